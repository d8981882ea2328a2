// read_text_file: the CLI's inputs (a spec, a .cu file, its headers) read whole or not at all.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <cuinline/error.hpp>
#include <string>

#include "cli/spec.hpp"

namespace cuinline::cli {
namespace {

struct InputFd {
  int fd = -1;
  explicit InputFd(int f) : fd(f) {}
  ~InputFd() {
    if (fd >= 0) ::close(fd);
  }
  InputFd(const InputFd&) = delete;
  InputFd& operator=(const InputFd&) = delete;
};

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

std::string read_text_file(const std::filesystem::path& path, const std::string& what, bool no_follow) {
  const std::string shown = what + ": '" + path.string() + "'";
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below in any case.
  InputFd in(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | (no_follow ? O_NOFOLLOW : 0)));
  if (in.fd < 0 && no_follow && errno == ELOOP) {
    throw InvalidArgument(shown + " became a symbolic link after it was checked (not followed)");
  }
  if (in.fd < 0) throw InvalidArgument(what + ": cannot read '" + path.string() + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(in.fd, &st) != 0) throw InvalidArgument(shown + ": cannot stat: " + std::strerror(errno));
  // A FIFO, /dev/zero or a terminal has no end that can be trusted: only regular files are input.
  if (!S_ISREG(st.st_mode)) throw InvalidArgument(shown + " is " + kind_of(st.st_mode) + ", not a regular file");
  if (static_cast<std::uint64_t>(st.st_size) > kMaxInputFileBytes) {
    throw InvalidArgument(shown + " has " + std::to_string(st.st_size) + " bytes, more than an input may have (" +
                          std::to_string(kMaxInputFileBytes) + ")");
  }
  // Read to the end (files under /proc say size 0), one byte past the limit at most.
  std::string text;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(in.fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw InvalidArgument(shown + ": read failed after " + std::to_string(text.size()) +
                                     " bytes: " + std::strerror(errno));
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.size() > kMaxInputFileBytes) {
      throw InvalidArgument(shown + " grew past the " + std::to_string(kMaxInputFileBytes) +
                            " bytes an input may have while it was read");
    }
  }
  if (text.size() < static_cast<std::uint64_t>(st.st_size)) {
    throw InvalidArgument(shown + " is shorter than its size (" + std::to_string(text.size()) + " of " +
                          std::to_string(st.st_size) + " bytes read): it changed while it was read");
  }
  if (const auto nul = text.find('\0'); nul != std::string::npos) {
    throw InvalidArgument(shown + " contains a NUL byte at offset " + std::to_string(nul) + " (not text)");
  }
  return text;
}

}  // namespace cuinline::cli
