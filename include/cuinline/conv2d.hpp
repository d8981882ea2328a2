#pragma once
/// @file conv2d.hpp
/// Fused 2-D convolution (any groups; float32, float16, bfloat16 or float64; NCHW or channels-last NHWC) with
/// an optional bias and any elementwise
/// epilogue (an ops::Op chain: divide → LeakyReLU, ReLU, scale, add, clamp, ...), compiled at run
/// time into one kernel per shape: channels, image size, filter size, stride, padding, dilation and
/// every epilogue constant are compile-time constants, so the filter loops unroll completely. The
/// batch size stays a run-time value; weights and bias are run-time data.
///
/// Arithmetic is fp32 FMA by default (no tensor cores): against PyTorch's conv with TF32 disabled
/// the relative L2 error is about 1e-7. Two opt-in tensor-core modes trade that for speed
/// (Conv2dPrecision::tf32, ::tf32x3).
///
/// f16 and bf16 tensors (NCHW or channels-last) run on tensor cores (mma.sync m16n8k16, an implicit
/// GEMM): the products of two f16 or bf16 values are exact, the sums fp32, the epilogue (bias,
/// residual, the Op chain) fp32, and the result is rounded once, to nearest even, to the output's
/// dtype at the store. f32 channels-last tensors run on a general direct kernel (fp32 FMA; the same
/// single rounding), as do f16 and bf16 when CUINLINE_CONV2D_HMMA=0. The precision argument does
/// not change the arithmetic of either (both sum exact products in fp32; only the order differs).
///
/// f64 tensors (PyTorch's float64 conv) run on the general direct kernel in double: loads, fused
/// multiply-adds (__fma_rn), bias, residual and epilogue in fp64, any shape, groups and layout; the
/// precision argument does not apply (TF32 is an f32 mode).

#include <cuda.h>

#include <cstdint>
#include <cuinline/compiler.hpp>
#include <cuinline/ops.hpp>
#include <cuinline/tensor.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cuinline::ops {

/// Stride, zero padding, dilation and groups of a convolution (PyTorch's F.conv2d arguments).
struct Conv2dParams {
  int stride_h = 1, stride_w = 1;
  int pad_h = 0, pad_w = 0;
  int dilation_h = 1, dilation_w = 1;
  /// F.conv2d's groups: input and output channels split into `groups` groups, output channel group g
  /// reading only input channel group g (the weight is [Cout, Cin / groups, KH, KW]); groups = Cin is
  /// a depthwise convolution. Cin and Cout must be multiples of it. A variant with groups > 1 runs on
  /// the general direct kernel (fp32 sums of exact products, any dtype and layout).
  int groups = 1;

  /// The same value for both dimensions, as `F.conv2d(x, w, stride=s, padding=p, dilation=d)`.
  static Conv2dParams square(int stride, int padding = 0, int dilation = 1) {
    return {stride, stride, padding, padding, dilation, dilation};
  }
  friend bool operator==(const Conv2dParams& a, const Conv2dParams& b) noexcept {
    return a.stride_h == b.stride_h && a.stride_w == b.stride_w && a.pad_h == b.pad_h && a.pad_w == b.pad_w &&
           a.dilation_h == b.dilation_h && a.dilation_w == b.dilation_w && a.groups == b.groups;
  }
  friend bool operator!=(const Conv2dParams& a, const Conv2dParams& b) noexcept { return !(a == b); }
};

/// How the products are computed and accumulated. A mode other than fp32 is only ever used when
/// asked for by name.
enum class Conv2dPrecision : std::uint8_t {
  fp32,    ///< fp32 fused multiply-add, accumulation in fp32 (the default)
  tf32,    ///< TF32 tensor cores (mma.sync m16n8k8; on sm_90 with 16+ input channels wgmma m64nNk8
           ///< after a staging copy, docs/conv2d.md): inputs and weights rounded to TF32
           ///< (10-bit mantissa, to nearest), fp32 accumulation; relative L2 error about 1e-4 (like
           ///< PyTorch with allow_tf32); the fastest mode
  tf32x3,  ///< "3xTF32" tensor cores: each fp32 operand split into a TF32 high part and a TF32
           ///< low part, three products accumulated in fp32 (CUTLASS's fp32-emulation scheme);
           ///< about fp32 accuracy at 3x the tensor-core work
};
/// "fp32", "tf32", "tf32x3".
const char* to_string(Conv2dPrecision precision) noexcept;
/// The mode named by to_string ("fp32", "tf32", "tf32x3"); throws InvalidArgument for any other
/// text, listing the allowed names.
Conv2dPrecision parse_conv2d_precision(std::string_view name);

/// Memory layout of a 4-D conv2d tensor, read from its strides.
enum class Conv2dLayout : std::uint8_t {
  nchw,  ///< contiguous [N, C, H, W] (a weight: [Cout, Cin, KH, KW] contiguous)
  nhwc,  ///< channels-last, PyTorch's memory_format=torch.channels_last: shape [N, C, H, W] with
         ///< strides [H*W*C, 1, W*C, C] (a weight: [Cout, Cin, KH, KW] with strides
         ///< [KH*KW*Cin, 1, KW*Cin, Cin])
};
/// "nchw", "nhwc".
const char* to_string(Conv2dLayout layout) noexcept;
/// The layout named by to_string; throws InvalidArgument for any other text.
Conv2dLayout parse_conv2d_layout(std::string_view name);

/// The GPU resources a conv2d variant's kernel is planned for: each target is the class of
/// architectures with the same shared memory a block and the same tensor-core and copy
/// instructions. A call plans for its stream's device (conv2d_target_for(device_arch(device)));
/// `cuinline warm --arch X` for X. Only a target other than sm90 changes a variant's name and key.
enum class Conv2dTarget : std::uint8_t {
  sm90,  ///< sm_90 (H100, H200) and the other archs with 227 KiB a block (sm_100, sm_103, sm_110):
         ///< every tiling; wgmma where the device is an sm_90 (the default)
  sm80,  ///< sm_80, sm_87 (A100, Orin): 163 KiB a block; the mma.sync tilings (no wgmma)
  sm86,  ///< sm_86, sm_89, sm_120, sm_121 (RTX 30/40/50, A10, L4, L40): 99 KiB a block; mma.sync
  sm75,  ///< sm_75 (T4, RTX 20): 64 KiB a block, no cp.async, no bf16 or TF32 tensor cores: the fp32
         ///< FMA kernels (direct, Winograd with FMA products; tf32 and tf32x3 compute in fp32 there,
         ///< as PyTorch does on such GPUs) and, for f16 / bf16, the general direct kernel
};
/// "sm90", "sm80", "sm86", "sm75".
const char* to_string(Conv2dTarget target) noexcept;
/// The target whose resources `arch` has (see Conv2dTarget); any arch not listed there plans as sm90
/// from sm_90 up, as sm86 from sm_86 up, as sm80 from sm_80 up, else as sm75.
Conv2dTarget conv2d_target_for(const Arch& arch) noexcept;

/// Output extent of one dimension, PyTorch's formula:
/// (in + 2 * pad - dilation * (k - 1) - 1) / stride + 1; may be <= 0 for an invalid shape.
std::int64_t conv2d_out_extent(std::int64_t in, int kernel, int stride, int pad, int dilation) noexcept;

/// The most input or output channels of a conv2d (its grid's channel blocks stay within 65535).
inline constexpr int kMaxConv2dChannels = 65535;
/// The largest image height or width, filter height or width, stride, padding and dilation of a
/// conv2d (F.conv2d has none; these keep the kernels' 32-bit indices exact). Beside them: one input
/// image, one output image and the weight each under 2^31 elements.
inline constexpr int kMaxConv2dExtent = 1 << 20;
/// The most per-output-channel operands a conv2d epilogue may read (conv2d's channel_operands).
inline constexpr int kMaxConv2dChannelOperands = 4;
/// The per-output-channel operands `epilogue` reads as a conv2d epilogue: its tensor operands in1,
/// in2, ... ("mul(in1)|leaky_relu(0.01)|add(in2)"), or an expression's named inputs after the first
/// (`expr([x, m] x * m)`: 1); 0 for an epilogue of constants only.
int conv2d_epilogue_operands(const Op& epilogue) noexcept;

/// One compiled conv2d kernel: what `cuinline warm` writes and the library looks up at run time.
/// The batch size is not part of it. Equal variants give equal CompileRequests (one cache entry).
struct Conv2dVariant {
  int in_channels = 0;   ///< Cin
  int height = 0;        ///< H of the input
  int width = 0;         ///< W of the input
  int out_channels = 0;  ///< Cout
  int kernel_h = 0;      ///< KH
  int kernel_w = 0;      ///< KW
  Conv2dParams params;
  bool has_bias = false;
  /// A residual tensor of the output's shape, added to conv + bias before the epilogue (ResNet's
  /// relu(conv(x) + b + residual): epilogue relu). Rounded as PyTorch's two adds are.
  bool has_residual = false;
  /// Applied to every (conv + bias [+ residual]) value before the store; an empty chain stores the
  /// conv as is. It may read per-output-channel operands (conv2d_epilogue_operands, at most
  /// kMaxConv2dChannelOperands; their values are passed at launch, not compiled in) and has one output.
  Op epilogue = Op::chain({});
  Conv2dPrecision precision = Conv2dPrecision::fp32;
  /// Of every tensor (input, weight, bias, residual, output): f32, f16, bf16 or f64. f16 and bf16
  /// compute in fp32 and round once at the store; f64 computes in fp64 (the general kernel).
  DType dtype = DType::f32;
  Conv2dLayout input_layout = Conv2dLayout::nchw;   ///< of the input
  Conv2dLayout weight_layout = Conv2dLayout::nchw;  ///< of the weight
  Conv2dLayout output_layout = Conv2dLayout::nchw;  ///< of the output (and of the residual)
  /// f16 / bf16 on tensor cores (and output_aligned also for f32 with an NCHW output, whose direct and
  /// Winograd kernels store vectors): whether the input and weight pointers are both 16-byte aligned
  /// (cp.async copies, where the layouts allow them: channels-last input and weight, Cin % 8 == 0)
  /// and whether the output pointer is aligned to the kernel's vector stores (16 bytes, or less where
  /// the output's contiguous run allows only shorter vectors). The kernel is compiled for them (one
  /// main loop, one store loop). conv2d_variant_for reads them from the pointers where they change
  /// the kernel and leaves them true everywhere else; make_conv2d_variant and `cuinline warm` give
  /// true (what allocators give), so a warmed key equals the run-time key of aligned tensors. A false
  /// one is named (",xw:unaligned", ",y:unaligned").
  bool inputs_aligned = true;
  bool output_aligned = true;
  /// The GPUs the kernel is planned for (their shared memory and instructions). conv2d_variant_for
  /// and make_conv2d_variant give sm90; a call plans the variant for its device
  /// (conv2d_variant_for_arch). A target other than sm90 is named (",target:sm86").
  Conv2dTarget target = Conv2dTarget::sm90;

  std::int64_t out_height() const noexcept;
  std::int64_t out_width() const noexcept;
  /// e.g. "conv2d<f32,8x128x128,64x3x3,s1x1,p0x0,d1x1,bias>[div(2)|leaky_relu(0.01)]"; a layout
  /// other than NCHW adds ",x:nhwc" (input), ",w:nhwc" (weight) or ",y:nhwc" (output).
  std::string name() const;
  /// Whether the variant is outside the f32 NCHW kernels as called: any dtype other than f32, any
  /// channels-last tensor, or groups > 1 (always the general direct kernel). f16 and bf16 run on the
  /// tensor-core kernel (conv2d_hmma.cuh: every f16 and bf16 variant); f32 with a channels-last
  /// tensor on the f32 NCHW kernels between transposing copies (from 2^22 multiply-adds an image, or
  /// CUINLINE_CONV2D_TRANSPOSE=1) or else on the general direct kernel (conv2d_generic.cuh).
  /// docs/conv2d.md says which kernel runs when.
  bool uses_generic_kernel() const noexcept;
  /// Throws InvalidArgument for a non-positive size, stride or dilation, negative padding, an empty
  /// output, a dtype other than f32, f16, bf16 or f64, an unknown layout or an invalid epilogue.
  void validate() const;

  friend bool operator==(const Conv2dVariant& a, const Conv2dVariant& b) noexcept;
  friend bool operator!=(const Conv2dVariant& a, const Conv2dVariant& b) noexcept { return !(a == b); }
};

/// The variant of `F.conv2d(x, w, b, ...)` then `epilogue`, for x of shape [N, in_channels, height,
/// width] and w of shape [out_channels, in_channels / params.groups, kernel_h, kernel_w].
Conv2dVariant make_conv2d_variant(int in_channels, int height, int width, int out_channels, int kernel_h,
                                  int kernel_w, const Conv2dParams& params, bool has_bias,
                                  const Op& epilogue);

/// `variant` planned for `arch`: its target set to conv2d_target_for(arch). What a call on a device
/// of that arch compiles and `cuinline warm --arch` writes: make_request(conv2d_variant_for_arch(v,
/// arch)) compiled for arch.
Conv2dVariant conv2d_variant_for_arch(const Conv2dVariant& variant, const Arch& arch);

/// `variant` as a call on `device` plans it: for the device's target (conv2d_target_for of its arch),
/// or for CUINLINE_CONV2D_TARGET's (a testing override: an arch name such as sm_75) where the device
/// has what that target plans for (no more shared memory a block; sm90 only on an sm90-class device).
/// The result is what the call compiles and runs.
Conv2dVariant conv2d_variant_for_device(const Conv2dVariant& variant, int device);

/// The CompileRequest of a variant (conv2d.cuh + ew_ops.cuh specialized with the variant's
/// constants). It has exactly one name expression: kernel_name(variant).
CompileRequest make_request(const Conv2dVariant& variant);
/// The name expression of the variant's kernel in make_request(variant).
std::string kernel_name(const Conv2dVariant& variant);
/// The other module a call of `variant` launches, if any: for an f16 / bf16 variant that is staged
/// (docs/conv2d.md) the staging copy's CompileRequest
/// (kernel_templates/conv2d_stage.cuh, one kernel); for an f32 variant with channels-last tensors
/// that runs between transposing copies the transpose's
/// (kernel_templates/conv2d_transpose.cuh, one kernel). Each is shape-generic — the same request,
/// one cache entry an arch, for every such variant — and `cuinline warm` compiles it beside them;
/// std::nullopt for every other variant.
std::optional<CompileRequest> make_stage_request(const Conv2dVariant& variant);
/// The split-K form of `variant` (docs/conv2d.md, "Split-K"), a second kernel beside
/// make_request(variant): for f16 / bf16 variants on the sm_90 wgmma tiling with few output tiles an
/// image and a long reduction (512 channels and more on a 3 x 3), the kernel a launch runs where its
/// tiles fill at most half of the multiprocessors (a small batch), its reduction cut into slices.
/// One name expression, cuinline_conv2d_hmma_split<...>. std::nullopt for every other variant, and
/// for every variant under CUINLINE_CONV2D_SPLIT_K=0. `cuinline warm` compiles it beside the variant.
std::optional<CompileRequest> make_split_request(const Conv2dVariant& variant);

/// The most images one launch of a conv kernel takes (its grid's limit): conv2d runs a larger batch as
/// consecutive launches on slices of it.
inline constexpr std::int64_t kMaxConv2dBatch = 65535;

/// output = epilogue(conv2d(input, weight) + bias [+ residual]), in one kernel.
/// Every tensor has the same dtype T: f32, f16, bf16 or f64.
///   input  T [N, Cin, H, W], or [Cin, H, W] (F.conv2d's unbatched form: one image; the output and a
///          residual then have 3 dimensions too)
///   weight T [Cout, Cin / params.groups, KH, KW]
///   bias   T [Cout], or a view with data == nullptr for no bias
///   output T [N, Cout, OH, OW], OH/OW by PyTorch's formula; must not overlap an input, and no two of
///          its elements may share an address
///   Strides: any, as F.conv2d takes them. The kernels read and write 4-D tensors that are contiguous
///          (NCHW) or channels-last (strides [H*W*C, 1, W*C, C]) in place — the output's own layout
///          is the result's — and any other view (a slice, a step, a permutation, an expanded view;
///          a bias or channel operand whose channels are not contiguous) through a compact copy in
///          one stream-ordered workspace (NCHW for f32, channels-last for f16 / bf16), made before
///          the conv (a strided output: written there, then copied into the output) by the N-ary
///          elementwise kernel: one more pass over each such tensor, capturable like the rest.
///   residual T of the output's shape, or a view with data == nullptr for
///            none; read in the same kernel where it has the layout the kernel writes the output in
///            (else first copied into that layout in the workspace), and added to
///            conv + bias before the epilogue (ResNet's
///            relu(conv(x) + b + residual) is epilogue Op::relu()); must not overlap the output
///   channel_operands  the epilogue's per-output-channel operands, as many as it reads
///            (conv2d_epilogue_operands): channel_operands[k - 1] is the epilogue's in<k> (or its
///            expression's input k, input 0 being the conv value), each T of shape [Cout], [Cout, 1, 1] or
///            [1, Cout, 1, 1] — PyTorch's (Cout, 1, 1) parameters broadcast over N, H, W: relu(conv)
///            + b2 is epilogue "relu|add(in1)" with {b2}; conv * m then ReLU is
///            `expr([x, m] fmaxf(x * m, 0.0f))` with {m} (an expression names its inputs: the conv
///            value first). Computed in fp32 with the rest of the epilogue.
/// Throws InvalidArgument (before anything is compiled or launched) for a dtype other than f32,
/// f16 or bf16, tensors of different dtypes, mismatched channels (or groups that do not divide them), a weight or bias or output shape
/// that does not match, an output whose elements share memory or that overlaps another tensor, null
/// pointers, or channel operands that are not as many as the epilogue reads, not of shape [Cout]
/// (or [Cout, 1, 1], [1, Cout, 1, 1]), or overlap the output. A call whose copies get no workspace
/// (out of device memory) throws DriverError (CUDA_ERROR_OUT_OF_MEMORY) with nothing launched.
/// N = 0 launches nothing; N > kMaxConv2dBatch runs as consecutive calls on slices of the batch.
/// Asynchronous on `stream` (nullptr: legacy default stream of the current device); the first call
/// of a variant compiles it (or loads it from the cache).
void conv2d(const TensorView& input, const TensorView& weight, const TensorView& bias,
            const TensorView& output, const Conv2dParams& params, const Op& epilogue,
            CUstream stream = nullptr, Conv2dPrecision precision = Conv2dPrecision::fp32,
            const TensorView& residual = {}, const std::vector<TensorView>& channel_operands = {});

/// The epilogue conv2d_div_leaky_relu uses: Op::chain({Step::div(divisor), Step::leaky_relu(slope)}).
inline Op div_leaky_relu_epilogue(double divisor, double slope) {
  return Op::chain({Step::div(divisor), Step::leaky_relu(slope)});
}

/// output = F.leaky_relu(F.conv2d(input, weight, bias, ...) / divisor, slope), fused.
void conv2d_div_leaky_relu(const TensorView& input, const TensorView& weight, const TensorView& bias,
                           const TensorView& output, const Conv2dParams& params, double divisor, double slope,
                           CUstream stream = nullptr, Conv2dPrecision precision = Conv2dPrecision::fp32);

/// The variant a call would use (validating everything conv2d validates), without launching; planned
/// for sm90 (a call plans it for its stream's device: conv2d_variant_for_arch).
Conv2dVariant conv2d_variant_for(const TensorView& input, const TensorView& weight, const TensorView& bias,
                                 const TensorView& output, const Conv2dParams& params, const Op& epilogue,
                                 Conv2dPrecision precision = Conv2dPrecision::fp32,
                                 const TensorView& residual = {},
                                 const std::vector<TensorView>& channel_operands = {});

/// Counters of the conv2d in-process kernel maps (in front of the KernelCache), the same fields as
/// the elementwise ops' OpsStats: launches and map_hits count conv2d calls (one a call);
/// cache_lookups counts every module a call fetched from the KernelCache — the conv's, its split-K
/// form (make_split_request) where a launch first wanted it, and the shape-generic staging or
/// transposing copy (make_stage_request) or the direct kernel of a call that got no scratch memory,
/// each fetched once a device.
using Conv2dStats = OpsStats;
Conv2dStats conv2d_stats();
/// Empties the in-process maps, the copies' included (the next call of each variant goes to
/// KernelCache::get again).
void clear_conv2d_kernel_map();

}  // namespace cuinline::ops
