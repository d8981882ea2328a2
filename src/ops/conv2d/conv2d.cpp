// conv2d variants: validation, names, targets, and what every kernel's rendering shares (the shape
// constants, the epilogue functor, the target defines, the plan checks). The f32 direct kernel's
// planner is conv2d_direct.cpp.
#include <cuinline/conv2d.hpp>
#include <cuinline/error.hpp>
#include <string>

#include "ops/conv2d/conv2d_internal.hpp"
#include "ops/elementwise/render.hpp"

namespace cuinline::ops {
namespace {


std::string describe_params(const Conv2dParams& p) {
  // (Only groups > 1 is named: the names and keys of other variants are unchanged.)
  return "s" + std::to_string(p.stride_h) + "x" + std::to_string(p.stride_w) + ",p" +
         std::to_string(p.pad_h) + "x" + std::to_string(p.pad_w) + ",d" + std::to_string(p.dilation_h) + "x" +
         std::to_string(p.dilation_w) + (p.groups != 1 ? ",g" + std::to_string(p.groups) : std::string());
}

bool is_identity(const Op& op) {
  return op.steps.empty() && op.expression.empty();
}

}  // namespace

int conv2d_epilogue_operands(const Op& epilogue) noexcept {
  return is_identity(epilogue) ? 0 : epilogue.min_inputs() - 1;
}

const char* to_string(Conv2dPrecision precision) noexcept {
  switch (precision) {
    case Conv2dPrecision::fp32:
      return "fp32";
    case Conv2dPrecision::tf32:
      return "tf32";
    case Conv2dPrecision::tf32x3:
      return "tf32x3";
  }
  return "unknown";
}

Conv2dPrecision parse_conv2d_precision(std::string_view name) {
  for (Conv2dPrecision p : {Conv2dPrecision::fp32, Conv2dPrecision::tf32, Conv2dPrecision::tf32x3}) {
    if (name == to_string(p)) return p;
  }
  throw InvalidArgument("unknown conv2d precision '" + std::string(name) + "' (fp32, tf32, tf32x3)");
}

const char* to_string(Conv2dTarget target) noexcept {
  switch (target) {
    case Conv2dTarget::sm90:
      return "sm90";
    case Conv2dTarget::sm80:
      return "sm80";
    case Conv2dTarget::sm86:
      return "sm86";
    case Conv2dTarget::sm75:
      return "sm75";
  }
  return "unknown";
}

Conv2dTarget conv2d_target_for(const Arch& arch) noexcept {
  const int n = arch.number();
  if (n >= 120) return Conv2dTarget::sm86;             // sm_120, sm_121: 99 KiB a block
  if (n >= 90) return Conv2dTarget::sm90;              // sm_90, sm_100, sm_103, sm_110: 227 KiB
  if (n == 80 || n == 87) return Conv2dTarget::sm80;   // 163 KiB
  if (n >= 86) return Conv2dTarget::sm86;              // sm_86, sm_89: 99 KiB
  if (n >= 80) return Conv2dTarget::sm80;
  return Conv2dTarget::sm75;                           // sm_75: 64 KiB
}

unsigned conv2d_max_shared_bytes(Conv2dTarget target) noexcept {
  // cudaDevAttrMaxSharedMemoryPerBlockOptin of each class (the CUDA programming guide's table).
  switch (target) {
    case Conv2dTarget::sm80:
      return 163 * 1024;
    case Conv2dTarget::sm86:
      return 99 * 1024;
    case Conv2dTarget::sm75:
      return 64 * 1024;
    case Conv2dTarget::sm90:
      break;
  }
  return 227 * 1024;
}

Conv2dVariant conv2d_variant_for_arch(const Conv2dVariant& variant, const Arch& arch) {
  Conv2dVariant v = variant;
  v.target = conv2d_target_for(arch);
  return v;
}

const char* to_string(Conv2dLayout layout) noexcept {
  switch (layout) {
    case Conv2dLayout::nchw:
      return "nchw";
    case Conv2dLayout::nhwc:
      return "nhwc";
  }
  return "unknown";
}

Conv2dLayout parse_conv2d_layout(std::string_view name) {
  for (Conv2dLayout l : {Conv2dLayout::nchw, Conv2dLayout::nhwc}) {
    if (name == to_string(l)) return l;
  }
  throw InvalidArgument("unknown conv2d layout '" + std::string(name) + "' (nchw, nhwc)");
}

std::int64_t conv2d_out_extent(std::int64_t in, int kernel, int stride, int pad, int dilation) noexcept {
  if (stride <= 0) return 0;
  const std::int64_t span =
      in + 2 * static_cast<std::int64_t>(pad) - static_cast<std::int64_t>(dilation) * (kernel - 1) - 1;
  if (span < 0) return 0;
  return span / stride + 1;
}

std::int64_t Conv2dVariant::out_height() const noexcept {
  return conv2d_out_extent(height, kernel_h, params.stride_h, params.pad_h, params.dilation_h);
}
std::int64_t Conv2dVariant::out_width() const noexcept {
  return conv2d_out_extent(width, kernel_w, params.stride_w, params.pad_w, params.dilation_w);
}

std::string Conv2dVariant::name() const {
  std::string s = "conv2d<" + std::string(cuinline::to_string(dtype)) + "," + std::to_string(in_channels) +
                  "x" + std::to_string(height) + "x" + std::to_string(width) + "," +
                  std::to_string(out_channels) + "x" + std::to_string(kernel_h) + "x" +
                  std::to_string(kernel_w) + "," + describe_params(params);
  if (has_bias) s += ",bias";
  if (has_residual) s += ",residual";
  if (precision != Conv2dPrecision::fp32) s += std::string(",") + to_string(precision);
  // Only a channels-last tensor is named: the names (and cache keys) of NCHW variants are unchanged.
  if (input_layout != Conv2dLayout::nchw) s += std::string(",x:") + to_string(input_layout);
  if (weight_layout != Conv2dLayout::nchw) s += std::string(",w:") + to_string(weight_layout);
  if (output_layout != Conv2dLayout::nchw) s += std::string(",y:") + to_string(output_layout);
  // Only a misaligned pointer is named (f16 / bf16 on tensor cores; conv2d_variant_for sets these
  // only where they change the kernel).
  if (!inputs_aligned) s += ",xw:unaligned";
  if (!output_aligned) s += ",y:unaligned";
  if (target != Conv2dTarget::sm90) s += std::string(",target:") + to_string(target);
  s += ">[" + (is_identity(epilogue) ? std::string("identity") : epilogue.describe()) + "]";
  return s;
}

void Conv2dVariant::validate() const {
  auto fail = [&](const std::string& what) { throw InvalidArgument("conv2d variant: " + what); };
  if (dtype != DType::f32 && dtype != DType::f16 && dtype != DType::bf16 && dtype != DType::f64)
    fail(std::string("dtype ") + cuinline::to_string(dtype) + " is not supported (f32, f16, bf16, f64)");
  for (Conv2dLayout l : {input_layout, weight_layout, output_layout}) {
    if (l != Conv2dLayout::nchw && l != Conv2dLayout::nhwc)
      fail("unknown layout " + std::to_string(static_cast<int>(l)));
  }
  if (target != Conv2dTarget::sm90 && target != Conv2dTarget::sm80 && target != Conv2dTarget::sm86 &&
      target != Conv2dTarget::sm75) {
    fail("unknown target " + std::to_string(static_cast<int>(target)));
  }
  if (precision != Conv2dPrecision::fp32 && precision != Conv2dPrecision::tf32 &&
      precision != Conv2dPrecision::tf32x3) {
    fail("unknown precision mode " + std::to_string(static_cast<int>(precision)));
  }
  if (in_channels <= 0 || height <= 0 || width <= 0 || out_channels <= 0 || kernel_h <= 0 || kernel_w <= 0) {
    fail("sizes must be positive (" + std::to_string(in_channels) + "x" + std::to_string(height) + "x" +
         std::to_string(width) + " input, " + std::to_string(out_channels) + "x" + std::to_string(kernel_h) +
         "x" + std::to_string(kernel_w) + " filters)");
  }
  // F.conv2d has no limits of its own; these keep every index the kernels compute within 32 bits
  // and the grid's channel blocks within 65535 (a ViT-B/32 patch embedding's 32 x 32 filter with
  // stride 32, DeepLab's ASPP dilations of 18-36, FCN's padding of 100 are all inside them).
  if (in_channels > kMaxConv2dChannels || out_channels > kMaxConv2dChannels || height > kMaxConv2dExtent ||
      width > kMaxConv2dExtent || kernel_h > kMaxConv2dExtent || kernel_w > kMaxConv2dExtent) {
    fail("sizes beyond what the kernels index (Cin, Cout <= " + std::to_string(kMaxConv2dChannels) +
         ", H, W, KH, KW <= " + std::to_string(kMaxConv2dExtent) + "; got " + std::to_string(in_channels) + "x" +
         std::to_string(height) + "x" + std::to_string(width) + " input, " + std::to_string(out_channels) + "x" +
         std::to_string(kernel_h) + "x" + std::to_string(kernel_w) + " filters)");
  }
  const Conv2dParams& p = params;
  if (p.stride_h <= 0 || p.stride_w <= 0 || p.dilation_h <= 0 || p.dilation_w <= 0) {
    fail("stride and dilation must be positive");
  }
  if (p.pad_h < 0 || p.pad_w < 0) fail("padding must not be negative");
  if (p.groups < 1) fail("groups must be positive, got " + std::to_string(p.groups));
  if (in_channels % p.groups != 0 || out_channels % p.groups != 0) {
    fail("groups " + std::to_string(p.groups) + " must divide the input channels (" + std::to_string(in_channels) +
         ") and the output channels (" + std::to_string(out_channels) + ")");
  }
  if (p.stride_h > kMaxConv2dExtent || p.stride_w > kMaxConv2dExtent || p.dilation_h > kMaxConv2dExtent ||
      p.dilation_w > kMaxConv2dExtent || p.pad_h > kMaxConv2dExtent || p.pad_w > kMaxConv2dExtent) {
    fail("stride, dilation and padding must be at most " + std::to_string(kMaxConv2dExtent) + " (got stride " +
         std::to_string(p.stride_h) + "x" + std::to_string(p.stride_w) + ", padding " + std::to_string(p.pad_h) +
         "x" + std::to_string(p.pad_w) + ", dilation " + std::to_string(p.dilation_h) + "x" +
         std::to_string(p.dilation_w) + ")");
  }
  // The filter's reach, in 64 bits: (KH - 1) x dilation + 1 may pass 2^31 before the check below.
  const std::int64_t reach_h = std::int64_t{kernel_h - 1} * p.dilation_h + 1;
  const std::int64_t reach_w = std::int64_t{kernel_w - 1} * p.dilation_w + 1;
  if (reach_h > height + std::int64_t{2} * p.pad_h || reach_w > width + std::int64_t{2} * p.pad_w) {
    fail("the output is empty: the filter's reach (" + std::to_string(reach_h) + "x" + std::to_string(reach_w) +
         ") exceeds the padded input (" + std::to_string(height + std::int64_t{2} * p.pad_h) + "x" +
         std::to_string(width + std::int64_t{2} * p.pad_w) + ")");
  }
  constexpr std::int64_t kIndexLimit = (std::int64_t{1} << 31) - 1;
  if (static_cast<std::int64_t>(in_channels) * height * width > kIndexLimit) {
    fail("one image has more than 2^31 - 1 elements");
  }
  if (static_cast<std::int64_t>(out_channels) * out_height() * out_width() > kIndexLimit) {
    fail("one output image has more than 2^31 - 1 elements (" + std::to_string(out_channels) + "x" +
         std::to_string(out_height()) + "x" + std::to_string(out_width()) + ")");
  }
  if (static_cast<std::int64_t>(out_channels) * (in_channels / p.groups) * kernel_h * kernel_w > kIndexLimit) {
    fail("the weight has more than 2^31 - 1 elements");
  }
  if (!is_identity(epilogue)) {
    epilogue.validate();
    if (epilogue.outputs() != 1) {
      fail("the epilogue " + epilogue.describe() + " has " + std::to_string(epilogue.outputs()) +
           " outputs; a conv2d epilogue has one");
    }
    if (conv2d_epilogue_operands(epilogue) > kMaxConv2dChannelOperands) {
      fail("the epilogue " + epilogue.describe() + " reads " + std::to_string(conv2d_epilogue_operands(epilogue)) +
           " per-channel operands; at most " + std::to_string(kMaxConv2dChannelOperands) + " are supported");
    }
  }
}

bool operator==(const Conv2dVariant& a, const Conv2dVariant& b) noexcept {
  return a.in_channels == b.in_channels && a.height == b.height && a.width == b.width &&
         a.out_channels == b.out_channels && a.kernel_h == b.kernel_h && a.kernel_w == b.kernel_w &&
         a.params == b.params && a.has_bias == b.has_bias && a.has_residual == b.has_residual && a.precision == b.precision &&
         a.dtype == b.dtype && a.input_layout == b.input_layout && a.weight_layout == b.weight_layout &&
         a.output_layout == b.output_layout && a.inputs_aligned == b.inputs_aligned &&
         a.output_aligned == b.output_aligned && a.target == b.target && a.epilogue == b.epilogue;
}

bool Conv2dVariant::uses_generic_kernel() const noexcept {
  return dtype != DType::f32 || input_layout != Conv2dLayout::nchw || weight_layout != Conv2dLayout::nchw ||
         output_layout != Conv2dLayout::nchw || params.groups != 1;
}

Conv2dVariant make_conv2d_variant(int in_channels, int height, int width, int out_channels, int kernel_h,
                                  int kernel_w, const Conv2dParams& params, bool has_bias,
                                  const Op& epilogue) {
  Conv2dVariant v;
  v.in_channels = in_channels;
  v.height = height;
  v.width = width;
  v.out_channels = out_channels;
  v.kernel_h = kernel_h;
  v.kernel_w = kernel_w;
  v.params = params;
  v.has_bias = has_bias;
  v.epilogue = epilogue;
  v.validate();
  return v;
}


namespace conv2d_impl {
std::string render_target_defines(const Conv2dVariant& v) {
  // sm_75 has no cp.async: the fp32 kernels' asynchronous copies become loads and stores
  // (conv2d.cuh's copy_async; the same source then runs on any arch, which is how the gpu tests
  // check the sm75 plan on an sm_90).
  return v.target == Conv2dTarget::sm75 ? "#define CUINLINE_CONV2D_SYNC_COPIES 1\n" : "";
}

std::string render_conv2d_epilogue(const Op& epilogue, DType dtype, int out_channels) {
  // The kernels call E{chan}(x, co) on each conv (+ bias [+ residual]) value x of output channel
  // co in opmath (fp32; fp64 for f64); the op computes in opmath, its per-channel operands converted
  // exactly from the storage type. (Some kernels compute E on a tile's channels past kCout too and
  // do not store those: the operands are read at a channel clamped to the last one, never past the
  // vectors.)
  const int operands = conv2d_epilogue_operands(epilogue);
  const DType opmath = dtype == DType::f64 ? DType::f64 : DType::f32;
  const std::string a = opmath == DType::f64 ? "double" : "float";
  std::string out;
  if (!is_identity(epilogue)) {
    out += operands == 0 ? cuinline::detail::render_op_functor(epilogue, opmath, "cuinline_conv2d_epilogue_op")
                         : cuinline::detail::render_nary_functor(epilogue, opmath, operands + 1,
                                                                 "cuinline_conv2d_epilogue_op");
  }
  out += "struct cuinline_conv2d_epilogue {\n  cuinline_conv2d_chan chan;\n"
         "  __device__ __forceinline__ " + a + " operator()(" + a + " x, int co) const {\n";
  if (is_identity(epilogue)) {
    out += "    (void)co;\n    return x;\n";
  } else if (operands == 0) {
    out += "    (void)co;\n    return cuinline_conv2d_epilogue_op{}(x);\n";
  } else {
    const std::string s = cuinline::detail::storage_type(dtype);
    const std::string last = std::to_string(out_channels - 1);
    out += "    const int c = co < " + last + " ? co : " + last + ";\n";
    out += "    const " + a + " xs[" + std::to_string(operands + 1) + "] = {x";
    for (int k = 0; k < operands; ++k) {
      out += ", ew_channel_value<" + s + ">(chan.p[" + std::to_string(k) + "], c)";
    }
    out += "};\n    " + a + " ys[1];\n    cuinline_conv2d_epilogue_op{}(xs, ys);\n    return ys[0];\n";
  }
  out += "  }\n};\n";
  return out;
}

std::string render_constant(const char* name, std::int64_t value) {
  return std::string("  static constexpr int ") + name + " = " + std::to_string(value) + ";\n";
}

std::string render_shape_constants(const Conv2dVariant& v) {
  const Conv2dParams& p = v.params;
  const auto c = render_constant;
  return c("kCin", v.in_channels) + c("kH", v.height) + c("kW", v.width) + c("kCout", v.out_channels) +
         c("kKH", v.kernel_h) + c("kKW", v.kernel_w) + c("kSH", p.stride_h) + c("kSW", p.stride_w) +
         c("kPH", p.pad_h) + c("kPW", p.pad_w) + c("kDH", p.dilation_h) + c("kDW", p.dilation_w) +
         c("kOH", v.out_height()) + c("kOW", v.out_width()) + c("kHasBias", v.has_bias ? 1 : 0) +
         c("kHasResidual", v.has_residual ? 1 : 0);
}

std::string render_plan_checks(const std::string& plan, const Conv2dGrid& grid, int threads) {
  auto check = [&](const char* member, std::int64_t value, const char* what) {
    return "static_assert(" + plan + "::" + member + " == " + std::to_string(value) + ", \"" + what +
           "\");\n";
  };
  return check("kSmemBytes", grid.shared_bytes, "shared bytes") + check("kTilesX", grid.tiles_x, "tiles x") +
         check("kTilesY", grid.tiles_y, "tiles y") + check("kThreads", threads, "threads");
}

}  // namespace conv2d_impl

}  // namespace cuinline::ops
