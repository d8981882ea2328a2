#pragma once
/// @file remote_cache.hpp
/// The remote tier: a fleet-wide kernel cache on Redis behind the disk tier. Every entry
/// is the disk tier's entry sealed with an HMAC-SHA256 tag under a fleet key, or signed with the
/// signer's Ed25519 key (docs/RELIABILITY.md, "Remote cache", "Signed entries"); a miss takes a
/// lease (SET NX PX) so one process of the fleet compiles each key while the others wait for its
/// entry. Redis is never a single point of failure: short deadlines, and after a failure the tier
/// is skipped (one warning) and retried with exponential back-off.

#include <cstdint>
#include <cuinline/cache.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cuinline {

/// Result of checking one remote entry (RemoteCache::check).
enum class RemoteEntryCheck {
  ok,
  missing,
  too_large,       ///< larger than RemoteCacheConfig::max_entry_bytes (STRLEN); not read
  not_sealed,      ///< no authentication envelope of this process's mode (no tag, or no signature)
  unknown_key_id,  ///< sealed or signed with a key id this process does not hold / trust
  bad_tag,         ///< the tag does not verify (forged, damaged, or copied under another key)
  revoked_key,     ///< signed by a key the trusted keys file revokes
  bad_signature,   ///< the signature does not verify (forged, damaged, or copied under another key)
  bad_entry,       ///< authentic, but the entry inside fails validation (see the EntryCheck)
  wrong_type,      ///< the key holds another Redis type (a hash, a list, ...): not an entry; not read
  unavailable,     ///< Redis could not be asked
};
const char* to_string(RemoteEntryCheck check) noexcept;

/// What `cuinline cache stats --remote` shows of the server.
struct RemoteServerInfo {
  std::string endpoint;  ///< the URL without its password
  std::string version;
  std::uint64_t used_memory = 0;
  std::uint64_t max_memory = 0;  ///< 0: unlimited
  std::string eviction_policy;
  std::string role;  ///< "master" or "slave"
};

/// The Redis tier. Construction never connects (no delay at start-up); the first use does.
/// Thread-safe. Without hiredis at build time (CUINLINE_WITH_REDIS=OFF) it is never usable.
class RemoteCache final : public StorageTier {
 public:
  explicit RemoteCache(RemoteCacheConfig config);
  ~RemoteCache() override;
  RemoteCache(const RemoteCache&) = delete;
  RemoteCache& operator=(const RemoteCache&) = delete;

  /// Whether this build has Redis support.
  static bool supported() noexcept;

  /// Configured well enough to be used (URL parsed, key loaded, Redis support built in). Says
  /// nothing about whether Redis is up.
  bool usable() const noexcept override;
  /// Why not usable (empty when usable).
  const std::string& unusable_reason() const noexcept;
  /// The URL without its password.
  const std::string& endpoint() const noexcept;
  /// The id of the key new entries are sealed or signed with; empty when this process holds only
  /// trusted public keys (it then publishes nothing and takes no lease).
  std::string signing_key_id() const;

  CacheTier tier() const noexcept override { return CacheTier::remote; }
  /// GETEX (TTL refreshed), then size, tag, entry validation; a bad entry is counted and a miss.
  std::optional<CompiledProgram> load(const CacheKey& key) override;
  /// SET with the entry TTL; the entry is sealed with the fleet key or signed. False without writing
  /// anything when this process only verifies.
  bool store(const CacheKey& key, const CompiledProgram& program) override;
  /// The fleet-wide compile lease of `key` (SET NX PX lock_ttl): waits up to lock_wait while another
  /// holder works, returning nullptr as soon as the entry appears or the wait runs out.
  std::unique_ptr<TierLock> lock_key(const CacheKey& key) override;
  /// Every authentic, valid entry (SCAN + GET; path empty, last_use unset).
  std::vector<DiskEntryInfo> list() const override;
  CacheStats stats() const override;

  /// The keys of every entry under the prefix (SCAN, never KEYS). Throws CacheError if Redis cannot
  /// be asked.
  std::vector<CacheKey> keys() const;
  /// Checks one entry without refreshing its TTL. On ok fills `out` (if non-null); `entry` gets the
  /// EntryCheck of a bad_entry; `bytes` the stored size.
  RemoteEntryCheck check(const CacheKey& key, CompiledProgram* out = nullptr, EntryCheck* entry = nullptr,
                         std::uint64_t* bytes = nullptr) const;
  /// Deletes one entry. False when Redis could not be asked.
  bool remove(const CacheKey& key);
  /// INFO server/memory/replication. Throws CacheError if Redis cannot be asked.
  RemoteServerInfo server_info() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace cuinline
