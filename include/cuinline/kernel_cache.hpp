#pragma once
/// @file kernel_cache.hpp
/// The cache in front of the compiler, and the process-wide one that load_inline and the ops use.

#include <cstddef>
#include <cuinline/cache.hpp>
#include <cuinline/compiler.hpp>
#include <cuinline/module.hpp>
#include <memory>

namespace cuinline {

class RemoteCache;

/// The cache in front of the compiler: memory (thread-safe, single-flight: N threads asking for one
/// missing key run one compile and share one Module), then the storage tiers in order — disk
/// (cross-process: one compile per key across processes), then remote (config.remote.url: one
/// compile per key across the fleet) — then NVRTC. A hit is copied into the tiers before the one
/// that had it; a compile is published to every tier.
class KernelCache {
 public:
  explicit KernelCache(CacheConfig config = CacheConfig::from_environment());
  ~KernelCache();
  KernelCache(const KernelCache&) = delete;
  KernelCache& operator=(const KernelCache&) = delete;

  /// The module for `request` compiled for `target`. `tier`, if given, receives where it came from.
  Module get(const CompileRequest& request, const Arch& target, CacheTier* tier = nullptr);
  /// Same, with a key the caller already computed with make_cache_key(request, target).
  Module get(const CacheKey& key, const CompileRequest& request, const Arch& target,
             CacheTier* tier = nullptr);

  /// Counters of every tier.
  CacheStats stats() const;
  /// The disk tier, or nullptr when disabled.
  DiskCache* disk() noexcept;
  /// The remote tier, or nullptr when none is configured or it cannot be used (no key, no Redis
  /// support in this build, a bad URL; each warned about once).
  RemoteCache* remote() noexcept;
  /// Waits until the copies of remote hits into the disk tier (written by a background thread, so
  /// that a remote hit does not wait for the disk) are done. The destructor does the same.
  void flush();
  const CacheConfig& config() const noexcept;
  /// Drops the memory tier (modules still held by callers stay alive).
  void clear_memory();
  std::size_t memory_entries() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The process-wide cache, configured from the environment on first use (or by
/// configure_default_cache before it).
KernelCache& default_cache();
/// Sets the configuration the process-wide cache is created with. Returns false (and changes
/// nothing) when default_cache() was already created.
bool configure_default_cache(CacheConfig config);

}  // namespace cuinline
