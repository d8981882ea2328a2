// fp32 conv2d variants computed by Winograd's F(2 x 2, 3 x 3) (kernel_templates/conv2d_winograd.cuh): which variants qualify, their tiling and the rendering of
// the template.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "conv2d_winograd_plan.cuh"
#include "ops/conv2d/conv2d_internal.hpp"
#include "ops/conv2d/tuning.hpp"
#include "templates/template_source.hpp"

namespace cuinline::ops::conv2d_impl {
namespace {

// A warp is 8 tile lanes x 4 channel lanes of 4 output channels each (16 channels); the template's
// column fold keeps a + m^2 = 8 accumulators per tile and channel (a = m + 2 = 4). 2 tiles a
// thread (64 accumulators), 8 or 4 warps a block (block_warps). 4 tiles a thread (8 loads for 64
// products instead of 6 for 32) ran slower: seed 0.479 / 0.440 ms at 8 / 12 warps an SM against
// 0.426 with 2 tiles (a standalone harness of the template's tilings, H200).
constexpr int kChannelsPerThread = 4;
constexpr int kTileLanes = 8;
constexpr int kWarpChannels = (32 / kTileLanes) * kChannelsPerThread;
// The block's transformed weights (all input channels) stay in shared memory: a^2 floats per
// (input, output channel), at most conv2d_tuning's winograd_max_weight_bytes.

constexpr int kM = 2;  // the output tile's side
constexpr int kTilesPerThread = 2;
// Warps a block: with all 4 channel warps 8 (2 along the tiles, 32 tiles) for an
// NCHW output, 4 (16 tiles) for a channels-last one; else 4. Seed, library, L2 flushed, H100,
// products on tensor cores: NCHW 0.3976 ms with 2 x 4 warps (4 tile rows a block)
// against 0.4901 with 1 x 4 (4 rows; 0.5446 with 8); channels-last output 0.4142-0.4195 with 1 x 4
// against 0.4282-0.4335 with 2 x 4.
int block_warps(const Conv2dVariant& v, int warps_c) {
  if (warps_c != 4) return 4;
  if (const int w = conv2d_knobs().winograd_warps; w != 0) return w;
  return v.output_layout == Conv2dLayout::nhwc ? 4 : 8;
}

std::int64_t weight_bytes(const Conv2dVariant& v, int warps_c) {
  return std::int64_t{v.in_channels} * (kM + 2) * (kM + 2) * kWarpChannels * warps_c * 4;
}

}  // namespace

bool winograd_applies(const Conv2dVariant& v) {
  const Conv2dParams& p = v.params;
  // (NCHW input and weight; the output may be channels-last: the kernel writes either layout.)
  Conv2dVariant nchw_out = v;
  nchw_out.output_layout = Conv2dLayout::nchw;
  if (v.precision != Conv2dPrecision::fp32 || nchw_out.uses_generic_kernel() || !conv2d_knobs().winograd) {
    return false;
  }
  if (v.kernel_h != 3 || v.kernel_w != 3 || p.stride_h != 1 || p.stride_w != 1 || p.dilation_h != 1 ||
      p.dilation_w != 1) {
    return false;
  }
  // Measured on an H200 (docs/conv2d.md, "f32: Winograd"): with 8 input channels (one stage a tile row)
  // 1.18-1.5x faster than the direct kernel; with 16-64 (2-8 stages, each transformed and
  // synchronized on its own) 1.4-2.3x slower. Fewer than 8 channels leave few products per
  // transform (not measured; the direct kernel keeps them).
  return v.in_channels == 8 && v.out_channels >= 16 && weight_bytes(v, 1) <= conv2d_tuning(v.target).winograd_max_weight_bytes &&
         winograd_tiling(v).shared_bytes <= conv2d_max_shared_bytes(v.target);
}

WinogradTiling winograd_tiling(const Conv2dVariant& v) {
  constexpr int m = kM;
  const int oh = static_cast<int>(v.out_height());
  const int ow = static_cast<int>(v.out_width());
  const int tiles_across = ceil_div(ow, m);
  const int warp_tiles = kTileLanes * kTilesPerThread;
  WinogradTiling t;
  t.m = m;
  // The products in 3xTF32 on tensor cores: 0.3934 ms on the seed against 0.4912 in fp32 FMA
  // (channels-last output 0.4161 against 0.5046; H200, L2 flushed), as accurate (rel L2 1.65e-7
  // against 1.36e-7). FMA products only where there are no TF32 tensor cores (sm_75).
  t.tc_products = v.in_channels % 8 == 0 && v.target != Conv2dTarget::sm75;
  // Warps along the channels: enough for Cout (up to 4), fewer where the weights would not fit;
  // the rest of the block's warps along the tiles, fewer where the row is narrow.
  int warps_c = std::min(4, pow2_at_least(ceil_div(v.out_channels, kWarpChannels)));
  while (warps_c > 1 && weight_bytes(v, warps_c) > conv2d_tuning(v.target).winograd_max_weight_bytes) warps_c /= 2;
  int warps_x = std::max(1, block_warps(v, warps_c) / warps_c);
  while (warps_x > 1 && (warps_x / 2) * warp_tiles >= tiles_across) warps_x /= 2;
  t.tile_lanes = kTileLanes;
  t.warps_x = warps_x;
  t.warps_c = warps_c;
  t.pixels_per_thread = m * kTilesPerThread;  // output columns of a thread
  t.channels_per_thread = kChannelsPerThread;
  t.ci_chunk = v.in_channels;  // one stage a tile row (winograd_applies: 8 input channels)
  // The channel loop rolled: NVRTC compiles the seed's variant in ~45 % of the time of the unrolled
  // one (which ran 0.421 against 0.444 ms in the harness, H200; unrolled 4: 0.433).
  t.ci_unroll = 1;
  // 16 resident warps per multiprocessor asked of ptxas (the seed's F(2x2): 2 blocks of 8 warps). With the column fold the seed's F(2x2) needs 105 registers whatever
  // is asked, and runs 0.426-0.428 ms at 8-16 (harness, H200; the 16-accumulator form
  // before it: 168 registers, 0.437 at 8 warps, its best); asking for 16 keeps other shapes from
  // growing past it.
  t.min_blocks = std::max(1, 16 / (warps_x * warps_c));
  t.row_tiles = 8;  // an upper bound: the launch picks 8, 4, 2 or 1 from the batch size
  // Shared memory and grid from the plan (conv2d_winograd_plan.cuh: U, V, one raw input stage);
  // fewer warps along the tiles where the bytes are more than the target has (the seed's 2 x 4
  // warps: 82 KiB, past sm_75's 64).
  namespace wino_plan = cuinline_conv2d_wino_detail;
  const auto figures = [&] {
    return wino_plan::winograd_plan_figures(wino_plan::WinogradPlanShape{
        v.in_channels, v.width, v.params.pad_w, oh, ow, t.tile_lanes, t.pixels_per_thread / m, t.warps_x,
        t.warps_c, t.channels_per_thread, v.output_aligned ? 1 : 0});
  };
  while (t.warps_x > 1 && figures().smem_bytes > conv2d_max_shared_bytes(v.target)) {
    t.warps_x /= 2;
    t.min_blocks = std::max(1, 16 / (t.warps_x * warps_c));
  }
  const wino_plan::WinogradPlanFigures f = figures();
  t.shared_bytes = static_cast<unsigned>(f.smem_bytes);
  t.tiles_x = f.tiles_x;
  t.tiles_y = f.tiles_y;
  return t;
}

CompileRequest make_winograd_request(const Conv2dVariant& v) {
  const WinogradTiling t = winograd_tiling(v);
  const auto c = render_constant;
  std::string src = "// cuinline conv2d variant " + v.name() + " (Winograd F(2x2, 3x3))\n" + render_target_defines(v) + "#include \"ew_ops.cuh\"\n#include \"conv2d_winograd.cuh\"\n\n" +
                    render_conv2d_epilogue(v.epilogue, v.dtype, v.out_channels);
  src += "\nstruct cuinline_conv2d_shape {\n" + render_shape_constants(v);
  src += c("kTT", t.pixels_per_thread / t.m) + c("kTCo", t.channels_per_thread) + c("kLX", t.tile_lanes);
  src += c("kWX", t.warps_x) + c("kWC", t.warps_c) + c("kCiChunk", t.ci_chunk);
  src += c("kCiUnroll", t.ci_unroll) + c("kMinBlocks", t.min_blocks);
  src += c("kWinoTC", t.tc_products ? 1 : 0) + c("kOutNhwc", v.output_layout == Conv2dLayout::nhwc ? 1 : 0);
  src += c("kOutAligned", v.output_aligned ? 1 : 0);
  src += "};\n\n";
  const std::string plan = "cuinline_conv2d_wino_detail::WPlan<cuinline_conv2d_shape>";
  src += render_plan_checks(plan, t, t.threads());
  src += "static_assert(" + plan + "::kBlockCout == " + std::to_string(t.block_channels()) +
         ", \"channels\");\n";

  CompileRequest request;
  request.name = "conv2d_winograd.cu";
  request.source = std::move(src);
  // conv2d_winograd.cuh and the files it includes (conv2d.cuh, conv2d_plan.cuh).
  request.headers = cuinline::detail::template_headers({"ew_common.cuh", "ew_ops.cuh", "conv2d_winograd.cuh"});
  // The products accumulate with explicit __fmaf_rn; no contraction elsewhere, so the transforms,
  // bias and epilogue round after every step. ptxas -O1: its default -O3 schedule ran this kernel
  // slower (seed, harness, H200: 0.444 ms against 0.530 rolled, 0.421 against 0.462 unrolled) and
  // takes longer to compile.
  request.options = {"--fmad=false", "--ptxas-options=-O1", "-minimal"};  // -minimal: see elementwise.cpp
  request.name_expressions = {kWinogradKernel};
  return request;
}

}  // namespace cuinline::ops::conv2d_impl
