// The disk tier: construction and the directory checks, load, store and the per-key locks.
// Scanning, eviction and the management calls are in disk_cache_maintenance.cpp.

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <utility>

#include "cache/disk_cache_entry.hpp"
#include "cache/disk_cache_impl.hpp"
#include "cuinline/error.hpp"
#include "cuinline/log.hpp"

namespace cuinline {
namespace {

using detail::UniqueFd;

std::string temp_name(const std::string& hex) {
  static std::atomic<std::uint64_t> counter{0};
  std::uint64_t random = 0;
  if (::getrandom(&random, sizeof random, GRND_NONBLOCK) != sizeof random) random = 0;
  char suffix[64];
  std::snprintf(suffix, sizeof suffix, "-%ld-%llu-%016llx", static_cast<long>(::getpid()),
                static_cast<unsigned long long>(counter.fetch_add(1)),
                static_cast<unsigned long long>(random));
  return std::string(detail::kTempPrefix) + hex.substr(0, 16) + suffix;
}

}  // namespace

// ---- construction ---------------------------------------------------------------------------

void DiskCache::Impl::open_directory() {
  auto log = logger();
  const std::string shown = directory.string();
  const auto unusable = [&](std::string reason) {
    unusable_reason = std::move(reason);
    log->warn("disk cache disabled, using the memory cache only: {}", unusable_reason);
  };
  if (directory.empty()) return unusable("no cache directory (set CUINLINE_CACHE_DIR)");
  int err = 0;
  std::string reason;
  dir_fd = detail::open_cache_directory(directory, config.create, config.allow_shared_directory, reason, err);
  if (!dir_fd) {
    // Nothing to inspect is not worth a warning: the caller (cuinline cache list) says so itself.
    if (!config.create && err == ENOENT) {
      unusable_reason = reason;
      log->debug("disk cache: {}", reason);
      return;
    }
    return unusable(reason);
  }
  struct stat st {};
  if (::fstat(dir_fd.get(), &st) != 0) {
    return unusable("cannot stat '" + shown + "': " + detail::errno_text(errno));
  }
  // Entries are machine code run with the user's rights: like ssh with ~/.ssh, refuse a directory
  // that someone else could plant files in, unless explicitly shared.
  if (!config.allow_shared_directory) {
    if (st.st_uid != ::geteuid()) {
      return unusable("'" + shown + "' is owned by uid " + std::to_string(st.st_uid) +
                      ", not by this user: anyone who owns it can plant machine code in it; use a directory of "
                      "your own (CUINLINE_CACHE_DIR)");
    }
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
      return unusable("'" + shown + "' is writable by group or others (mode " + mode +
                      "): anyone who can write it can plant machine code in it; chmod 700 it (entries other "
                      "users wrote there are then refused one by one)");
    }
  }
  if (!config.create) {
    // Inspection: neither the lock file nor anything else is created or replaced.
    usable = true;
    log->debug("disk cache at '{}' (inspection only)", shown);
    return;
  }
  if (::faccessat(dir_fd.get(), ".", W_OK | X_OK, AT_EACCESS) != 0) {
    return unusable("'" + shown + "' is not writable: " + detail::errno_text(errno));
  }
  UniqueFd lock_file(
      ::openat(dir_fd.get(), detail::kLockFileName, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!lock_file) {
    return unusable("cannot open the lock file in '" + shown + "': " + detail::errno_text(errno));
  }
  // A restrictive umask must not leave a lock file that later opens (O_RDWR) cannot use.
  if (struct stat lock_st{}; ::fstat(lock_file.get(), &lock_st) == 0 && lock_st.st_uid == ::geteuid() &&
                             (lock_st.st_mode & 0600) != 0600) {
    ::fchmod(lock_file.get(), 0600);
  }
  // A lock file another user owns or can write lets them hold the cache's locks for ever: replace it
  // (the directory is ours and private here). Shared caches keep theirs.
  if (struct stat lock_st{}; !config.allow_shared_directory && ::fstat(lock_file.get(), &lock_st) == 0 &&
                             !detail::trusted_file(lock_st)) {
    log->warn("disk cache: replacing the lock file in '{}' (owned by uid {}, mode {:04o})", shown, lock_st.st_uid,
              static_cast<unsigned>(lock_st.st_mode & 07777));
    lock_file.reset();
    ::unlinkat(dir_fd.get(), detail::kLockFileName, 0);
    lock_file.reset(::openat(dir_fd.get(), detail::kLockFileName,
                             O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!lock_file) {
      return unusable("cannot replace the untrusted lock file in '" + shown + "': " + detail::errno_text(errno));
    }
    ::fchmod(lock_file.get(), 0600);
  }
  usable = true;
  // No scan here: a process that only reads (disk hits) never pays for one. The first store scans
  // (size estimate for eviction, stale temp files), see evict_if_needed.
  log->debug("disk cache at '{}' (cap {} bytes)", shown, config.max_bytes);
}

void DiskCache::Impl::require_usable(const char* operation) const {
  if (!usable) {
    throw CacheError(std::string(operation) + " of the disk cache at '" + directory.string() +
                     "': " + (unusable_reason.empty() ? "the disk cache is disabled" : unusable_reason));
  }
}

DiskCache::DiskCache(CacheConfig config) : impl_(std::make_unique<Impl>()) {
  impl_->config = std::move(config);
  impl_->directory = impl_->config.directory.empty() ? default_cache_directory() : impl_->config.directory;
  if (!impl_->config.disk_enabled) {
    impl_->unusable_reason = "disabled by configuration (CUINLINE_DISABLE_DISK_CACHE)";
    logger()->debug("disk cache: {}", impl_->unusable_reason);
    return;
  }
  try {
    impl_->open_directory();
  } catch (const std::exception& e) {
    impl_->usable = false;
    impl_->unusable_reason = e.what();
    logger()->warn("disk cache disabled, using the memory cache only: {}", e.what());
  }
}

DiskCache::~DiskCache() = default;

bool DiskCache::usable() const noexcept {
  return impl_->usable;
}
const std::filesystem::path& DiskCache::directory() const noexcept {
  return impl_->directory;
}
std::uint64_t DiskCache::max_bytes() const noexcept {
  return impl_->config.max_bytes;
}

// ---- load -----------------------------------------------------------------------------------

void DiskCache::Impl::reject(const std::string& name, EntryCheck check, const struct stat* st) {
  ++rejected_entries;
  // Entries of another NVRTC or format version are expected after an upgrade; damage is not, nor is
  // a planted entry (warned about once a process, each one counted).
  const bool expected = check == EntryCheck::foreign || check == EntryCheck::wrong_version;
  if (check == EntryCheck::untrusted_owner) {
    const bool first = !untrusted_warned.exchange(true);
    logger()->log(first ? spdlog::level::warn : spdlog::level::debug,
                  "disk cache: refusing entry '{}' in '{}': owned by uid {} with mode {:04o} (only entries of "
                  "this user or root, writable by no one else, are loaded); it will be rebuilt",
                  name, directory.string(), st ? st->st_uid : 0u, st ? (st->st_mode & 07777) : 0u);
    if (st != nullptr) remove_if_same(name, st->st_dev, st->st_ino);
    return;
  }
  logger()->log(expected ? spdlog::level::debug : spdlog::level::warn,
                "disk cache: rejecting entry '{}' in '{}' ({}); it will be rebuilt", name, directory.string(),
                to_string(check));
  if (st != nullptr) remove_if_same(name, st->st_dev, st->st_ino);
}

bool DiskCache::Impl::remove_if_same(const std::string& name, dev_t dev, ino_t ino) {
  struct stat now {};
  if (::fstatat(dir_fd.get(), name.c_str(), &now, AT_SYMLINK_NOFOLLOW) != 0) return false;
  // Someone may have published a fresh entry under this name since we read it: leave that one.
  if (now.st_dev != dev || now.st_ino != ino) return false;
  return ::unlinkat(dir_fd.get(), name.c_str(), 0) == 0;
}

std::optional<CompiledProgram> DiskCache::load(const CacheKey& key) {
  if (!impl_->usable) return std::nullopt;
  try {
    const std::string name = key.hex();
    UniqueFd fd(::openat(impl_->dir_fd.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
    if (!fd) {
      const int err = errno;
      if (err == ENOENT) return std::nullopt;
      struct stat st {};
      if (err == ELOOP && ::fstatat(impl_->dir_fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
          S_ISLNK(st.st_mode)) {
        impl_->reject(name, EntryCheck::foreign, &st);  // a symlink is never an entry
      } else {
        logger()->debug("disk cache: cannot open entry '{}': {}", name, detail::errno_text(err));
      }
      return std::nullopt;
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return std::nullopt;
    if (!S_ISREG(st.st_mode)) {
      impl_->reject(name, EntryCheck::foreign, nullptr);  // not a file: count it, but never unlink it
      return std::nullopt;
    }
    // Checked on the opened descriptor, not the path: a file another user wrote (while the
    // directory was group-writable, say) stays refused after the directory is made private, and a
    // writer that kept a descriptor open cannot rewrite a file that passed (it is not theirs).
    if (!detail::entry_file_trusted(st, impl_->config.allow_shared_directory)) {
      impl_->reject(name, EntryCheck::untrusted_owner, &st);
      return std::nullopt;
    }
    if (static_cast<std::uint64_t>(st.st_size) > detail::kMaxEntryBytes) {
      impl_->reject(name, EntryCheck::foreign, &st);
      return std::nullopt;
    }
    // The header and the file size first: a file whose header does not describe it (another key,
    // a size that does not add up) is rejected without reading the rest of it.
    std::string bytes;
    if (const int err = detail::read_up_to(fd.get(), detail::kEntryHeaderSize, bytes); err != 0) {
      logger()->debug("disk cache: cannot read entry '{}': {}", name, detail::errno_text(err));
      return std::nullopt;
    }
    if (const EntryCheck head = detail::check_entry_head(bytes, static_cast<std::uint64_t>(st.st_size), &key);
        head != EntryCheck::ok) {
      impl_->reject(name, head, &st);
      return std::nullopt;
    }
    if (const int err = detail::read_up_to(fd.get(), static_cast<std::size_t>(st.st_size), bytes); err != 0) {
      logger()->debug("disk cache: cannot read entry '{}': {}", name, detail::errno_text(err));
      return std::nullopt;
    }
    CompiledProgram program;
    if (const EntryCheck check = check_entry_bytes(bytes, &key, &program); check != EntryCheck::ok) {
      impl_->reject(name, check, &st);
      return std::nullopt;
    }
    // The entry's mtime is its last use (LRU); atime is unreliable under noatime/relatime.
    const struct timespec times[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
    if (::futimens(fd.get(), times) != 0) {
      logger()->debug("disk cache: cannot refresh the use time of '{}': {}", name, detail::errno_text(errno));
    }
    ++impl_->disk_hits;
    return program;
  } catch (const std::exception& e) {
    logger()->warn("disk cache: load failed, treating it as a miss: {}", e.what());
    return std::nullopt;
  }
}

// ---- store ----------------------------------------------------------------------------------

void DiskCache::Impl::note_write_failure(const char* what, int err) {
  ++disk_write_failures;
  if (!write_failure_warned.exchange(true)) {
    logger()->warn("disk cache: cannot write entries to '{}' ({}: {}); continuing with the memory cache only",
                   directory.string(), what, detail::errno_text(err));
  } else {
    logger()->debug("disk cache: write failed ({}: {})", what, detail::errno_text(err));
  }
}

bool DiskCache::store(const CacheKey& key, const CompiledProgram& program) {
  if (!impl_->usable) return false;
  if (program.binary.empty()) {
    logger()->warn("disk cache: not storing '{}': its binary is empty", program.program_name);
    return false;
  }
  try {
    const std::string name = key.hex();
    const std::string bytes = detail::encode_entry(key, nvrtc_version(), program);
    if (bytes.size() > detail::kMaxEntryBytes) {
      impl_->note_write_failure("entry too large", EFBIG);
      return false;
    }
    const int dir = impl_->dir_fd.get();
    std::string temp;
    UniqueFd fd;
    for (int attempt = 0; attempt < 8 && !fd; ++attempt) {
      temp = temp_name(name);
      fd.reset(::openat(dir, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
      if (!fd && errno != EEXIST) break;
    }
    if (!fd) {
      impl_->note_write_failure("creating a temp file", errno);
      return false;
    }
    ::fchmod(fd.get(), 0600);  // owner read/write whatever the umask; never more
    // Write, flush to the device, close, and only then rename: a reader sees all or nothing.
    int err = detail::write_all(fd.get(), bytes);
    const char* what = "writing";
    const auto fail = [&](int code, const char* step) {
      if (err == 0) {
        err = code;
        what = step;
      }
    };
    if (err == 0 && ::fsync(fd.get()) != 0) fail(errno, "flushing");
    if (const int close_err = fd.close(); close_err != 0) fail(close_err, "closing");
    if (err == 0 && ::renameat(dir, temp.c_str(), dir, name.c_str()) != 0) {
      // ENOENT: someone removed the temp file while it was written (a cleaner that did not know it).
      fail(errno, errno == ENOENT ? "publishing: the temp file was removed while it was written, renaming it"
                                  : "renaming the temp file into place");
    }
    if (err != 0) {
      ::unlinkat(dir, temp.c_str(), 0);
      impl_->note_write_failure(what, err);
      return false;
    }
    ++impl_->disk_writes;
    impl_->evict_if_needed(bytes.size());
    return true;
  } catch (const std::exception& e) {
    ++impl_->disk_write_failures;
    logger()->warn("disk cache: store failed: {}", e.what());
    return false;
  }
}

// ---- locks ----------------------------------------------------------------------------------

UniqueFd DiskCache::Impl::lock_byte(off_t offset, bool wait) {
  // A new open file description per lock: OFD locks then also exclude other threads of this process.
  UniqueFd fd(::openat(dir_fd.get(), detail::kLockFileName, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) {
    if (!lock_failure_warned.exchange(true)) {
      logger()->warn("disk cache: cannot open the lock file in '{}': {}", directory.string(),
                     detail::errno_text(errno));
    }
    return fd;
  }
  struct flock range {};
  range.l_type = F_WRLCK;
  range.l_whence = SEEK_SET;
  range.l_start = offset;
  range.l_len = 1;
  range.l_pid = 0;  // required for OFD locks
  while (::fcntl(fd.get(), wait ? F_OFD_SETLKW : F_OFD_SETLK, &range) != 0) {
    if (errno == EINTR) continue;
    if (!wait && (errno == EAGAIN || errno == EACCES)) return UniqueFd();
    if (!lock_failure_warned.exchange(true)) {
      logger()->warn("disk cache: cannot lock '{}/{}': {}", directory.string(), detail::kLockFileName,
                     detail::errno_text(errno));
    }
    return UniqueFd();
  }
  return fd;
}

DiskCache::KeyLock DiskCache::lock(const CacheKey& key) {
  if (!impl_->usable) return KeyLock();
  // Byte 0 is the directory lock; keys spread over 2^56 bytes after it (the file stays empty).
  std::uint64_t slot = 0;
  for (int i = 0; i < 7; ++i) slot |= static_cast<std::uint64_t>(key.digest[i]) << (8 * i);
  UniqueFd fd = impl_->lock_byte(static_cast<off_t>(slot + 1), /*wait=*/true);
  return KeyLock(fd.release());
}

DiskCache::KeyLock::KeyLock(KeyLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

DiskCache::KeyLock& DiskCache::KeyLock::operator=(KeyLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

// Closing the only descriptor of the description releases the OFD lock.
DiskCache::KeyLock::~KeyLock() {
  if (fd_ >= 0) ::close(fd_);
}

CacheStats DiskCache::stats() const {
  CacheStats stats;
  stats.disk_hits = impl_->disk_hits;
  stats.disk_writes = impl_->disk_writes;
  stats.disk_write_failures = impl_->disk_write_failures;
  stats.evictions = impl_->evictions;
  stats.rejected_entries = impl_->rejected_entries;
  return stats;
}

}  // namespace cuinline
