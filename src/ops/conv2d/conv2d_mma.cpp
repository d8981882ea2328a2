// conv2d on TF32 tensor cores (Conv2dPrecision::tf32 and ::tf32x3): the block tiling chosen on the
// host and the rendering of kernel_templates/conv2d_mma.cuh into one CompileRequest per variant.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <cuinline/error.hpp>
#include <string>

#include "conv2d_mma_plan.cuh"
#include "ops/conv2d/conv2d_internal.hpp"
#include "ops/conv2d/tuning.hpp"
#include "templates/template_source.hpp"

namespace cuinline::ops::conv2d_impl {
namespace {

// Shared memory a block may use (conv2d_tuning: two blocks still fit on one H100/H200
// multiprocessor, or the target's limit where that is less).
std::int64_t pipelined_bytes(const Conv2dVariant& v) {
  return conv2d_tuning(v.target).mma_pipelined_bytes;
}
// The unrolled body of the accumulation loop (code size, NVRTC time; see mma_tiling): at most
// mma_unroll_taps filter taps x 8-channel steps and mma_unrolled_mma mma instructions (conv2d_tuning).
// 3xTF32: filter columns unrolled at most (see mma_tiling): 1 — each filter column an iteration —
// unless CUINLINE_CONV2D_TF32X3_KW=N (a tuning override; with per-step sums unrolled columns spill
// and run slower). CUINLINE_CONV2D_TF32X3_SUMS=chained (a tuning override): 3xTF32's products
// chained into the running sum on the tensor cores instead of per-step sums (conv2d_mma.cuh,
// kSumsFromZero): faster, not fp32-accurate on long reductions.

namespace mma_plan = cuinline_conv2d_mma_detail;

// The plan of a tiling: conv2d_mma_plan.cuh's figures (what the kernel's Plan<S> compiles) of the
// shape constants make_mma_request renders for v and t.
mma_plan::MmaPlanFigures mma_figures_of(const Conv2dVariant& v, const MmaTiling& t) {
  const Conv2dParams& p = v.params;
  return mma_plan::mma_plan_figures(mma_plan::MmaPlanShape{
      v.kernel_h, v.kernel_w, p.stride_h, p.stride_w, p.dilation_h, p.dilation_w, static_cast<int>(v.out_height()),
      static_cast<int>(v.out_width()), t.tile_cols, t.tile_rows, t.warps_m, t.warps_n, t.m_tiles, t.n_tiles,
      t.ci_chunk, t.pipeline, t.out_stage});
}
// A tiling's shared memory and grid from its plan (kSmemBytes, kTilesX, kTilesY).
void set_mma_plan_figures(const Conv2dVariant& v, MmaTiling& t) {
  const mma_plan::MmaPlanFigures f = mma_figures_of(v, t);
  t.shared_bytes = static_cast<unsigned>(std::min<long long>(f.smem_bytes, 0xffffffffll));
  t.tiles_x = f.tiles_x;
  t.tiles_y = f.tiles_y;
}

// Input rows (or columns) that `outs` consecutive outputs read.
int in_extent(int outs, int k, int stride, int dilation) {
  return (outs - 1) * stride + (k - 1) * dilation + 1;
}

// Row streaming (pipeline 3), TF32 only (3xTF32 cannot round operands in shared memory, and its
// three-fragment split leaves no registers for the longer-lived streaming state: it measured 6 %
// slower on the seed, 35 % on a 5 x 5 filter), where the image is wide enough for a tile of 64 or
// 128 columns (narrower tiles starve the block) and all input channels, the block's weights, the
// input-row ring and the warps' output tiles fit in pipelined_bytes: a step of one or two output
// rows (tile_rows), the width with the least computed overhang (narrow tiles count extra for their
// halo and per-block work). Two rows a step where they fit: the warps of both rows store a channel's
// rows oy and oy + 1 in the same step, one contiguous run of 2 x OW floats in NCHW; on the seed
// (H200) the output's stores were the kernel's limit at one row a step (504-byte runs,
// 2.2 TB/s), and runs of 1008 bytes stored together measured 0.210 ms against 0.280. Sets the
// tile and smem fields of t; false: no fit.
bool stream_rows(const Conv2dVariant& v, MmaTiling& t, int ci_pad) {
  if (v.precision != Conv2dPrecision::tf32) return false;
  const int oh = static_cast<int>(v.out_height());
  const int ow = static_cast<int>(v.out_width());
  auto cost = [&](int cols) { return static_cast<double>(ceil_div(ow, cols)) * cols * (1.0 + 16.0 / cols); };
  int cols = 0;
  for (int c : {128, 64, 32, 16}) {
    if (cols == 0 || cost(c) < cost(cols)) cols = c;
  }
  if (cols < 64) return false;
  // With two warps along the channels a warp takes the whole 128-column row (up to 8 pixel tiles x 4
  // channel tiles: 32 independent accumulator chains a filter tap, 1.25 shared loads per mma): on the
  // seed 0.277 ms against 0.302 for four warps of 4 x 4 tiles. A single channel warp keeps two warps
  // along the row.
  const int m_total = cols / 16;
  const int m_tiles = std::min(t.warps_n == 2 ? 8 : 4, m_total);
  const int warps_per_row = m_total / m_tiles;
  // The output tile goes through shared memory in passes: one channel tile a pass for the whole-row
  // warps (less shared memory), else two where they divide evenly.
  // With a residual the warps store directly (the residual is read beside each output; 0 passes).
  const int out_stage =
      v.has_residual ? 0 : (m_tiles == 8 && t.n_tiles % 4 == 0 ? 4 : (t.n_tiles % 2 == 0 ? 2 : 1));
  for (int rows = std::min(2, oh); rows >= 1; --rows) {
    MmaTiling c = t;
    c.tile_cols = cols;
    c.tile_rows = rows;
    c.m_tiles = m_tiles;
    c.warps_m = warps_per_row * rows;
    c.pipeline = 3;
    c.out_stage = out_stage;
    c.ci_chunk = ci_pad;
    set_mma_plan_figures(v, c);  // (all channels, the block's weights, the input-row ring, the warps' output tiles)
    if (c.shared_bytes > pipelined_bytes(v)) continue;
    t = c;
    t.row_tiles = t.tiles_y;  // an upper bound: the launch picks the steps a block from the batch size
    return true;
  }
  return false;
}

}  // namespace

bool uses_tensor_cores(const Conv2dVariant& v) {
  if (v.precision == Conv2dPrecision::fp32 || v.uses_generic_kernel()) return false;  // (f16 / bf16: hmma)
  // sm_75 has no TF32 tensor cores: the fp32 kernels compute tf32 and tf32x3 there (as PyTorch does).
  if (v.target == Conv2dTarget::sm75) return false;
  try {
    mma_tiling(v);  // host arithmetic only (microseconds); asked on a variant-map miss, not per launch
    return true;
  } catch (const InvalidArgument&) {
    return false;  // the tile does not fit the shared memory: the fp32 kernel computes it
  }
}

MmaTiling mma_tiling(const Conv2dVariant& v) {
  v.validate();
  const Conv2dParams& p = v.params;
  const int oh = static_cast<int>(v.out_height());
  const int ow = static_cast<int>(v.out_width());
  MmaTiling t;
  t.warps_n = v.out_channels <= 16 ? 1 : 2;
  t.n_tiles = std::clamp(ceil_div(v.out_channels, 8 * t.warps_n), 1, 4);
  const int ci_pad = (v.in_channels + 7) / 8 * 8;
  // Two warps along the channels (one for up to 16 channels), each up to 4 channel tiles of 8.
  // Row streaming where it fits; else block tiles of 2 warps along the pixels, each up to 4 pixel
  // tiles of 16 (64 accumulators).
  if (!stream_rows(v, t, ci_pad)) {
    // Otherwise 128 pixels a block, the tile's shape (1 x 128, 2 x 64, 4 x 32 or 8 x 16 output rows
    // x columns) the one with the least work per output: computed pixels (with the tile's
    // overhang) times (filter taps + staged input values per pixel).
    double best = 0;
    for (int cols : {128, 64, 32, 16}) {
      const int rows = 8 / (cols / 16);
      const int used_rows = std::min(rows, pow2_at_least(oh));
      const double computed =
          static_cast<double>(ceil_div(ow, cols)) * cols * ceil_div(oh, used_rows) * used_rows;
      const double staged = static_cast<double>(in_extent(used_rows, v.kernel_h, p.stride_h, p.dilation_h)) *
                            in_extent(cols, v.kernel_w, p.stride_w, p.dilation_w) / (used_rows * cols);
      const double cost = computed * (v.kernel_h * v.kernel_w + staged);
      if (best == 0 || cost < best) {
        best = cost;
        t.tile_cols = cols;
        t.tile_rows = used_rows;
      }
    }
    const int m_total = t.tile_rows * t.tile_cols / 16;
    t.m_tiles = std::min(4, m_total);
    t.warps_m = m_total / t.m_tiles;
    // All input channels in one stage with the next row tile's input copied during this one's math
    // (pipeline 1) where it fits; else the largest chunk of channels, double-buffered with its
    // weights (pipeline 2); else 8 channels a stage, one buffer (pipeline 0).
    const auto fits = [&](int pipeline, int chunk) {
      t.pipeline = pipeline;
      t.ci_chunk = chunk;
      set_mma_plan_figures(v, t);
      return t.shared_bytes <= pipelined_bytes(v);
    };
    t.row_tiles = 1;
    if (fits(1, ci_pad)) {
      t.row_tiles = 4;  // an upper bound: the launch picks 1, 2 or 4 from the batch size
    } else {
      bool chunked = false;
      for (int d = ci_pad; d >= 8 && !chunked; d -= 8) chunked = ci_pad % d == 0 && fits(2, d);
      if (!chunked) fits(0, 8);
    }
  }
  // 128 registers a thread at 128 threads for TF32 (64 accumulators + fragments, no spills), 168
  // for 3xTF32: it holds three fragments per operand and spills a few (20-70 bytes) of them even
  // at 255 registers, so it keeps 3 blocks a multiprocessor.
  t.min_blocks = std::max(1, (v.precision == Conv2dPrecision::tf32 ? 512 : 384) / t.threads());
  // Row streaming: up to 255 registers for a warp of 8 x 4 tiles (128 accumulators; 2 blocks of 4
  // warps a multiprocessor on the seed), else as above, at most 4 blocks.
  if (t.pipeline == 3) t.min_blocks = std::clamp((t.m_tiles == 8 ? 256 : 512) / t.threads(), 1, 4);
  if (t.shared_bytes > conv2d_max_shared_bytes(v.target)) {
    throw InvalidArgument("conv2d variant " + v.name() + ": a tile needs " + std::to_string(t.shared_bytes) +
                          " bytes of shared memory (filter too large for the tensor-core kernel)");
  }
  // The unrolled body of the accumulation loop. Filter columns unroll fully (constant fragment
  // offsets) unless kernel_w taps would pass mma_unrolled_mma mma instructions; then one tap an
  // iteration. Then whole filter rows and 8-channel steps, up to mma_unroll_taps taps x steps and
  // mma_unrolled_mma mma (3xTF32 holds three fragments an operand: a longer body spills). NVRTC's time
  // grows with the body (optimizer and ptxas). The mma bound is 3xTF32's 3 x 3 block tile (3 taps x
  // 48 mma): its 5 x 5 and 7 x 7 filters roll. On the H200 rolling cost the 3 x 3 seed
  // 11-15 % (so it does not roll), 5 x 5 filters -4 % / +8 %, and saved 7 x 7 filters 4-12 %
  // (their unrolled body spilled); NVRTC time of the 7 x 7 stem: 0.59 s unrolled, 0.20 s rolled.
  // 3xTF32 also rolls filters wider than 7 columns (none tuned: 10 and 11 columns of 4 x 1 tiles, 120
  // and 132 mma, spilled 36-92 bytes at 168 registers and took NVRTC 0.45-0.51 s; rolled, no spill
  // and 0.18 s).
  const int tap_mma = t.m_tiles * t.n_tiles * (v.precision == Conv2dPrecision::tf32x3 ? 3 : 1);
  const int max_kw = v.precision == Conv2dPrecision::tf32x3 ? conv2d_knobs().tf32x3_kw : v.kernel_w;
  const int unrolled_mma = static_cast<int>(conv2d_tuning(v.target).mma_unrolled_mma);
  const int unroll_taps = static_cast<int>(conv2d_tuning(v.target).mma_unroll_taps);
  t.kw_unroll = v.kernel_w * tap_mma <= unrolled_mma && v.kernel_w <= max_kw ? v.kernel_w : 1;
  const int body_taps = std::max(1, std::min(unroll_taps, unrolled_mma / tap_mma));
  // 3xTF32 keeps filter rows rolled (no tuned 3xTF32 tiling unrolled them; a 7 x 1 filter's 4 rows
  // of 2 x 2 tiles in one warp spilled 20 bytes, rolled none).
  t.kh_unroll = t.kw_unroll < v.kernel_w || v.precision == Conv2dPrecision::tf32x3
                    ? 1
                    : std::clamp(body_taps / v.kernel_w, 1, v.kernel_h);
  int ci_unroll = t.kw_unroll < v.kernel_w || t.kh_unroll < v.kernel_h
                      ? 1
                      : std::clamp(body_taps / (v.kernel_h * v.kernel_w), 1, t.ci_chunk / 8);
  while ((t.ci_chunk / 8) % ci_unroll != 0) --ci_unroll;  // whole unrolled steps, no remainder code
  t.ci_unroll = ci_unroll;
  return t;
}

CompileRequest make_mma_request(const Conv2dVariant& v) {
  const MmaTiling t = mma_tiling(v);  // validates
  const auto c = render_constant;
  std::string src = "// cuinline conv2d variant " + v.name() +
                    "\n#include \"ew_ops.cuh\"\n#include \"conv2d_mma.cuh\"\n\n" +
                    render_conv2d_epilogue(v.epilogue, v.dtype, v.out_channels);
  src += "\nstruct cuinline_conv2d_shape {\n" + render_shape_constants(v);
  src +=
      c("kTileCols", t.tile_cols) + c("kTY", t.tile_rows) + c("kWarpsM", t.warps_m) + c("kWarpsN", t.warps_n);
  src += c("kMT", t.m_tiles) + c("kNT", t.n_tiles) + c("kCiPad", (v.in_channels + 7) / 8 * 8);
  src += c("kCiChunk", t.ci_chunk) + c("kCiUnroll", t.ci_unroll) + c("kKhUnroll", t.kh_unroll);
  src += c("kKwUnroll", t.kw_unroll);
  src += c("kMinBlocks", t.min_blocks) + c("kOutStage", t.out_stage);
  src += c("kPipeline", t.pipeline) + c("kSplit", v.precision == Conv2dPrecision::tf32x3 ? 3 : 1);
  src += c("kSumsFromZero", v.precision == Conv2dPrecision::tf32x3 && conv2d_knobs().tf32x3_chained_sums ? 0 : 1);
  src += "};\n\n";
  const std::string plan = "cuinline_conv2d_mma_detail::Plan<cuinline_conv2d_shape>";
  src += render_plan_checks(plan, t, t.threads());
  src += "static_assert(" + plan + "::kBlockCout == " + std::to_string(t.block_channels()) +
         ", \"channels\");\n";

  CompileRequest request;
  request.name = "conv2d_mma.cu";
  request.source = std::move(src);
  // conv2d_mma.cuh and the files it includes (conv2d.cuh, conv2d_mma_plan.cuh).
  request.headers = cuinline::detail::template_headers({"ew_common.cuh", "ew_ops.cuh", "conv2d_mma.cuh"});
  // No contraction: bias and epilogue round after every step like the separate PyTorch ops, and
  // the 3xTF32 split (x - hi) stays exact.
  request.options = {"--fmad=false", "-minimal"};  // -minimal: see elementwise.cpp
  request.name_expressions = {kernel_name(v)};
  return request;
}

}  // namespace cuinline::ops::conv2d_impl
