#pragma once
// The reductions family's planner and variant internals (docs/ops-families.md, docs/reductions.md):
// from a call's tensors to (RowVariant, launch arguments), every check done before anything is
// compiled or launched.
#include <cstddef>
#include <cstdint>
#include <cuinline/arch.hpp>
#include <cuinline/reductions.hpp>

namespace cuinline::ops::detail {

/// The epilogue's extra tensors at most (in1..in7, the elementwise chains' operands).
constexpr int kMaxEpilogueInputs = kMaxInputs - 1;

/// The kernels' argument (rd_args in kernel_templates/reductions.cuh, field for field).
struct RowArgs {
  const void* x = nullptr;
  void* y = nullptr;
  const void* w = nullptr;
  const void* b = nullptr;
  void* r = nullptr;
  long long rows = 0, n = 0, sx = 0, sy = 0, sr = 0;
  double eps = 0;
  void* ws = nullptr;   // the split form's workspace
  long long chunk = 0;  // the split form's chunk: kSplitThreads * split_per_thread(dtype)
  // The epilogue's tensors (rd_extra): a kernel with K of them takes the first K after the rest
  // (rd_args_e<K>), one without none (rd_args).
  struct Extra {
    const void* p = nullptr;
    long long s = 0;  // row stride, in elements
  } e[kMaxEpilogueInputs];
};
static_assert(offsetof(RowArgs, e) == 5 * 8 + 5 * 8 + 8 + 8 + 8, "must match rd_args");
static_assert(sizeof(RowArgs::Extra) == 16, "must match rd_extra");

/// The bytes of RowArgs a kernel with `extras` epilogue tensors takes.
constexpr std::size_t row_args_bytes(int extras) {
  return offsetof(RowArgs, e) + sizeof(RowArgs::Extra) * static_cast<std::size_t>(extras);
}

/// The warp form: a block of 128 threads (reductions.cuh's RD_WARP_BLOCK) holds 128 / T rows of T
/// lanes each, T a power of two from kWarpMinLanes to 32: the fewest whose accesses cover the row,
/// so that every lane of a short row holds data (a lane's one access is all it has in flight, and
/// bytes in flight are what a short row's bandwidth is bound by). Rows up to 32 * 32 elements.
constexpr int kWarpBlock = 128;
constexpr int kWarpMinLanes = 1;
constexpr int kWarpMaxPerThread = 32;
/// The bytes of what a row reads (x; add_rms_norm's residual too) a lane of the warp form holds at
/// most: rows past them take the block form (warp_form_max).
constexpr int kWarpMaxLaneBytes = 64;
/// The warp form's longest row for `op` on `dtype`: CUINLINE_ROWS_WARP_MAX where it is set, else 32
/// lanes of kWarpMaxLaneBytes of what the row reads (16-bit rows of 1024, f32 512, f64 256;
/// add_rms_norm, reading the residual as well, half of each), at most 32 lanes of kWarpMaxPerThread.
std::int64_t warp_form_max(RowOp op, DType dtype) noexcept;
/// The looped form's block.
constexpr int kLoopedThreads = 1024;
// The split form: a block of 256 threads a chunk of split_per_thread elements a thread, in
// registers: 32 (8192 a chunk); unchained f16 and bf16 (no chain, or a light prologue: light())
// 64 (16384; kept as loaded, 16 bits each: the same registers and bytes a chunk as f32's). With
// other chains 32 (their values in opmath).
constexpr int kSplitThreads = 256;
constexpr int split_per_thread(DType dtype, bool chained) noexcept {
  return (dtype == DType::f16 || dtype == DType::bf16) && !chained ? 64 : 32;
}
/// The cluster form (sm_90 and later): the split form's chunks, G a block (a group of kSplitThreads
/// each), a row's blocks one cluster of at most kClusterMaxBlocks — past the portable 8, which the
/// launch opts into (Kernel::allow_non_portable_clusters; sm_90 and sm_100 hold 16) and a device
/// that holds no such cluster runs the split form; rows of up to kClusterMaxBlocks *
/// cluster_max_groups chunks: 2 a block (512 threads), f64 1 (its values take two registers each).
/// Past that a thread's chunk part spilled (1024 threads of f32 at 64 registers: up to 96 bytes;
/// 512 of f64: 4; ptxas, sm_90, NVRTC 13.0).
constexpr int kClusterMaxBlocks = 16;
constexpr int kClusterPortableBlocks = 8;
constexpr int kClusterMinArch = 90;
constexpr int cluster_max_groups(DType dtype) noexcept {
  return dtype == DType::f64 ? 1 : 2;
}

/// The most elements a thread of the block form holds: 32, f64 8 (its registers are twice as wide);
/// a variant whose chains keep many registers through the row's write 16 — layer_norm with any chain,
/// or an epilogue of more than two tensor operands (each spills at 32; ptxas's report, sm_90). Then
/// the fewest a thread takes before the block has more threads.
int block_max_per_thread(DType dtype) noexcept;
int block_max_per_thread(const RowVariant& variant) noexcept;
int block_min_per_thread(DType dtype) noexcept;

struct RowCall {
  RowPlan plan;
  RowArgs args;
};

/// The planner: checks, variant, grid and arguments. plan.rows == 0 (or n == 0): nothing to launch.
RowCall plan_row_call(RowOp op, const TensorView& in, const TensorView& out, const TensorView& weight,
                      const TensorView& bias, const TensorView& residual, double eps, const RowFusion& fusion = {});

/// Whether an op is a chain (not empty); whether a variant has chains; the chains' checks
/// (RowVariant::validate's part, the planner's first).
bool has_chain(const Op& op) noexcept;
bool fused(const RowVariant& variant) noexcept;
/// Whether a variant takes the unchained layouts (reductions.cuh's rd_unchained): no chain, or, for
/// f16 and bf16 rows (not add_rms_norm's, nor f16 rms_norm's: they spilled), a prologue alone of
/// scalar add, sub, mul and div steps (render.hpp's chain_is_scalar_arithmetic), whose program
/// specializes rd_light for it.
bool light(const RowVariant& variant) noexcept;
void check_chains(const RowVariant& variant);

/// The dynamic shared memory a block of the variant's kernel takes (reductions.cuh's
/// rd_parked_bytes: an unchained f32 softmax, log_softmax or rms_norm on the block form of 1024
/// threads of 32 elements parks half of each thread's in 64 KiB), 0 for the others; with a target,
/// also 0 where two such blocks do not fit a multiprocessor (sm_75, sm_86, sm_89, sm_120: the
/// kernel keeps the row in registers there, reductions.cuh's rd_arch_parks).
std::uint32_t row_shared_bytes(const RowVariant& variant) noexcept;
std::uint32_t row_shared_bytes(const RowVariant& variant, const Arch& target) noexcept;

/// The looped form of a split (or cluster) call, for when its workspace cannot be had.
RowCall looped_fallback(RowCall call);
/// The split form of a cluster call (a GPU without clusters; the generic kernels); other calls as
/// they are.
RowCall split_form(RowCall call);
/// The chunks a block of the cluster form for a row of `chunks`, 0 where a cluster cannot hold it.
std::int64_t cluster_groups(DType dtype, std::int64_t chunks) noexcept;
/// Whether the planner takes the cluster form for an op and dtype on a row of `chunks` (a cluster
/// holds it, and the measured table in plan.cpp says it pays there); cluster_form makes it of a split
/// call regardless (the tests' instantiations).
bool cluster_pays(RowOp op, DType dtype, std::int64_t chunks) noexcept;
RowCall cluster_form(RowCall call);

/// The in-process map's hash of a variant.
std::uint64_t hash_of(const RowVariant& variant);

}  // namespace cuinline::ops::detail
