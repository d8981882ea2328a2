// fp32 conv2d variants computed by Winograd's F(2 x 2, 3 x 3) (kernel_templates/conv2d_winograd.cuh):
// which variants qualify, their tiling and the rendering of the template.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "ops/conv2d/conv2d_internal.hpp"
#include "templates/template_source.hpp"

namespace cuinline::ops::conv2d_impl {
namespace {

// Per thread: 2 tiles (2 x 2 outputs each) x 4 output channels x 16 transformed positions = 128
// accumulators. A warp is 8 tile lanes x 4 channel lanes: 16 tiles (32 output columns) x 16 channels.
constexpr int kTilesPerThread = 2;
constexpr int kChannelsPerThread = 4;
constexpr int kTileLanes = 8;
constexpr int kWarpTiles = kTileLanes * kTilesPerThread;
constexpr int kWarpChannels = (32 / kTileLanes) * kChannelsPerThread;
constexpr int kBlockWarps = 4;
// The block's transformed weights (all input channels) stay in shared memory: 16 floats per
// (input, output channel).
constexpr std::int64_t kMaxWeightBytes = 64 * 1024;
constexpr int kMaxChunk = 8;  // input channels per stage (the unrolled accumulation body)

bool disabled_by_environment() {
  static const bool off = [] {
    const char* e = std::getenv("CUINLINE_CONV2D_WINOGRAD");
    return e != nullptr && std::strcmp(e, "0") == 0;
  }();
  return off;
}

std::int64_t weight_bytes(const Conv2dVariant& v, int warps_c) {
  return std::int64_t{v.in_channels} * 16 * kWarpChannels * warps_c * 4;
}

}  // namespace

bool winograd_applies(const Conv2dVariant& v) {
  const Conv2dParams& p = v.params;
  // (NCHW input and weight; the output may be channels-last: the kernel writes either layout.)
  Conv2dVariant nchw_out = v;
  nchw_out.output_layout = Conv2dLayout::nchw;
  if (v.precision != Conv2dPrecision::fp32 || nchw_out.uses_generic_kernel() || disabled_by_environment()) return false;
  if (v.kernel_h != 3 || v.kernel_w != 3 || p.stride_h != 1 || p.stride_w != 1 || p.dilation_h != 1 ||
      p.dilation_w != 1) {
    return false;
  }
  // Measured on an H200 (2026-11-21, docs/conv2d.md): with 8 input channels (one stage a tile row)
  // 1.18-1.5x faster than the direct kernel; with 16-64 (2-8 stages, each transformed and
  // synchronized on its own) 1.4-2.3x slower. Fewer than 8 channels leave few products per
  // transform (not measured; the direct kernel keeps them).
  return v.in_channels == 8 && v.out_channels >= 16 && weight_bytes(v, 1) <= kMaxWeightBytes;
}

Conv2dTiling winograd_tiling(const Conv2dVariant& v) {
  const int oh = static_cast<int>(v.out_height());
  const int ow = static_cast<int>(v.out_width());
  const int tiles_across = (ow + 1) / 2;
  Conv2dTiling t;
  t.winograd = true;
  t.pipeline = 4;
  // Warps along the channels: enough for Cout (up to 4), fewer where the weights would not fit;
  // the rest of the block's 4 warps along the tiles, fewer where the row is narrow.
  int warps_c = std::min(kBlockWarps, pow2_at_least(ceil_div(v.out_channels, kWarpChannels)));
  while (warps_c > 1 && weight_bytes(v, warps_c) > kMaxWeightBytes) warps_c /= 2;
  int warps_x = kBlockWarps / warps_c;
  while (warps_x > 1 && (warps_x / 2) * kWarpTiles >= tiles_across) warps_x /= 2;
  t.threads_x = kTileLanes;
  t.threads_y = warps_x;
  t.channel_groups = warps_c;
  t.pixels_per_thread = 2 * kTilesPerThread;
  t.channels_per_thread = kChannelsPerThread;
  t.ci_chunk = 1;
  for (int d = std::min(kMaxChunk, v.in_channels); d >= 1; --d) {
    if (v.in_channels % d == 0) {
      t.ci_chunk = d;
      break;
    }
  }
  // The channel loop rolled: NVRTC compiles the seed's variant in ~45 % of the time of the unrolled
  // one (which ran 0.421 against 0.444 ms in the harness, H200, 2026-11-21; unrolled 4: 0.433).
  t.ci_unroll = 1;
  // ~8 resident warps per multiprocessor, registers capped at 255: 0.436 ms against 0.444 with 12
  // warps (168 registers) on the seed in the same harness run.
  t.min_blocks = std::max(1, 8 / (warps_x * warps_c));
  const int block_tiles = warps_x * kWarpTiles;
  t.tiles_x = ceil_div(tiles_across, block_tiles);
  t.tiles_y = ceil_div(oh, 2);
  t.row_tiles = 8;  // an upper bound: the launch picks 8, 4, 2 or 1 from the batch size
  // Shared memory, as WPlan<S> lays it out: U, V, two raw input stages.
  const std::int64_t pitch = (2 * block_tiles + 2 + 3) / 4 * 4;
  const std::int64_t floats = std::int64_t{v.in_channels} * 16 * t.block_channels() +
                              std::int64_t{t.ci_chunk} * 16 * block_tiles + 2 * t.ci_chunk * 4 * pitch;
  t.shared_bytes = static_cast<unsigned>(floats * 4);
  return t;
}

CompileRequest make_winograd_request(const Conv2dVariant& v) {
  const Conv2dTiling t = winograd_tiling(v);
  const auto c = render_constant;
  std::string src = "// cuinline conv2d variant " + v.name() +
                    " (Winograd F(2x2, 3x3))\n#include \"ew_ops.cuh\"\n#include \"conv2d_winograd.cuh\"\n\n" +
                    render_conv2d_epilogue(v.epilogue);
  src += "\nstruct cuinline_conv2d_shape {\n" + render_shape_constants(v);
  src += c("kTT", kTilesPerThread) + c("kTCo", t.channels_per_thread) + c("kLX", t.threads_x);
  src += c("kWX", t.threads_y) + c("kWC", t.channel_groups) + c("kCiChunk", t.ci_chunk);
  src += c("kCiUnroll", t.ci_unroll) + c("kMinBlocks", t.min_blocks);
  // (Only where set: NCHW variants keep their sources and cache keys.)
  if (v.output_layout == Conv2dLayout::nhwc) src += c("kOutNhwc", 1);
  if (!v.output_aligned) src += c("kOutAligned", 0);  // scalar NCHW stores
  src += "};\n\n";
  const std::string plan = "cuinline_conv2d_wino_detail::WPlan<cuinline_conv2d_shape>";
  src += render_plan_checks(plan, t);
  src += "static_assert(" + plan + "::kBlockCout == " + std::to_string(t.block_channels()) +
         ", \"channels\");\n";

  CompileRequest request;
  request.name = "conv2d_winograd.cu";
  request.source = std::move(src);
  for (const char* header : {"ew_common.cuh", "ew_ops.cuh", "conv2d.cuh", "conv2d_winograd.cuh"}) {
    request.headers.push_back({header, cuinline::detail::template_text(header)});
  }
  // The products accumulate with explicit __fmaf_rn; no contraction elsewhere, so the transforms,
  // bias and epilogue round after every step. ptxas -O1: its default -O3 schedule ran this kernel
  // slower (seed, harness, H200: 0.444 ms against 0.530 rolled, 0.421 against 0.462 unrolled) and
  // takes longer to compile.
  request.options = {"--fmad=false", "--ptxas-options=-O1", "-minimal"};  // -minimal: see elementwise.cpp
  request.name_expressions = {kWinogradKernel};
  return request;
}

}  // namespace cuinline::ops::conv2d_impl
