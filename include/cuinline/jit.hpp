#pragma once
/// @file
/// When a call waits for a compile. A never-seen variant of an op family that has a generic kernel
/// (elementwise chains: results bit for bit the specialized kernel's; conv2d with a chain epilogue:
/// a direct convolution, within the dtype's rounding of the specialized kernel) can run at once on
/// that kernel — its shapes, steps and constants passed as data, built with the library — while the
/// specialized kernel compiles on a bounded background pool; later calls use the specialized kernel
/// as soon as it is loaded. Before a short-lived process exits, wait_for_specializations() keeps it
/// out of NVRTC's first compile. docs/jit.md says when to use which policy.
#include <cstdint>

namespace cuinline {

/// What a call does when its specialized kernel is not loaded yet.
enum class JitPolicy : int {
  /// Run the generic kernel now and compile the specialized one in the background (the default
  /// for eager calls). Inside a CUDA-graph capture a call waits instead (as `sync`), so a graph
  /// always holds the specialized kernel.
  async = 0,
  /// Wait for the specialized kernel (compile it, or load it from the cache).
  sync = 1,
  /// Always the generic kernel where the family has one; nothing is compiled.
  generic = 2,
};

/// "async", "sync", "generic".
const char* to_string(JitPolicy policy) noexcept;

/// The process's policy: set_jit_policy's, else CUINLINE_JIT_POLICY (async | sync | generic), else
/// async.
JitPolicy jit_policy() noexcept;
void set_jit_policy(JitPolicy policy) noexcept;

/// The policy of the calls this thread makes while the guard lives (nests; restores on exit).
class ScopedJitPolicy {
 public:
  explicit ScopedJitPolicy(JitPolicy policy) noexcept;
  ~ScopedJitPolicy();
  ScopedJitPolicy(const ScopedJitPolicy&) = delete;
  ScopedJitPolicy& operator=(const ScopedJitPolicy&) = delete;

 private:
  int previous_;
};

/// Starts NVRTC's one-time start-up (its first compile in a process costs hundreds of
/// milliseconds) on a background thread and returns at once; a later compile finds it done. Where
/// the process already has the CUDA driver loaded, the generic kernels' libraries are loaded there
/// first (a family's first generic call then skips it); the driver itself is never loaded or
/// initialized by this. Called by the first op call that would compile; call it earlier (at
/// start-up, after the application's first CUDA call) to take all of it off the request path.
/// Idempotent; CUINLINE_PREWARM=0 makes it a no-op.
void prewarm() noexcept;

/// Blocks until every background specialization submitted so far has finished (loaded or failed).
/// Call it before capturing a graph whose ops were first called eagerly, to capture specialized
/// kernels rather than wait inside the capture.
void wait_for_specializations();

/// Counters of the asynchronous specialization, over every op family.
struct JitStats {
  std::uint64_t generic_launches = 0;     ///< launches of a generic kernel
  std::uint64_t submitted = 0;            ///< background specializations started
  std::uint64_t pending = 0;              ///< of those, not finished yet
  std::uint64_t swaps = 0;                ///< finished: the specialized kernel is in use from now on
  std::uint64_t background_failures = 0;  ///< finished with an error (the generic kernel stays)
  std::uint64_t sync_waits = 0;           ///< calls that waited for a compile (sync policy or capture)
};
JitStats jit_stats() noexcept;

/// Whether this build has the generic kernels (CUINLINE_GENERIC_KERNELS at build time).
bool generic_kernels_built() noexcept;

}  // namespace cuinline
