// The disk tier: construction and the directory checks, load and store. The locks are in
// disk_cache_lock.cpp; scanning, eviction and the management calls in disk_cache_maintenance.cpp.

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "cache/disk_cache_entry.hpp"
#include "cache/disk_cache_impl.hpp"
#include "common/log.hpp"
#include "cuinline/error.hpp"

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

namespace detail {

EntryCheck read_entry_file(int fd, std::uint64_t size, const EntryAuth* auth, const CacheKey* key,
                           std::string& bytes, std::size_t& entry_offset) {
  entry_offset = 0;
  // Decided from the size alone: a file planted to be large (a sparse one costs its writer nothing)
  // is never read, and a sealed one would have to be read whole before its tag could be checked.
  if (size > kMaxEntryBytes) return EntryCheck::too_large;
  // The seal (if any) and the header first: a file whose header does not describe it (another key,
  // a size that does not add up) is rejected without reading the rest of it.
  if (read_up_to(fd, kMaxSealSize + kEntryHeaderSize, bytes) != 0) return EntryCheck::io_error;
  entry_offset = seal_size(bytes);
  if (auth == nullptr && entry_offset != 0) return EntryCheck::unauthenticated;  // sealed: cannot check
  if (auth != nullptr && (entry_offset == 0 || key == nullptr)) return EntryCheck::unauthenticated;
  if (entry_offset > size) return EntryCheck::truncated;
  if (const EntryCheck head =
          check_entry_head(std::string_view(bytes).substr(std::min(entry_offset, bytes.size())), size - entry_offset, key);
      head != EntryCheck::ok) {
    return head;
  }
  if (read_up_to(fd, static_cast<std::size_t>(size), bytes) != 0) return EntryCheck::io_error;
  if (auth != nullptr) {
    std::string_view entry;
    return auth->entry_check(auth->open(*key, bytes, &entry));
  }
  return EntryCheck::ok;
}

}  // namespace detail

// ---- construction ---------------------------------------------------------------------------

void DiskCache::Impl::refuse(std::string reason) {
  unusable_reason = std::move(reason);
  // A read-only tier is one of several: KernelCache, which knows the others, says which are still
  // used. This one's refusal is all there is to say about it here.
  if (config.read_only) {
    logger()->debug("disk cache: the read-only cache '{}' is not used: {}", directory.string(), unusable_reason);
  } else {
    logger()->warn("disk cache '{}' disabled, nothing is read from or written to it: {}", directory.string(),
                   unusable_reason);
  }
}

void DiskCache::Impl::open_directory() {
  auto log = logger();
  const std::string shown = directory.string();
  if (directory.empty()) return refuse("no cache directory (set CUINLINE_CACHE_DIR)");
  // Shared mode belongs to the writable team cache: KernelCache opens the read-only tiers with it off,
  // so a shipped cache always gets the owner and mode checks below.
  const bool shared = config.allow_shared_directory;
  int err = 0;
  std::string reason;
  // A read-only cache is never created: a missing one is a cache with nothing in it.
  dir_fd = detail::open_cache_directory(directory, config.create && !config.read_only, shared, reason, err);
  if (!dir_fd) {
    // Nothing to inspect is not worth a warning: the caller (cuinline cache list) says so itself.
    if (!config.create && err == ENOENT) {
      unusable_reason = reason;
      log->debug("disk cache: {}", reason);
      return;
    }
    return refuse(reason);
  }
  struct stat st {};
  if (::fstat(dir_fd.get(), &st) != 0) return refuse("cannot stat '" + shown + "': " + detail::errno_text(errno));
  // Entries are machine code run with the user's rights: like ssh with ~/.ssh, refuse a directory
  // that someone else could plant files in, unless explicitly shared. Root's directories are
  // trusted (a cache shipped in an image is typically root's, and only readable).
  if (!shared) {
    if (st.st_uid != ::geteuid() && st.st_uid != 0) {
      return refuse("'" + shown + "' is owned by " + detail::describe_uid(st.st_uid) +
                    ", not by this user or root: its owner can plant machine code in it; use a directory of your own "
                    "(CUINLINE_CACHE_DIR), or set up a team cache (docs/RELIABILITY.md)");
    }
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
      return refuse("'" + shown + "' is writable by group or others (mode " + detail::mode_text(st.st_mode) +
                    "): anyone who can write it can plant machine code in it; chmod 700 it (entries other users "
                    "wrote there are then refused one by one)");
    }
  } else if (!load_fleet_key()) {
    return;  // load_fleet_key said why
  }
  if (!config.create) {
    // Inspection: neither the lock file nor anything else is created or replaced.
    usable = true;
    read_only = true;
    log->debug("disk cache at '{}' (inspection only)", shown);
    return;
  }
  if (config.read_only || ::faccessat(dir_fd.get(), ".", W_OK | X_OK, AT_EACCESS) != 0) {
    const int access_err = config.read_only ? 0 : errno;
    if (access_err != 0 && access_err != EACCES && access_err != EROFS && access_err != EPERM) {
      return refuse("cannot check whether '" + shown + "' is writable: " + detail::errno_text(access_err));
    }
    // A shipped cache (an image layer, a read-only mount, root's directory): serve its hits, write
    // nothing. Said once when it was not asked for, since new kernels are then not kept.
    usable = true;
    read_only = true;
    if (config.read_only) {
      log->debug("disk cache at '{}' (read-only)", shown);
    } else {
      log->warn("disk cache: '{}' is not writable ({}): its entries are used, new kernels are not saved (set "
                "CUINLINE_CACHE_DIR to a writable directory and list this one in CUINLINE_CACHE_READONLY_DIRS)",
                shown, detail::errno_text(access_err));
    }
    return;
  }
  if (shared) {
    // A team cache: this user's own lock file, then the team's, checked (disk_cache_lock.cpp). Neither
    // can switch the cache off: a lock file that is not sound is passed over with one warning.
    open_own_lock_directory();
    open_team_lock_file();
  } else if (!prepare_private_lock_file()) {
    return;  // it said why
  }
  usable = true;
  // No scan here: a process that only reads (disk hits) never pays for one. The first store scans
  // (size estimate for eviction, stale temp files), see evict_if_needed.
  log->debug("disk cache at '{}' (cap {} bytes)", shown, config.max_bytes);
}

bool DiskCache::Impl::prepare_private_lock_file() {
  const std::string shown = directory.string();
  UniqueFd lock_file(
      ::openat(dir_fd.get(), detail::kLockFileName, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600));
  if (!lock_file) {
    refuse("cannot open the lock file in '" + shown + "': " + detail::errno_text(errno));
    return false;
  }
  struct stat lock_st {};
  if (::fstat(lock_file.get(), &lock_st) != 0) {
    refuse("cannot stat the lock file in '" + shown + "': " + detail::errno_text(errno));
    return false;
  }
  // A restrictive umask must not leave a lock file that later opens (O_RDWR) cannot use.
  if (lock_st.st_uid == ::geteuid() && (lock_st.st_mode & 0600) != 0600) ::fchmod(lock_file.get(), 0600);
  // A lock file another user owns or can write lets them hold the cache's locks for ever: replace it
  // (the directory is this user's and private, so no one else can put it back).
  if (S_ISREG(lock_st.st_mode) && detail::trusted_file(lock_st)) return true;
  logger()->warn("disk cache: replacing the lock file in '{}' (owned by {}, mode {})", shown,
                 detail::describe_uid(lock_st.st_uid), detail::mode_text(lock_st.st_mode));
  lock_file.reset();
  ::unlinkat(dir_fd.get(), detail::kLockFileName, 0);
  lock_file.reset(
      ::openat(dir_fd.get(), detail::kLockFileName, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!lock_file) {
    refuse("cannot replace the untrusted lock file in '" + shown + "': " + detail::errno_text(errno));
    return false;
  }
  ::fchmod(lock_file.get(), 0600);
  return true;
}

// A team cache holds entries of every member: with a fleet key or signatures they are sealed and
// checked; without either only this user's (and root's) own entries can be trusted, and the others'
// are misses.
bool DiskCache::Impl::load_fleet_key() {
  std::string error;
  auth = detail::EntryAuth::from_config(config.remote, &error);
  if (!auth && error.empty()) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true)) {
      logger()->warn(
          "disk cache: the shared cache '{}' is not authenticated (no CUINLINE_CACHE_KEY_FILE or "
          "CUINLINE_CACHE_TRUSTED_KEYS): only entries this user or root wrote are loaded, the other members' are "
          "misses (left in place); give the team a fleet key file or signed entries to share entries "
          "(docs/RELIABILITY.md)",
          directory.string());
    }
    return true;
  }
  if (!auth) {
    refuse("the shared cache '" + directory.string() + "' needs its keys: " + error);
    return false;
  }
  logger()->log(publishes() ? spdlog::level::debug : spdlog::level::info,
                "disk cache: shared cache '{}' with {}{}", directory.string(), auth->describe(),
                publishes() ? "" : ": its signed entries are used, new kernels are not written there");
  return true;
}

void DiskCache::Impl::require_usable(const char* operation) const {
  if (!usable) {
    throw CacheError(std::string(operation) + " of the disk cache at '" + directory.string() +
                     "': " + (unusable_reason.empty() ? "the disk cache is disabled" : unusable_reason));
  }
}

void DiskCache::Impl::require_writable(const char* operation) const {
  if (read_only) {
    throw CacheError(std::string(operation) + " the disk cache at '" + directory.string() +
                     "': it is read-only (not writable by this user, or opened read-only); nothing was changed");
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
    impl_->refuse(e.what());
  }
}

DiskCache::~DiskCache() = default;

bool DiskCache::usable() const noexcept {
  return impl_->usable;
}
const std::string& DiskCache::unusable_reason() const noexcept {
  return impl_->unusable_reason;
}
bool DiskCache::read_only() const noexcept {
  return impl_->read_only;
}
const std::filesystem::path& DiskCache::directory() const noexcept {
  return impl_->directory;
}
std::uint64_t DiskCache::max_bytes() const noexcept {
  return impl_->config.max_bytes;
}

// ---- load -----------------------------------------------------------------------------------

void DiskCache::Impl::reject(const std::string& name, EntryCheck check, const struct stat* st) {
  if (check == EntryCheck::unauthenticated || check == EntryCheck::unknown_key ||
      check == EntryCheck::revoked_key || check == EntryCheck::bad_signature) {
    // A team cache with a fleet key: an entry without a valid tag was planted, altered, or sealed
    // with a key this process does not hold; it is removed. With signatures it is left in place (a
    // machine whose list trusts a newer key may use it; `cache verify` reports it, the signer's next
    // publish replaces it). Never loaded; warned about once a process, each counted.
    ++unauthenticated;
    const bool signatures = auth && auth->mode() == detail::EntryAuth::Mode::signatures;
    const bool first = !unauthenticated_warned.exchange(true);
    logger()->log(first ? spdlog::level::warn : spdlog::level::debug,
                  "disk cache: refusing entry '{}' in '{}': {}", name, directory.string(),
                  auth ? auth->refusal(check) : to_string(check));
    if (st != nullptr && !signatures) remove_if_same(name, st->st_dev, st->st_ino);
    return;
  }
  ++rejected_entries;
  // Entries of another NVRTC or format version are expected after an upgrade; damage is not, nor is
  // a planted entry (warned about once a process, each one counted).
  const bool expected = check == EntryCheck::foreign || check == EntryCheck::wrong_version;
  if (check == EntryCheck::untrusted_owner) {
    const bool first = !untrusted_warned.exchange(true);
    logger()->log(first ? spdlog::level::warn : spdlog::level::debug,
                  "disk cache: refusing entry '{}' in '{}': owned by {} with mode {} (only entries of "
                  "this user or root, writable by no one else, are loaded); it will be rebuilt",
                  name, directory.string(), detail::describe_uid(st ? st->st_uid : 0u),
                  detail::mode_text(st ? st->st_mode : 0u));
    if (st != nullptr) remove_if_same(name, st->st_dev, st->st_ino);
    return;
  }
  logger()->log(expected ? spdlog::level::debug : spdlog::level::warn,
                "disk cache: rejecting entry '{}' in '{}' ({}); it will be rebuilt", name, directory.string(),
                to_string(check));
  if (st != nullptr) remove_if_same(name, st->st_dev, st->st_ino);
}

bool DiskCache::Impl::remove_if_same(const std::string& name, dev_t dev, ino_t ino) {
  if (read_only) return false;  // a read-only cache is never written
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
    if (!detail::entry_file_trusted(st, impl_->sealed())) {
      if (impl_->config.allow_shared_directory) {
        // A team cache without a key: another member's entry is theirs to use, not ours to trust (or
        // to remove). A miss; the compile that follows publishes this user's own over it.
        // (The one warning that says so came when the cache was opened.)
        logger()->debug("disk cache: not loading entry '{}' in '{}': written by {} (mode {}), and without a "
                        "fleet key only this user's and root's entries can be trusted",
                        name, impl_->directory.string(), detail::describe_uid(st.st_uid),
                        detail::mode_text(st.st_mode));
        return std::nullopt;
      }
      impl_->reject(name, EntryCheck::untrusted_owner, &st);
      return std::nullopt;
    }
    std::string bytes;
    std::size_t offset = 0;
    const EntryCheck read = detail::read_entry_file(fd.get(), static_cast<std::uint64_t>(st.st_size),
                                                    impl_->auth ? &*impl_->auth : nullptr, &key, bytes, offset);
    if (read == EntryCheck::io_error) {
      logger()->debug("disk cache: cannot read entry '{}': {}", name, detail::errno_text(errno));
      return std::nullopt;
    }
    if (read == EntryCheck::unauthenticated && !impl_->auth) {
      // Sealed by a member with the fleet key; this process has none to check it with: a miss, kept.
      logger()->debug("disk cache: entry '{}' is sealed with a fleet key and no CUINLINE_CACHE_KEY_FILE is set", name);
      return std::nullopt;
    }
    if (read != EntryCheck::ok) {
      impl_->reject(name, read, &st);
      return std::nullopt;
    }
    CompiledProgram program;
    if (const EntryCheck check = check_entry_bytes(std::string_view(bytes).substr(offset), &key, &program);
        check != EntryCheck::ok) {
      impl_->reject(name, check, &st);
      return std::nullopt;
    }
    // The entry's mtime is its last use (LRU); atime is unreliable under noatime/relatime. Another
    // member's entry in a team cache cannot be touched (EPERM): its mtime stays its writer's.
    const struct timespec times[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
    if (!impl_->read_only && ::futimens(fd.get(), times) != 0) {
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
  if (!impl_->usable || impl_->read_only || !impl_->publishes()) return false;
  if (program.binary.empty()) {
    logger()->warn("disk cache: not storing '{}': its binary is empty", program.program_name);
    return false;
  }
  try {
    const std::string name = key.hex();
    std::string bytes = detail::encode_entry(key, nvrtc_version(), program);
    if (impl_->auth) bytes = impl_->auth->seal(key, bytes);
    if (bytes.size() > detail::kMaxEntryBytes) {
      impl_->note_write_failure("entry too large", EFBIG);
      return false;
    }
    const int dir = impl_->dir_fd.get();
    // Private: the owner alone. A team cache: the group reads every member's entries.
    const mode_t entry_mode = impl_->config.allow_shared_directory ? 0640 : 0600;
    std::string temp;
    UniqueFd fd;
    for (int attempt = 0; attempt < 8 && !fd; ++attempt) {
      temp = temp_name(name);
      fd.reset(::openat(dir, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, entry_mode));
      if (!fd && errno != EEXIST) break;
    }
    if (!fd) {
      impl_->note_write_failure("creating a temp file", errno);
      return false;
    }
    ::fchmod(fd.get(), entry_mode);  // whatever the umask; never more
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

CacheStats DiskCache::stats() const {
  CacheStats stats;
  stats.disk_hits = impl_->disk_hits;
  stats.disk_writes = impl_->disk_writes;
  stats.disk_write_failures = impl_->disk_write_failures;
  stats.evictions = impl_->evictions;
  stats.rejected_entries = impl_->rejected_entries;
  stats.unauthenticated_entries = impl_->unauthenticated;
  stats.disk_lock_timeouts = impl_->lock_timeouts;
  return stats;
}

}  // namespace cuinline
