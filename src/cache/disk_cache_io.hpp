#pragma once
// Small POSIX helpers for the disk tier: an owning file descriptor and EINTR-safe whole-buffer I/O.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

namespace cuinline::detail {

/// Whether an opened file (its fstat) may be trusted as written by this user: owned by the effective
/// user or by root, and writable by no one else. A file someone else could write may hold planted
/// machine code, whatever its checksum says (anyone who can write it can recompute that).
inline bool trusted_file(const struct stat& st) noexcept {
  return (st.st_uid == ::geteuid() || st.st_uid == 0) && (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

/// Whether an entry file (its fstat after an O_NOFOLLOW open) may be read at all. Only an entry that
/// a fleet key authenticates (`sealed`: a team cache with a key file, which checks the tag) may come
/// from any writer; everywhere else (a private cache, a read-only tier, a team cache without a key)
/// the file itself must be trusted_file: its owner's word is the only authentication there is.
inline bool entry_file_trusted(const struct stat& st, bool sealed) noexcept {
  return sealed || trusted_file(st);
}

/// Sole owner of one file descriptor; closes it on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  int release() noexcept { return std::exchange(fd_, -1); }
  void reset(int fd = -1) noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  /// Closes now and reports close()'s errno (0 on success): a write error can surface only here.
  int close() noexcept {
    const int fd = std::exchange(fd_, -1);
    if (fd < 0) return 0;
    return ::close(fd) == 0 ? 0 : errno;
  }

 private:
  int fd_ = -1;
};

/// strerror for an errno value, thread-safe.
inline std::string errno_text(int err) {
  char buffer[256] = {};
  // GNU strerror_r may return a static string instead of filling the buffer.
  const char* text = ::strerror_r(err, buffer, sizeof buffer);
  return text != nullptr ? std::string(text) : "errno " + std::to_string(err);
}

/// Writes all of `bytes`; returns 0 or the errno of the failing write.
inline int write_all(int fd, std::string_view bytes) noexcept {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return 0;
}

/// Reads up to `size` bytes from offset 0 into `out` (resized to what was read); returns 0 or an errno.
inline int read_up_to(int fd, std::size_t size, std::string& out) {
  out.resize(size);
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, out.data() + done, size - done, static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  out.resize(done);
  return 0;
}

}  // namespace cuinline::detail
