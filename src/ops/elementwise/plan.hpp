#pragma once
// The elementwise family's planner (docs/ops-families.md: the "planner" piece): how a call over one
// or several tensors runs — checks, broadcasting, each input's pattern, dimension merging, vector
// width, scalar head and grid. Pure host logic (no driver calls, no allocation), shared by ops::plan,
// ops::make_request and the launch path; throws InvalidArgument before anything is compiled.
#include <cstdint>
#include <cuinline/ops.hpp>
#include <utility>

#include "ops/elementwise/variant.hpp"

namespace cuinline::ops {

/// How a one-input call would run, without running it (for tests and benchmarks): the N-ary
/// planner's answer for one input and one output. Throws InvalidArgument for bad input, exactly as
/// the ops do.
struct LaunchPlan {
  Variant variant;
  std::int64_t numel = 0;  ///< 0: nothing to launch
  /// Contiguous: scalar elements before the first aligned vector (< vector_width), the same for the
  /// input and the output (which share their misalignment modulo the vector; else a narrower one).
  std::int64_t head = 0;
  /// Blocks at one pass of 16 bytes per thread. The launch halves it (two passes a thread) when it
  /// would need between one and two waves of resident blocks on the stream's device.
  std::uint32_t grid = 0;
  std::uint32_t block = 0;  ///< threads per block
  /// The bf16 table form (table.hpp): its kernel is not `variant`'s, and its launch takes
  /// kTableBlock threads a block and table_grid's blocks (grid and block above are the plain kernel's).
  bool table = false;
  const void* in = nullptr;
  void* out = nullptr;
  int ndim = 0;  ///< after merging dimensions (contiguous: 1, shape {numel}, strides 1)
  std::int64_t shape[TensorView::kMaxDims] = {};
  std::int64_t in_strides[TensorView::kMaxDims] = {};
  std::int64_t out_strides[TensorView::kMaxDims] = {};
};
LaunchPlan plan(const Op& op, const TensorView& in, const TensorView& out);

}  // namespace cuinline::ops

namespace cuinline::ops::detail {

inline constexpr std::uint32_t kBlock = 256;  // EW_BLOCK in elementwise.cuh

/// Vectors per thread of ew_nary (ew_tile<S, W>::kUnroll in elementwise.cuh): enough for 16 bytes
/// per thread and operand, and no more. Measured on an H200 (f32 relu, 6.4 GB):
/// one 16-byte vector per thread in an exact grid of 256-thread blocks runs at 100.0 % of a
/// device-to-device copy; 4 vectors per thread at 95.8 %; grid-stride loops at 89-93 %.
inline constexpr std::uint32_t unroll_for(std::size_t vector_bytes) {
  return vector_bytes >= 16 ? 1u : static_cast<std::uint32_t>(16 / vector_bytes);
}

/// Resident blocks of ew_nary per SM (256 threads, __launch_bounds__(256, 8): 2048 threads).
inline constexpr std::uint32_t kResidentBlocksPerSm = 8;

/// The `reps` argument of ew_nary for a grid of `grid` blocks (one pass of 16 bytes per thread):
/// 2 — twice the work per thread, half the blocks — when that grid needs between one and two waves
/// of resident blocks, so the launch fits in one wave; else 1. Measured on an H200
/// (float32): at 2^21 elements (1.94 waves) 6.77 µs with 2 against 7.06 µs with
/// 1; at 2^22 and above 1 is faster. The kernel honours 2 for one input and one output only.
inline constexpr int reps_for(std::uint64_t grid, int multiprocessors) {
  const std::uint64_t wave =
      std::uint64_t{kResidentBlocksPerSm} * static_cast<std::uint64_t>(multiprocessors);
  return multiprocessors > 0 && grid > wave && grid <= 2 * wave ? 2 : 1;
}

/// The multiprocessor count of a device, queried once per device.
int multiprocessors(int device);

// Kernel arguments (ew_nary_args / ew_nary_strided_params in ew_nary.cuh): same layouts.
struct NaryArgs {
  const void* in[kMaxInputs] = {};
  void* out[kMaxOutputs] = {};
  std::int64_t period[kMaxInputs] = {};
  /// period[k] as fast_divisor gives it, for plans with 32-bit indices (else 0: a division).
  std::uint32_t div_mul[kMaxInputs] = {};
  std::uint32_t div_shift[kMaxInputs] = {};
};
static_assert(sizeof(NaryArgs) == 8 * 8 + 4 * 8 + 8 * 8 + 2 * 4 * 8, "must match ew_nary_args");

/// A divisor d in [2, 2^31) as (multiplier, shift) with e / d == umulhi(e, multiplier) >> shift for
/// every e in [0, 2^31) (CUTLASS's FastDivmod); d = 1 (or out of range) gives (0, 0): a plain
/// division.
std::pair<std::uint32_t, std::uint32_t> fast_divisor(std::int64_t d);
struct NaryStrided {
  int ndim = 0;
  std::int64_t shape[8] = {};
  std::int64_t in_strides[kMaxInputs][8] = {};
  std::int64_t out_strides[kMaxOutputs][8] = {};
};
static_assert(sizeof(NaryStrided) == 8 + 8 * 8 + 8 * 8 * 8 + 4 * 8 * 8, "must match ew_nary_strided_params");

/// A planned call: the kernel (key) and its run-time arguments.
struct NaryPlan {
  NaryKey key;
  std::int64_t numel = 0;  ///< 0: nothing to launch
  std::int64_t head = 0;   ///< scalar elements before the first aligned vector (fast path)
  std::uint32_t grid = 0;  ///< blocks for reps = 1 (the launch divides it by reps_for's answer)
  NaryArgs args;
  NaryStrided strided;  ///< the strided path's merged dimensions
};

/// Plans ops::apply(op, inputs, outputs). `whole_inputs_only`: the one-input ops (ops::apply(op, in,
/// out)), whose warm variants (ops::Variant) know the whole-tensor pattern only: any other input
/// pattern takes the strided path.
NaryPlan plan_nary(const Op& op, TensorList inputs, TensorList outputs, bool whole_inputs_only = false);

/// ops::apply(op, {in}, {out}) for another op's copy into its own stream-ordered workspace `out`
/// (driver/workspace.hpp): `in` is checked for access from the stream's device as apply checks it,
/// `out` is not — inside a stream capture a workspace is the graph's memory, which the driver's
/// pointer queries do not know until the graph is instantiated. Counted in nary_stats().
void apply_into_workspace(const Op& op, const TensorView& in, const TensorView& out, CUstream stream);
/// The other direction: ops::apply(op, {in}, {out}) from another op's workspace `in` into the caller's
/// `out` (an op that computed into a compact copy of a strided output): `out` is checked, `in` not.
void apply_from_workspace(const Op& op, const TensorView& in, const TensorView& out, CUstream stream);

/// Every identifier of an expression that is not a call must be an input, a constant, an earlier
/// output (y0 ...) or a type keyword: an unknown name is an InvalidArgument before anything is
/// compiled, not an NVRTC error.
void check_expression_names(const Op& op, int inputs);

}  // namespace cuinline::ops::detail
