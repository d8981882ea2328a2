// elementwise.cuh — what every elementwise kernel shares: the block size, how a vector is loaded
// and stored, and how many vectors a thread moves. The kernels are in ew_nary.cuh (one input or
// several); the op is a functor (ew_ops.cuh, src/templates/render.cpp).
#ifndef CUINLINE_ELEMENTWISE_CUH
#define CUINLINE_ELEMENTWISE_CUH

#include "ew_ops.cuh"

#define EW_BLOCK 256

// How a vector is loaded and stored (bench/run_gpu_elementwise.sh tries cache-streaming hints,
// __ldcs / __stcs, through a CUINLINE_TEMPLATE_DIR copy that redefines these two lines).
// Loads take the non-coherent path (ld.global.nc): a plain load measured 97.4 % of a copy's
// bandwidth on an H200 where ld.global.nc reached 100 % (bench/ew_tune.cu). It is safe in place
// (out == in) too: each address is read once, by the thread that writes it, before it writes it.
#define EW_LOAD(p) __ldg(p)
#define EW_STORE(p, v) (*(p) = (v))

// Vectors per thread: enough for 16 bytes per thread and operand, and no more (unroll_for in
// src/ops/elementwise/plan.hpp, which sizes the grid, must agree). Measured on an H200
// (bench/ew_tune.cu): one 16-byte vector per thread in an exact grid reaches a device-to-device
// copy's bandwidth; more work per thread (4 vectors: 95.8 %) or a grid-stride loop (89-93 %) does
// not. At most 32 registers with 32-bit indices (8 blocks of 256 threads per SM: full occupancy).
template <class S, int W>
struct ew_tile {
  enum { kBytes = sizeof(S) * W, kUnroll = kBytes >= 16 ? 1 : 16 / kBytes };
};

#endif  // CUINLINE_ELEMENTWISE_CUH
