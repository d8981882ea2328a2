// The generic elementwise kernels (kernel_templates/ew_generic.cuh), compiled by nvcc with the
// library for every supported arch and embedded as one fatbin (CMakeLists.txt): a never-seen chain
// runs on them with no compile on the call's path. Kernels per dtype: 16-byte vectors, and single
// elements for operands that are not 16-byte aligned; each with and without the activation steps
// (_light), with 32-bit indices and, for 2^31 elements and more, 64-bit ones (_i64).
#include "ew_generic.cuh"

// Resident blocks asked of ptxas: sm_75 holds at most 1024 threads (4 blocks) a multiprocessor.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define CUINLINE_EWG_BLOCKS(b) ((b) > 4 ? 4 : (b))
#else
#define CUINLINE_EWG_BLOCKS(b) (b)
#endif

#define CUINLINE_EWG_KERNEL(name, S, W, Functions, reps, blocks, I)                                        \
  extern "C" __global__ void __launch_bounds__(EW_BLOCK, CUINLINE_EWG_BLOCKS(blocks))                      \
      name(ew_nary_args a, long long n, long long head, ewg_program p) {                                   \
    ew_generic_body<S, W, Functions, reps, I>(a, n, head, p);                                              \
  }

// Under 2^31 elements (the kernels without a suffix): 32-bit indices, one 16-byte vector a thread
// (16 bytes of single elements in the _v1 kernels) and eight resident blocks (32 registers), the
// specialized kernel's shape. Against two vectors a thread at four blocks with 64-bit indices (the
// _i64 kernels, for larger tensors), NVIDIA H200, [8192, 28672], L2 flushed, median of 30:
// relu / mul(0.5)|leaky_relu(0.02) / add(in1)|gelu took 0.232 / 0.241 / 0.485 ms against 0.289 /
// 0.328 / 0.595 in bf16, 0.229 / 0.239 / 0.469 against 0.285 / 0.322 / 0.602 in f16, 0.442 /
// 0.455 / 0.689 against 0.446 / 0.471 / 0.759 in f32 (the specialized kernels 0.222 / 0.222 / 0.338
// bf16, 0.441 / 0.441 f32 on the memory-bound chains). Chains of arithmetic, clamps, tensor
// operands and selects run on the light kernels (no activation or math step compiled in); chains
// with one on the full kernels. The host's grid follows (src/ops/elementwise/generic.cpp).
#define CUINLINE_EWG_KERNELS(tag, S, W)                                                          \
  CUINLINE_EWG_KERNEL(cuinline_ewg_##tag##_v##W, S, W, true, 1, 8, unsigned)                     \
  CUINLINE_EWG_KERNEL(cuinline_ewg_##tag##_v1, S, 1, true, 1, 8, unsigned)                       \
  CUINLINE_EWG_KERNEL(cuinline_ewg_##tag##_v##W##_light, S, W, false, 1, 8, unsigned)            \
  CUINLINE_EWG_KERNEL(cuinline_ewg_##tag##_v1_light, S, 1, false, 1, 8, unsigned)                \
  CUINLINE_EWG_KERNEL(cuinline_ewg_##tag##_v##W##_i64, S, W, true, 2, 4, long long)              \
  CUINLINE_EWG_KERNEL(cuinline_ewg_##tag##_v1_i64, S, 1, true, 1, 4, long long)                  \
  CUINLINE_EWG_KERNEL(cuinline_ewg_##tag##_v##W##_light_i64, S, W, false, 2, 4, long long)       \
  CUINLINE_EWG_KERNEL(cuinline_ewg_##tag##_v1_light_i64, S, 1, false, 1, 4, long long)

CUINLINE_EWG_KERNELS(f32, float, 4)
CUINLINE_EWG_KERNELS(f64, double, 2)
CUINLINE_EWG_KERNELS(f16, ew_half, 8)
CUINLINE_EWG_KERNELS(bf16, ew_bf16, 8)
