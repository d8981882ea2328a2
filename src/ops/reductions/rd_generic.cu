// The generic row-reduction kernels (kernel_templates/reductions_generic.cuh), compiled by nvcc with
// the library for every supported arch and embedded as a fatbin of their own (CMakeLists.txt), with
// the options of the specialized reduction kernels (contraction on; a chain's arithmetic steps with
// their roundings spelled out): a never-seen variant runs on them with no compile on the call's
// path. One kernel per op and dtype: cuinline_rdg_<op>_<dtype>.
#include "reductions_generic.cuh"

#define CUINLINE_RDG_KERNEL(name, op, S)                                                      \
  extern "C" __global__ void __launch_bounds__(1024)                                          \
      name(const __grid_constant__ rd_args_e<7> a, const __grid_constant__ rdg_shape g,         \
           const __grid_constant__ rdg_chain pro, const __grid_constant__ rdg_chain epi) {      \
    rd_generic_body<op, S>(a, g, pro, epi);                                                   \
  }

#define CUINLINE_RDG_KERNELS(tag, S)                                                          \
  CUINLINE_RDG_KERNEL(cuinline_rdg_softmax_##tag, RD_SOFTMAX, S)                              \
  CUINLINE_RDG_KERNEL(cuinline_rdg_log_softmax_##tag, RD_LOG_SOFTMAX, S)                      \
  CUINLINE_RDG_KERNEL(cuinline_rdg_rms_norm_##tag, RD_RMS_NORM, S)                            \
  CUINLINE_RDG_KERNEL(cuinline_rdg_add_rms_norm_##tag, RD_ADD_RMS_NORM, S)                    \
  CUINLINE_RDG_KERNEL(cuinline_rdg_layer_norm_##tag, RD_LAYER_NORM, S)

CUINLINE_RDG_KERNELS(f32, float)
CUINLINE_RDG_KERNELS(f64, double)
CUINLINE_RDG_KERNELS(f16, ew_half)
CUINLINE_RDG_KERNELS(bf16, ew_bf16)
