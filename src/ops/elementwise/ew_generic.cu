// The generic elementwise kernels (kernel_templates/ew_generic.cuh), compiled by nvcc with the
// library for every supported arch and embedded as one fatbin (cmake/generic_kernels.cmake): a
// never-seen chain runs on them with no compile on the call's path. One kernel per dtype and vector
// width: 16-byte vectors, and single elements for operands that are not 16-byte aligned.
#include "ew_generic.cuh"

#define CUINLINE_EWG_KERNEL(name, S, W, Functions, reps, blocks)                                           \
  extern "C" __global__ void __launch_bounds__(EW_BLOCK, blocks)                                           \
      name(ew_nary_args a, long long n, long long head, ewg_program p) {                                   \
    ew_generic_body<S, W, Functions, reps>(a, n, head, p);                                                 \
  }

// Every vector kernel moves two 16-byte vectors a thread, both loads issued first, with four resident
// blocks (64 registers, no spills): 32 KB of loads in flight per SM, what a copy's bandwidth needs.
// Chains of arithmetic, clamps, tensor operands and selects run on the light kernels (no activation
// or math step compiled in); chains with one on the full kernels. The host's grid follows
// (src/ops/elementwise/generic.cpp).
#define CUINLINE_EWG_KERNELS(tag, S, W)                                        \
  CUINLINE_EWG_KERNEL(cuinline_ewg_##tag##_v##W, S, W, true, 2, 4)             \
  CUINLINE_EWG_KERNEL(cuinline_ewg_##tag##_v1, S, 1, true, 1, 4)               \
  CUINLINE_EWG_KERNEL(cuinline_ewg_##tag##_v##W##_light, S, W, false, 2, 4)    \
  CUINLINE_EWG_KERNEL(cuinline_ewg_##tag##_v1_light, S, 1, false, 1, 4)

CUINLINE_EWG_KERNELS(f32, float, 4)
CUINLINE_EWG_KERNELS(f64, double, 2)
CUINLINE_EWG_KERNELS(f16, ew_half, 8)
CUINLINE_EWG_KERNELS(bf16, ew_bf16, 8)
