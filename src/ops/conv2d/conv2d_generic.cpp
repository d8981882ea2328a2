// conv2d on the general direct kernel (kernel_templates/conv2d_generic.cuh): every f16 and bf16
// variant and every variant with a channels-last tensor. The tiling chosen on the host and the
// rendering of the template into one CompileRequest per variant.
#include <algorithm>
#include <cuinline/error.hpp>
#include <string>

#include "ops/conv2d/conv2d_internal.hpp"
#include "ops/elementwise/render.hpp"
#include "templates/template_source.hpp"

namespace cuinline::ops::conv2d_impl {
namespace {

// Output channels a thread accumulates: each input value loaded is used this many times.
constexpr int kMaxCoTile = 8;

int co_tile(const Conv2dVariant& v) {
  if (v.params.groups == 1) return std::min(v.out_channels, kMaxCoTile);
  // Grouped: a thread's channels within one group (they read the same input channels).
  const int per_group = v.out_channels / v.params.groups;
  int c = kMaxCoTile;
  while (per_group % c != 0) c /= 2;
  return c;
}

// Threads a block: 128, fewer (whole warps) for planes of fewer pixels.
int block_threads(const Conv2dVariant& v) {
  const std::int64_t pixels = v.out_height() * v.out_width();
  return static_cast<int>(std::clamp<std::int64_t>((pixels + 31) / 32 * 32, 32, 128));
}

}  // namespace

GenericTiling generic_tiling(const Conv2dVariant& v) {
  v.validate();
  GenericTiling t;
  // Depthwise (one input channel a group) with a channels-last input: channels fastest, so that a
  // warp's loads are consecutive channels of one pixel (a pixel-fast warp reads one channel of 32
  // pixels: 32 sectors a load, each used once). With more channels a group the pixel-fast threads
  // use each sector for all of them, and their weight loads are one address a warp: ResNeXt-like
  // 32x256x28² g32 channels-last ran 0.53 ms (f16) channel-fast (H100).
  // Depthwise with filters of up to 49 taps (7 x 7; their weights in registers): a thread computes up to 8
  // rows of one column (fewer for row strides of 2 and more, whose input rows serve fewer outputs),
  // columns fastest for an NCHW input, channels fastest for a channels-last one; each input row
  // loaded serves all the thread's rows it reaches. (A pixel-fast thread loads every tap's input and
  // weight: KernelBench's 16x64x512² 3x3 depthwise took 2.3 ms in f32 and in f16, 0.82 / 0.57
  // row-fast; H100.) Larger depthwise filters with a channels-last input: channel-fast.
  const bool depthwise = v.params.groups > 1 && v.in_channels == v.params.groups;
  t.order = !depthwise                            ? GenericOrder::pixels
            : v.kernel_h * v.kernel_w <= 49         ? GenericOrder::row_fast
            : v.input_layout == Conv2dLayout::nhwc ? GenericOrder::channel_fast
                                                    : GenericOrder::pixels;
  t.block_threads = block_threads(v);
  t.pixels_per_thread = 1;
  t.channels_per_thread = co_tile(v);
  t.row_tiles = 1;
  const std::int64_t pixels = v.out_height() * v.out_width();
  if (t.channel_fast()) {
    t.block_threads = 128;
    t.channels_per_thread = 1;
    // Up to 4 consecutive columns a thread, its weights loaded once (filters of up to 25 taps: the
    // registers they take).
    t.pixels_per_thread = v.kernel_h * v.kernel_w <= 25 ? static_cast<int>(std::min<std::int64_t>(4, v.out_width())) : 1;
    const std::int64_t col_groups = (v.out_width() + t.pixels_per_thread - 1) / t.pixels_per_thread;
    const std::int64_t items = v.out_height() * col_groups * v.out_channels;
    t.tiles_x = static_cast<int>((items + t.block_threads - 1) / t.block_threads);
    if ((items + t.block_threads - 1) / t.block_threads > 0x7fffffff) {
      throw InvalidArgument("conv2d variant " + v.name() + ": more than 2^31 - 1 blocks an image");
    }
  } else if (t.row_fast()) {
    t.block_threads = 128;
    // A channels-last f16 / bf16 input (one output channel a group, an even count, up to 9 taps): two
    // adjacent channels a thread, read as one 32-bit word (MobileNetV2's 3x3 at 56², f16: 0.0964 ->
    // 0.054 ms; EfficientNet's 5x5 went 0.041 -> 0.076 with pairs, twice the weights in registers:
    // one channel there; H100).
    t.channels_per_thread = v.input_layout == Conv2dLayout::nhwc && dtype_size(v.dtype) == 2 &&
                                    v.out_channels == v.in_channels && v.in_channels % 2 == 0 &&
                                    v.kernel_h * v.kernel_w <= 9
                                ? 2
                                : 1;
    const int rows = v.params.stride_h == 1 ? 8 : v.params.stride_h == 2 ? 4 : 2;
    t.pixels_per_thread = static_cast<int>(std::min<std::int64_t>(rows, v.out_height()));
    const std::int64_t row_groups = (v.out_height() + t.pixels_per_thread - 1) / t.pixels_per_thread;
    const std::int64_t items = std::int64_t{v.out_channels / t.channels_per_thread} * row_groups * v.out_width();
    if ((items + t.block_threads - 1) / t.block_threads > 0x7fffffff) {
      throw InvalidArgument("conv2d variant " + v.name() + ": more than 2^31 - 1 blocks an image");
    }
    t.tiles_x = static_cast<int>((items + t.block_threads - 1) / t.block_threads);
  } else {
    t.tiles_x = static_cast<int>((pixels + t.block_threads - 1) / t.block_threads);
  }
  t.tiles_y = 1;
  t.shared_bytes = 0;
  return t;
}

CompileRequest make_generic_request(const Conv2dVariant& v) {
  const GenericTiling t = generic_tiling(v);
  const auto c = render_constant;
  std::string src = "// cuinline conv2d variant " + v.name() +
                    "\n#include \"ew_ops.cuh\"\n#include \"conv2d_generic.cuh\"\n\n";
  src += render_conv2d_epilogue(v.epilogue, v.dtype, v.out_channels);
  src += "\nstruct cuinline_conv2d_shape {\n  typedef " + std::string(cuinline::detail::storage_type(v.dtype)) +
         " storage;\n";
  src += render_shape_constants(v);
  src += c("kInNhwc", v.input_layout == Conv2dLayout::nhwc ? 1 : 0) +
         c("kWNhwc", v.weight_layout == Conv2dLayout::nhwc ? 1 : 0) +
         c("kOutNhwc", v.output_layout == Conv2dLayout::nhwc ? 1 : 0);
  src += c("kThreads", t.block_threads) + c("kCoTile", t.channels_per_thread);
  src += c("kGroups", v.params.groups);
  src += c("kChannelFast", t.channel_fast() ? 1 : 0) + c("kPixPerThread", t.channel_fast() ? t.pixels_per_thread : 1);
  src += c("kRowFast", t.row_fast() ? 1 : 0) + c("kRowsPerThread", t.row_fast() ? t.pixels_per_thread : 1);
  src += "};\n\n";
  src += render_plan_checks("cuinline_conv2d_generic_detail::Plan<cuinline_conv2d_shape>", t, t.threads());

  CompileRequest request;
  request.name = "conv2d.cu";
  request.source = std::move(src);
  for (const char* header : {"ew_common.cuh", "ew_ops.cuh", "conv2d_generic.cuh"}) {
    request.headers.push_back({header, detail::template_text(header)});
  }
  // As the fp32 direct kernel: explicit __fmaf_rn in the sums, no contraction in the epilogue.
  request.options = {"--fmad=false", "-minimal"};
  request.name_expressions = {kGenericKernel};
  return request;
}

}  // namespace cuinline::ops::conv2d_impl
