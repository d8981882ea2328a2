#include <atomic>
#include <chrono>
#include <future>
#include <unordered_map>

#include "cuinline/error.hpp"
#include "cuinline/log.hpp"
#include "cuinline/module.hpp"
#include "driver/module_state.hpp"

namespace cuinline {
namespace {

// The key covers the target arch, so an entry built for another arch under this key was forged or
// damaged in a way the checksum cannot see (it was re-sealed). A CUBIN must be for the target
// exactly; PTX (the fallback for targets newer than NVRTC) for an arch no newer than the target.
bool fits_target(const CompiledProgram& p, const Arch& target) {
  if (p.kind == BinaryKind::cubin) return p.arch == target;
  return p.kind == BinaryKind::ptx && p.arch.number() <= target.number();
}

}  // namespace

struct KernelCache::Impl {
  explicit Impl(CacheConfig c) : config(std::move(c)) {
    if (config.disk_enabled) disk = std::make_unique<DiskCache>(config);
  }

  using Slot = std::shared_future<std::shared_ptr<detail::ModuleState>>;

  CacheConfig config;
  std::unique_ptr<DiskCache> disk;
  mutable std::mutex mutex;
  std::unordered_map<CacheKey, Slot, CacheKeyHash> entries;
  std::atomic<std::uint64_t> memory_hits{0};
  std::atomic<std::uint64_t> compiles{0};
  std::atomic<std::uint64_t> compile_failures{0};

  // Disk, then (under the cross-process key lock) disk again, then NVRTC.
  std::optional<CompiledProgram> load_fitting(const CacheKey& key, const Arch& target) {
    std::optional<CompiledProgram> hit = disk->load(key);
    if (hit && !fits_target(*hit, target)) {
      logger()->warn(
          "disk cache: entry {} holds {} code for {}, but its key is for {}; ignoring it and recompiling",
          key.hex(), hit->kind == BinaryKind::ptx ? "PTX" : "CUBIN", hit->arch.name(), target.name());
      hit.reset();
    }
    return hit;
  }

  std::shared_ptr<detail::ModuleState> produce(const CacheKey& key, const CompileRequest& request,
                                               const Arch& target, CacheTier& tier) {
    if (disk && disk->usable()) {
      if (auto hit = load_fitting(key, target)) {
        tier = CacheTier::disk;
        return std::make_shared<detail::ModuleState>(std::move(*hit), key, tier);
      }
      // Another process may be compiling this key: wait for it, then look again.
      DiskCache::KeyLock lock = disk->lock(key);
      if (lock.held()) {
        if (auto hit = load_fitting(key, target)) {
          tier = CacheTier::disk;
          return std::make_shared<detail::ModuleState>(std::move(*hit), key, tier);
        }
      }
      CompiledProgram program = compile_counted(request, target);
      disk->store(key, program);
      tier = CacheTier::compiled;
      return std::make_shared<detail::ModuleState>(std::move(program), key, tier);
    }
    tier = CacheTier::compiled;
    return std::make_shared<detail::ModuleState>(compile_counted(request, target), key, tier);
  }

  CompiledProgram compile_counted(const CompileRequest& request, const Arch& target) {
    try {
      CompiledProgram p = compile(request, target);
      compiles.fetch_add(1, std::memory_order_relaxed);
      return p;
    } catch (...) {
      compile_failures.fetch_add(1, std::memory_order_relaxed);
      throw;
    }
  }
};

KernelCache::KernelCache(CacheConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {}
KernelCache::~KernelCache() = default;

Module KernelCache::get(const CompileRequest& request, const Arch& target, CacheTier* tier) {
  return get(make_cache_key(request, target), request, target, tier);
}

Module KernelCache::get(const CacheKey& key, const CompileRequest& request, const Arch& target,
                        CacheTier* tier) {
  Impl& d = *impl_;
  std::promise<std::shared_ptr<detail::ModuleState>> promise;
  Impl::Slot slot;
  bool producer = false;
  {
    std::lock_guard<std::mutex> lock(d.mutex);
    auto it = d.entries.find(key);
    if (it != d.entries.end()) {
      slot = it->second;
    } else {
      slot = promise.get_future().share();
      d.entries.emplace(key, slot);
      producer = true;
    }
  }
  if (!producer) {
    // Single flight: wait for the thread producing this key (a no-op for a finished entry).
    std::shared_ptr<detail::ModuleState> state = slot.get();  // rethrows the producer's error
    d.memory_hits.fetch_add(1, std::memory_order_relaxed);
    if (tier) *tier = CacheTier::memory;
    return Module(std::move(state));
  }
  try {
    CacheTier produced = CacheTier::compiled;
    auto state = d.produce(key, request, target, produced);
    promise.set_value(state);
    if (tier) *tier = produced;
    return Module(std::move(state));
  } catch (...) {
    // Waiters get the error; the key is forgotten so a later request tries again.
    promise.set_exception(std::current_exception());
    std::lock_guard<std::mutex> lock(d.mutex);
    d.entries.erase(key);
    throw;
  }
}

CacheStats KernelCache::stats() const {
  CacheStats s = impl_->disk ? impl_->disk->stats() : CacheStats{};
  s.memory_hits = impl_->memory_hits.load(std::memory_order_relaxed);
  s.compiles = impl_->compiles.load(std::memory_order_relaxed);
  s.compile_failures = impl_->compile_failures.load(std::memory_order_relaxed);
  return s;
}

DiskCache* KernelCache::disk() noexcept {
  return impl_->disk.get();
}
const CacheConfig& KernelCache::config() const noexcept {
  return impl_->config;
}

void KernelCache::clear_memory() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->entries.clear();
}

std::size_t KernelCache::memory_entries() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->entries.size();
}

namespace {
std::mutex& default_cache_mutex() {
  static std::mutex m;
  return m;
}
std::optional<CacheConfig>& default_cache_config() {
  static std::optional<CacheConfig> c;
  return c;
}
std::atomic<bool> default_cache_created{false};
}  // namespace

bool configure_default_cache(CacheConfig config) {
  std::lock_guard<std::mutex> lock(default_cache_mutex());
  if (default_cache_created.load()) return false;
  default_cache_config() = std::move(config);
  return true;
}

KernelCache& default_cache() {
  // Never destroyed: modules may be unloaded by static destructors only after the driver is gone.
  static KernelCache* cache = [] {
    std::lock_guard<std::mutex> lock(default_cache_mutex());
    default_cache_created.store(true);
    return new KernelCache(default_cache_config() ? *default_cache_config() : CacheConfig::from_environment());
  }();
  return *cache;
}

}  // namespace cuinline
