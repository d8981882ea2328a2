// The row-reduction kernels (kernel_templates/reductions.cuh) run on the host: each block's threads
// are lanes (fibers, emulated_lanes.hpp) run in rounds by one scheduler — a thread runs until its next
// __syncthreads or shuffle, where it yields; every thread of a block meets the same sequence of
// them, so a round is a barrier — the kernel's __shared__ arrays shared by them, blocks one after
// another over the grid the launch uses, with the variant,
// arguments and grid the planner gives for host buffers (ops/reductions/plan.hpp). Every op in
// every dtype, in each form — warp (a whole warp a row, scalar and 16-byte accesses; and 1, 2, 4, 8
// and 16 lanes a row, row counts leaving groups past the last row in the last block), block (both),
// split (both), looped (the split form's fallback) — on random rows with strides and gaps, misaligned
// rows, and rows of special values with eps 0; against the float64 reference of the GPU tests, every
// 16-byte load checked for alignment and every read for bounds, every shuffle for the whole warp's
// presence (its mask), and nothing written outside the output's rows nor the residual's (the gaps
// and the rows past the last, poisoned, must keep their poison). With chains (RowFusion): prologue
// "mul(0.125)" and epilogue "mul(in1)" in the warp (whole and fewer lanes), block, split and looped
// forms, special values included.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory>
#include <random>
#include <type_traits>
#include <functional>
#include <vector>

#include "emulated_lanes.hpp"
#include "ops/reductions/generic.hpp"
#include "ops/reductions/plan.hpp"
#include "reductions_reference.hpp"
#include "test_support.hpp"

#define __shared__ static  // one block runs at a time; its threads share the array
#include "host_emulation.hpp"

namespace {
// The cluster form's launch: a cluster's blocks run at once, their threads lanes 0 .. C * block - 1
// of one run (lane l is thread l % block of block first + l / block), so that a barrier of the
// cluster is a round of all of them. 0 blocks: one block at a time.
constexpr unsigned kMaxClusterLanes = 8 * 1024;
unsigned g_cluster_block = 0, g_cluster_first = 0, g_cluster_size = 0;

// A warp's shuffles: `words` are the values its lanes exchange, `at` the number of each lane's
// shuffle that wrote its word (`shuffles`: how many each lane has made in this block or cluster).
struct Shuffles {
  double words[kMaxClusterLanes / 32][32];
  unsigned at[kMaxClusterLanes / 32][32];
  unsigned shuffles[kMaxClusterLanes];
  int missing_reports = 0;
};
Shuffles g_shuffles;

// The running lane's thread (and, in a cluster's run, block).
void set_thread() {
  const auto lane = static_cast<unsigned>(cuinline::test::lanes::lane_index());
  if (g_cluster_block == 0) {
    threadIdx.x = lane;
  } else {
    threadIdx.x = lane % g_cluster_block;
    blockIdx.x = g_cluster_first + lane / g_cluster_block;
  }
}

// Every thread of the block (of the cluster) gets here before any goes on (see above): the threads
// are lanes (emulated_lanes.hpp) run in rounds, each to its next barrier, where it yields.
void barrier() {
  cuinline::test::lanes::yield();
  set_thread();
}
}  // namespace

struct uint2 {
  unsigned x, y;
};
template <>
struct ew_raw<8> {
  typedef uint2 type;
};
template <>
struct ew_raw<16> {
  typedef uint4 type;
};

template <class R>
R __ldg(const R* p) {
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % sizeof(R), 0u) << "a " << sizeof(R) << "-byte load must be aligned";
  EXPECT_TRUE(in_a_tensor(p, sizeof(R))) << "a read outside every tensor";
  R v;
  std::memcpy(&v, p, sizeof(R));
  return v;
}
// The hardware exp that the kernels take for 16-bit outputs (rd_exp): 2^x of x * log2(e), in float.
inline float __expf(float v) {
  return std::exp2(v * 1.44269504f);
}
inline float __fmaf_rn(float a, float b, float c) {
  return std::fma(a, b, c);
}
inline double __fma_rn(double a, double b, double c) {
  return std::fma(a, b, c);
}
inline float __fmul_rn(float a, float b) {
  return a * b;
}
inline double __dmul_rn(double a, double b) {
  return a * b;
}
inline float __fadd_rn(float a, float b) {
  return a + b;
}
inline double __dadd_rn(double a, double b) {
  return a + b;
}
inline float rsqrtf(float v) {
  return 1.0f / std::sqrt(v);
}
inline double rsqrt(double v) {
  return 1.0 / std::sqrt(v);
}
// A lane reads the word of lane ^ o, which for the warp form's groups of T lanes (o < T) is in its
// own group. The mask names the whole warp, so every lane of it must be at the same shuffle, a group
// whose row is past the last one included: a lane that returned early leaves an older count.
template <class A>
A __shfl_xor_sync(unsigned mask, A v, int o) {
  EXPECT_EQ(mask, 0xffffffffu);
  EXPECT_TRUE(o > 0 && o < 32) << "xor offset " << o;
  Shuffles& f = g_shuffles;
  const auto at = static_cast<unsigned>(cuinline::test::lanes::lane_index());  // threadIdx.x but in a cluster
  const unsigned lane = at & 31, warp = at >> 5, k = ++f.shuffles[at];
  f.words[warp][lane] = static_cast<double>(v);
  f.at[warp][lane] = k;
  barrier();
  unsigned present = 0;
  for (unsigned l = 0; l < 32; ++l) present += f.at[warp][l] == k;
  if (present != 32 && f.missing_reports++ < 3) {
    ADD_FAILURE() << "shuffle " << k << " of thread " << threadIdx.x << " (block " << blockIdx.x
                  << "): " << 32 - present << " lanes of its warp are not there";
  }
  const A r = static_cast<A>(f.words[warp][lane ^ static_cast<unsigned>(o)]);
  barrier();  // every lane has read before the next shuffle writes
  return r;
}
inline void __syncthreads() {
  barrier();
}

// The block's dynamic shared memory (a parked row: reductions.cuh's RD_PARKED), as many bytes as
// the launch's plan gives: a kernel that parks where the plan gives none fails here.
std::vector<float> g_dynamic_smem;
unsigned g_dynamic_smem_uses = 0;
#define CUINLINE_RD_DYNAMIC_SMEM
inline float* rd_dynamic_smem() {
  ++g_dynamic_smem_uses;
  EXPECT_FALSE(g_dynamic_smem.empty()) << "the kernel parks in dynamic shared memory its plan gives none of";
  return g_dynamic_smem.data();
}
// The cluster form's hooks: each block's shared arrays (the running lane's block's, by tag), a
// block's element in another's (rank), the cluster's barrier (its wait a round of all the
// cluster's lanes; each lane arrives once before each wait), a group's named barrier (a round).
#define CUINLINE_RD_CLUSTER_HOOKS
#define RD_CLUSTER_DIMS(C)
constexpr unsigned kMaxClusterBlocks = 16;  // (reductions' kClusterMaxBlocks)
unsigned g_cluster_arrivals[kMaxClusterLanes], g_cluster_waits[kMaxClusterLanes];
inline unsigned cluster_rank() {
  EXPECT_NE(g_cluster_block, 0u) << "a cluster's hook outside a cluster launch";
  return blockIdx.x - g_cluster_first;
}
template <class A, int N, int kTag>
A* rd_cta_shared() {
  static A blocks[kMaxClusterBlocks][N];
  const unsigned rank = cluster_rank();
  EXPECT_LT(rank, kMaxClusterBlocks) << "a cluster past the emulation's blocks";
  return blocks[rank < kMaxClusterBlocks ? rank : 0];
}
template <int N, class A>
A rd_cluster_load(const A* local, int i, int rank) {
  EXPECT_TRUE(i >= 0 && i < N) << "element " << i << " of a block's " << N;
  EXPECT_TRUE(rank >= 0 && static_cast<unsigned>(rank) < g_cluster_size)
      << "block " << rank << " of the cluster";
  return local[(rank - static_cast<int>(cluster_rank())) * N + i];
}
inline void rd_cluster_arrive() {
  ++g_cluster_arrivals[cuinline::test::lanes::lane_index()];
}
inline void rd_cluster_arrive_relaxed() {
  rd_cluster_arrive();
}
inline void rd_cluster_wait() {
  const auto lane = cuinline::test::lanes::lane_index();
  EXPECT_EQ(g_cluster_arrivals[lane], ++g_cluster_waits[lane]) << "a cluster wait without its arrival";
  barrier();
}
inline void rd_bar_sync(int id, int count) {
  EXPECT_TRUE(id >= 1 && id < 16 && count % 32 == 0) << "bar.sync " << id << ", " << count;
  barrier();
}
#include "../kernel_templates/reductions.cuh"

// The generic kernels' step interpreter over host stand-ins of the two step functions the fused
// cases use, with the arithmetic of EmuScale and EmuGate below (the others are never called).
#define CUINLINE_EW_OPS_CUH
#define CUINLINE_EWG_HOST_EMULATED 1
#define __noinline__
template <class S>
S ew_mul(S x, typename ew_traits<S>::op c) {
  return ew_traits<S>::from_op(ew_traits<S>::to_op(x) * c);
}
template <class S>
S ew_mul_tensor(S x, S o) {
  return ew_traits<S>::from_op(ew_traits<S>::to_op(x) * ew_traits<S>::to_op(o));
}
#define CUINLINE_EMU_UNUSED(name)        \
  template <class S, class... A>         \
  S name(S v, A...) {                    \
    ADD_FAILURE() << #name " called";    \
    return v;                            \
  }
CUINLINE_EMU_UNUSED(ew_add)
CUINLINE_EMU_UNUSED(ew_sub)
CUINLINE_EMU_UNUSED(ew_relu)
CUINLINE_EMU_UNUSED(ew_leaky_relu)
CUINLINE_EMU_UNUSED(ew_clamp)
CUINLINE_EMU_UNUSED(ew_add_tensor)
CUINLINE_EMU_UNUSED(ew_sub_tensor)
CUINLINE_EMU_UNUSED(ew_div_tensor)
CUINLINE_EMU_UNUSED(ew_where)
CUINLINE_EMU_UNUSED(ew_sigmoid)
CUINLINE_EMU_UNUSED(ew_tanh)
CUINLINE_EMU_UNUSED(ew_silu)
CUINLINE_EMU_UNUSED(ew_gelu)
CUINLINE_EMU_UNUSED(ew_gelu_tanh)
CUINLINE_EMU_UNUSED(ew_mish)
CUINLINE_EMU_UNUSED(ew_softplus)
CUINLINE_EMU_UNUSED(ew_elu)
CUINLINE_EMU_UNUSED(ew_hardswish)
CUINLINE_EMU_UNUSED(ew_hardsigmoid)
CUINLINE_EMU_UNUSED(ew_exp)
CUINLINE_EMU_UNUSED(ew_log)
CUINLINE_EMU_UNUSED(ew_sqrt)
CUINLINE_EMU_UNUSED(ew_abs)
CUINLINE_EMU_UNUSED(ew_neg)
CUINLINE_EMU_UNUSED(ew_softsign)
CUINLINE_EMU_UNUSED(ew_tanhshrink)
CUINLINE_EMU_UNUSED(ew_logsigmoid)
CUINLINE_EMU_UNUSED(ew_hardshrink)
CUINLINE_EMU_UNUSED(ew_softshrink)
CUINLINE_EMU_UNUSED(ew_threshold)
#include "../kernel_templates/reductions_generic.cuh"

namespace {

using cuinline::DType;
using cuinline::TensorView;
using cuinline::ops::RowForm;
using cuinline::ops::RowOp;
using cuinline::ops::RowVariant;
using cuinline::test::Problem;

template <class Kernel, class Args>
void launch(Kernel kernel, unsigned grid, unsigned threads, const Args& a) {
  static_assert(RD_WARP_BLOCK == cuinline::ops::detail::kWarpBlock,
                "the kernel's warp-form block and the planner's differ");
  Shuffles& f = g_shuffles;
  unsigned b = 0;
  const std::function<void()> body = [&] {
    threadIdx.x = static_cast<unsigned>(cuinline::test::lanes::lane_index());
    blockIdx.x = b;
    kernel(a);
  };
  for (; b < grid; ++b) {
    std::fill(std::begin(f.shuffles), std::end(f.shuffles), 0u);
    std::fill(&f.at[0][0], &f.at[0][0] + sizeof f.at / sizeof f.at[0][0], 0u);
    cuinline::test::lanes::run_lanes(threads, body);
  }
}

// The cluster form's launch: `cluster` blocks at a time (see g_cluster_block).
template <class Kernel, class Args>
void launch_cluster(Kernel kernel, unsigned grid, unsigned threads, unsigned cluster, const Args& a) {
  EXPECT_EQ(grid % cluster, 0u) << "a grid of whole clusters";
  EXPECT_LE(threads * cluster, kMaxClusterLanes);
  Shuffles& f = g_shuffles;
  const std::function<void()> body = [&] {
    set_thread();
    kernel(a);
  };
  g_cluster_block = threads;
  g_cluster_size = cluster;
  for (g_cluster_first = 0; g_cluster_first < grid; g_cluster_first += cluster) {
    std::fill(std::begin(f.shuffles), std::end(f.shuffles), 0u);
    std::fill(&f.at[0][0], &f.at[0][0] + sizeof f.at / sizeof f.at[0][0], 0u);
    std::fill(std::begin(g_cluster_arrivals), std::end(g_cluster_arrivals), 0u);
    std::fill(std::begin(g_cluster_waits), std::end(g_cluster_waits), 0u);
    cuinline::test::lanes::run_lanes(threads * cluster, body);
    for (unsigned l = 0; l < threads * cluster; ++l) {
      EXPECT_EQ(g_cluster_waits[l], 2u) << "lane " << l << " left the cluster without its two barriers";
    }
  }
  g_cluster_block = 0;
}

// Host forms of the chains the fused cases use, as the elementwise family renders them
// (render_op_functor / render_nary_functor over ew_ops.cuh's ew_mul and ew_mul_tensor): the
// product in the accumulation type, rounded once to the storage type.
struct EmuScale {  // "mul(0.125)"
  template <class S>
  S operator()(S x) const {
    typedef ew_traits<S> T;
    return T::from_op(T::to_op(x) * typename T::op(0.125));
  }
};
struct EmuGate {  // "mul(in1)"
  template <class S>
  void operator()(const S (&xs)[2], S (&ys)[1]) const {
    typedef ew_traits<S> T;
    ys[0] = T::from_op(T::to_op(xs[0]) * T::to_op(xs[1]));
  }
};

// "mul(0.125)" alone on f16 / bf16, as the library renders it there: 0.125 is a storage value, so
// the step is ew_mul_exact (one 16-bit instruction on a GPU, the same float product here) and the
// prologue is light (rd_light, specialized after the namespace): the variant keeps the unchained
// layouts and chunks.
struct EmuLightScale : EmuScale {};
}  // namespace
template <>
struct rd_light<EmuLightScale> {
  enum { value = 1 };
};
namespace {

// The fused instantiations of the fused cases below.
using cuinline::ops::detail::RowArgs;

// The planner's arguments as the kernel takes them (rd_args, then its epilogue's tensors).
template <class Args>
Args args_of(const RowArgs& planned) {
  static_assert(std::is_trivially_copyable_v<Args> && sizeof(Args) <= sizeof(RowArgs));
  Args a;
  std::memcpy(&a, &planned, sizeof a);
  return a;
}
static_assert(sizeof(rd_args) == cuinline::ops::detail::row_args_bytes(0), "rd_args and RowArgs differ");
static_assert(sizeof(rd_args_e<1>) == cuinline::ops::detail::row_args_bytes(1), "rd_args_e and RowArgs differ");

// The warp form with T < 32 lanes a row (V elements a lane), for T among Ts: rd_regs plain (Args
// rd_args) or with the fused cases' chains (rd_args_e<1>).
template <int kOp, class S, int V, int T, class Args>
void launch_lanes(unsigned grid, unsigned block, const Args& a) {
  if constexpr (std::is_same_v<Args, rd_args>) {
    launch(rd_regs<kOp, S, V, V, T>, grid, block, a);
  } else {
    launch(rd_regs<kOp, S, V, V, T, EmuScale, EmuGate, 1>, grid, block, a);
  }
}
template <int kOp, class S, int V, int... Ts, class Args>
bool run_lanes(const RowVariant& v, unsigned grid, unsigned block, const Args& a) {
  if (v.form != RowForm::warp || v.vector_width != V || v.per_thread != V) return false;
  return ((v.threads == Ts && (launch_lanes<kOp, S, V, Ts>(grid, block, a), true)) || ...);
}

// The warp form's most elements a lane (its rows of warp_form_max, a whole warp each): kWarpMaxLaneBytes of
// what the row reads, add_rms_norm's residual too.
template <int kOp, class S>
constexpr int kWholeE = cuinline::ops::detail::kWarpMaxLaneBytes /
                        static_cast<int>(sizeof(S) * (kOp == RD_ADD_RMS_NORM ? 2 : 1));

// The split and cluster forms' elements a thread (split_per_thread): unchained 16-bit chunks twice
// as long.
template <class S>
constexpr int kChunkE = sizeof(S) == 2 ? 64 : 32;
// The rows the cases use for chunks: n elements of an f32 row, twice as many of an unchained 16-bit one.
std::int64_t chunked(std::int64_t n, DType dt, bool chained = false) {
  return cuinline::dtype_size(dt) == 2 && !chained ? 2 * n : n;
}

// The cluster form of clusters of 5 blocks of one chunk (the cases' rows of 5 chunks) and of 9
// blocks, past the portable 8, of one or two chunks (rows of 9 and of 17-18 chunks).
template <int kOp, class S, int V, int E = kChunkE<S>, class P = rd_no_prologue, class Q = rd_no_epilogue,
          int K = 0, class Args>
bool run_cluster(const RowVariant& v, unsigned grid, unsigned block, const Args& a) {
  if (v.form != RowForm::cluster || v.vector_width != V || v.per_thread != E) return false;
  if (v.threads == 256 && v.cluster == 5) {
    return launch_cluster(rd_cluster<kOp, S, V, E, 256, 1, 5, P, Q, K>, grid, block, 5, a), true;
  }
  if (v.threads == 256 && v.cluster == 9) {
    return launch_cluster(rd_cluster<kOp, S, V, E, 256, 1, 9, P, Q, K>, grid, block, 9, a), true;
  }
  if (v.threads == 512 && v.cluster == 9) {
    return launch_cluster(rd_cluster<kOp, S, V, E, 256, 2, 9, P, Q, K>, grid, block, 9, a), true;
  }
  return false;
}

template <int kOp, class S>
bool run_fused(const RowVariant& v, unsigned grid, unsigned block, const RowArgs& planned) {
  constexpr int W = static_cast<int>(16 / sizeof(S));
  const rd_args_e<1> a = args_of<rd_args_e<1>>(planned);
  EXPECT_EQ(v.prologue.describe(), "mul(0.125)");
  EXPECT_EQ(v.epilogue.describe(), "mul(in1)");
  const auto is = [&](RowForm form, int width, int per_thread, int threads) {
    return v.form == form && v.vector_width == width && v.per_thread == per_thread && v.threads == threads;
  };
  if (run_lanes<kOp, S, 1, 8>(v, grid, block, a) || run_lanes<kOp, S, W, 4, 8>(v, grid, block, a)) {
    return true;
  }
  constexpr int WE = kWholeE<kOp, S>;
  if (is(RowForm::warp, W, WE, 32))
    return launch(rd_regs<kOp, S, W, WE, 32, EmuScale, EmuGate, 1>, grid, block, a), true;
  if constexpr (sizeof(S) == 8) {  // f64 holds at most 8 a thread; the others at least 16
    if (is(RowForm::block, W, 8, 512)) return launch(rd_regs<kOp, S, W, 8, 512, EmuScale, EmuGate, 1>, grid, block, a), true;
  } else {
    if (is(RowForm::block, W, 16, 256)) return launch(rd_regs<kOp, S, W, 16, 256, EmuScale, EmuGate, 1>, grid, block, a), true;
  }
  if (is(RowForm::looped, 1, 1, 1024)) return launch(rd_long<kOp, S, 1, 1024, EmuScale, EmuGate, 1>, grid, block, a), true;
  if (is(RowForm::split_stats, 1, 32, 256)) {  // (chained: 32 a thread in every dtype)
    launch(rd_split_stats<kOp, S, 1, 32, 256, EmuScale, EmuGate, 1>, grid, block, a);
    return launch(rd_split_write<kOp, S, 1, 32, 256, EmuScale, EmuGate, 1>, grid, block, a), true;
  }
  return run_cluster<kOp, S, 1, 32, EmuScale, EmuGate, 1>(v, grid, block, a);
}

// A light prologue's cases (f16, bf16): the block form of 16 and of 32 elements a thread (the packs
// of 1024 threads), the split form's and the cluster form's chunks of 64 elements a thread.
template <int kOp, class S>
bool run_light(const RowVariant& v, unsigned grid, unsigned block, const RowArgs& planned) {
  constexpr int W = static_cast<int>(16 / sizeof(S));
  constexpr int E = kChunkE<S>;
  const rd_args a = args_of<rd_args>(planned);
  EXPECT_EQ(v.prologue.describe(), "mul(0.125)");
  const auto is = [&](RowForm form, int width, int per_thread, int threads) {
    return v.form == form && v.vector_width == width && v.per_thread == per_thread && v.threads == threads;
  };
  using P = EmuLightScale;
  if (is(RowForm::block, W, 16, 256)) return launch(rd_regs<kOp, S, W, 16, 256, P>, grid, block, a), true;
  if (is(RowForm::block, W, 32, 1024)) return launch(rd_regs<kOp, S, W, 32, 1024, P>, grid, block, a), true;
  if (is(RowForm::split_stats, W, E, 256)) {
    launch(rd_split_stats<kOp, S, W, E, 256, P>, grid, block, a);
    return launch(rd_split_write<kOp, S, W, E, 256, P>, grid, block, a), true;
  }
  return run_cluster<kOp, S, W, E, P>(v, grid, block, a);
}

// The warp form of four rows a group of 8, 16 or 32 lanes, one access each (Run::rows4).
template <int kOp, class S>
bool run_rows4(const RowVariant& v, unsigned grid, unsigned block, const rd_args& a) {
  constexpr int W = static_cast<int>(16 / sizeof(S));
  if (v.form != RowForm::warp || v.vector_width != W || v.per_thread != W) return false;
  if (v.threads == 8)
    return launch(rd_regs<kOp, S, W, W, 8, rd_no_prologue, rd_no_epilogue, 0, 4>, grid, block, a), true;
  if (v.threads == 16)
    return launch(rd_regs<kOp, S, W, W, 16, rd_no_prologue, rd_no_epilogue, 0, 4>, grid, block, a), true;
  if (v.threads == 32)
    return launch(rd_regs<kOp, S, W, W, 32, rd_no_prologue, rd_no_epilogue, 0, 4>, grid, block, a), true;
  return false;
}

// The instantiations the cases below plan to (the test fails on any other).
template <int kOp, class S>
bool run(const RowVariant& v, unsigned grid, unsigned block, const RowArgs& planned) {
  if (v.rows_per_group == 4 && !cuinline::ops::detail::fused(v)) {
    return run_rows4<kOp, S>(v, grid, block, args_of<rd_args>(planned));
  }
  if constexpr (sizeof(S) == 2) {
    if (cuinline::ops::detail::fused(v) && cuinline::ops::detail::light(v)) {
      return run_light<kOp, S>(v, grid, block, planned);
    }
  }
  if (cuinline::ops::detail::fused(v)) return run_fused<kOp, S>(v, grid, block, planned);
  const rd_args a = args_of<rd_args>(planned);
  constexpr int W = static_cast<int>(16 / sizeof(S));
  const auto is = [&](RowForm form, int width, int per_thread, int threads) {
    return v.form == form && v.vector_width == width && v.per_thread == per_thread && v.threads == threads;
  };
  if (run_lanes<kOp, S, 1, 8>(v, grid, block, a) ||
      run_lanes<kOp, S, W, 1, 2, 4, 8, 16, 32>(v, grid, block, a)) {
    return true;
  }
  constexpr int WE = kWholeE<kOp, S>;
  if (is(RowForm::warp, W, WE, 32)) return launch(rd_regs<kOp, S, W, WE, 32>, grid, block, a), true;
  if constexpr (sizeof(S) == 8) {
    if (is(RowForm::block, W, 8, 512)) return launch(rd_regs<kOp, S, W, 8, 512>, grid, block, a), true;
    if (is(RowForm::block, 1, 8, 256)) return launch(rd_regs<kOp, S, 1, 8, 256>, grid, block, a), true;
  } else {
    if (is(RowForm::block, W, 16, 256)) return launch(rd_regs<kOp, S, W, 16, 256>, grid, block, a), true;
    if (is(RowForm::block, 1, 16, 128)) return launch(rd_regs<kOp, S, 1, 16, 128>, grid, block, a), true;
    // 1024 threads: two blocks an SM (16 a thread), the 16-bit packs (32 a thread).
    if (is(RowForm::block, W, 16, 1024)) return launch(rd_regs<kOp, S, W, 16, 1024>, grid, block, a), true;
    if (is(RowForm::block, W, 32, 1024)) return launch(rd_regs<kOp, S, W, 32, 1024>, grid, block, a), true;
  }
  if (is(RowForm::looped, W, W, 1024)) return launch(rd_long<kOp, S, W, 1024>, grid, block, a), true;
  if (is(RowForm::looped, 1, 1, 1024)) return launch(rd_long<kOp, S, 1, 1024>, grid, block, a), true;
  constexpr int E = kChunkE<S>;
  if (is(RowForm::split_stats, W, E, 256)) {
    launch(rd_split_stats<kOp, S, W, E, 256>, grid, block, a);
    return launch(rd_split_write<kOp, S, W, E, 256>, grid, block, a), true;
  }
  if (is(RowForm::split_stats, 1, E, 256)) {
    launch(rd_split_stats<kOp, S, 1, E, 256>, grid, block, a);
    return launch(rd_split_write<kOp, S, 1, E, 256>, grid, block, a), true;
  }
  return run_cluster<kOp, S, W>(v, grid, block, a) || run_cluster<kOp, S, 1>(v, grid, block, a);
}

template <class S>
bool run_op(RowOp op, const RowVariant& v, unsigned grid, unsigned block, const RowArgs& a) {
  switch (op) {
    case RowOp::softmax:
      return run<RD_SOFTMAX, S>(v, grid, block, a);
    case RowOp::log_softmax:
      return run<RD_LOG_SOFTMAX, S>(v, grid, block, a);
    case RowOp::rms_norm:
      return run<RD_RMS_NORM, S>(v, grid, block, a);
    case RowOp::add_rms_norm:
      return run<RD_ADD_RMS_NORM, S>(v, grid, block, a);
    case RowOp::layer_norm:
      return run<RD_LAYER_NORM, S>(v, grid, block, a);
  }
  return false;
}

// The generic kernel of S with the launch the library computes for a planned call
// (generic_rows_launch): the op, the row's split and the lowered chains as run-time data.
struct GenericArgs {
  rd_args_e<7> a;
  rdg_shape shape;
  rdg_chain pro, epi;
};
static_assert(sizeof(rd_args_e<7>) == sizeof(RowArgs), "rd_args_e<7> and RowArgs differ");
static_assert(sizeof(rdg_shape) == sizeof(cuinline::ops::detail::GenericRowShape), "rdg_shape differs");
static_assert(sizeof(rdg_chain) == sizeof(cuinline::ops::detail::GenericRowChain), "rdg_chain differs");

template <class S>
void generic_kernel(const GenericArgs& g) {
  rd_generic_body<S>(g.a, g.shape, g.pro, g.epi);
}

template <class S>
void run_generic(const cuinline::ops::detail::RowCall& call, bool whole_rows = false) {
  const cuinline::ops::detail::GenericRowLaunch l =
      cuinline::ops::detail::generic_rows_launch(call, whole_rows);
  GenericArgs g;
  std::memcpy(&g.a, &call.args, sizeof g.a);
  std::memcpy(&g.shape, &l.shape, sizeof g.shape);
  std::memcpy(&g.pro, &l.prologue, sizeof g.pro);
  std::memcpy(&g.epi, &l.epilogue, sizeof g.epi);
  launch(generic_kernel<S>, l.grid, l.block, g);
  if (l.shape.phase == 1) {  // the chunks' statistics are in the workspace: merge and write
    g.shape.phase = 2;
    launch(generic_kernel<S>, l.grid, l.block, g);
  }
}

// Every element of `buf` (`before` as it was) outside the rows of p laid out `stride` apart is
// unchanged: the gaps between rows and what follows the last.
void expect_untouched(const Problem& p, const std::vector<unsigned char>& buf,
                      const std::vector<unsigned char>& before, std::int64_t stride, const char* name) {
  const std::size_t es = cuinline::dtype_size(p.dt);
  int bad = 0;
  for (std::size_t e = 0; e < buf.size() / es && bad < 3; ++e) {
    const std::int64_t i = static_cast<std::int64_t>(e) - p.offset;
    const bool in_a_row = i >= 0 && i / stride < p.rows && i % stride < p.n;
    if (!in_a_row && std::memcmp(&buf[e * es], &before[e * es], es) != 0) {
      ADD_FAILURE() << cuinline::test::what(p) << ": the " << name
                    << " was written outside its rows, at element " << e << " ("
                    << (i >= 0 && i / stride >= p.rows ? "past the last row" : "a gap") << ")";
      ++bad;
    }
  }
}

// Plans p on host buffers (the output poisoned, its rows p.sy apart), runs the planned kernel (the
// split form's two over a workspace, or its looped fallback when `looped`; the generic kernel when
// `generic`), checks the result and returns the variant run (the output and the residual in y_out
// and r_out where given). The output and the residual run on past their last row by the rows a
// warp-form block holds (one row for the other forms), poisoned: nothing may be written there.
// The cases' dtypes and ops, in the order their loops (and the AddressSanitizer build's turns) take.
constexpr DType kDtypes[] = {DType::f32, DType::f16, DType::bf16, DType::f64};
constexpr RowOp kOps[] = {RowOp::softmax, RowOp::log_softmax, RowOp::rms_norm, RowOp::add_rms_norm,
                          RowOp::layer_norm};

// What emulate runs: the planned kernel, the cluster form of a split or cluster call (whether the
// planner takes it or not), the split form of either (a GPU without clusters), the looped fallback
// of either, or the generic kernel.
// (rows4: the planned warp form with four rows a group, RowVariant::rows_per_group.)
enum class Run { planned, cluster, split, looped, generic, generic_whole_rows, rows4 };

// The form the planner gives a row of chunks (8192 elements) past the block form: the cluster form
// where a cluster holds the row and the measured table takes it (cluster_pays), else the split form.
RowForm long_form(RowOp op, DType dt, std::int64_t n, bool chained = false) {
  const std::int64_t chunk = 256 * cuinline::ops::detail::split_per_thread(dt, chained);
  const bool pays = cuinline::ops::detail::cluster_pays(op, dt, (n + chunk - 1) / chunk);
  return pays ? RowForm::cluster : RowForm::split_stats;
}

// A row of a whole warp with the most elements a lane the warp form gives op in dt (kWholeE): 24
// short of warp_form_max (bf16 rows of 1000, f32 488, f64 232; add_rms_norm's shorter).
std::int64_t whole_warp_row(RowOp op, DType dt) {
  return cuinline::ops::detail::warp_form_max(op, dt) - 24;
}

RowVariant emulate(Problem& p, RowForm want_form, Run run_as = Run::planned,
                   std::vector<unsigned char>* y_out = nullptr, std::vector<unsigned char>* r_out = nullptr) {
  const bool generic = run_as == Run::generic || run_as == Run::generic_whole_rows;
  const std::size_t es = cuinline::dtype_size(p.dt);
  const std::int64_t tail_rows = p.n <= 1024 ? cuinline::ops::detail::kWarpBlock : 1;
  std::vector<unsigned char> y(static_cast<std::size_t>(p.span(p.sy) + tail_rows * p.sy) * es);
  for (std::size_t i = 0; i + 4 <= y.size(); i += 4) std::memcpy(&y[i], &cuinline::test::kRowPoison, 4);
  const std::vector<unsigned char> y_before = y;
  const auto at = [&](std::vector<unsigned char>& buf) { return buf.data() + p.offset * es; };
  const auto rows = [&](std::vector<unsigned char>& buf, std::int64_t stride) {
    return TensorView::strided(at(buf), p.dt, {p.rows, p.n}, {stride, 1});
  };
  const TensorView x = rows(p.x, p.sx), out = rows(y, p.sy);
  const TensorView w = p.has_w() ? TensorView::contiguous(at(p.w), p.dt, {p.n}) : TensorView{};
  const TensorView b = p.has_b() ? TensorView::contiguous(at(p.b), p.dt, {p.n}) : TensorView{};
  // Written by add_rms_norm (p.r stays the reference's input), poisoned past its last row.
  std::vector<unsigned char> res = p.r;
  res.resize(p.r.size() + static_cast<std::size_t>(tail_rows * p.sr) * es, 0x5a);
  const std::vector<unsigned char> res_before = res;
  const TensorView r = p.op == RowOp::add_rms_norm ? rows(res, p.sr) : TensorView{};
  cuinline::ops::RowFusion fusion{p.prologue, p.epilogue, {}};
  for (auto& e : p.extra) fusion.epilogue_inputs.push_back(rows(e, p.se));
  cuinline::ops::detail::RowCall call = cuinline::ops::detail::plan_row_call(p.op, x, out, w, b, r, p.eps, fusion);
  EXPECT_EQ(call.plan.variant.form, want_form) << call.plan.variant.name();
  if (run_as == Run::looped) call = cuinline::ops::detail::looped_fallback(call);
  if (run_as == Run::split) call = cuinline::ops::detail::split_form(call);
  if (run_as == Run::rows4) {
    RowVariant& v = call.plan.variant;
    EXPECT_EQ(v.form, RowForm::warp);
    v.rows_per_group = 4;
    EXPECT_NO_THROW(v.validate());
    const std::int64_t per_block = cuinline::ops::detail::kWarpBlock / v.threads * 4;
    call.plan.grid = static_cast<std::uint32_t>((p.rows + per_block - 1) / per_block);
  }
  if (run_as == Run::cluster) {
    call = cuinline::ops::detail::cluster_form(call);
    EXPECT_EQ(call.plan.variant.form, RowForm::cluster);
  }
  std::vector<double> ws((call.plan.workspace_bytes + 7) / 8);
  call.args.ws = ws.data();
  const RowArgs& a = call.args;
  g_tensors = {
      {p.x.data(), p.x.size()}, {p.w.data(), p.w.size()}, {p.b.data(), p.b.size()}, {res.data(), p.r.size()}};
  for (const auto& e : p.extra) g_tensors.push_back({e.data(), e.size()});
  bool ran = true;
  const RowVariant& v = call.plan.variant;
  g_dynamic_smem.assign(call.plan.shared_bytes / sizeof(float), -1.0f);
  g_dynamic_smem_uses = 0;
  const auto run_dtype = [&](auto storage) {
    using S = decltype(storage);
    if (generic) {
      run_generic<S>(call, run_as == Run::generic_whole_rows);
    } else {
      ran = run_op<S>(p.op, v, call.plan.grid, call.plan.block, a);
    }
  };
  switch (p.dt) {
    case DType::f32:
      run_dtype(float{});
      break;
    case DType::f16:
      run_dtype(ew_half{});
      break;
    case DType::bf16:
      run_dtype(ew_bf16{});
      break;
    case DType::f64:
      run_dtype(double{});
      break;
  }
  EXPECT_TRUE(ran) << "no emulated instantiation of " << call.plan.variant.name();
  if (!generic) {  // every thread of a parking kernel takes its part; the plan gives bytes only for those
    EXPECT_EQ(g_dynamic_smem_uses > 0, call.plan.shared_bytes > 0) << call.plan.variant.name();
  }
  if (ran) {
    cuinline::test::check_rows(p, y, p.sy, res, true);
    expect_untouched(p, y, y_before, p.sy, "output");
    expect_untouched(p, res, res_before, p.sr, "residual");
  }
  if (y_out != nullptr) *y_out = std::move(y);
  if (r_out != nullptr) *r_out = std::move(res);
  return call.plan.variant;
}

// Each op in each dtype, with their indices in kDtypes and kOps. Under AddressSanitizer (about ten
// times slower here) each op runs in one dtype, the dtypes in turn (d == k % 4): softmax f32,
// log_softmax f16, rms_norm bf16, add_rms_norm f64, layer_norm f32.
template <class F>
void each_op_and_dtype(F f) {
  for (int d = 0; d < 4; ++d) {
    for (int k = 0; k < 5; ++k) {
#ifdef RD_ASAN_FIBERS
      if (d != k % 4) continue;
#endif
      f(kDtypes[d], kOps[k], d, k);
    }
  }
}

TEST(ReductionsEmulated, EveryFormOpAndDtype) {
  const std::uint64_t seed = cuinline::test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (CUINLINE_TEST_SEED replays it)");
  std::mt19937_64 rng(seed);
  each_op_and_dtype([&](DType dt, RowOp op, int d, int k) {
    struct Shape {
      std::int64_t rows, n, pad_x, pad_y, offset;
      RowForm form;
    };
    const std::int64_t c5 = chunked(33000, dt), c5odd = c5 + 1;  // rows of 5 chunks
    const RowForm split = long_form(op, dt, c5);                 // cluster or split
    const std::int64_t whole = whole_warp_row(op, dt);
    const Shape shapes[] = {
        {9, 7, 0, 3, 0, RowForm::warp},
        {6, whole, 0, 8, 0, RowForm::warp},
        {3, 3000, 16, 8, 0, RowForm::block},
        {3, 2001, 2, 0, 1, RowForm::block},
        {2, c5, 8, 16, 0, split},
        {2, c5odd, 0, 1, 1, split},
    };
    for (const Shape& s : shapes) {
      Problem p = cuinline::test::make_problem(op, dt, s.rows, s.n, rng, s.pad_x, s.pad_y, s.offset);
      p.weight = s.offset == 0;  // without weight on the misaligned rows
      emulate(p, s.form);
      if (s.form == split && s.offset != 0) emulate(p, s.form, Run::looped);  // the looped fallback
    }
    // The warp form with fewer lanes a row, one access of W (16 bytes) each: 1 to 16 lanes, some
    // idle (3 of 4, 5 of 8, 12 of 16), strided rows, rows a block (128 / T) a whole number of times
    // and not, one row; the last block's groups past the last row meet their warp's shuffles and
    // write nothing. (9, 7 above: scalar accesses, 8 lanes.)
    struct Lanes {
      std::int64_t rows, accesses, pad_x, pad_y;  // pads in accesses
      int lanes;
    };
    const std::int64_t W = 16 / static_cast<std::int64_t>(cuinline::dtype_size(dt));
    for (const Lanes& s :
         {Lanes{130, 1, 0, 0, 1}, Lanes{67, 2, 1, 2, 2}, Lanes{64, 2, 0, 0, 2}, Lanes{33, 3, 0, 1, 4},
          Lanes{19, 5, 2, 0, 8}, Lanes{1, 16, 0, 0, 16}, Lanes{11, 12, 1, 1, 16}}) {
      Problem p = cuinline::test::make_problem(op, dt, s.rows, s.accesses * W, rng, s.pad_x * W, s.pad_y * W);
      p.weight = s.rows != 64;
      const RowVariant v = emulate(p, RowForm::warp);
      EXPECT_EQ(v.threads, s.lanes) << v.name();
      EXPECT_EQ(v.per_thread, W) << v.name();
    }
    // Special values in the warp and split forms for all; in the looped form (the online softmax)
    // for softmax in f32 and f64 and log_softmax in f16 and bf16 (a 1024-thread block is the
    // costly part here).
    const bool online = (op == RowOp::softmax && (dt == DType::f32 || dt == DType::f64)) ||
                        (op == RowOp::log_softmax && (dt == DType::f16 || dt == DType::bf16));
    for (const Shape& s : {Shape{7, whole, 0, 0, 0, RowForm::warp}, Shape{9, 3 * W, 0, 0, 0, RowForm::warp},
                           Shape{7, W, 0, 0, 0, RowForm::warp}, Shape{9, c5, 0, 0, 0, split}}) {
      Problem p = cuinline::test::make_problem(op, dt, s.rows, s.n, rng);
      p.eps = 0;
      cuinline::test::add_special_rows(p, rng);
      emulate(p, s.form);
      if (s.form == split && online) emulate(p, s.form, Run::looped);
    }
    // Fused: prologue and epilogue in the warp (8 lanes a row, scalar and 16-byte accesses), block
    // and split forms, the looped one for each op in one dtype (the dtypes in turn); special values
    // in the warp form (a whole warp a row and 4 lanes).
    for (const Shape& s : {Shape{9, 7, 0, 3, 0, RowForm::warp}, Shape{19, 5 * W, 2 * W, 0, 0, RowForm::warp},
                           Shape{3, 3000, 16, 8, 0, RowForm::block},
                           Shape{2, 33001, 0, 1, 1, long_form(op, dt, 33001, true)}}) {
      Problem p = cuinline::test::make_problem(op, dt, s.rows, s.n, rng, s.pad_x, s.pad_y, s.offset);
      cuinline::test::add_chains(p, "mul(0.125)", "mul(in1)", 1, rng);
      emulate(p, s.form);
      if (s.n == 33001 && d == k % 4) emulate(p, s.form, Run::looped);
    }
    // A light prologue alone (f16, bf16, but add_rms_norm and f16 rms_norm; 0.125 is one 16-bit
    // step): the unchained layouts, the 16-bit packs of 1024 threads and chunks of 64 a thread.
    if (W == 8 && op != RowOp::add_rms_norm && !(op == RowOp::rms_norm && dt == DType::f16)) {
      for (const Shape& s : {Shape{3, 3000, 16, 8, 0, RowForm::block},
                             Shape{2, 20000, 0, 8, 0, RowForm::block}, Shape{2, c5, 8, 0, 0, split}}) {
        Problem p = cuinline::test::make_problem(op, dt, s.rows, s.n, rng, s.pad_x, s.pad_y, s.offset);
        cuinline::test::add_chains(p, "mul(0.125)", "", 0, rng);
        const RowVariant v = emulate(p, s.form);
        EXPECT_TRUE(cuinline::ops::detail::light(v)) << v.name();
        EXPECT_EQ(v.per_thread, s.n == 3000 ? 16 : s.n == 20000 ? 32 : 64) << v.name();
      }
    }
    for (const std::int64_t n : {whole, 3 * W}) {
      Problem p = cuinline::test::make_problem(op, dt, 7, n, rng);
      p.eps = 0;
      cuinline::test::add_special_rows(p, rng);
      cuinline::test::add_chains(p, "mul(0.125)", "mul(in1)", 1, rng);
      const RowVariant v = emulate(p, RowForm::warp);
      EXPECT_EQ(v.threads, n == whole ? 32 : 4) << v.name();
    }
  });
}

// The generic kernels (reductions_generic.cuh, the JIT's no-wait path) on the split the library
// computes for each planned call: against the float64 reference, and bit for bit the specialized
// kernel's output (and residual), whose element order, reductions, chunks and formulas the generic
// kernel follows. Every op in every dtype (under AddressSanitizer each op in one dtype, in turn);
// scalar and 16-byte accesses, 1-32 lanes a row, the block form, misaligned rows, the split form
// (two launches over the workspace), special values with eps 0, and the fused chains.
TEST(ReductionsEmulated, GenericKernelsFollowTheSpecializedOnes) {
  const std::uint64_t seed = cuinline::test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (CUINLINE_TEST_SEED replays it)");
  std::mt19937_64 rng(seed);
  each_op_and_dtype([&](DType dt, RowOp op, int d, int k) {
    const std::int64_t W = 16 / static_cast<std::int64_t>(cuinline::dtype_size(dt));
    const std::int64_t c5 = chunked(33000, dt), c5odd = c5 + 1;  // rows of 5 chunks
    const RowForm split = long_form(op, dt, c5);                 // cluster or split
    const std::int64_t whole = whole_warp_row(op, dt);
    struct Case {
      std::int64_t rows, n, pad_x, pad_y, offset;
      RowForm form;
      bool special, chains;
    };
    const Case cases[] = {
        {9, 7, 0, 3, 0, RowForm::warp, false, false},
        {19, 5 * W, 2 * W, 0, 0, RowForm::warp, false, false},
        {67, 2 * W, W, 2 * W, 0, RowForm::warp, false, false},
        {6, whole, 0, 8, 0, RowForm::warp, false, false},
        {3, 3000, 16, 8, 0, RowForm::block, false, false},
        {3, 2001, 2, 0, 1, RowForm::block, false, false},
        {2, c5odd, 0, 1, 1, split, false, false},
        {9, c5, 0, 0, 0, split, true, false},
        {7, whole, 0, 0, 0, RowForm::warp, true, false},
        {9, 3 * W, 0, 0, 0, RowForm::warp, true, false},
        {19, 5 * W, 2 * W, 0, 0, RowForm::warp, false, true},
        {7, 3000, 0, 0, 0, RowForm::block, true, true},
    };
    for (const Case& c : cases) {
#ifdef RD_ASAN_FIBERS
      // Under AddressSanitizer: one row length a form (the misaligned block and split rows, the
      // whole-warp rows and the 2-access lanes only in the release build).
      if (c.offset != 0 || c.n == whole || c.rows == 67) continue;
#endif
      Problem p = cuinline::test::make_problem(op, dt, c.rows, c.n, rng, c.pad_x, c.pad_y, c.offset);
      p.weight = c.offset == 0;
      if (c.special) {
        p.eps = 0;
        cuinline::test::add_special_rows(p, rng);
      }
      if (c.chains) cuinline::test::add_chains(p, "mul(0.125)", "mul(in1)", 1, rng);
      std::vector<unsigned char> y_generic, r_generic;
      const RowVariant v = emulate(p, c.form, Run::generic, &y_generic, &r_generic);
      std::vector<unsigned char> y, r;
      emulate(p, c.form, Run::planned, &y, &r);
      EXPECT_TRUE(cuinline::test::same_bits_or_nans(p.dt, y, y_generic))
          << cuinline::test::what(p) << " " << v.name() << ": the outputs differ";
      EXPECT_TRUE(r == r_generic) << cuinline::test::what(p) << " " << v.name() << ": the residuals differ";
    }
    // A light prologue alone (f16, bf16, but add_rms_norm and f16 rms_norm): the unchained
    // layouts' split (the block form of 16 elements a thread, chunks of 64), which the generic
    // kernel follows.
#ifdef RD_ASAN_FIBERS
    if (d != k % 4) continue;
#endif
    if (W == 8 && op != RowOp::add_rms_norm && !(op == RowOp::rms_norm && dt == DType::f16)) {
      for (const auto& [n, form] : {std::pair{std::int64_t{3000}, RowForm::block}, std::pair{c5, split}}) {
        Problem p = cuinline::test::make_problem(op, dt, 3, n, rng);
        cuinline::test::add_chains(p, "mul(0.125)", "", 0, rng);
        std::vector<unsigned char> y_generic, r_generic, y, r;
        const RowVariant v = emulate(p, form, Run::generic, &y_generic, &r_generic);
        emulate(p, form, Run::planned, &y, &r);
        EXPECT_TRUE(cuinline::ops::detail::light(v)) << v.name();
        EXPECT_TRUE(cuinline::test::same_bits_or_nans(p.dt, y, y_generic))
            << cuinline::test::what(p) << " " << v.name() << ": the outputs differ";
      }
    }
  });
}

// The cluster form (rows of 2-32 chunks of the split form, f64 2-16; 16 blocks at most a cluster): a
// cluster of 5 blocks of one chunk each (f32 rows of 33000-40960, 16-bit ones twice as long), of 9
// blocks of one (9 chunks: past the portable cluster size) and of 9 of two (17 chunks but in f64:
// the last block's second group idle); scalar and 16-byte accesses,
// special values with eps 0, the fused chains; every op and dtype, whether the planner takes the
// cluster form for it or not (cluster_pays). Its outputs and residuals are its split form's (the
// GPUs without clusters) and the generic kernel's bit for bit, and the float64 reference's within
// the tolerance.
TEST(ReductionsEmulated, ClusterFormIsTheSplitFormBitForBit) {
  const std::uint64_t seed = cuinline::test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (CUINLINE_TEST_SEED replays it)");
  std::mt19937_64 rng(seed);
  for (int d = 0; d < 4; ++d) {
    for (int k = 0; k < 5; ++k) {
      const DType dt = kDtypes[d];
      const RowOp op = kOps[k];
      struct Case {
        std::int64_t rows, n, pad_x, pad_y, offset;
        int threads, cluster;
        bool special, chains;
      };
      const Case cases[] = {
          {2, 40960, 8, 16, 0, 256, 5, false, false},
          {2, 33001, 0, 1, 1, 256, 5, false, false},
          {2, 73000, 0, 0, 0, 256, 9, false, false},
          {2, 139000, 0, 0, 0, 512, 9, false, false},
          {9, 33000, 0, 0, 0, 256, 5, true, false},
          {2, 33001, 0, 1, 1, 256, 5, false, true},  // (16-bit rows twice as long: chunked)
      };
      int index = 0;
      for (const Case& c : cases) {
        ++index;
        if (c.threads > 256 && dt == DType::f64) continue;  // f64 holds one chunk a block (split past 16)
#ifdef RD_ASAN_FIBERS
        // Under AddressSanitizer one case an op and dtype, in turn.
        if (index % 6 != (d + k) % 6) continue;
#else
        // The chains in one dtype an op (the dtypes in turn), as the other tests' looped runs.
        if (c.chains && d != k % 4) continue;
#endif
        const std::int64_t n = chunked(c.n, dt, c.chains);
        Problem p = cuinline::test::make_problem(op, dt, c.rows, n, rng, c.pad_x, c.pad_y, c.offset);
        p.weight = c.offset == 0;
        if (c.special) {
          p.eps = 0;
          cuinline::test::add_special_rows(p, rng);
        }
        if (c.chains) cuinline::test::add_chains(p, "mul(0.125)", "mul(in1)", 1, rng);
        std::vector<unsigned char> y, r, y_split, r_split, y_generic, r_generic;
        const RowForm planned = long_form(op, dt, n, c.chains);
        const RowVariant v = emulate(p, planned, Run::cluster, &y, &r);
        EXPECT_EQ(v.threads, c.threads) << v.name();
        EXPECT_EQ(v.cluster, c.cluster) << v.name();
        emulate(p, planned, Run::split, &y_split, &r_split);
        emulate(p, planned, Run::generic, &y_generic, &r_generic);
        EXPECT_TRUE(cuinline::test::same_bits_or_nans(p.dt, y, y_split))
            << cuinline::test::what(p) << " " << v.name() << ": the split form's outputs differ";
        EXPECT_TRUE(r == r_split) << cuinline::test::what(p) << " " << v.name()
                                  << ": the split form's residuals differ";
        EXPECT_TRUE(cuinline::test::same_bits_or_nans(p.dt, y, y_generic))
            << cuinline::test::what(p) << " " << v.name() << ": the generic outputs differ";
        EXPECT_TRUE(r == r_generic) << cuinline::test::what(p) << " " << v.name()
                                    << ": the generic residuals differ";
      }
    }
  }
}

// The block form's 1024-thread kernels: 16 elements a thread (bounded to two blocks an SM) and 32
// (f16 and bf16: the loaded packs kept, softmax's exp taken again for the output; f32 softmax,
// log_softmax and rms_norm: half parked in the dynamic shared memory the plan gives; layer_norm and
// f32 add_rms_norm hold opmath values): the reference's results, and the generic kernel's bit for
// bit, on random rows and on rows of special values (eps 0).
TEST(ReductionsEmulated, ThousandThreadBlocksFollowTheGenericKernel) {
  const std::uint64_t seed = cuinline::test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (CUINLINE_TEST_SEED replays it)");
  std::mt19937_64 rng(seed);
  for (const DType dt : {DType::f16, DType::bf16, DType::f32}) {
    for (int k = 0; k < 5; ++k) {
      const RowOp op = kOps[k];
      for (const std::int64_t n : {std::int64_t{12000}, std::int64_t{20000}}) {
        for (const bool special : {false, true}) {
#ifdef RD_ASAN_FIBERS
          if (special != (k % 2 == 0) || (dt == DType::f32) != (n == 12000)) continue;
#endif
          Problem p = cuinline::test::make_problem(op, dt, special ? 7 : 2, n, rng, special ? 0 : 24, 8);
          if (special) {
            p.eps = 0;
            cuinline::test::add_special_rows(p, rng);
          }
          std::vector<unsigned char> y_generic, r_generic, y, r;
          const RowVariant v = emulate(p, RowForm::block, Run::generic, &y_generic, &r_generic);
          emulate(p, RowForm::block, Run::planned, &y, &r);
          EXPECT_EQ(v.threads, 1024) << v.name();
          EXPECT_EQ(v.per_thread, n > 16384 ? 32 : 16) << v.name();
          const bool parks = dt == DType::f32 && n > 16384 &&
                             (op == RowOp::softmax || op == RowOp::log_softmax || op == RowOp::rms_norm);
          EXPECT_EQ(cuinline::ops::detail::row_shared_bytes(v), parks ? 65536u : 0u) << v.name();
          EXPECT_EQ(cuinline::ops::detail::row_shared_bytes(v, cuinline::Arch{8, 0}), parks ? 65536u : 0u)
              << v.name();
          // The host's list of targets that park is the template's (rd_arch_parks).
          const auto parks_on = [&](auto arch) {
            return cuinline::ops::detail::row_shared_bytes(
                       v, cuinline::Arch{decltype(arch)::value / 10, decltype(arch)::value % 10}) != 0;
          };
          const auto same = [&](auto arch) {
            EXPECT_EQ(parks_on(arch), parks && rd_arch_parks<decltype(arch)::value>::value)
                << v.name() << " sm_" << decltype(arch)::value;
          };
          const auto same_list = [&](auto... archs) { (same(archs), ...); };
          same_list(std::integral_constant<int, 75>{}, std::integral_constant<int, 80>{},
                    std::integral_constant<int, 86>{}, std::integral_constant<int, 87>{},
                    std::integral_constant<int, 89>{}, std::integral_constant<int, 90>{},
                    std::integral_constant<int, 100>{}, std::integral_constant<int, 103>{},
                    std::integral_constant<int, 110>{}, std::integral_constant<int, 120>{},
                    std::integral_constant<int, 121>{});
          EXPECT_TRUE(cuinline::test::same_bits_or_nans(p.dt, y, y_generic))
              << cuinline::test::what(p) << " " << v.name() << ": the outputs differ";
          EXPECT_TRUE(r == r_generic)
              << cuinline::test::what(p) << " " << v.name() << ": the residuals differ";
        }
      }
    }
  }
}

// layer_norm of rows that each hold one value (not 0, nor one the mean's sum divides exactly):
// x - mean is exactly 0, so every form gives the bias bit for bit (0 * w + b), as PyTorch's
// Welford kernels and the float64 reference do. A mean summed in one pass is off by a rounding,
// which rsqrt(0 + eps) then magnifies (about 1e-5 of the row's scale in f32 at eps 1e-5).
// The looped form (rd_long: the split form's fallback where no workspace can be had) against the
// generic kernel's whole rows (its fallback there, on 1024 lanes): the same element order, sums and
// formulas, so the same bits, residuals included. Every op in every dtype (under AddressSanitizer
// each op in one dtype, in turn): 16-byte and scalar accesses, special values (eps 0), and chains.
TEST(ReductionsEmulated, LoopedFormIsTheGenericKernelsWholeRowsBitForBit) {
  const std::uint64_t seed = cuinline::test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (CUINLINE_TEST_SEED replays it)");
  std::mt19937_64 rng(seed);
  each_op_and_dtype([&](DType dt, RowOp op, int d, int k) {
    struct Case {
      std::int64_t rows, n, offset;
      bool special, chains;
    };
    const std::int64_t c5 = chunked(33000, dt);
    for (const Case& c : {Case{2, c5, 0, false, false}, Case{7, c5 + 1, 0, true, false},
                          Case{2, chunked(33000, dt, true) + 1, 1, false, true}}) {
      if (c.chains && d != k % 4) continue;  // (the chains in one dtype an op, in turn)
      Problem p = cuinline::test::make_problem(op, dt, c.rows, c.n, rng, 0, 3, c.offset);
      p.weight = c.offset == 0;
      if (c.special) {
        p.eps = 0;
        cuinline::test::add_special_rows(p, rng);
      }
      if (c.chains) cuinline::test::add_chains(p, "mul(0.125)", "mul(in1)", 1, rng);
      const RowForm form = long_form(op, dt, c.n, c.chains);
      std::vector<unsigned char> y, r, y_generic, r_generic;
      const RowVariant v = emulate(p, form, Run::looped, &y, &r);
      emulate(p, form, Run::generic_whole_rows, &y_generic, &r_generic);
      EXPECT_TRUE(cuinline::test::same_bits_or_nans(p.dt, y, y_generic))
          << cuinline::test::what(p) << " " << v.name() << ": the generic whole rows' outputs differ";
      EXPECT_TRUE(r == r_generic) << cuinline::test::what(p) << " " << v.name()
                                  << ": the generic whole rows' residuals differ";
    }
  });
}

// Four rows a group of lanes (the warp form's rows_per_group): every row's outputs and residual the
// bits of one row a group, on rows that fill the last block's groups and rows that do not (groups
// past the last row in a warp of live ones; a whole warp stopping at its first such row), with
// special values.
TEST(ReductionsEmulated, RowsAGroupKeepEachRowsBits) {
  const std::uint64_t seed = cuinline::test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (CUINLINE_TEST_SEED replays it)");
  std::mt19937_64 rng(seed);
  each_op_and_dtype([&](DType dt, RowOp op, int, int) {
    const std::int64_t W = 16 / static_cast<std::int64_t>(cuinline::dtype_size(dt));
    struct Case {
      std::int64_t rows, lanes;
      bool special;
    };
    for (const Case& c : {Case{64, 16, false}, Case{77, 16, true}, Case{300, 8, false}, Case{37, 32, true},
                          Case{3, 8, false}}) {
      Problem p = cuinline::test::make_problem(op, dt, c.rows, c.lanes * W, rng, 0, 0);
      if (c.special) cuinline::test::add_special_rows(p, rng);
      std::vector<unsigned char> y1, r1, y4, r4;
      const RowVariant v = emulate(p, RowForm::warp, Run::planned, &y1, &r1);
      ASSERT_EQ(v.threads, c.lanes) << v.name();
      emulate(p, RowForm::warp, Run::rows4, &y4, &r4);
      EXPECT_TRUE(cuinline::test::same_bits_or_nans(p.dt, y1, y4))
          << cuinline::test::what(p) << " " << v.name() << ": four rows a group changed the outputs";
      EXPECT_TRUE(r1 == r4) << cuinline::test::what(p) << " " << v.name()
                            << ": four rows a group changed the residual";
    }
  });
}

using RunKind = Run;  // (in a test's body Run names testing::Test::Run)
TEST(ReductionsEmulated, LayerNormOfAConstantRowIsExactlyTheBias) {
  const std::uint64_t seed = cuinline::test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (CUINLINE_TEST_SEED replays it)");
  std::mt19937_64 rng(seed);
  const double values[] = {0.15, -3.7, 1234.56, 1.0 / 3.0, -0.0123};
  for (const DType dt : kDtypes) {
    struct Shape {
      std::int64_t n;
      RowForm form;
      RunKind run;
    };
    const std::int64_t c5 = chunked(33000, dt);
    const RowForm split = long_form(RowOp::layer_norm, dt, c5);
    for (const Shape& s :
         {Shape{7, RowForm::warp, Run::planned},
          Shape{whole_warp_row(RowOp::layer_norm, dt), RowForm::warp, Run::planned},
          Shape{3000, RowForm::block, Run::planned}, Shape{3000, RowForm::block, Run::generic},
          Shape{c5, split, Run::planned}, Shape{c5, split, Run::split}, Shape{c5 + 1, split, Run::looped},
          Shape{c5, split, Run::generic}}) {
#ifdef RD_ASAN_FIBERS
      if (s.n == c5 + 1 && dt != DType::f32) continue;  // (a 1024-thread block: the costly part)
#endif
      for (const bool weight : {true, false}) {
        Problem p = cuinline::test::make_problem(RowOp::layer_norm, dt, 5, s.n, rng);
        p.weight = weight;
        for (std::int64_t row = 0; row < p.rows; ++row) {
          const std::uint64_t bits = cuinline::test::bits_of(dt, values[row]);
          for (std::int64_t i = 0; i < s.n; ++i) cuinline::test::set_bits(p.x, dt, row * p.sx + i, bits);
        }
        std::vector<unsigned char> y;
        const RowVariant v = emulate(p, s.form, s.run, &y);
        for (std::int64_t row = 0; row < p.rows; ++row) {
          std::int64_t wrong = 0, first = -1;
          for (std::int64_t i = 0; i < s.n; ++i) {
            if (cuinline::test::get_bits(y, dt, row * p.sy + i) != cuinline::test::get_bits(p.b, dt, i)) {
              wrong += 1;
              if (first < 0) first = i;
            }
          }
          EXPECT_EQ(wrong, 0) << cuinline::test::what(p) << " " << v.name() << " run "
                              << static_cast<int>(s.run) << (weight ? "" : " without weight") << ": row "
                              << row << " of " << values[row] << ", first at " << first;
        }
      }
    }
  }
}

}  // namespace
