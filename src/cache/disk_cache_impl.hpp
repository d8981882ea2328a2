#pragma once
// DiskCache's state, shared by disk_cache.cpp (construction, load, store), disk_cache_lock.cpp (the
// locks) and disk_cache_maintenance.cpp (scan, eviction, list/verify/prune/clear).

#include <sys/stat.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cache/directory_walk.hpp"
#include "cache/disk_cache_io.hpp"
#include "cache/entry_auth.hpp"
#include "cuinline/cache.hpp"

namespace cuinline {

namespace detail {

/// The lock file of the cache directory: byte 0 is the directory-wide (eviction) lock, byte
/// 1 + (first 7 key bytes) is the lock of that key. A team cache's members share it; each member
/// also locks the same bytes of a lock file of their own (own_lock_directory), which no one else
/// can replace.
inline constexpr const char* kLockFileName = "lock";
/// Temp files start with this; they never look like an entry name (64 hex digits).
inline constexpr std::string_view kTempPrefix = ".tmp-";
/// A temp file this old belongs to a writer that died; it is removed.
inline constexpr std::chrono::minutes kStaleTempAge{10};

/// Where this user keeps its own lock file for the team caches it uses ($XDG_CACHE_HOME/cuinline-locks,
/// else ~/.cache/cuinline-locks, else $TMPDIR/cuinline-locks-<uid>): a directory only this user
/// controls (disk_cache_config.cpp; disk_cache_lock.cpp says why).
std::filesystem::path own_lock_directory();
/// This user's lock file in own_lock_directory(), one for every team cache.
inline constexpr const char* kOwnLockFileName = "team.lock";

/// Reads the entry file open as `fd` (a regular file of `size` bytes): nothing of a file over
/// kMaxEntryBytes (too_large); with `auth`, the seal first; the entry's header checked against the
/// size and `key` before the rest is read; with `auth`, the tag or signature (over `key`, which must
/// then be given; a failure is auth->entry_check's verdict). On ok the entry is bytes[entry_offset..].
/// A sealed file read without `auth` gives `unauthenticated` (it cannot be checked here, and is not
/// damaged).
EntryCheck read_entry_file(int fd, std::uint64_t size, const EntryAuth* auth, const CacheKey* key,
                           std::string& bytes, std::size_t& entry_offset);

bool is_entry_name(std::string_view name) noexcept;
bool is_temp_name(std::string_view name) noexcept;

/// The locks of one byte (lock_byte): this user's own and, in a team cache, the team's.
struct HeldLock {
  UniqueFd own;
  UniqueFd team;
  bool held() const noexcept { return own || team; }
};

/// One file of the cache directory as a scan saw it.
struct ScannedFile {
  std::string name;
  bool entry = false;  ///< else a temp file
  std::uint64_t size = 0;
  struct timespec mtime {};
  dev_t dev = 0;
  ino_t ino = 0;
};

}  // namespace detail

struct DiskCache::Impl {
  CacheConfig config;
  std::filesystem::path directory;
  detail::UniqueFd dir_fd;  // every file operation is relative to this (openat, renameat, ...)
  std::atomic<bool> usable{false};
  std::string unusable_reason;  // set once in the constructor
  bool read_only = false;       // config.read_only, or a directory this user cannot write
  std::optional<detail::EntryAuth> auth;  // a shared cache with a fleet key or signatures: entries sealed
  // A team cache (writable): the directory of this user's own lock file (kOwnLockFileName). Empty
  // when it cannot be used (one warning).
  detail::UniqueFd own_lock_dir;

  std::atomic<bool> write_failure_warned{false};
  std::atomic<bool> untrusted_warned{false};
  std::atomic<bool> lock_failure_warned{false};
  std::atomic<bool> lock_timeout_warned{false};
  std::atomic<bool> unauthenticated_warned{false};
  std::atomic<bool> team_lock_warned{false};

  std::mutex size_mutex;
  bool size_known = false;             // set by the first scan, which the first store runs
  std::uint64_t estimated_bytes = 0;   // this process's running estimate of the directory total
  std::uint64_t bytes_since_scan = 0;  // written by this process since the last scan

  std::atomic<std::uint64_t> disk_hits{0};
  std::atomic<std::uint64_t> disk_writes{0};
  std::atomic<std::uint64_t> disk_write_failures{0};
  std::atomic<std::uint64_t> evictions{0};
  std::atomic<std::uint64_t> rejected_entries{0};
  std::atomic<std::uint64_t> unauthenticated{0};
  std::atomic<std::uint64_t> lock_timeouts{0};

  void open_directory();
  /// Marks the cache unusable for `reason` and says so (a read-only tier at debug: KernelCache says
  /// which tiers are still used).
  void refuse(std::string reason);
  /// Private cache: makes the lock file, or replaces one another user owns or can write. False (with
  /// refuse) when that fails.
  bool prepare_private_lock_file();
  /// Shared mode: reads the fleet key or the signature keys (config.remote, EntryAuth::from_config)
  /// into `auth`; false (unusable, with the reason) when one is named but cannot be used.
  bool load_fleet_key();
  /// False in a shared cache of signed entries for a process without the signing key: it loads
  /// signed entries and writes none (nothing it could write would be accepted), nor takes key locks.
  bool publishes() const noexcept { return !auth || auth->can_seal(); }
  void require_usable(const char* operation) const;
  /// Throws CacheError for a read-only cache.
  void require_writable(const char* operation) const;

  /// Whether entries come from other writers and a fleet key authenticates them (a team cache with
  /// a key file): only then may an entry file of another owner be read.
  bool sealed() const noexcept { return auth.has_value(); }

  /// Team cache: opens the directory of this user's own lock file (own_lock_dir).
  void open_own_lock_directory();
  /// Team cache: the team's lock file, opened (made, group-writable, if missing) and checked; empty,
  /// with one warning naming its owner, when it is not sound.
  detail::UniqueFd open_team_lock_file();
  /// OFD write locks on [offset, offset + 1) of the lock files (disk_cache_lock.cpp), each on a
  /// description of its own: this user's (the directory's lock file in a private cache, its own
  /// lock file in a team cache), then in a team cache the team's lock file when it is sound (a
  /// regular file that others than the team cannot write; else it is passed over, with one
  /// warning naming its owner). With wait = false, nothing held when someone else holds one; with
  /// wait = true, what could be taken before config.lock_wait ran out (one warning: the caller goes
  /// on with less). Nothing for a read-only cache.
  detail::HeldLock lock_byte(off_t offset, bool wait);

  /// Entries and temp files (nothing else) of the directory. Throws CacheError if unreadable.
  std::vector<detail::ScannedFile> scan() const;
  /// Removes temp files older than kStaleTempAge (a younger one may be a live writer's). Returns the count.
  std::uint64_t remove_stale_temp_files(const std::vector<detail::ScannedFile>& files);
  /// Removes least-recently-used entries of `files` until their total is at most `target`.
  /// Returns the number removed; `total` is updated to what remains.
  std::uint64_t evict_down_to(std::vector<detail::ScannedFile>& files, std::uint64_t target,
                              std::uint64_t& total);
  /// After a store: if the estimate says the directory is over the cap, rescan and evict under
  /// the directory lock.
  void evict_if_needed(std::uint64_t added_bytes);
  /// Unlinks `name` only if it is still the file (dev, ino) that was read.
  bool remove_if_same(const std::string& name, dev_t dev, ino_t ino);
  /// A bad entry: count, log, remove.
  void reject(const std::string& name, EntryCheck check, const struct stat* st);
  void note_write_failure(const char* what, int err);
};

}  // namespace cuinline
