#include "templates/template_source.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuinline/error.hpp>
#include <string>

#include "cache/directory_walk.hpp"
#include "templates/embedded.hpp"

namespace cuinline::detail {
namespace {

// A template is source that is compiled and run: no override is near that size.
constexpr off_t kMaxTemplateBytes = 4 << 20;

struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

[[noreturn]] void refuse(const std::string& what, const std::string& why) {
  throw InvalidArgument("kernel template " + what + " (CUINLINE_TEMPLATE_DIR): " + why);
}

// Owned by this user or root and writable by no one else, like the cache directory: anyone who can
// write a template chooses the code that is compiled and run with this user's rights.
void check_owner(const struct stat& st, const std::string& what) {
  if (st.st_uid != ::geteuid() && st.st_uid != 0) {
    refuse(what, "owned by uid " + std::to_string(st.st_uid) +
                     ", not by this user or root: its owner chooses the code compiled and run");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    refuse(what, std::string("writable by group or others (mode ") + mode +
                     "): anyone who can write it chooses the code compiled and run; chmod go-w it");
  }
}

// The override of `name` in `dir`, or nothing when the directory has no such file.
bool read_override(const char* dir, std::string_view name, std::string& text) {
  const std::string shown_dir = std::string("'") + dir + "'";
  // The cache directory's walk (src/cache/disk_cache_directory.cpp): resolved once, then opened from
  // '/' without following symlinks, each directory above it owned by this user or root and writable
  // by no one else unless sticky. Whoever can replace a parent chooses the directory read here.
  std::string reason;
  int error = 0;
  Fd d(open_cache_directory(dir, /*create=*/false, /*shared=*/false, reason, error).release());
  if (d.fd < 0) refuse("directory " + shown_dir, reason);
  struct stat st {};
  if (::fstat(d.fd, &st) != 0) refuse("directory " + shown_dir, std::strerror(errno));
  check_owner(st, "directory " + shown_dir);
  const std::string file = std::string(dir) + "/" + std::string(name);
  const std::string shown = "'" + file + "'";
  Fd f(::openat(d.fd, std::string(name).c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (f.fd < 0) {
    if (errno == ENOENT) return false;  // not overridden: the embedded template
    refuse(shown, errno == ELOOP ? std::string("a symbolic link (not followed)")
                                 : std::string("cannot open: ") + std::strerror(errno));
  }
  if (::fstat(f.fd, &st) != 0) refuse(shown, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) {
    refuse(shown, S_ISDIR(st.st_mode) ? "a directory, not a file" : "not a regular file (a FIFO, socket or device)");
  }
  check_owner(st, shown);
  if (st.st_size > kMaxTemplateBytes) {
    refuse(shown, std::to_string(st.st_size) + " bytes, more than a template may have (" +
                      std::to_string(kMaxTemplateBytes) + ")");
  }
  text.assign(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(f.fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) refuse(shown, n < 0 ? std::string("read failed: ") + std::strerror(errno) : "shorter than its size");
    got += static_cast<std::size_t>(n);
  }
  if (text.find('\0') != std::string::npos) refuse(shown, "contains a NUL byte (not source text)");
  return true;
}

}  // namespace

std::string template_text(std::string_view name) {
  if (const char* dir = std::getenv("CUINLINE_TEMPLATE_DIR"); dir != nullptr && *dir != '\0') {
    std::string text;
    if (read_override(dir, name, text)) return text;
  }
  for (std::size_t i = 0; i < kEmbeddedTemplateCount; ++i) {
    if (kEmbeddedTemplates[i].name != nullptr && name == kEmbeddedTemplates[i].name) {
      return kEmbeddedTemplates[i].content;
    }
  }
  throw InvalidArgument("no kernel template named '" + std::string(name) + "'");
}

std::vector<std::string> embedded_template_names() {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < kEmbeddedTemplateCount; ++i) {
    if (kEmbeddedTemplates[i].name != nullptr) names.emplace_back(kEmbeddedTemplates[i].name);
  }
  return names;
}

}  // namespace cuinline::detail
