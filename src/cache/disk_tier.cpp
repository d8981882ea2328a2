// DiskCache as a StorageTier: its per-key lock behind the TierLock interface. Kept apart from
// disk_cache*.cpp so the disk tier's own files stay about the disk.

#include <memory>

#include "cuinline/cache.hpp"

namespace cuinline {
namespace {

struct DiskTierLock final : TierLock {
  explicit DiskTierLock(DiskCache::KeyLock held) : lock(std::move(held)) {}
  DiskCache::KeyLock lock;
};

}  // namespace

std::unique_ptr<TierLock> DiskCache::lock_key(const CacheKey& key) {
  KeyLock held = lock(key);
  if (!held.held()) return nullptr;
  return std::make_unique<DiskTierLock>(std::move(held));
}

}  // namespace cuinline
