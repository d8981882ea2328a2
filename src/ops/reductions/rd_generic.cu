// The generic row-reduction kernels (kernel_templates/reductions_generic.cuh), compiled by nvcc with
// the library for every supported arch and embedded as a fatbin of their own (CMakeLists.txt), with
// the options of the specialized reduction kernels (contraction on; a chain's arithmetic steps with
// their roundings spelled out): a never-seen variant runs on them with no compile on the call's
// path. One kernel per dtype (cuinline_rdg_<dtype>), the op a run-time argument: one copy of the
// passes' shared code instead of five (a third of the fatbin's compile time).
#include "reductions_generic.cuh"

#define CUINLINE_RDG_KERNEL(name, S)                                                           \
  extern "C" __global__ void __launch_bounds__(1024)                                          \
      name(const __grid_constant__ rd_args_e<7> a, const __grid_constant__ rdg_shape g,         \
           const __grid_constant__ rdg_chain pro, const __grid_constant__ rdg_chain epi) {      \
    rd_generic_body<S>(a, g, pro, epi);                                                       \
  }

CUINLINE_RDG_KERNEL(cuinline_rdg_f32, float)
CUINLINE_RDG_KERNEL(cuinline_rdg_f64, double)
CUINLINE_RDG_KERNEL(cuinline_rdg_f16, ew_half)
CUINLINE_RDG_KERNEL(cuinline_rdg_bf16, ew_bf16)
