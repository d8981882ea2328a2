// The generic elementwise kernels (kernel_templates/ew_generic.cuh), compiled by nvcc with the
// library for every supported arch and embedded as one fatbin (cmake/generic_kernels.cmake): a
// never-seen chain runs on them with no compile on the call's path. One kernel per dtype and vector
// width: 16-byte vectors, and single elements for operands that are not 16-byte aligned.
#include "ew_generic.cuh"

#define CUINLINE_EWG_KERNEL(name, S, W)                                                                    \
  extern "C" __global__ void __launch_bounds__(EW_BLOCK)                                                   \
      name(ew_nary_args a, long long n, long long head, ewg_program p) {                                   \
    ew_generic_body<S, W>(a, n, head, p);                                                                  \
  }

CUINLINE_EWG_KERNEL(cuinline_ewg_f32_v4, float, 4)
CUINLINE_EWG_KERNEL(cuinline_ewg_f32_v1, float, 1)
CUINLINE_EWG_KERNEL(cuinline_ewg_f64_v2, double, 2)
CUINLINE_EWG_KERNEL(cuinline_ewg_f64_v1, double, 1)
CUINLINE_EWG_KERNEL(cuinline_ewg_f16_v8, ew_half, 8)
CUINLINE_EWG_KERNEL(cuinline_ewg_f16_v1, ew_half, 1)
CUINLINE_EWG_KERNEL(cuinline_ewg_bf16_v8, ew_bf16, 8)
CUINLINE_EWG_KERNEL(cuinline_ewg_bf16_v1, ew_bf16, 1)
