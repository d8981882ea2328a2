// conv2d_plan.cuh — the shared-memory layout and grid of conv2d.cuh (f32 on FMA):
// direct_plan_figures(DirectPlanShape), a constexpr function of the shape struct's values. One
// definition for both sides: conv2d.cuh's Plan<S> takes its figures from it, and the library's
// host code includes this file (src/ops/conv2d/conv2d_direct.cpp) to plan a variant's block, stages and
// pipeline. Plain C++ (the functions are __host__ __device__ where the file is compiled as CUDA).
#ifndef CUINLINE_CONV2D_PLAN_CUH
#define CUINLINE_CONV2D_PLAN_CUH

#ifdef __CUDACC__
#define CUINLINE_CONV2D_PLAN_CONSTEXPR __host__ __device__ constexpr
#else
#define CUINLINE_CONV2D_PLAN_CONSTEXPR constexpr
#endif

namespace cuinline_conv2d_detail {

// The values of a shape struct S's members that a plan depends on (conv2d.cuh lists them).
struct DirectPlanShape {
  int kh, kw, sh, sw, dh, dw, oh, ow;
  int tx, ty, tg, tk, tp, tc, ci_chunk, pipeline, col_phases, out_aligned;
};

// A plan's figures; conv2d.cuh's Plan<S> has each as the member k<Name>.
struct DirectPlanFigures {
  int set_threads, threads, block_cout, tile_cols, tiles_x;
  bool compact_h, compact_w;
  int row_step, row_dil, col_step, col_dil, in_rows, in_cols;
  bool split;
  int phases, need;
  bool vec_in;
  int need_pad, last_read, phase_cols, pitch_raw, phase_pitch, pitch;
  long long in_floats;
  int taps, w_pitch;
  long long w_floats;
  bool vec_w;
  int tiles_y, buffers, w_buffers;
  long long stage_floats, red_floats, smem_floats, smem_bytes;
  int ci_slice, store_vec;
};

// Positions past a thread's first output that column phase ph is read at (-1: no filter column
// reads it). Column phases (col_phases == sw): staged column c sits at phase c % sw, position c /
// sw; filter column kw of output o reads phase kw * dw % sw at position o + kw * dw / sw.
CUINLINE_CONV2D_PLAN_CONSTEXPR int direct_phase_reach(const DirectPlanShape& s, int ph) {
  int m = -1;
  for (int kw = 0; kw < s.kw; ++kw) {
    if (kw * s.dw % s.sw == ph && kw * s.dw / s.sw > m) m = kw * s.dw / s.sw;
  }
  return m;
}
// Staged columns of phase ph that one thread reads per filter row (0: none).
CUINLINE_CONV2D_PLAN_CONSTEXPR int direct_phase_need(const DirectPlanShape& s, int ph) {
  return direct_phase_reach(s, ph) < 0 ? 0 : s.tp + direct_phase_reach(s, ph);
}

// Shared-memory wavefronts of a warp's first input load with phase pitch pp (floats of one phase;
// the row's, unsplit): 32 lanes of 4-byte loads, or 4 quarter-warps of 16-byte loads, each as many
// wavefronts as the most distinct addresses that share a bank (a warp spans several thread rows
// when tx < 32: their distance decides the conflicts). row: floats between staged rows of a phase
// (row_step x phases x pp); col: floats between neighbouring threads' first columns.
CUINLINE_CONV2D_PLAN_CONSTEXPR int direct_load_wavefronts(const DirectPlanShape& s, bool vec_in, int row, int col) {
  const int width = vec_in ? 4 : 1;
  const int group = width == 4 ? 8 : 32;  // lanes served together
  int total = 0;
  for (int g0 = 0; g0 < 32; g0 += group) {
    int count[32] = {};  // distinct addresses a bank (a 16-byte bank group for width 4)
    int worst = 0;
    for (int l = g0; l < g0 + group; ++l) {
      const int a = (l / s.tx % s.ty) * row + l % s.tx * col;
      bool seen = false;
      for (int m = g0; m < l; ++m) seen = seen || (m / s.tx % s.ty) * row + m % s.tx * col == a;
      if (seen) continue;
      const int bank = a / width % (32 / width);
      worst = ++count[bank] > worst ? count[bank] : worst;
    }
    total += worst;
  }
  return total;
}

CUINLINE_CONV2D_PLAN_CONSTEXPR DirectPlanFigures direct_plan_figures(const DirectPlanShape& s) {
  DirectPlanFigures f{};
  f.set_threads = s.tx * s.ty * s.tg;  // one thread set (a full output tile)
  f.threads = f.set_threads * s.tk;
  f.block_cout = s.tg * s.tc;
  f.tile_cols = s.tx * s.tp;
  f.tiles_x = (s.ow + f.tile_cols - 1) / f.tile_cols;
  // Compact stage along an axis when the filter's reach is no larger than the stride: staged row
  // ty * kh + i holds input row ty * sh + i * dh (likewise for columns).
  f.compact_h = (s.kh - 1) * s.dh + 1 <= s.sh;
  f.compact_w = (s.kw - 1) * s.dw + 1 <= s.sw;
  f.row_step = f.compact_h ? s.kh : s.sh;  // staged rows between output rows
  f.row_dil = f.compact_h ? 1 : s.dh;      // staged rows between filter rows
  f.col_step = f.compact_w ? s.kw : s.sw;
  f.col_dil = f.compact_w ? 1 : s.dw;
  f.in_rows = (s.ty - 1) * f.row_step + (s.kh - 1) * f.row_dil + 1;
  f.in_cols = (f.tile_cols - 1) * f.col_step + (s.kw - 1) * f.col_dil + 1;
  f.split = s.col_phases > 1;
  f.phases = f.split ? s.sw : 1;
  // Staged columns one thread reads per filter row (per phase when split).
  int max_need = 0;
  for (int ph = 0; ph < f.phases; ++ph) {
    const int n = direct_phase_need(s, ph);
    max_need = n > max_need ? n : max_need;
  }
  f.need = f.split ? max_need : (s.tp - 1) * f.col_step + (s.kw - 1) * f.col_dil + 1;
  // 16-byte loads need each thread's first column 4-aligned.
  f.vec_in = (s.tp * (f.split ? 1 : f.col_step)) % 4 == 0;
  f.need_pad = f.vec_in && !f.split ? (f.need + 3) / 4 * 4 : f.need;
  f.last_read = (s.tx - 1) * s.tp * (f.split ? 1 : f.col_step) + f.need_pad;
  f.phase_cols = (f.in_cols + f.phases - 1) / f.phases;  // staged columns of phase 0
  f.pitch_raw = f.split ? (f.phase_cols > f.last_read ? f.phase_cols : f.last_read)
                        : (f.in_cols > f.last_read ? f.in_cols : f.last_read);
  // The phase pitch: the smallest padding (0 .. 28 floats, 16-byte steps) with the fewest wavefronts.
  const int col = s.tp * (f.split ? 1 : f.col_step);
  const int base = (f.pitch_raw + 3) / 4 * 4;
  int best = base, best_cost = direct_load_wavefronts(s, f.vec_in, f.row_step * f.phases * base, col);
  for (int pad = 4; pad < 32; pad += 4) {
    const int cost = direct_load_wavefronts(s, f.vec_in, f.row_step * f.phases * (base + pad), col);
    if (cost < best_cost) {
      best = base + pad;
      best_cost = cost;
    }
  }
  f.phase_pitch = best;  // floats of one phase (the row, unsplit)
  f.pitch = f.phases * f.phase_pitch;
  f.in_floats = (long long)s.ci_chunk * f.in_rows * f.pitch;
  f.taps = s.kh * s.kw;
  // Weight stage: a row of w_pitch floats per (input channel, tap) of the chunk, the block's output
  // channels contiguous in it (read as warp-wide broadcasts). Staged every chunk, the pitch is 4 mod
  // 8 floats: the 8 lanes that copy 8 consecutive taps of one channel then write 8 distinct 16-byte
  // bank groups. Staged once a block (the row-tile pipeline), it is not padded.
  f.w_pitch = f.block_cout;
  while (s.pipeline != 1 && f.w_pitch % 8 != 4) ++f.w_pitch;
  f.w_floats = (long long)s.ci_chunk * f.taps * f.w_pitch;
  f.vec_w = s.tc % 4 == 0;
  f.tiles_y = (s.oh + s.ty - 1) / s.ty;
  f.buffers = s.pipeline != 0 ? 2 : 1;
  f.w_buffers = s.pipeline == 2 ? 2 : 1;
  f.stage_floats = f.w_buffers * f.w_floats + f.buffers * f.in_floats;
  // Partial tiles of thread sets 1 .. tk - 1. Pipelines 0 and 2 reuse the stage buffers (every
  // chunk is consumed by then); the row-tile pipeline is still copying the next tile, so it gets
  // its own region after the stage buffers.
  f.red_floats = (long long)(s.tk - 1) * f.set_threads * s.tc * s.tp;
  f.smem_floats = s.pipeline == 1                 ? f.stage_floats + f.red_floats
                  : f.stage_floats > f.red_floats ? f.stage_floats
                                                  : f.red_floats;
  f.smem_bytes = f.smem_floats * 4;
  f.ci_slice = s.ci_chunk / s.tk;  // channels of a chunk one thread set sums
  // (Vector stores only where the output pointer is 16-byte aligned: conv2d_direct.cpp renders
  // kOutAligned 0 otherwise, e.g. a contiguous batch slice of an odd-sized plane.)
  f.store_vec = s.out_aligned == 0                     ? 1
                : (s.tp % 4 == 0 && s.ow % 4 == 0) ? 4
                : (s.tp % 2 == 0 && s.ow % 2 == 0) ? 2
                                                   : 1;
  return f;
}

// The DirectPlanShape of a shape struct S.
template <class S>
CUINLINE_CONV2D_PLAN_CONSTEXPR DirectPlanShape direct_plan_shape() {
  return DirectPlanShape{S::kKH, S::kKW, S::kSH, S::kSW, S::kDH,       S::kDW,      S::kOH,
                         S::kOW, S::kTX, S::kTY, S::kTG, S::kTK,       S::kTP,      S::kTC,
                         S::kCiChunk, S::kPipeline, S::kColPhases, S::kOutAligned};
}
// The figures of a shape struct S, evaluated once an instantiation (a namespace-scope variable
// template: NVRTC emits a class's static constexpr members as device globals).
template <class S>
constexpr DirectPlanFigures kDirectPlanFigures = direct_plan_figures(direct_plan_shape<S>());

}  // namespace cuinline_conv2d_detail

#endif  // CUINLINE_CONV2D_PLAN_CUH
