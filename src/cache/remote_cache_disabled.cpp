// RemoteCache in a build without hiredis (CUINLINE_WITH_REDIS=OFF, or AUTO where it is not found):
// never usable; a configured URL gets one warning saying so.

#include <atomic>

#include "common/log.hpp"
#include "cuinline/error.hpp"
#include "cuinline/remote_cache.hpp"

namespace cuinline {

struct RemoteCache::Impl {
  RemoteCacheConfig config;
  std::string reason;
  std::string shown;  // never the URL: it may hold a password
};

RemoteCache::RemoteCache(RemoteCacheConfig config) : impl_(std::make_unique<Impl>()) {
  static std::atomic<bool> warned{false};
  impl_->config = std::move(config);
  if (impl_->config.url.empty()) {
    impl_->reason = "no remote cache configured (CUINLINE_REMOTE_CACHE)";
    return;
  }
  impl_->reason = "this build of cuinline has no Redis support (built without hiredis: CUINLINE_WITH_REDIS)";
  if (!warned.exchange(true))
    logger()->warn("CUINLINE_REMOTE_CACHE is set, but {}; using the local tiers", impl_->reason);
}

RemoteCache::~RemoteCache() = default;

bool RemoteCache::supported() noexcept {
  return false;
}
bool RemoteCache::usable() const noexcept {
  return false;
}
const std::string& RemoteCache::unusable_reason() const noexcept {
  return impl_->reason;
}
const std::string& RemoteCache::endpoint() const noexcept {
  return impl_->shown;
}
std::string RemoteCache::signing_key_id() const {
  return {};
}
std::optional<CompiledProgram> RemoteCache::load(const CacheKey&) {
  return std::nullopt;
}
bool RemoteCache::store(const CacheKey&, const CompiledProgram&) {
  return false;
}
std::unique_ptr<TierLock> RemoteCache::lock_key(const CacheKey&) {
  return nullptr;
}
std::vector<DiskEntryInfo> RemoteCache::list() const {
  throw CacheError("remote cache: " + impl_->reason);
}
CacheStats RemoteCache::stats() const {
  return {};
}
std::vector<CacheKey> RemoteCache::keys() const {
  throw CacheError("remote cache: " + impl_->reason);
}
RemoteEntryCheck RemoteCache::check(const CacheKey&, CompiledProgram*, EntryCheck*, std::uint64_t*) const {
  return RemoteEntryCheck::unavailable;
}
bool RemoteCache::remove(const CacheKey&) {
  return false;
}
RemoteServerInfo RemoteCache::server_info() const {
  throw CacheError("remote cache: " + impl_->reason);
}

}  // namespace cuinline
