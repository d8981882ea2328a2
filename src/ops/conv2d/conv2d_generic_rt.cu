// The generic conv2d kernels (kernel_templates/conv2d_generic_rt.cuh), compiled by nvcc with the
// library for every supported arch and embedded as a fatbin beside the generic elementwise kernels'
// (CMakeLists.txt): a never-seen conv2d variant runs on them with no compile on the call's path. One
// kernel per storage dtype. Compiled as the specialized conv kernels are (--fmad=false, no
// CUINLINE_EW_FMAD), so the epilogue's steps round as theirs do.
#include "conv2d_generic_rt.cuh"

#define CUINLINE_CONV2D_RT_KERNEL(name, T)                                                                     \
  extern "C" __global__ void __launch_bounds__(CUINLINE_CONV2D_RT_THREADS)                                     \
      name(const T* __restrict__ input, const T* __restrict__ weight, const T* __restrict__ bias,              \
           T* __restrict__ output, const T* __restrict__ residual, cuinline_conv2d_chan chan,                  \
           cuinline_conv2d_rt_params p, ewg_program e) {                                                       \
    cuinline_conv2d_rt_body<T>(input, weight, bias, output, residual, chan, p, e);                             \
  }

CUINLINE_CONV2D_RT_KERNEL(cuinline_conv2d_rt_f32, float)
CUINLINE_CONV2D_RT_KERNEL(cuinline_conv2d_rt_f64, double)
CUINLINE_CONV2D_RT_KERNEL(cuinline_conv2d_rt_f16, ew_half)
CUINLINE_CONV2D_RT_KERNEL(cuinline_conv2d_rt_bf16, ew_bf16)
