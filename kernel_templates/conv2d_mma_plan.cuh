// conv2d_mma_plan.cuh — the shared-memory layout and grid of conv2d_mma.cuh (TF32 tensor cores):
// mma_plan_figures(MmaPlanShape), a constexpr function of the shape struct's values. One definition
// for both sides: conv2d_mma.cuh's Plan<S> takes its figures from it, and the library's host code
// includes this file (src/ops/conv2d/conv2d_mma.cpp) to plan a variant's tile and pipeline. Plain
// C++ (the functions are __host__ __device__ where the file is compiled as CUDA).
#ifndef CUINLINE_CONV2D_MMA_PLAN_CUH
#define CUINLINE_CONV2D_MMA_PLAN_CUH

#ifdef __CUDACC__
#define CUINLINE_CONV2D_MMA_CONSTEXPR __host__ __device__ constexpr
#else
#define CUINLINE_CONV2D_MMA_CONSTEXPR constexpr
#endif

namespace cuinline_conv2d_mma_detail {

// Largest number of distinct words one bank serves when the 32 lanes (g = lane / 4, t = lane % 4)
// read word t * plane + g * sw (an A fragment: channel t, pixel g).
CUINLINE_CONV2D_MMA_CONSTEXPR int bank_conflicts(int plane, int sw) {
  // One pass over the 32 lanes into per-bank counts (NVRTC evaluates this while instantiating Plan;
  // a bank-by-bank rescan of the lanes cost ~20 ms of its front end a variant).
  int n[32] = {};
  for (int t = 0; t < 4; ++t) {
    for (int g = 0; g < 8; ++g) ++n[(t * plane + g * sw) % 32];
  }
  int worst = 0;
  for (int bank = 0; bank < 32; ++bank) worst = n[bank] > worst ? n[bank] : worst;
  return worst;
}
// The smallest plane stride >= min_plane with the fewest conflicts. One word a bank (no conflict)
// cannot be beaten, so the search stops at the first such stride.
CUINLINE_CONV2D_MMA_CONSTEXPR int conflict_free_plane(int min_plane, int sw) {
  int best = min_plane;
  int best_conflicts = bank_conflicts(min_plane, sw);
  for (int p = min_plane + 1; p < min_plane + 32 && best_conflicts > 1; ++p) {
    const int c = bank_conflicts(p, sw);
    if (c < best_conflicts) {
      best = p;
      best_conflicts = c;
    }
  }
  return best;
}
// A weight row pitch >= cout with pitch % 32 in {8, 24}: the B fragment (k = t, n = g) is then
// conflict-free.
CUINLINE_CONV2D_MMA_CONSTEXPR int weight_pitch(int cout) {
  int p = cout;
  while (p % 32 != 8 && p % 32 != 24) ++p;
  return p;
}

// The values of a shape struct S's members that a plan depends on (conv2d_mma.cuh lists them).
struct MmaPlanShape {
  int kh, kw, sh, sw, dh, dw, oh, ow;
  int tile_cols, ty, warps_m, warps_n, mt, nt, ci_chunk, pipeline, out_stage;
};

// A plan's figures; conv2d_mma.cuh's Plan<S> has each as the member k<Name>.
struct MmaPlanFigures {
  int warps, threads, block_cout, col_tiles, tiles_x, tiles_y;
  bool stream;
  int span, step_rows, window, new_rows, ring, in_rows, in_cols, pitch, plane, in_floats, taps;
  int w_pitch, w_floats, buffers, w_buffers, warp_cols, out_pitch, out_chunks, out_floats;
  long long smem_bytes;
};

CUINLINE_CONV2D_MMA_CONSTEXPR MmaPlanFigures mma_plan_figures(const MmaPlanShape& s) {
  MmaPlanFigures f{};
  f.warps = s.warps_m * s.warps_n;
  f.threads = 32 * f.warps;
  f.block_cout = 8 * s.warps_n * s.nt;
  f.col_tiles = s.tile_cols / 16;
  f.tiles_x = (s.ow + s.tile_cols - 1) / s.tile_cols;
  f.tiles_y = (s.oh + s.ty - 1) / s.ty;
  f.stream = s.pipeline == 3;
  // Row streaming: a step computes kTY output rows; kStepRows input rows further each step;
  // kWindow input rows read by one step; kNew rows each further step stages; kRing rows held.
  f.span = (s.kh - 1) * s.dh + 1;
  f.step_rows = s.ty * s.sh;
  f.window = (s.ty - 1) * s.sh + f.span;
  f.new_rows = f.step_rows < f.window ? f.step_rows : f.window;
  f.ring = f.window + 2 * f.step_rows;
  f.in_rows = f.stream ? f.ring : f.window;
  f.in_cols = (s.tile_cols - 1) * s.sw + (s.kw - 1) * s.dw + 1;
  f.pitch = f.in_cols;
  f.plane = conflict_free_plane(f.in_rows * f.pitch, s.sw);
  f.in_floats = s.ci_chunk * f.plane;
  f.taps = s.kh * s.kw;
  f.w_pitch = weight_pitch(f.block_cout);
  f.w_floats = f.taps * s.ci_chunk * f.w_pitch;
  f.buffers = s.pipeline == 1 || s.pipeline == 2 ? 2 : 1;
  f.w_buffers = s.pipeline == 2 ? 2 : 1;
  // Output staging (kOutStage passes): one [kNT * 8 / kOutStage channels][kOutPitch] tile a warp. A
  // pitch = 4 (mod 16) makes the fragment writes conflict-free and keeps the rows 16-byte aligned;
  // each row is shifted by its global address mod 4 (< 4 floats) so that its float4 chunks are
  // aligned in both spaces.
  f.warp_cols = 16 * s.mt;
  f.out_pitch = f.warp_cols + 4;
  f.out_chunks = f.warp_cols / 4 + 1;
  f.out_floats = s.out_stage ? f.warps * 8 * (s.nt / s.out_stage) * f.out_pitch : 0;
  f.smem_bytes = ((long long)f.w_buffers * f.w_floats + (long long)f.buffers * f.in_floats + f.out_floats) * 4;
  return f;
}

}  // namespace cuinline_conv2d_mma_detail

#endif  // CUINLINE_CONV2D_MMA_PLAN_CUH
