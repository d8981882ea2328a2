#pragma once
/// @file cache.hpp
/// The kernel cache: a SHA-256 key over everything that changes the binary, a thread-safe
/// single-flight memory tier, and a bounded, crash-safe, cross-process disk tier.

#include <array>
#include <chrono>
#include <cstdint>
#include <cuinline/compiler.hpp>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cuinline {

/// Version of the on-disk entry format; part of every key and every entry header.
inline constexpr std::uint32_t kCacheFormatVersion = 1;

/// SHA-256 digest identifying one compiled binary.
struct CacheKey {
  std::array<unsigned char, 32> digest{};

  /// 64 lowercase hex digits. The only thing cuinline ever builds a cache path from.
  std::string hex() const;
  /// Parses 64 hex digits; nullopt for anything else.
  static std::optional<CacheKey> from_hex(std::string_view hex);

  friend bool operator==(const CacheKey& a, const CacheKey& b) noexcept { return a.digest == b.digest; }
  friend bool operator!=(const CacheKey& a, const CacheKey& b) noexcept { return !(a == b); }
};

struct CacheKeyHash {
  std::size_t operator()(const CacheKey& key) const noexcept;
};

/// The key of `request` compiled for `target`: SHA-256 over the program name, the source, every
/// header's name and content, the canonical options plus default_options() (less the toolkit
/// include path), the name expressions, the target arch,
/// the NVRTC version, the cuinline version and kCacheFormatVersion — each length-prefixed, so no
/// two different inputs hash the same bytes. Throws InvalidArgument for options that
/// canonical_options rejects.
CacheKey make_cache_key(const CompileRequest& request, const Arch& target);

/// Where a request was served from.
enum class CacheTier { memory, disk, compiled, remote };
const char* to_string(CacheTier tier) noexcept;

/// Counters, all monotonic since the cache was created.
struct CacheStats {
  std::uint64_t memory_hits = 0;
  std::uint64_t disk_hits = 0;
  std::uint64_t compiles = 0;  ///< NVRTC compiles this process ran
  std::uint64_t compile_failures = 0;
  std::uint64_t disk_writes = 0;  ///< entries published
  std::uint64_t disk_write_failures = 0;
  std::uint64_t evictions = 0;         ///< entries removed to stay under the size cap
  std::uint64_t rejected_entries = 0;  ///< entries that failed validation (removed, recompiled)
  /// Waits for a disk lock that ran out (CacheConfig::lock_wait): the caller went on without it.
  std::uint64_t disk_lock_timeouts = 0;
  /// Entries that passed their tier's checks but hold code for another arch than their key says
  /// (forged or re-sealed): refused by KernelCache and recompiled.
  std::uint64_t wrong_arch_entries = 0;
  // The remote tier (RemoteCache; all zero without one).
  std::uint64_t remote_hits = 0;
  std::uint64_t remote_writes = 0;          ///< entries published to the remote tier
  std::uint64_t remote_write_failures = 0;  ///< publishes refused or not attempted (Redis down, OOM, read-only)
  std::uint64_t remote_errors = 0;          ///< commands that failed or were skipped while the remote tier was down
  std::uint64_t remote_rejected = 0;        ///< remote entries that were authentic but failed validation
  /// Entries whose HMAC tag or signature did not verify (missing, made with an unknown or revoked key,
  /// or wrong), in the remote tier or a team disk cache: never loaded.
  std::uint64_t unauthenticated_entries = 0;
  std::uint64_t remote_lock_waits = 0;     ///< lookups that waited for another machine's compile
  std::uint64_t remote_lock_timeouts = 0;  ///< waits that ran out (then this process compiled itself)
};

/// Settings of the remote (Redis) tier; all read by RemoteCacheConfig::from_environment().
struct RemoteCacheConfig {
  /// CUINLINE_REMOTE_CACHE: redis://[user:password@]host:port[/db] or unix:///path/to/redis.sock.
  /// Empty: no remote tier.
  std::string url;
  /// CUINLINE_CACHE_KEY_FILE: the fleet key(s) that seal and check every remote entry and every entry
  /// of a team disk cache (lines "<key-id> <hex secret>", the first seals; docs/RELIABILITY.md). Owned
  /// by this user, mode 0600 or stricter. Not used when entries are signed (the two files below).
  /// Without a usable key or signature setting the remote tier is not used.
  std::filesystem::path key_file;
  /// CUINLINE_CACHE_SIGNING_KEY: an Ed25519 private key (`cuinline key generate`) that signs the entries
  /// this process publishes to the remote tier and a team disk cache; the warm / CI machine's. Owned by
  /// this user, mode 0600 or stricter. Setting it or trusted_keys_file switches those tiers from the
  /// fleet key to signatures (docs/RELIABILITY.md, "Signed entries").
  std::filesystem::path signing_key_file;
  /// CUINLINE_CACHE_TRUSTED_KEYS: the public keys whose signatures are accepted, one
  /// "ed25519 <key-id> <hex key> [comment]" line each, "@revoked ed25519 ..." for a revoked one. Owned
  /// by this user or root, writable by no one else. With this list and no signing key a process loads
  /// signed entries and publishes none to those tiers; with a signing key and no list it trusts its
  /// own key alone.
  std::filesystem::path trusted_keys_file;
  /// Deadlines, not per-read timeouts (docs/RELIABILITY.md, "Deadlines"): a connect must succeed within
  /// connect_timeout (CUINLINE_REMOTE_CONNECT_TIMEOUT_MS); connect + AUTH + SELECT within connect_timeout
  /// + command_timeout; each command within command_timeout (CUINLINE_REMOTE_TIMEOUT_MS) plus 1 ms per
  /// 32 KiB it moves; the whole SCAN of `cache stats/verify --remote`, `cache pull` and list() within
  /// scan_timeout (CUINLINE_REMOTE_SCAN_TIMEOUT_MS).
  std::chrono::milliseconds connect_timeout{50};
  std::chrono::milliseconds command_timeout{200};
  std::chrono::milliseconds scan_timeout{30000};
  /// How long a miss waits for another process's compile of the same key (CUINLINE_REMOTE_LOCK_WAIT_MS)
  /// before compiling itself.
  std::chrono::milliseconds lock_wait{10000};
  /// Lifetime of the compile lease; it expires on its own if its holder dies (CUINLINE_REMOTE_LOCK_TTL_MS).
  std::chrono::milliseconds lock_ttl{30000};
  /// Lifetime of an entry, refreshed on every hit (CUINLINE_REMOTE_TTL_S, default 30 days).
  std::chrono::seconds entry_ttl{std::chrono::hours(24 * 30)};
  /// After a failure the remote tier is skipped for this long, doubling up to retry_max.
  std::chrono::milliseconds retry_initial{1000};
  std::chrono::milliseconds retry_max{60000};
  /// A remote value larger than this is rejected unread: its size (STRLEN) is asked before it is
  /// fetched, and no reply may exceed it by more than 1 MiB (CUINLINE_REMOTE_MAX_ENTRY_BYTES).
  std::uint64_t max_entry_bytes = std::uint64_t{64} << 20;
  /// Prefix of every Redis key cuinline writes (CUINLINE_REMOTE_PREFIX).
  std::string key_prefix = "cuinline:";

  static RemoteCacheConfig from_environment();
};

/// Settings of a cache; from_environment() reads the documented variables.
struct CacheConfig {
  /// Disk tier on/off. CUINLINE_DISABLE_DISK_CACHE=1 turns it off.
  bool disk_enabled = true;
  /// CUINLINE_CACHE_DIR, else $XDG_CACHE_HOME/cuinline, else ~/.cache/cuinline.
  std::filesystem::path directory;
  /// CUINLINE_CACHE_MAX_BYTES (default 1 GiB). Past it, least-recently-used entries are evicted.
  std::uint64_t max_bytes = std::uint64_t{1} << 30;
  /// A team cache (CUINLINE_CACHE_SHARED=1): accept a directory of another owner that its group may
  /// write (a setgid directory of the team's group, docs/RELIABILITY.md), write entries group-readable
  /// and the lock file group-writable. Entries then come from every member, so ownership proves
  /// nothing: with a fleet key (remote.key_file, CUINLINE_CACHE_KEY_FILE) every entry is sealed with
  /// an HMAC-SHA256 tag and one without a valid tag is never loaded; without a key only entries this
  /// user or root wrote are loaded (the other members' are misses, left in place), with one warning.
  /// It applies to `directory` alone: read_only_directories are always checked as private caches.
  /// Off by default: entries are machine code run with the user's rights.
  bool allow_shared_directory = false;
  /// Open the directory for reading only: hits are served (validated as always), nothing is ever
  /// written (no entry, no lock file, no use-time refresh). Also chosen by itself for a directory this
  /// user may read but not write (a read-only image layer or bind mount, a root-owned shipped cache).
  bool read_only = false;
  /// Read-only caches looked up after `directory` (CUINLINE_CACHE_READONLY_DIRS, ':'-separated):
  /// caches warmed elsewhere and shipped with the service; a miss in all of them is compiled and
  /// written to `directory`. Each must be owned by this user or root and writable by no one else,
  /// and so must each entry in it, whatever allow_shared_directory says.
  std::vector<std::filesystem::path> read_only_directories;
  /// Longest wait for a lock another process holds (a per-key compile lock, the directory lock of
  /// `clear`/`prune`); past it the caller goes on without the lock (compiles itself), with one
  /// warning (CUINLINE_CACHE_LOCK_WAIT_MS, default 10 s).
  std::chrono::milliseconds lock_wait{10000};
  /// Create the directory (mode 0700) and its lock file when missing. Off for inspection only
  /// (`cuinline cache list/stats/verify`), which must leave no trace: a missing directory is then
  /// unusable (nothing to inspect) and the lock file is neither created nor replaced.
  bool create = true;
  /// The remote tier behind the disk (off while remote.url is empty).
  RemoteCacheConfig remote;

  static CacheConfig from_environment();
};

/// The directory the environment selects (see CacheConfig::directory).
std::filesystem::path default_cache_directory();

/// One entry as the disk tier sees it (for `cuinline cache list`).
struct DiskEntryInfo {
  CacheKey key;
  std::filesystem::path path;
  std::string program_name;
  std::vector<std::pair<std::string, std::string>> lowered_names;
  Arch arch;
  BinaryKind kind = BinaryKind::cubin;
  NvrtcVersion nvrtc;
  std::uint64_t size_bytes = 0;              ///< file size
  std::filesystem::file_time_type last_use;  ///< refreshed on every hit
};

/// Result of checking one entry file.
enum class EntryCheck {
  ok,
  truncated,  ///< shorter than its header says, or empty
  bad_magic,
  wrong_version,  ///< written by another entry-format version
  wrong_key,      ///< the key inside differs from the file name / the key asked for
  bad_checksum,
  foreign,  ///< built by another NVRTC, or unreadable metadata
  io_error,
  /// owned by another user (not root), or writable by group or others: anyone who could write it may
  /// have planted it (refused unless a fleet key authenticates it: a team cache with a key file)
  untrusted_owner,
  /// a shared cache with a fleet key: the entry has no valid HMAC tag (not sealed, sealed with a key
  /// this process does not hold, or forged / altered / copied under another name); with signatures:
  /// the entry is not signed (an unsealed or fleet-key entry)
  unauthenticated,
  /// a file larger than an entry may be (64 MiB): never read, whatever its header says
  too_large,
  /// signatures: signed by a key id the trusted keys do not list (left in place: another machine may trust
  /// it)
  unknown_key,
  /// signatures: signed by a key the trusted keys file revokes
  revoked_key,
  /// signatures: the signature does not verify (forged, altered, or copied under another name)
  bad_signature,
};
const char* to_string(EntryCheck check) noexcept;

struct VerifyReport {
  std::uint64_t checked = 0;
  std::vector<std::pair<std::filesystem::path, EntryCheck>> bad;  ///< every entry that is not ok
  std::uint64_t removed = 0;                                      ///< with fix = true
  std::uint64_t stale_temp_files_removed = 0;
};

/// A held lock on one key of one tier (StorageTier::lock_key); released by its destructor.
class TierLock {
 public:
  virtual ~TierLock() = default;
};

/// One storage tier behind the memory tier. KernelCache walks its tiers in order (disk, then
/// remote): the first hit is served and copied into the tiers before it; on a miss everywhere it
/// takes each tier's key lock in order (looking again after each), compiles once and publishes to
/// every tier. A new tier is one class implementing this. Implementations never throw from
/// load/store/lock_key: a tier that cannot be used answers misses.
class StorageTier {
 public:
  virtual ~StorageTier() = default;
  /// Where a hit of this tier is reported as coming from.
  virtual CacheTier tier() const noexcept = 0;
  virtual bool usable() const noexcept = 0;
  /// The validated entry for `key`, or nullopt (miss, bad entry, tier unavailable).
  virtual std::optional<CompiledProgram> load(const CacheKey& key) = 0;
  /// Publishes an entry; false if it could not be written.
  virtual bool store(const CacheKey& key, const CompiledProgram& program) = 0;
  /// Waits (as long as the tier allows) until no one else is producing `key`, and returns the held
  /// lock, or nullptr when none is held (unusable tier, a wait that ran out, or the entry appeared
  /// while waiting). The caller looks in the tier again either way.
  virtual std::unique_ptr<TierLock> lock_key(const CacheKey& key) = 0;
  /// Every entry (for `cuinline cache list`; path and last_use may be empty for a remote tier).
  virtual std::vector<DiskEntryInfo> list() const = 0;
  /// This tier's counters (the others are zero).
  virtual CacheStats stats() const = 0;
};

/// The disk tier alone: one file per entry under directory(), published atomically
/// (unique temp file → write → flush/close → rename), validated on every read, bounded by LRU
/// eviction, with one cross-process lock per key (OFD locks, released by the kernel if the holder
/// dies). Never throws from load/store: a directory that cannot be used makes usable() false
/// (one warning) and everything becomes a miss.
class DiskCache final : public StorageTier {
 public:
  explicit DiskCache(CacheConfig config);
  ~DiskCache() override;
  DiskCache(const DiskCache&) = delete;
  DiskCache& operator=(const DiskCache&) = delete;

  bool usable() const noexcept override;
  /// Why the tier is not usable (empty while it is).
  const std::string& unusable_reason() const noexcept;
  /// Hits are served, nothing is written (CacheConfig::read_only, a directory this user cannot
  /// write, or inspection with create = false).
  bool read_only() const noexcept;
  CacheTier tier() const noexcept override { return CacheTier::disk; }
  const std::filesystem::path& directory() const noexcept;
  std::uint64_t max_bytes() const noexcept;

  /// The entry for `key`, validated (magic, format version, key, NVRTC version, checksum); a bad
  /// entry is removed, counted in stats().rejected_entries and reported as a miss. A hit refreshes
  /// the entry's use time.
  std::optional<CompiledProgram> load(const CacheKey& key) override;

  /// Publishes an entry; evicts least-recently-used entries if the directory is then over the cap.
  /// Returns false (with a warning) if it could not be written; nothing half-written stays behind.
  bool store(const CacheKey& key, const CompiledProgram& program) override;

  /// Exclusive cross-process (and cross-thread) lock on one key. Released by the destructor or
  /// by the kernel when the process dies. A team cache takes two: this user's own (which no other
  /// user can touch) and the team's (shared with the other members, when its lock file is sound).
  class KeyLock {
   public:
    KeyLock() = default;
    KeyLock(KeyLock&& other) noexcept;
    KeyLock& operator=(KeyLock&& other) noexcept;
    ~KeyLock();
    bool held() const noexcept { return fd_ >= 0 || team_fd_ >= 0; }

   private:
    friend class DiskCache;
    KeyLock(int fd, int team_fd) : fd_(fd), team_fd_(team_fd) {}
    int fd_ = -1;
    int team_fd_ = -1;
  };
  /// Blocks until the lock for `key` is held. Returns an unheld lock if the disk tier is unusable.
  KeyLock lock(const CacheKey& key);
  /// lock() as a StorageTier lock (src/cache/disk_tier.cpp).
  std::unique_ptr<TierLock> lock_key(const CacheKey& key) override;

  std::vector<DiskEntryInfo> list() const override;
  std::uint64_t total_bytes() const;
  /// Checks every entry; with fix, removes the bad ones and stale temp files.
  VerifyReport verify(bool fix);
  /// Evicts least-recently-used entries until the total is at most `max_bytes`. Returns the count.
  std::uint64_t prune(std::uint64_t max_bytes);
  /// Removes every entry and the stale temp files (older than 10 minutes: a younger one may be a
  /// writer's still at work). Returns the number of entries removed.
  std::uint64_t clear();

  CacheStats stats() const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cuinline
