// A conv2d call's tensors checked and planned into its variant (call_plan.hpp).
#include "ops/conv2d/call_plan.hpp"

#include <algorithm>
#include <cstdint>
#include <cuinline/error.hpp>
#include <string>
#include <vector>

#include "driver/tensor_access.hpp"
#include "ops/conv2d/conv2d_internal.hpp"
#include "ops/conv2d/select.hpp"

namespace cuinline::ops {
namespace conv2d_impl {
namespace {

[[noreturn]] void bad(const std::string& what) {
  throw InvalidArgument("conv2d: " + what);
}

void check_tensor(const TensorView& t, const char* name, int ndim) {
  if (t.ndim != ndim)
    bad(std::string(name) + " must have " + std::to_string(ndim) + " dimensions, got " + t.describe());
  for (int d = 0; d < ndim; ++d) {
    if (t.shape[d] < 0) bad(std::string(name) + " has a negative extent: " + t.describe());
  }
  if (t.data == nullptr && t.numel() > 0) bad(std::string(name) + " is a null pointer");
}

// Whether a 4-D view [N, C, H, W] is channels-last: strides [H*W*C, 1, W*C, C] (extents of 1 may
// have any stride, as in PyTorch; an empty view is both layouts).
bool is_channels_last(const TensorView& t) {
  const std::int64_t c = t.shape[1], h = t.shape[2], w = t.shape[3];
  if (t.numel() == 0) return true;
  const std::int64_t expect[4] = {h * w * c, 1, w * c, c};
  for (int d = 0; d < 4; ++d) {
    if (t.shape[d] != 1 && t.strides[d] != expect[d]) return false;
  }
  return true;
}

// The layout the kernels read or write a checked 4-D tensor in: NCHW where it is contiguous (also
// where both patterns agree, e.g. one channel), NHWC where channels-last. Any other strides (a slice,
// a step, a permutation, an expanded view: what F.conv2d takes and makes contiguous first) are read
// or written through a compact copy in a stream-ordered workspace (`copied`), laid out as the
// dtype's kernels read fastest: NCHW for f32, channels-last for f16 / bf16.
Conv2dLayout kernel_layout(const TensorView& t, DType dtype, bool& copied) {
  copied = false;
  if (t.is_contiguous()) return Conv2dLayout::nchw;
  if (is_channels_last(t)) return Conv2dLayout::nhwc;
  copied = true;
  if (dtype == DType::f32 || dtype == DType::f64) return Conv2dLayout::nchw;
  // (A channels-last copy that is contiguous too — one channel, or one pixel — is named NCHW, as a
  // tensor of those strides is: the same variant as a call on such a compact tensor.)
  return compact_view(t, Conv2dLayout::nhwc).is_contiguous() ? Conv2dLayout::nchw : Conv2dLayout::nhwc;
}

// Whether no two elements of a view share an address (a sufficient test: the axes of more than one
// element sorted by stride, each stride past the reach of the smaller ones). An output that fails it
// is refused, as PyTorch refuses to write one ("more than one element of the written-to tensor
// refers to a single memory location").
bool elements_distinct(const TensorView& t) {
  std::int64_t stride[TensorView::kMaxDims], extent[TensorView::kMaxDims];
  int k = 0;
  for (int d = 0; d < t.ndim; ++d) {
    if (t.shape[d] <= 1) continue;
    int at = k++;
    const std::int64_t s = t.strides[d] < 0 ? -t.strides[d] : t.strides[d];
    for (; at > 0 && stride[at - 1] > s; --at) {
      stride[at] = stride[at - 1];
      extent[at] = extent[at - 1];
    }
    stride[at] = s;
    extent[at] = t.shape[d];
  }
  std::int64_t reach = 0;  // elements past the first that the smaller axes reach
  for (int i = 0; i < k; ++i) {
    if (stride[i] <= reach) return false;
    reach += stride[i] * (extent[i] - 1);
  }
  return true;
}

// Whether the kernels can read `residual` (the output's shape) where they write the output: the
// output's layout, compared as the kernel reads them (where both patterns describe the same
// addresses — an extent of 1 in the right places — the layouts agree whatever layout_of names).
bool residual_in_output_layout(const TensorView& residual, Conv2dLayout output_layout) {
  return output_layout == Conv2dLayout::nhwc ? is_channels_last(residual) : residual.is_contiguous();
}

// Every tensor of a call shares one dtype (f32, f16, bf16 or f64): checked before anything else, so a
// mix is named as a mix.
DType common_dtype(const TensorView& input, const TensorView& weight, const TensorView& bias,
                   const TensorView& output, const TensorView& residual) {
  const DType dt = input.dtype;
  const bool mixed = weight.dtype != dt || output.dtype != dt || (bias.data != nullptr && bias.dtype != dt) ||
                     (residual.data != nullptr && residual.dtype != dt);
  if (mixed) {
    std::string list = std::string("input ") + cuinline::to_string(input.dtype) + ", weight " +
                       cuinline::to_string(weight.dtype);
    if (bias.data != nullptr) list += std::string(", bias ") + cuinline::to_string(bias.dtype);
    if (residual.data != nullptr) list += std::string(", residual ") + cuinline::to_string(residual.dtype);
    list += std::string(", output ") + cuinline::to_string(output.dtype);
    bad("tensors must share one dtype, got " + list);
  }
  if (dt != DType::f32 && dt != DType::f16 && dt != DType::bf16 && dt != DType::f64)
    bad(std::string("dtype ") + cuinline::to_string(dt) + " is not supported (f32, f16, bf16, f64)");
  return dt;
}

// Whether the bytes two views reach (first to last element, whatever their strides) intersect.
bool overlap(const TensorView& a, const TensorView& b) {
  std::uintptr_t a0 = 0, a1 = 0, b0 = 0, b1 = 0;
  if (!cuinline::detail::byte_span(a, a0, a1) || !cuinline::detail::byte_span(b, b0, b1)) return false;
  return a0 <= b1 && b0 <= a1;
}

// The epilogue's per-output-channel operands: as many as it reads, each of the call's dtype, of shape
// [Cout], [Cout, 1, 1] or [1, Cout, 1, 1] (what broadcasts along the output's channels only), aligned
// to its element and not overlapping the output. Bit k of `copied`: operand k's channels are not
// contiguous (a step, an expanded view): read through a compact copy.
void check_channel_operands(const Conv2dVariant& v, const std::vector<TensorView>& operands,
                            const TensorView& output, unsigned& copied) {
  copied = 0;
  const int want = conv2d_epilogue_operands(v.epilogue);
  if (static_cast<int>(operands.size()) != want) {
    bad("the epilogue " + v.epilogue.describe() + " reads " + std::to_string(want) +
        " per-channel operand(s) but " + std::to_string(operands.size()) + " were given");
  }
  for (std::size_t k = 0; k < operands.size(); ++k) {
    const TensorView& t = operands[k];
    // (Every call checks its operands: the name is built only for a refusal.)
    const auto named = [k] {
      return "channel operand " + std::to_string(k + 1) + " (in" + std::to_string(k + 1) + ")";
    };
    if (t.dtype != v.dtype) {
      bad(named() + " is " + cuinline::to_string(t.dtype) + " but the conv's tensors are " +
          cuinline::to_string(v.dtype));
    }
    // The channel axis: the only extent that is not 1 (any axis of a 1-D or 3-D view is the first
    // of [Cout] / [Cout, 1, 1]; a 4-D view's is axis 1).
    const int axis = t.ndim == 4 ? 1 : 0;
    bool shape_ok = t.ndim == 1 || t.ndim == 3 || t.ndim == 4;
    for (int d = 0; shape_ok && d < t.ndim; ++d) {
      shape_ok = t.shape[d] == (d == axis ? v.out_channels : 1);
    }
    if (!shape_ok) {
      bad(named() + " " + t.describe() + " is not a per-channel vector of the " +
          std::to_string(v.out_channels) + " output channels ([" + std::to_string(v.out_channels) + "], [" +
          std::to_string(v.out_channels) + ", 1, 1] or [1, " + std::to_string(v.out_channels) + ", 1, 1])");
    }
    if (t.data == nullptr) bad(named() + " is a null pointer");
    if (v.out_channels > 1 && t.strides[axis] != 1) copied |= 1u << k;
    if (reinterpret_cast<std::uintptr_t>(t.data) % dtype_size(t.dtype) != 0) {
      bad(named() + " is not aligned to its " + std::to_string(dtype_size(t.dtype)) + "-byte elements");
    }
    if (overlap(t, output)) bad(named() + " overlaps the output");
  }
}

}  // namespace

TensorView compact_view(const TensorView& t, Conv2dLayout layout) {
  TensorView c = t;
  c.data = nullptr;
  std::int64_t stride = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    c.strides[d] = stride;
    stride *= std::max<std::int64_t>(t.shape[d], 1);
  }
  if (t.ndim == 4 && layout == Conv2dLayout::nhwc) {
    const std::int64_t ch = t.shape[1], w = t.shape[3];
    c.strides[0] = t.shape[2] * w * ch;
    c.strides[1] = 1;
    c.strides[2] = w * ch;
    c.strides[3] = ch;
  }
  return c;
}

Batched batched(const TensorView& input, const TensorView& output, const TensorView& residual) {
  Batched b{input, output, residual, input.ndim == 3};
  if (!b.unbatched) return b;
  if (output.ndim != 3 || (residual.data != nullptr && residual.ndim != 3)) {
    bad("an unbatched input " + input.describe() +
        " ([C, H, W], as F.conv2d takes one image) needs an output" +
        (residual.data != nullptr ? " and a residual" : "") + " of 3 dimensions too, got output " +
        output.describe() + (residual.data != nullptr ? ", residual " + residual.describe() : std::string()));
  }
  const auto add_batch = [](const TensorView& t) {
    TensorView v = t;
    v.ndim = 4;
    for (int d = 3; d > 0; --d) {
      v.shape[d] = t.shape[d - 1];
      v.strides[d] = t.strides[d - 1];
    }
    v.shape[0] = 1;
    v.strides[0] = std::max<std::int64_t>(t.numel(), 1);  // (any stride: one image)
    return v;
  };
  b.input = add_batch(input);
  b.output = add_batch(output);
  if (residual.data != nullptr) b.residual = add_batch(residual);
  return b;
}

Conv2dVariant plan_call(const TensorView& input, const TensorView& weight, const TensorView& bias,
                        const TensorView& output, const Conv2dParams& params, const Op& epilogue,
                        Conv2dPrecision precision, const TensorView& residual,
                        const std::vector<TensorView>& channel_operands, Conv2dCopies& copies) {
  copies = Conv2dCopies{};
  const DType dtype = common_dtype(input, weight, bias, output, residual);
  check_tensor(input, "input", 4);
  check_tensor(weight, "weight", 4);
  check_tensor(output, "output", 4);
  const bool has_bias = bias.data != nullptr;
  if (has_bias) {
    check_tensor(bias, "bias", 1);
    copies.bias = bias.shape[0] > 1 && bias.strides[0] != 1;
  }
  if (params.groups < 1) bad("groups must be positive, got " + std::to_string(params.groups));
  if (weight.shape[1] * params.groups != input.shape[1]) {
    bad("input has " + std::to_string(input.shape[1]) + " channels but the weight " + weight.describe() +
        " expects " + std::to_string(weight.shape[1]) + " x groups " + std::to_string(params.groups) + " = " +
        std::to_string(weight.shape[1] * params.groups));
  }
  if (weight.shape[0] % params.groups != 0) {
    bad("the weight's " + std::to_string(weight.shape[0]) + " output channels are not a multiple of groups " +
        std::to_string(params.groups));
  }
  if (has_bias && bias.shape[0] != weight.shape[0]) {
    bad("bias " + bias.describe() + " does not match the " + std::to_string(weight.shape[0]) +
        " output channels");
  }
  // (Sizes that fit an int; the variant's own bounds — kMaxConv2dChannels, kMaxConv2dExtent — are
  // checked, and named, by validate() below.)
  for (int d = 1; d < 4; ++d) {
    if (input.shape[d] > INT32_MAX || weight.shape[d - 1] > INT32_MAX || weight.shape[d] > INT32_MAX) {
      bad("extent too large: input " + input.describe() + ", weight " + weight.describe());
    }
  }
  Conv2dVariant v;
  v.in_channels = static_cast<int>(input.shape[1]);
  v.height = static_cast<int>(input.shape[2]);
  v.width = static_cast<int>(input.shape[3]);
  v.out_channels = static_cast<int>(weight.shape[0]);
  v.kernel_h = static_cast<int>(weight.shape[2]);
  v.kernel_w = static_cast<int>(weight.shape[3]);
  v.params = params;
  v.has_bias = has_bias;
  v.epilogue = epilogue;
  v.precision = precision;
  v.dtype = dtype;
  v.input_layout = kernel_layout(input, dtype, copies.input);
  v.weight_layout = kernel_layout(weight, dtype, copies.weight);
  v.output_layout = kernel_layout(output, dtype, copies.output);
  v.validate();
  const std::int64_t expect[4] = {input.shape[0], weight.shape[0], v.out_height(), v.out_width()};
  for (int d = 0; d < 4; ++d) {
    if (output.shape[d] != expect[d]) {
      bad("output " + output.describe() + " does not match the expected [" + std::to_string(expect[0]) +
          ", " + std::to_string(expect[1]) + ", " + std::to_string(expect[2]) + ", " +
          std::to_string(expect[3]) + "]");
    }
  }
  if (copies.output && !elements_distinct(output)) {
    bad("output " + output.describe() +
        " has elements that share memory: each output element needs its own address");
  }
  if (overlap(input, output) || overlap(weight, output) || (has_bias && overlap(bias, output))) {
    bad("output overlaps an input");
  }
  v.has_residual = residual.data != nullptr;
  if (v.has_residual) {
    check_tensor(residual, "residual", 4);
    for (int d = 0; d < 4; ++d) {
      if (residual.shape[d] != output.shape[d])
        bad("residual " + residual.describe() + " does not have the output's shape " + output.describe());
    }
    // Read where the kernel writes the output where it has the kernel's output layout; else (the
    // other layout, any other strides) copied into that layout first.
    copies.residual = !residual_in_output_layout(residual, v.output_layout);
    // The Winograd kernel may store a tile twice (a direct recompute of non-finite tiles), reading
    // the residual again after the first store: the two must not share memory.
    if (overlap(residual, output)) bad("residual overlaps the output (write the sum to another tensor)");
  }
  check_channel_operands(v, channel_operands, output, copies.operands);
  // The kernels are compiled for their pointers' alignment where it matters: the f16 / bf16
  // tensor-core kernels, and the f32 kernels that store an NCHW output as vectors (the direct
  // kernel and Winograd), the TF32 wgmma kernel's and the pointwise form's float4 stores in either
  // layout. A copy is read from a workspace aligned to 256 bytes (a null pointer here).
  const auto direct = [](bool copied, const TensorView& t) { return copied ? nullptr : t.data; };
  const void* residual_read = v.has_residual ? direct(copies.residual, residual) : nullptr;
  conv2d_impl::set_hmma_alignment(v, direct(copies.input, input), direct(copies.weight, weight),
                                  direct(copies.output, output), residual_read);
  if (v.dtype == DType::f32 && (v.output_layout == Conv2dLayout::nchw ||
                                v.precision == Conv2dPrecision::tf32 || conv2d_impl::pointwise_applies(v))) {
    const auto out = reinterpret_cast<std::uintptr_t>(direct(copies.output, output)) |
                     reinterpret_cast<std::uintptr_t>(residual_read);
    v.output_aligned = out % 16 == 0;
  }
  return v;
}

}  // namespace conv2d_impl

Conv2dVariant conv2d_variant_for(const TensorView& input, const TensorView& weight, const TensorView& bias,
                                 const TensorView& output, const Conv2dParams& params, const Op& epilogue,
                                 Conv2dPrecision precision, const TensorView& residual,
                                 const std::vector<TensorView>& channel_operands) {
  const conv2d_impl::Batched b = conv2d_impl::batched(input, output, residual);
  conv2d_impl::Conv2dCopies copies;
  return conv2d_impl::plan_call(b.input, weight, bias, b.output, params, epilogue, precision, b.residual,
                                channel_operands, copies);
}

}  // namespace cuinline::ops
