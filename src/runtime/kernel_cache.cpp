#include "cuinline/kernel_cache.hpp"

#include <atomic>
#include <chrono>
#include <future>
#include <unordered_map>

#include "cache/background_writer.hpp"
#include "common/log.hpp"
#include "cuinline/error.hpp"
#include "cuinline/module.hpp"
#include "cuinline/remote_cache.hpp"
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

// Sums the counters of the tiers (each fills only its own).
void accumulate(CacheStats& into, const CacheStats& s) {
  into.memory_hits += s.memory_hits;
  into.disk_hits += s.disk_hits;
  into.compiles += s.compiles;
  into.compile_failures += s.compile_failures;
  into.disk_writes += s.disk_writes;
  into.disk_write_failures += s.disk_write_failures;
  into.evictions += s.evictions;
  into.rejected_entries += s.rejected_entries;
  into.disk_lock_timeouts += s.disk_lock_timeouts;
  into.wrong_arch_entries += s.wrong_arch_entries;
  into.remote_hits += s.remote_hits;
  into.remote_writes += s.remote_writes;
  into.remote_write_failures += s.remote_write_failures;
  into.remote_errors += s.remote_errors;
  into.remote_rejected += s.remote_rejected;
  into.unauthenticated_entries += s.unauthenticated_entries;
  into.remote_lock_waits += s.remote_lock_waits;
  into.remote_lock_timeouts += s.remote_lock_timeouts;
}

}  // namespace

struct KernelCache::Impl {
  explicit Impl(CacheConfig c) : config(std::move(c)) {
    if (config.disk_enabled) {
      disk = std::make_unique<DiskCache>(config);
      if (disk->usable()) tiers.push_back(disk.get());
      // Shipped caches, after the writable one: a miss in all of them is compiled into `directory`.
      for (const auto& directory : config.read_only_directories) {
        CacheConfig shipped = config;
        shipped.directory = directory;
        shipped.read_only = true;
        shipped.read_only_directories.clear();
        // Shared mode (and its key) is the writable team cache's. A shipped cache is trusted for being
        // this user's or root's alone: another owner's directory or entry there is refused, as in a
        // private cache, whatever CUINLINE_CACHE_SHARED says.
        shipped.allow_shared_directory = false;
        shipped.remote = RemoteCacheConfig{};
        auto tier = std::make_unique<DiskCache>(std::move(shipped));
        if (tier->usable()) tiers.push_back(tier.get());
        read_only_disks.push_back(std::move(tier));  // kept for its counters even when unusable
      }
    }
    if (!config.remote.url.empty()) {
      remote = std::make_unique<RemoteCache>(config.remote);
      if (remote->usable()) {
        tiers.push_back(remote.get());
      } else {
        remote.reset();  // the constructor said why, once
      }
    }
    // Each refused read-only cache, once every tier is known: which one, why, and what is used instead.
    for (const auto& shipped : read_only_disks) {
      if (!shipped->usable()) {
        logger()->warn("disk cache: skipping the read-only cache '{}': {}; still used: {}",
                       shipped->directory().string(), shipped->unusable_reason(), tiers_in_use());
      }
    }
  }

  // "the memory cache, the disk cache '…', the read-only cache '…', the remote cache".
  std::string tiers_in_use() const {
    std::string text = "the memory cache";
    for (const StorageTier* tier : tiers) {
      if (tier == disk.get()) {
        text += ", the disk cache '" + disk->directory().string() + "'";
      } else if (tier == remote.get()) {
        text += ", the remote cache";
      } else {
        text += ", the read-only cache '" + static_cast<const DiskCache*>(tier)->directory().string() + "'";
      }
    }
    return text;
  }

  using Slot = std::shared_future<std::shared_ptr<detail::ModuleState>>;

  CacheConfig config;
  std::unique_ptr<DiskCache> disk;
  std::vector<std::unique_ptr<DiskCache>> read_only_disks;  // CacheConfig::read_only_directories
  std::unique_ptr<RemoteCache> remote;
  std::vector<StorageTier*> tiers;  // in lookup order: disk, remote
  mutable std::mutex mutex;
  std::unordered_map<CacheKey, Slot, CacheKeyHash> entries;
  std::atomic<std::uint64_t> memory_hits{0};
  std::atomic<std::uint64_t> compiles{0};
  std::atomic<std::uint64_t> compile_failures{0};
  std::atomic<std::uint64_t> misfits{0};  // valid entries for another arch (wrong_arch_entries)
  // Declared last: destroyed (drained, joined) first, while the tiers it writes to still exist.
  detail::BackgroundWriter writer;

  std::optional<CompiledProgram> load_fitting(StorageTier& tier, const CacheKey& key, const Arch& target) {
    std::optional<CompiledProgram> hit = tier.load(key);
    if (hit && !fits_target(*hit, target)) {
      ++misfits;
      logger()->warn(
          "{} cache: entry {} holds {} code for {}, but its key is for {}; ignoring it and recompiling",
          to_string(tier.tier()), key.hex(), hit->kind == BinaryKind::ptx ? "PTX" : "CUBIN", hit->arch.name(),
          target.name());
      hit.reset();
    }
    return hit;
  }

  // A hit in tiers[index]: a remote hit is copied into the disk tiers before it (read-only ones
  // decline), in the background: the disk write (fsync) would double the time of a remote hit. A hit
  // in a shipped read-only cache is as fast as a local one and is not copied.
  std::shared_ptr<detail::ModuleState> serve(std::size_t index, CompiledProgram program, const CacheKey& key,
                                             CacheTier& tier) {
    if (index > 0 && tiers[index]->tier() == CacheTier::remote) {
      writer.submit([this, index, key, copy = program] {
        for (std::size_t i = 0; i < index; ++i) tiers[i]->store(key, copy);
      });
    }
    tier = tiers[index]->tier();
    return std::make_shared<detail::ModuleState>(std::move(program), key, tier);
  }

  // Every tier in order; then, on a miss everywhere, each tier's key lock in order, looking in that
  // tier again once it is held (another process or machine may have published meanwhile); then
  // NVRTC, published to every tier (the last first: its waiters are other machines) before the
  // locks are released.
  std::shared_ptr<detail::ModuleState> produce(const CacheKey& key, const CompileRequest& request,
                                               const Arch& target, CacheTier& tier) {
    for (std::size_t i = 0; i < tiers.size(); ++i) {
      if (auto hit = load_fitting(*tiers[i], key, target)) return serve(i, std::move(*hit), key, tier);
    }
    std::vector<std::unique_ptr<TierLock>> locks;
    for (std::size_t i = 0; i < tiers.size(); ++i) {
      locks.push_back(tiers[i]->lock_key(key));
      if (auto hit = load_fitting(*tiers[i], key, target)) return serve(i, std::move(*hit), key, tier);
    }
    CompiledProgram program = compile_counted(request, target);
    for (std::size_t i = tiers.size(); i-- > 0;) tiers[i]->store(key, program);
    while (!locks.empty()) locks.pop_back();  // in reverse order of taking
    tier = CacheTier::compiled;
    return std::make_shared<detail::ModuleState>(std::move(program), key, tier);
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

Module KernelCache::get(const CacheKey& key, const CompileRequest& request, const Arch& requested,
                        CacheTier* tier) {
  Impl& d = *impl_;
  // The arch the entry is built for (sm_90a for an arch-specific request on sm_90): what an entry
  // must fit.
  const Arch target = compile_target(request, requested);
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
  CacheStats s;
  for (const StorageTier* tier : impl_->tiers) accumulate(s, tier->stats());
  if (impl_->disk && !impl_->disk->usable()) accumulate(s, impl_->disk->stats());
  for (const auto& shipped : impl_->read_only_disks) {
    if (!shipped->usable()) accumulate(s, shipped->stats());
  }
  s.memory_hits = impl_->memory_hits.load(std::memory_order_relaxed);
  s.compiles = impl_->compiles.load(std::memory_order_relaxed);
  s.compile_failures = impl_->compile_failures.load(std::memory_order_relaxed);
  s.wrong_arch_entries = impl_->misfits.load(std::memory_order_relaxed);
  return s;
}

DiskCache* KernelCache::disk() noexcept {
  return impl_->disk.get();
}
RemoteCache* KernelCache::remote() noexcept {
  return impl_->remote.get();
}
void KernelCache::flush() {
  impl_->writer.drain();
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
