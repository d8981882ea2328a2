#pragma once
// How an elementwise call runs: checks, dimension merging, vector width and grid. Pure host
// logic (no driver calls), shared by ops::plan and the launch path.
#include <cstdint>
#include <cuinline/ops.hpp>

namespace cuinline::ops::detail {

inline constexpr std::uint32_t kBlock = 256;  // EW_BLOCK in elementwise.cuh

/// Vectors per thread of ew_contiguous (ew_tile<S, W>::kUnroll in elementwise.cuh): enough for 16
/// bytes per thread, and no more. Measured on an H200 (bench/ew_tune.cu, f32 relu, 6.4 GB): one
/// 16-byte vector per thread in an exact grid of 256-thread blocks runs at 100.0 % of a
/// device-to-device copy; 4 vectors per thread at 95.8 %; grid-stride loops at 89-93 %.
inline constexpr std::uint32_t unroll_for(std::size_t vector_bytes) {
  return vector_bytes >= 16 ? 1u : static_cast<std::uint32_t>(16 / vector_bytes);
}

/// Resident blocks of ew_contiguous per SM (256 threads, __launch_bounds__(256, 8): 2048 threads).
inline constexpr std::uint32_t kResidentBlocksPerSm = 8;

/// The `reps` argument of ew_contiguous for a grid of `grid` blocks (one pass of 16 bytes per
/// thread): 2 — twice the work per thread, half the blocks — when that grid needs between one and
/// two waves of resident blocks, so the launch fits in one wave; else 1. Measured on an H200
/// (bench/ew_tune.cu, float32): at 2^21 elements (1.94 waves) 6.77 µs with 2 against 7.06 µs with
/// 1; at 2^22 and above 1 is faster.
inline constexpr int reps_for(std::uint64_t grid, int multiprocessors) {
  const std::uint64_t wave =
      std::uint64_t{kResidentBlocksPerSm} * static_cast<std::uint64_t>(multiprocessors);
  return multiprocessors > 0 && grid > wave && grid <= 2 * wave ? 2 : 1;
}

/// The multiprocessor count of a device, queried once per device.
int multiprocessors(int device);

/// Kernel parameter of ew_strided (ew_strided_params in elementwise.cuh): same layout.
struct StridedParams {
  int ndim = 0;
  std::int64_t shape[8] = {};
  std::int64_t in_strides[8] = {};
  std::int64_t out_strides[8] = {};
};
static_assert(sizeof(StridedParams) == 200, "must match ew_strided_params");

/// A plan without the op (the launch path does not copy the op).
struct PlanCore {
  DType dtype = DType::f32;
  int vector_width = 1;
  IndexWidth index = IndexWidth::i32;
  Layout layout = Layout::contiguous;
  std::int64_t numel = 0;
  std::int64_t head = 0;
  std::uint32_t grid = 0;
  const void* in = nullptr;
  void* out = nullptr;
  StridedParams strided;
};

/// Validates (InvalidArgument before anything runs) and plans a call of `op`.
PlanCore plan_core(const Op& op, const TensorView& in, const TensorView& out);

}  // namespace cuinline::ops::detail
