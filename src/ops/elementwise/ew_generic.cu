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

#define CUINLINE_EWG_KERNEL(name, body, S, W, Functions, reps, blocks, I)                                  \
  extern "C" __global__ void __launch_bounds__(EW_BLOCK, CUINLINE_EWG_BLOCKS(blocks))                      \
      name(ew_nary_args a, long long n, long long head, ewg_program p) {                                   \
    body<S, W, Functions, reps, I>(a, n, head, p);                                                         \
  }

// Kernels per dtype. The 16-byte-vector kernels name their vectors a thread (_r<reps>), which the
// host's grid follows (generic_vectors_per_thread, src/ops/elementwise/generic.cpp: a kernel of another
// count is not found). Under 2^31 elements (no suffix): 32-bit indices (fewer instructions an
// element, and 32 registers a thread for full occupancy); from 2^31, 64-bit ones (_i64), two vectors
// a thread at four blocks.
// - The light kernels (chains of arithmetic, clamps, tensor operands and selects: no activation or
//   math step compiled in): one vector a thread at eight resident blocks, the specialized kernel's
//   shape, the steps run over the thread's values with each input's pattern tested once
//   (ew_generic_body_wide). The f64 full kernel: the same shape on ew_generic_body.
// - The full kernels (a chain with an activation or math step) run each step once over all of a
//   thread's vectors: f32 two vectors at six blocks (40 registers), each step dispatched once for 8
//   values; f16 and bf16 three vectors at four blocks (64 registers), once for 24 values.
// NVIDIA H200, [8192, 28672], L2 flushed, median of 30, add(row)|gelu (scratch A/B of every shape
// against a hand-written specialized kernel at 0.453 ms f32, 0.346 bf16, 0.331 f16):
//   f32 two vectors at six blocks 0.505 ms; four at four 0.520, four at five 0.510, three at six
//   0.513, two at seven 0.551, two at eight 0.512-0.551 (unstable), one vector a thread 0.563.
//   bf16 three vectors at four blocks 0.437; four at three 0.432 (224 bytes spilled), three at
//   three 0.459, two at four 0.458, two at six 0.478, one vector at eight (the previous shape) 0.466,
//   at six 0.459, at four 0.527; four at four 0.762 and three at six 1.51 (spills).
//   f16 three at four 0.435, three at three 0.431, two at four 0.434, one at eight 0.449.
// bf16 and f16 are compute-bound here, the specialized kernel too (0.346 ms: 64 % of a copy's
// bandwidth, 0.222). What the generic kernel adds is per step, not per dispatch: each step's
// results rounded to 16 bits and packed in pairs, unpacked by the next. Tried and not taken (same
// machine, bf16): a kernel whose switch holds gelu alone (the other functions compiled out) 0.424
// at three vectors and four blocks, 0.419 at two and four, slower at other shapes (two at three
// 0.458, at two 0.591; one at four 0.538, at five 0.481; three at three 0.440, at two 0.530): 4 %
// for a kernel per function; without the per-step pins (ewg_pin) 0.436, the same.
// The memory-bound chains (relu) on these shapes: within 2 % of the light kernels' figures.
// Row and column operands divide by their period with the host's multiply-shift divisor.
#define CUINLINE_EWG_KERNELS(tag, S, W, full_body, full_reps, full_blocks)                                      \
  CUINLINE_EWG_KERNEL(cuinline_ewg_##tag##_v##W##_r##full_reps, full_body, S, W, true, full_reps, full_blocks, \
                      unsigned)                                                                                 \
  CUINLINE_EWG_KERNEL(cuinline_ewg_##tag##_v1, ew_generic_body, S, 1, true, 1, 8, unsigned)                     \
  CUINLINE_EWG_KERNEL(cuinline_ewg_##tag##_v##W##_r1_light, ew_generic_body_wide, S, W, false, 1, 8, unsigned) \
  CUINLINE_EWG_KERNEL(cuinline_ewg_##tag##_v1_light, ew_generic_body, S, 1, false, 1, 8, unsigned)             \
  CUINLINE_EWG_KERNEL(cuinline_ewg_##tag##_v##W##_r2_i64, ew_generic_body, S, W, true, 2, 4, long long)        \
  CUINLINE_EWG_KERNEL(cuinline_ewg_##tag##_v1_i64, ew_generic_body, S, 1, true, 1, 4, long long)               \
  CUINLINE_EWG_KERNEL(cuinline_ewg_##tag##_v##W##_r2_light_i64, ew_generic_body, S, W, false, 2, 4, long long) \
  CUINLINE_EWG_KERNEL(cuinline_ewg_##tag##_v1_light_i64, ew_generic_body, S, 1, false, 1, 4, long long)

CUINLINE_EWG_KERNELS(f32, float, 4, ew_generic_body_wide, 2, 6)
CUINLINE_EWG_KERNELS(f64, double, 2, ew_generic_body, 1, 8)
CUINLINE_EWG_KERNELS(f16, ew_half, 8, ew_generic_body_wide, 3, 4)
CUINLINE_EWG_KERNELS(bf16, ew_bf16, 8, ew_generic_body_wide, 3, 4)
// The bf16 table form (ew_table.cuh): the specialized table kernel's shape, 1024-thread blocks, two
// a multiprocessor (one before sm_80), one vector a thread at a time; 32-bit indices only (the host
// takes it under 2^31 elements).
extern "C" __global__ void __launch_bounds__(EWT_BLOCK, EWT_MIN_BLOCKS)
    cuinline_ewg_bf16_v8_table(ew_nary_args a, long long n, long long head, ewg_program p, int from) {
  ew_generic_body_table<unsigned, EWT_BLOCK, 1>(a, n, head, p, from);
}
