#pragma once
/// @file module.hpp
/// A compiled program and its kernels. A Module is a cheap shared handle; a Kernel keeps its module
/// (and the loaded library) alive. Loading is context-independent (cuLibraryLoadData), so one
/// binary serves every device of its architecture. The cache that hands modules out is
/// KernelCache (kernel_cache.hpp).

#include <cuda.h>

#include <cstddef>
#include <cuinline/cache.hpp>
#include <cuinline/compiler.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>

namespace cuinline {

namespace detail {
struct ModuleState;
struct KernelState;
}  // namespace detail

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr Dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) noexcept : x(x_), y(y_), z(z_) {}
};

/// Grid, block, dynamic shared memory and the caller's stream.
struct LaunchConfig {
  Dim3 grid;
  Dim3 block;
  unsigned shared_bytes = 0;
  CUstream stream = nullptr;
};

/// A kernel of a loaded module. Launching allocates nothing and never synchronizes, so a launch
/// can be captured into a CUDA graph.
class Kernel {
 public:
  Kernel() = default;

  /// Launches on cfg.stream with `args` as the kernel's parameters. The argument count (and each
  /// argument's size) is checked against the kernel's parameters where the driver can tell
  /// (cuKernelGetParamInfo); a mismatch throws InvalidArgument and nothing is launched. A failed
  /// launch throws DriverError.
  template <class... Args>
  void launch(const LaunchConfig& cfg, const Args&... args) const {
    static_assert((std::is_trivially_copyable_v<Args> && ...), "kernel arguments must be trivially copyable");
    if constexpr (sizeof...(Args) == 0) {
      launch_raw(cfg, nullptr, 0, nullptr);
    } else {
      void* ptrs[] = {const_cast<void*>(static_cast<const void*>(&args))...};
      static constexpr std::size_t sizes[] = {sizeof(Args)...};
      launch_raw(cfg, ptrs, sizeof...(Args), sizes);
    }
  }

  /// Untyped launch: `args[i]` points at argument i, `sizes[i]` is its size (may be null: then
  /// only the count is checked).
  void launch_raw(const LaunchConfig& cfg, void** args, std::size_t count, const std::size_t* sizes) const;

  /// A config for `work_items` threads on `stream`: the block size that maximizes occupancy
  /// (cuOccupancyMaxPotentialBlockSize) and a grid of ceil(work_items / block), at most
  /// resident-blocks × multiprocessors when `grid_stride` (the kernel loops over its range).
  LaunchConfig occupancy_config(std::size_t work_items, CUstream stream = nullptr, unsigned shared_bytes = 0,
                                bool grid_stride = true) const;
  /// Blocks of `block_threads` threads and `shared_bytes` dynamic shared memory that one
  /// multiprocessor of `device` (-1: current) holds at once (cuOccupancyMaxActiveBlocksPerMultiprocessor).
  int max_active_blocks(unsigned block_threads, unsigned shared_bytes, int device = -1) const;
  /// Clusters of a kernel compiled with __cluster_dims__ that `device` (-1: current) holds at once
  /// under `cfg`'s grid, block and shared memory (cuOccupancyMaxActiveClusters): 0 where not one fits
  /// (a GPU partition without a GPC free for the cluster), -1 where the driver cannot tell (before
  /// CUDA 11.8, a GPU without clusters).
  int max_active_clusters(const LaunchConfig& cfg, int device = -1) const;

  /// The name the kernel was asked for by (name expression or plain name).
  const std::string& name() const;
  /// The lowered (mangled) name in the binary.
  const std::string& lowered_name() const;
  /// Number of parameters, or -1 when the driver cannot tell.
  int param_count() const;
  /// The context-independent handle.
  CUkernel handle() const;
  /// The function in the primary context of `device` (-1: current device).
  CUfunction function(int device = -1) const;
  /// Allows launches with more than 48 KiB of dynamic shared memory on `device` (-1: current).
  void set_max_dynamic_shared_bytes(unsigned bytes, int device = -1) const;
  /// Allows clusters of more than the portable 8 blocks (a `__cluster_dims__` past 8) on `device`
  /// (-1: current): CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED. Whether the GPU holds one
  /// is max_active_clusters's to say.
  void allow_non_portable_clusters(int device = -1) const;

  explicit operator bool() const noexcept { return state_ != nullptr; }

 private:
  friend class Module;
  std::shared_ptr<const detail::KernelState> state_;
};

/// A compiled program, loaded on first use of one of its kernels.
class Module {
 public:
  Module() = default;
  explicit Module(std::shared_ptr<detail::ModuleState> state);

  /// The kernel named by a requested name expression (e.g. "leaky<float, 4>") or by its plain
  /// (extern "C" or lowered) name. Loads the module on first use. Throws InvalidArgument naming
  /// the kernel and the available names when there is no such kernel; DriverError when loading fails.
  Kernel kernel(std::string_view name_or_expression) const;

  const CompiledProgram& program() const;
  const CacheKey& key() const;
  /// Where this module came from when it was first obtained in this process.
  CacheTier tier() const;
  /// Loads the binary now (cuLibraryLoadData) instead of on first kernel() call.
  void load() const;
  /// Whether the binary is loaded (by load() or a kernel() call, in this process).
  bool loaded() const noexcept;

  explicit operator bool() const noexcept { return state_ != nullptr; }

 private:
  std::shared_ptr<detail::ModuleState> state_;
};

}  // namespace cuinline
