// The generic elementwise kernels (kernel_templates/ew_generic.cuh), compiled by nvcc with the
// library for every supported arch and embedded as one fatbin (cmake/generic_kernels.cmake): a
// never-seen chain runs on them with no compile on the call's path. One kernel per dtype and vector
// width: 16-byte vectors, and single elements for operands that are not 16-byte aligned.
#include "ew_generic.cuh"

// Turing holds at most 1024 threads an SM: four blocks (ptxas ignores, with a warning, more).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define CUINLINE_EWG_MIN_BLOCKS(blocks) ((blocks) < 4 ? (blocks) : 4)
#else
#define CUINLINE_EWG_MIN_BLOCKS(blocks) (blocks)
#endif

#define CUINLINE_EWG_KERNEL(name, S, W, Functions, reps, blocks)                                           \
  extern "C" __global__ void __launch_bounds__(EW_BLOCK, CUINLINE_EWG_MIN_BLOCKS(blocks))                  \
      name(ew_nary_args a, long long n, long long head, ewg_program p,                                     \
           const __grid_constant__ ewg_divisors d) {                                                       \
    ew_generic_body<S, W, Functions, reps>(a, n, head, p, d);                                              \
  }

// Every vector kernel moves two 16-byte vectors a thread, input 0's loads issued first and each
// tensor operand's loads for both vectors back to back, with at least four resident blocks (at most
// 64 registers, no spills): 32 KB of loads in flight per SM and operand, what the specialized kernel
// has at these sizes (one 16-byte vector a thread, eight blocks) and what a copy's bandwidth needs.
// The f32 ones fit five blocks (48 registers, no spills; the other dtypes spilled there): more
// resident warps for the chains whose interpreted arithmetic bounds them by instruction issue.
// (Four vectors a thread for the 16-bit light kernels at three blocks spilled; three held 36 KB with
// fewer threads.) Chains of arithmetic, clamps, tensor operands and selects run on the light kernels
// (no activation or math step compiled in); chains with one on the full kernels. The host's grid
// follows (generic_launch in src/ops/elementwise/generic.cpp). The row / column reciprocals are a
// __grid_constant__ parameter (ewg_divisors says why).
#define CUINLINE_EWG_KERNELS(tag, S, W, blocks)                                  \
  CUINLINE_EWG_KERNEL(cuinline_ewg_##tag##_v##W, S, W, true, 2, blocks)          \
  CUINLINE_EWG_KERNEL(cuinline_ewg_##tag##_v1, S, 1, true, 1, 4)                 \
  CUINLINE_EWG_KERNEL(cuinline_ewg_##tag##_v##W##_light, S, W, false, 2, blocks) \
  CUINLINE_EWG_KERNEL(cuinline_ewg_##tag##_v1_light, S, 1, false, 1, 4)

CUINLINE_EWG_KERNELS(f32, float, 4, 5)
CUINLINE_EWG_KERNELS(f64, double, 2, 4)
CUINLINE_EWG_KERNELS(f16, ew_half, 8, 4)
CUINLINE_EWG_KERNELS(bf16, ew_bf16, 8, 4)
