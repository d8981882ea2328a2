// The conv2d selector: the forms' predicates in one order (conv2d_algo), and each algorithm's
// tiling, requests and kernel name. The public conv2d_tiling, kernel_name, make_request and
// make_stage_request are its parts.
#include "ops/conv2d/select.hpp"

#include <cuinline/error.hpp>
#include <string>

#include "ops/conv2d/conv2d_internal.hpp"

namespace cuinline::ops {
namespace conv2d_impl {

const char* to_string(Conv2dAlgo algo) noexcept {
  switch (algo) {
    case Conv2dAlgo::hmma_halo:
      return "hmma_halo";
    case Conv2dAlgo::hmma_wgmma:
      return "hmma_wgmma";
    case Conv2dAlgo::hmma_staged:
      return "hmma_staged";
    case Conv2dAlgo::hmma_mma:
      return "hmma_mma";
    case Conv2dAlgo::pointwise:
      return "pointwise";
    case Conv2dAlgo::tf32_wgmma:
      return "tf32_wgmma";
    case Conv2dAlgo::fp32_transposed:
      return "fp32_transposed";
    case Conv2dAlgo::generic:
      return "generic";
    case Conv2dAlgo::fp32_mma:
      return "fp32_mma";
    case Conv2dAlgo::fp32_winograd:
      return "fp32_winograd";
    case Conv2dAlgo::fp32_direct:
      return "fp32_direct";
  }
  return "unknown";
}

Conv2dAlgo conv2d_algo(const Conv2dVariant& v) {
  if (hmma_applies(v)) {  // f16 / bf16 on sm80+, groups 1
    // (Pointwise needs an NCHW input, the cp.async form a channels-last one: never both.)
    if (pointwise_applies(v)) return Conv2dAlgo::pointwise;
    if (hmma_halo(v)) return Conv2dAlgo::hmma_halo;
    if (hmma_async_layout(v) && v.inputs_aligned) {
      return hmma_wgmma_enabled(v) ? Conv2dAlgo::hmma_wgmma : Conv2dAlgo::hmma_mma;
    }
    return hmma_stage_rule(v) ? Conv2dAlgo::hmma_staged : Conv2dAlgo::hmma_mma;
  }
  if (pointwise_applies(v)) return Conv2dAlgo::pointwise;  // (f32 in tf32)
  if (tf32_wgmma_applies(v)) return Conv2dAlgo::tf32_wgmma;
  if (f32_transposes(v)) return Conv2dAlgo::fp32_transposed;
  if (v.uses_generic_kernel() || f32_direct_too_large(v)) return Conv2dAlgo::generic;
  if (uses_tensor_cores(v)) return Conv2dAlgo::fp32_mma;
  if (winograd_applies(v)) return Conv2dAlgo::fp32_winograd;
  return Conv2dAlgo::fp32_direct;
}

Conv2dTiling conv2d_tiling_of(Conv2dAlgo algo, const Conv2dVariant& v) {
  switch (algo) {
    case Conv2dAlgo::hmma_halo:
    case Conv2dAlgo::hmma_wgmma:
    case Conv2dAlgo::hmma_staged:
    case Conv2dAlgo::hmma_mma:
      return hmma_tiling(v);
    case Conv2dAlgo::pointwise:
      return pointwise_tiling(v);
    case Conv2dAlgo::tf32_wgmma:
      return tf32_wgmma_tiling(v);
    case Conv2dAlgo::fp32_transposed: {
      const Conv2dVariant k = f32_kernel_variant(v);
      Conv2dTiling t = f32_kernel_tiling(k);
      t.transpose.input = v.input_layout == Conv2dLayout::nhwc;
      t.transpose.weight = v.weight_layout == Conv2dLayout::nhwc;
      t.transpose.output = v.output_layout == Conv2dLayout::nhwc && k.output_layout == Conv2dLayout::nchw;
      return t;
    }
    case Conv2dAlgo::generic:
      return generic_tiling(v);
    case Conv2dAlgo::fp32_mma:
      return mma_tiling(v);
    case Conv2dAlgo::fp32_winograd:
      return winograd_tiling(v);
    case Conv2dAlgo::fp32_direct:
      break;
  }
  return fp32_direct_tiling(v);
}

CompileRequest make_request_of(Conv2dAlgo algo, const Conv2dVariant& v) {
  switch (algo) {
    case Conv2dAlgo::hmma_halo:
    case Conv2dAlgo::hmma_wgmma:
    case Conv2dAlgo::hmma_staged:
    case Conv2dAlgo::hmma_mma:
      return make_hmma_request(v);
    case Conv2dAlgo::pointwise:
      return make_pointwise_request(v);
    case Conv2dAlgo::tf32_wgmma:
      return make_tf32_wgmma_request(v);
    case Conv2dAlgo::fp32_transposed:
      // The NCHW kernel of the shape: its module (one cache entry) serves the NCHW variant too.
      return make_f32_kernel_request(f32_kernel_variant(v));
    case Conv2dAlgo::generic:
      return make_generic_request(v);
    case Conv2dAlgo::fp32_mma:
      return make_mma_request(v);
    case Conv2dAlgo::fp32_winograd:
      v.validate();
      return make_winograd_request(v);
    case Conv2dAlgo::fp32_direct:
      break;
  }
  v.validate();
  return make_fp32_direct_request(v);
}

std::optional<CompileRequest> make_stage_request_of(Conv2dAlgo algo) {
  switch (algo) {
    case Conv2dAlgo::hmma_staged:
    case Conv2dAlgo::tf32_wgmma:
      return make_hmma_stage_request();
    case Conv2dAlgo::fp32_transposed:
      return make_transpose_request();
    default:
      return std::nullopt;  // (pointwise, f32 too: no copies)
  }
}

std::string kernel_name_of(Conv2dAlgo algo, const Conv2dVariant& v) {
  switch (algo) {
    case Conv2dAlgo::hmma_halo:
    case Conv2dAlgo::hmma_wgmma:
    case Conv2dAlgo::hmma_staged:
    case Conv2dAlgo::hmma_mma:
    case Conv2dAlgo::pointwise:
    case Conv2dAlgo::tf32_wgmma:
      return hmma_kernel_name(conv2d_tiling_of(algo, v).as_hmma());
    case Conv2dAlgo::fp32_transposed: {
      const Conv2dVariant k = f32_kernel_variant(v);
      return k.output_layout == Conv2dLayout::nhwc ? kWinogradKernel : kernel_name_of(conv2d_algo(k), k);
    }
    case Conv2dAlgo::generic:
      return kGenericKernel;
    case Conv2dAlgo::fp32_mma:
      return "cuinline_conv2d_mma<cuinline_conv2d_shape, cuinline_conv2d_epilogue>";
    case Conv2dAlgo::fp32_winograd:
      return kWinogradKernel;
    case Conv2dAlgo::fp32_direct:
      break;
  }
  return "cuinline_conv2d<cuinline_conv2d_shape, cuinline_conv2d_epilogue>";
}

std::optional<HmmaTiling> split_tiling_of(Conv2dAlgo algo, const Conv2dVariant& v) {
  if (algo != Conv2dAlgo::hmma_wgmma && algo != Conv2dAlgo::hmma_staged) return std::nullopt;
  HmmaTiling t = hmma_split_tiling(v);
  if (t.split_k == 0) return std::nullopt;
  return t;
}

Conv2dSelection select_conv2d(const Conv2dVariant& v) {
  v.validate();
  Conv2dSelection s;
  s.algo = conv2d_algo(v);
  s.kernel_algo = s.algo;
  if (s.algo == Conv2dAlgo::fp32_transposed) {
    const Conv2dVariant k = f32_kernel_variant(v);
    s.kernel_algo = k.output_layout == Conv2dLayout::nhwc ? Conv2dAlgo::fp32_winograd : conv2d_algo(k);
  }
  s.tiling = conv2d_tiling_of(s.algo, v);
  s.request = make_request_of(s.algo, v);
  s.stage_request = make_stage_request_of(s.algo);
  s.kernel_name = kernel_name_of(s.algo, v);
  return s;
}

}  // namespace conv2d_impl

void conv2d_tiling_mismatch(Conv2dKernel held, Conv2dKernel asked) {
  const auto name = [](Conv2dKernel k) {
    switch (k) {
      case Conv2dKernel::direct:
        return "direct";
      case Conv2dKernel::winograd:
        return "winograd";
      case Conv2dKernel::mma:
        return "mma";
      case Conv2dKernel::hmma:
        return "hmma";
      case Conv2dKernel::generic:
        return "generic";
    }
    return "unknown";
  };
  throw Error(std::string("conv2d: the ") + name(asked) + " tiling asked of a " + name(held) +
              " kernel's tiling");
}

Conv2dTiling conv2d_tiling(const Conv2dVariant& v) {
  v.validate();
  return conv2d_impl::conv2d_tiling_of(conv2d_impl::conv2d_algo(v), v);
}

std::string kernel_name(const Conv2dVariant& v) {
  return conv2d_impl::kernel_name_of(conv2d_impl::conv2d_algo(v), v);
}

CompileRequest make_request(const Conv2dVariant& v) {
  return conv2d_impl::make_request_of(conv2d_impl::conv2d_algo(v), v);
}

std::optional<CompileRequest> make_split_request(const Conv2dVariant& v) {
  v.validate();
  const conv2d_impl::Conv2dAlgo algo = conv2d_impl::conv2d_algo(v);
  if (!conv2d_impl::split_tiling_of(algo, v)) return std::nullopt;
  return conv2d_impl::make_hmma_split_request(v);
}

std::optional<CompileRequest> make_stage_request(const Conv2dVariant& v) {
  v.validate();
  return conv2d_impl::make_stage_request_of(conv2d_impl::conv2d_algo(v));
}

}  // namespace cuinline::ops
