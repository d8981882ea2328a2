// The disk tier's cross-process locks: OFD write locks on one byte of a lock file per key (and
// byte 0 for the directory), polled with a bound.
//
// A private cache has one lock file, in its directory, that only this user can write. A team cache
// has two: the team's `lock` in the shared directory, which every member can write and so replace,
// and this user's own `team.lock`, in a directory only this user controls (own_lock_directory()).
// That one file serves every team cache the user has: a key's byte is the same in all of them
// (sharing it only serializes two caches' compiles of the same kernel), and so is the directory
// lock's (an eviction of one waits for, or is skipped during, an eviction of another); and no lock
// files pile up, one per directory ever used. Each lock is taken on the user's own file first: all
// processes of one user exclude each other through it whatever a member does to the team's file
// (a replaced team file would otherwise split them between two inodes). Then on the team's file,
// which makes the members' compiles single-flight too, when it is sound: a regular file that no one
// outside the team can write. One that is not (replaced by a symlink, by a file this user cannot
// open, one anyone can write) is passed over with one warning naming its owner; the cache stays on.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string>
#include <thread>
#include <utility>

#include "cache/disk_cache_impl.hpp"
#include "common/log.hpp"

namespace cuinline {
namespace {

using detail::UniqueFd;
using Clock = std::chrono::steady_clock;

enum class Take { held, busy, failed };

}  // namespace

void DiskCache::Impl::open_own_lock_directory() {
  const std::filesystem::path path = detail::own_lock_directory();
  std::string reason;
  int err = 0;
  UniqueFd dir = detail::open_cache_directory(path, /*create=*/true, /*shared=*/false, reason, err);
  struct stat st {};
  if (dir && ::fstat(dir.get(), &st) == 0) {
    if (st.st_uid == ::geteuid() && (st.st_mode & (S_IWGRP | S_IWOTH)) == 0) {
      own_lock_dir = std::move(dir);
      return;
    }
    reason = "'" + path.string() + "' is owned by " + detail::describe_uid(st.st_uid) + " with mode " +
             detail::mode_text(st.st_mode) + " (it must be this user's, writable by no one else)";
  }
  logger()->warn(
      "disk cache: no lock file of this user's own for the team cache '{}' ({}): this user's processes "
      "exclude each other only through the team's lock file, which any member can replace",
      directory.string(), reason);
}

namespace {

// Polls F_OFD_SETLK on byte `offset` of `fd` (not F_OFD_SETLKW: a holder that never lets go, a
// stopped process or a member holding the lock on purpose, must not hang us; steps of at most 10 ms
// add little to a wait for a compile of 30-400 ms).
Take take_byte(int fd, off_t offset, bool wait, Clock::time_point deadline, int& err) {
  struct flock range {};
  range.l_type = F_WRLCK;
  range.l_whence = SEEK_SET;
  range.l_start = offset;
  range.l_len = 1;
  range.l_pid = 0;  // required for OFD locks
  auto pause = std::chrono::microseconds(500);
  while (::fcntl(fd, F_OFD_SETLK, &range) != 0) {
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EACCES) {
      err = errno;
      return Take::failed;
    }
    if (!wait || Clock::now() >= deadline) return Take::busy;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(10000));
  }
  return Take::held;
}

}  // namespace

UniqueFd DiskCache::Impl::open_team_lock_file() {
  const int dir = dir_fd.get();
  const int flags = O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK;
  UniqueFd fd;
  int err = 0;
  for (int attempt = 0; attempt < 3 && !fd; ++attempt) {
    // Made by whichever member comes first. Only a file made here is chmod'ed: an existing one may be
    // a hard link to some other file of this user's, whose mode must not change.
    fd.reset(::openat(dir, detail::kLockFileName, flags | O_CREAT | O_EXCL, 0660));
    if (fd) {
      ::fchmod(fd.get(), 0660);
      return fd;
    }
    if (errno != EEXIST) {
      err = errno;
      break;
    }
    fd.reset(::openat(dir, detail::kLockFileName, flags));
    err = fd ? 0 : errno;
    if (!fd && err != ENOENT) break;  // ENOENT: removed meanwhile; make it again
  }
  struct stat st {};
  std::string problem;
  if (!fd) {
    problem = err == ELOOP    ? "it is a symbolic link"
              : err == EACCES ? "this user may not write it"
                              : "it cannot be opened (" + detail::errno_text(err) + ")";
    if (::fstatat(dir, detail::kLockFileName, &st, AT_SYMLINK_NOFOLLOW) != 0) st = {};
  } else if (::fstat(fd.get(), &st) != 0) {
    problem = "it cannot be examined (" + detail::errno_text(errno) + ")";
  } else if (!S_ISREG(st.st_mode)) {
    problem = "it is not a regular file";
  } else if ((st.st_mode & S_IWOTH) != 0) {
    problem = "anyone, not only the team, may write it";
  } else {
    return fd;
  }
  if (!team_lock_warned.exchange(true)) {
    const std::string path = (directory / detail::kLockFileName).string();
    const std::string own =
        own_lock_dir ? "'" + (detail::own_lock_directory() / detail::kOwnLockFileName).string() + "'"
                     : std::string();
    logger()->warn(
        "disk cache: passing over the lock file '{}' of the team cache: {} (owned by {}, mode {}); a "
        "member may have replaced it. {}; other members' processes may compile the same kernel at the same "
        "time until it is removed: any member can `rm {}` (in a cache directory without the sticky bit), and "
        "the next lookup makes a new one; ask {} why it was there",
        path, problem, detail::describe_uid(st.st_uid), detail::mode_text(st.st_mode),
        own.empty() ? "No lock is taken at all (this user's own lock directory is not usable either)"
                    : "This user's processes still exclude each other through " + own,
        path, detail::describe_uid(st.st_uid));
  }
  return UniqueFd();
}

detail::HeldLock DiskCache::Impl::lock_byte(off_t offset, bool wait) {
  detail::HeldLock held;
  if (read_only) return held;  // no lock file: nothing is written, so nothing to exclude
  const bool team = config.allow_shared_directory;
  const auto deadline = Clock::now() + config.lock_wait;
  // A new open file description per lock: OFD locks then also exclude other threads of this process.
  UniqueFd own;
  if (!team) {
    own.reset(::openat(dir_fd.get(), detail::kLockFileName, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  } else if (own_lock_dir) {
    own.reset(::openat(own_lock_dir.get(), detail::kOwnLockFileName,
                       O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  }
  const int open_err = errno;
  if (!own && (!team || own_lock_dir) && !lock_failure_warned.exchange(true)) {
    logger()->warn("disk cache: cannot open {} of '{}': {}",
                   team ? "this user's own lock file" : "the lock file", directory.string(),
                   detail::errno_text(open_err));
  }
  const auto take = [&](UniqueFd& fd, const char* which) {
    int err = 0;
    const Take result = take_byte(fd.get(), offset, wait, deadline, err);
    if (result == Take::failed && !lock_failure_warned.exchange(true)) {
      logger()->warn("disk cache: cannot lock {} of '{}': {}", which, directory.string(),
                     detail::errno_text(err));
    }
    if (result == Take::busy && wait) {
      ++lock_timeouts;
      const bool first = !lock_timeout_warned.exchange(true);
      logger()->log(first ? spdlog::level::warn : spdlog::level::debug,
                    "disk cache: a lock of '{}' ({}) has been held by another process for more than {} ms (a "
                    "stopped or hung process?); going on without it",
                    directory.string(), which, config.lock_wait.count());
    }
    if (result != Take::held) fd.reset();
    return result;
  };
  if (own && take(own, team ? "this user's own lock file" : "the lock file") == Take::busy) return {};
  held.own = std::move(own);
  if (!team) return held;
  UniqueFd shared = open_team_lock_file();
  if (shared && take(shared, "the team's lock file") == Take::busy && !wait) return {};
  held.team = std::move(shared);
  return held;
}

DiskCache::KeyLock DiskCache::lock(const CacheKey& key) {
  // A process that publishes nothing here has nothing to exclude, and no one should wait for it.
  if (!impl_->usable || !impl_->publishes()) return KeyLock();
  // Byte 0 is the directory lock; keys spread over 2^56 bytes after it (the file stays empty).
  std::uint64_t slot = 0;
  for (int i = 0; i < 7; ++i) slot |= static_cast<std::uint64_t>(key.digest[i]) << (8 * i);
  detail::HeldLock held = impl_->lock_byte(static_cast<off_t>(slot + 1), /*wait=*/true);
  return KeyLock(held.own.release(), held.team.release());
}

DiskCache::KeyLock::KeyLock(KeyLock&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), team_fd_(std::exchange(other.team_fd_, -1)) {}

DiskCache::KeyLock& DiskCache::KeyLock::operator=(KeyLock&& other) noexcept {
  if (this != &other) {
    if (team_fd_ >= 0) ::close(team_fd_);
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    team_fd_ = std::exchange(other.team_fd_, -1);
  }
  return *this;
}

// Closing the only descriptor of a description releases its OFD lock; the team's first (taken last).
DiskCache::KeyLock::~KeyLock() {
  if (team_fd_ >= 0) ::close(team_fd_);
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace cuinline
