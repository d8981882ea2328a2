// The generic conv2d kernels (kernel_templates/conv2d_generic_rt.cuh, conv2d_generic_rt_gemm.cuh,
// conv2d_generic_rt_mma.cuh), compiled by nvcc with the library for every supported arch and
// embedded as a fatbin beside the generic elementwise kernels' (CMakeLists.txt): a never-seen conv2d
// variant runs on them with no compile on the call's path. Per storage dtype: the direct kernel (a
// pixel's tile of output channels a thread), its pixel-row form and the depthwise one (channels
// fastest); for f32 the implicit GEMM on the FP32 pipes; for f16 and bf16 the tensor-core ones, their
// vector form (in 64 x 64 and wide 128 x 128 tiles) and gathered form (sm_80 and newer; the host
// picks them only there), and the gathered form's weight-packing kernel. Compiled as the
// specialized conv kernels are (--fmad=false, no CUINLINE_EW_FMAD), so the epilogue's steps round
// as theirs do.
#include "conv2d_generic_rt_gemm.cuh"
#include "conv2d_generic_rt_mma.cuh"

#define CUINLINE_CONV2D_RT_KERNEL(name, T, body, threads)                                                      \
  extern "C" __global__ void __launch_bounds__(threads)                                                        \
      name(const T* __restrict__ input, const T* __restrict__ weight, const T* __restrict__ bias,              \
           T* __restrict__ output, const T* __restrict__ residual, cuinline_conv2d_chan chan,                  \
           cuinline_conv2d_rt_params p, ewg_program e) {                                                       \
    body(input, weight, bias, output, residual, chan, p, e);                                                   \
  }
#define CUINLINE_CONV2D_RT_KERNELS(tag, T)                                                                     \
  CUINLINE_CONV2D_RT_KERNEL(cuinline_conv2d_rt_##tag, T, (cuinline_conv2d_rt_mode_body<T, 0>),                 \
                            CUINLINE_CONV2D_RT_THREADS)                                                        \
  CUINLINE_CONV2D_RT_KERNEL(cuinline_conv2d_rt_dw_##tag, T, (cuinline_conv2d_rt_mode_body<T, 1>),              \
                            CUINLINE_CONV2D_RT_THREADS)                                                        \
  CUINLINE_CONV2D_RT_KERNEL(cuinline_conv2d_rt_px_##tag, T, (cuinline_conv2d_rt_mode_body<T, 4>),              \
                            CUINLINE_CONV2D_RT_THREADS)

CUINLINE_CONV2D_RT_KERNELS(f32, float)
CUINLINE_CONV2D_RT_KERNELS(f64, double)
CUINLINE_CONV2D_RT_KERNELS(f16, ew_half)
CUINLINE_CONV2D_RT_KERNELS(bf16, ew_bf16)
CUINLINE_CONV2D_RT_KERNEL(cuinline_conv2d_rt_gemm_f32, float, (cuinline_conv2d_rt_gemm_body<float>),
                          CUINLINE_CONV2D_RT_GEMM_THREADS)
CUINLINE_CONV2D_RT_KERNEL(cuinline_conv2d_rt_mma_f16, ew_half, (cuinline_conv2d_rt_mma_body<ew_half, false>),
                          CUINLINE_CONV2D_RT_MMA_THREADS)
CUINLINE_CONV2D_RT_KERNEL(cuinline_conv2d_rt_mma_bf16, ew_bf16, (cuinline_conv2d_rt_mma_body<ew_bf16, false>),
                          CUINLINE_CONV2D_RT_MMA_THREADS)
CUINLINE_CONV2D_RT_KERNEL(cuinline_conv2d_rt_mmag_f16, ew_half, (cuinline_conv2d_rt_mma_body<ew_half, true>),
                          CUINLINE_CONV2D_RT_MMA_THREADS)
#define CUINLINE_CONV2D_RT_PACK_KERNEL(tag, T)                                                                  \
  extern "C" __global__ void __launch_bounds__(CUINLINE_CONV2D_RT_THREADS) cuinline_conv2d_rt_wpack_##tag(      \
      const T* __restrict__ weight, T* __restrict__ packed, cuinline_conv2d_rt_params p, int kpad) {           \
    cuinline_conv2d_rt_pack_weight_body<T>(weight, packed, p, kpad);                                            \
  }
CUINLINE_CONV2D_RT_PACK_KERNEL(f16, ew_half)
CUINLINE_CONV2D_RT_PACK_KERNEL(bf16, ew_bf16)
CUINLINE_CONV2D_RT_KERNEL(cuinline_conv2d_rt_mmag_bf16, ew_bf16, (cuinline_conv2d_rt_mma_body<ew_bf16, true>),
                          CUINLINE_CONV2D_RT_MMA_THREADS)
// The vector form's wide tiling (launched with TileWide::kSharedBytes of dynamic shared memory).
CUINLINE_CONV2D_RT_KERNEL(
    cuinline_conv2d_rt_mmaw_f16, ew_half,
    (cuinline_conv2d_rt_mma_body<ew_half, false, cuinline_conv2d_rt_mma_detail::TileWide>),
    CUINLINE_CONV2D_RT_MMA_THREADS)
CUINLINE_CONV2D_RT_KERNEL(
    cuinline_conv2d_rt_mmaw_bf16, ew_bf16,
    (cuinline_conv2d_rt_mma_body<ew_bf16, false, cuinline_conv2d_rt_mma_detail::TileWide>),
    CUINLINE_CONV2D_RT_MMA_THREADS)
