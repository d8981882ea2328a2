// f32 conv2d with channels-last tensors on the f32 NCHW kernels (direct, Winograd, TF32 tensor
// cores) between transposing copies (kernel_templates/conv2d_transpose.cuh): which variants, the
// variant whose kernel runs, the copy's request and launch grid. The launch is conv2d_launch.cpp's.
#include <string>

#include "ops/conv2d/conv2d_internal.hpp"
#include "ops/conv2d/tuning.hpp"
#include "templates/template_source.hpp"

namespace cuinline::ops::conv2d_impl {
int transpose_log_tile() {
  return conv2d_knobs().transpose_log_tile;  // CUINLINE_CONV2D_TRANSPOSE_TILE (10-12; tuning)
}

bool f32_transposes(const Conv2dVariant& v) {
  if (v.dtype != DType::f32 || !v.uses_generic_kernel() || v.params.groups != 1) return false;
  // (Where the NCHW kernel of the shape would be the general kernel too, the copies gain nothing.)
  if (f32_direct_too_large(f32_nchw_variant(v))) return false;
  const int setting = conv2d_knobs().transpose;  // CUINLINE_CONV2D_TRANSPOSE: 0 never, 1 always
  if (setting != 2) return setting == 1;
  const std::int64_t macs = std::int64_t{v.out_channels} * v.out_height() * v.out_width() * v.in_channels *
                            v.kernel_h * v.kernel_w;
  return macs >= conv2d_tuning(v.target).transpose_min_macs;
}

Conv2dVariant f32_nchw_variant(const Conv2dVariant& v) {
  Conv2dVariant t = v;
  t.input_layout = t.weight_layout = t.output_layout = Conv2dLayout::nchw;
  t.inputs_aligned = true;  // (f16 / bf16 only)
  // The caller's NCHW output keeps its alignment; a channels-last one is written to aligned scratch
  // (or by Winograd, which checks its pointers).
  t.output_aligned = v.output_layout == Conv2dLayout::nchw ? v.output_aligned : true;
  return t;
}

Conv2dVariant f32_kernel_variant(const Conv2dVariant& v) {
  Conv2dVariant t = f32_nchw_variant(v);
  if (v.output_layout == Conv2dLayout::nhwc) {
    Conv2dVariant out = t;
    out.output_layout = Conv2dLayout::nhwc;
    out.output_aligned = true;
    if (winograd_applies(out)) return out;  // Winograd writes the channels-last output itself
  }
  return t;
}

Conv2dTiling f32_kernel_tiling(const Conv2dVariant& k) {
  return k.output_layout == Conv2dLayout::nhwc ? Conv2dTiling(winograd_tiling(k)) : conv2d_tiling(k);
}

CompileRequest make_f32_kernel_request(const Conv2dVariant& k) {
  return k.output_layout == Conv2dLayout::nhwc ? make_winograd_request(k) : make_request(k);
}

CompileRequest make_transpose_request() {
  CompileRequest request;
  request.name = "conv2d_transpose.cu";
  request.source =
      "// cuinline conv2d transposing copy (f32 channels-last tensors around the NCHW kernels)\n"
      "#include \"conv2d_transpose.cuh\"\n";
  request.headers.push_back({"conv2d_transpose.cuh", cuinline::detail::template_text("conv2d_transpose.cuh")});
  request.options = {"-minimal"};  // see elementwise.cpp (32-bit moves only: nothing to contract)
  request.name_expressions = {kTransposeKernel};
  return request;
}

TransposeGrid transpose_grid(std::int64_t rows, std::int64_t cols, int lt) {
  TransposeGrid g;
  int lc = 0;  // tile columns 1 << lc: 32, or the power of two at or above cols
  while (lc < 5 && (std::int64_t{1} << lc) < cols) ++lc;
  g.lt = lt;
  const std::int64_t tc = std::int64_t{1} << lc, tr = (std::int64_t{1} << g.lt) / tc;
  const std::int64_t col_tiles = (cols + tc - 1) / tc;
  g.lc = lc;
  g.col_tiles = static_cast<std::uint32_t>(col_tiles);
  g.blocks = (rows + tr - 1) / tr * col_tiles;
  return g;
}

}  // namespace cuinline::ops::conv2d_impl
