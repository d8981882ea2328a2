// conv2d_winograd_plan.cuh — the shared-memory layout and grid of conv2d_winograd.cuh (f32
// Winograd F(2x2, 3x3)): winograd_plan_figures(WinogradPlanShape), a constexpr function of the
// shape struct's values. One definition for both sides: conv2d_winograd.cuh's WPlan<S> takes its
// figures from it, and the library's host code includes this file
// (src/ops/conv2d/conv2d_winograd.cpp) to plan a variant's block. Plain C++ (the functions are
// __host__ __device__ where the file is compiled as CUDA).
#ifndef CUINLINE_CONV2D_WINOGRAD_PLAN_CUH
#define CUINLINE_CONV2D_WINOGRAD_PLAN_CUH

#ifdef __CUDACC__
#define CUINLINE_CONV2D_WINOGRAD_CONSTEXPR __host__ __device__ constexpr
#else
#define CUINLINE_CONV2D_WINOGRAD_CONSTEXPR constexpr
#endif

namespace cuinline_conv2d_wino_detail {

// The values of a shape struct S's members that a plan depends on (conv2d_winograd.cuh lists them).
struct WinogradPlanShape {
  int cin, w, pw, oh, ow;
  int lx, tt, wx, wc, tco, out_aligned;
};

// A plan's figures; conv2d_winograd.cuh's WPlan<S> has each as the member k<Name>.
struct WinogradPlanFigures {
  int m, a, mm, lanes_c, warp_tiles, block_tiles, groups, block_cout, threads;
  int tiles_across, tiles_x, tiles_y, in_cols, pitch;
  bool vec_stage;
  long long raw_floats, v4_floats, u4_floats, smem_floats, smem_bytes;
  int store_vec;
};

CUINLINE_CONV2D_WINOGRAD_CONSTEXPR WinogradPlanFigures winograd_plan_figures(const WinogradPlanShape& s) {
  WinogradPlanFigures f{};
  f.m = 2;                // output tile side
  f.a = f.m + 2;          // input tile side, transformed positions per column
  f.mm = f.m * f.m;       // outputs of a tile
  f.lanes_c = 32 / s.lx;  // channel lanes of a warp
  f.warp_tiles = s.lx * s.tt;
  f.block_tiles = s.wx * f.warp_tiles;
  f.groups = s.wc * f.lanes_c;  // channel groups (of tco) of a block
  f.block_cout = f.groups * s.tco;
  f.threads = 32 * s.wx * s.wc;
  f.tiles_across = (s.ow + f.m - 1) / f.m;                          // m x m tiles of a tile row
  f.tiles_x = (f.tiles_across + f.block_tiles - 1) / f.block_tiles;  // blocks along x
  f.tiles_y = (s.oh + f.m - 1) / f.m;                                // tile rows
  // Staged input: a rows x (m * block_tiles + 2) columns of each channel.
  f.in_cols = f.m * f.block_tiles + 2;
  f.pitch = (f.in_cols + 3) / 4 * 4;
  f.vec_stage = s.w % 4 == 0 && s.pw % 4 == 0 && (f.m * f.block_tiles) % 4 == 0;
  f.raw_floats = (long long)s.cin * f.a * f.pitch;
  // V4[ci][column nu][tile][rows 0-3]: the transformed input; U4[ci][nu][c][group][rows 0-3]: the
  // transformed weights, as the products take them.
  f.v4_floats = (long long)s.cin * f.a * f.block_tiles * 4;
  f.u4_floats = (long long)s.cin * f.a * f.block_cout * 4;
  f.smem_floats = f.u4_floats + f.v4_floats + f.raw_floats;
  f.smem_bytes = f.smem_floats * 4;
  // NCHW stores of a tile row: float2 where OW is even, else one a float (and one a float wherever
  // the output may be misaligned: out_aligned 0).
  f.store_vec = s.out_aligned == 0 ? 1 : s.ow % 2 == 0 ? 2 : 1;
  return f;
}

// The figures of a shape struct S, evaluated once an instantiation (a namespace-scope variable
// template: NVRTC emits a class's static constexpr members as device globals).
template <class S>
constexpr WinogradPlanFigures kWinogradPlanFigures = winograd_plan_figures(
    WinogradPlanShape{S::kCin, S::kW, S::kPW, S::kOH, S::kOW, S::kLX, S::kTT, S::kWX, S::kWC, S::kTCo, S::kOutAligned});

}  // namespace cuinline_conv2d_wino_detail

#endif  // CUINLINE_CONV2D_WINOGRAD_PLAN_CUH
