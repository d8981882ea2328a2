// elementwise.cuh — the elementwise loops; Op is a functor S -> S (see ew_ops.cuh).
//
// ew_contiguous: a flat tensor of n elements. The host picks W (elements per access, up to 16
// bytes) from the pointers' alignment, and `head` (< W) scalar elements so that in + head and
// out + head are W-element aligned. Block b's threads move kUnroll vectors each (16 bytes per
// thread): all loads first, then all stores; the exact grid covers the
// vectors once. The last block also does the scalar head and tail (fewer than 2W elements), so
// nothing is ever read or written outside [0, n).
//
// ew_strided: any strides, one element per thread (grid-stride), 64-bit indices.
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

// Vectors per thread: enough for 16 bytes per thread and no more (unroll_for in
// src/ops/elementwise_plan.hpp, which sizes the grid, must agree). Measured on an H200
// (bench/ew_tune.cu): one 16-byte vector per thread in an exact grid reaches a device-to-device
// copy's bandwidth; more work per thread (4 vectors: 95.8 %) or a grid-stride loop (89-93 %) does
// not. At most 32 registers with 32-bit indices (8 blocks of 256 threads per SM: full occupancy).
template <class S, int W>
struct ew_tile {
  enum { kBytes = sizeof(S) * W, kUnroll = kBytes >= 16 ? 1 : 16 / kBytes };
};

// U vectors of thread `first` (block-strided: u * EW_BLOCK apart, coalesced), all loads first.
template <int U, class Op, class R, class S, int W, class I>
__device__ __forceinline__ void ew_vectors(const R* vin, R* vout, I first, I nv, const Op& op) {
  union V {
    R raw;
    S v[W];
  };
  V buf[U];
  if (first + (U - 1) * EW_BLOCK < nv) {
#pragma unroll
    for (int u = 0; u < U; ++u) buf[u].raw = EW_LOAD(vin + first + u * EW_BLOCK);
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
      for (int k = 0; k < W; ++k) buf[u].v[k] = op(buf[u].v[k]);
      EW_STORE(vout + first + u * EW_BLOCK, buf[u].raw);
    }
  } else {
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (first + u * EW_BLOCK < nv) buf[u].raw = EW_LOAD(vin + first + u * EW_BLOCK);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (first + u * EW_BLOCK < nv) {
#pragma unroll
        for (int k = 0; k < W; ++k) buf[u].v[k] = op(buf[u].v[k]);
        EW_STORE(vout + first + u * EW_BLOCK, buf[u].raw);
      }
    }
  }
}

// reps (1 or 2, chosen by the host) doubles the vectors per thread when one would need between
// one and two waves of resident blocks: the launch then fits in one wave (bench/ew_tune.cu at 2^21
// float32 on an H200: 6.77 µs against 7.06). A uniform branch, no extra registers in the common path.
template <class Op, class S, int W, class I>
__global__ void __launch_bounds__(EW_BLOCK, sizeof(I) == 8 ? 4 : 8)
    ew_contiguous(const S* in, S* out, I n, I head, int reps) {
  typedef typename ew_raw<sizeof(S) * W>::type R;
  enum { kUnroll = ew_tile<S, W>::kUnroll };
  const Op op;
  const I nv = (n - head) / W;
  const R* vin = reinterpret_cast<const R*>(in + head);
  R* vout = reinterpret_cast<R*>(out + head);
  if (reps == 2) {
    ew_vectors<2 * kUnroll, Op, R, S, W, I>(
        vin, vout, static_cast<I>(blockIdx.x) * (EW_BLOCK * 2 * kUnroll) + threadIdx.x, nv, op);
  } else {
    ew_vectors<kUnroll, Op, R, S, W, I>(
        vin, vout, static_cast<I>(blockIdx.x) * (EW_BLOCK * kUnroll) + threadIdx.x, nv, op);
  }
  if (W > 1 && blockIdx.x == gridDim.x - 1) {
    const I tail = head + nv * W;
    const I t = threadIdx.x;
    if (t < head + (n - tail)) {
      const I i = t < head ? t : tail + (t - head);
      out[i] = op(in[i]);
    }
  }
}

struct ew_strided_params {
  int ndim;
  long long shape[8];
  long long in_strides[8];
  long long out_strides[8];
};

template <class Op, class S>
__global__ void __launch_bounds__(EW_BLOCK)
    ew_strided(const S* in, S* out, long long n, ew_strided_params p) {
  const Op op;
  const long long step = static_cast<long long>(gridDim.x) * EW_BLOCK;
  for (long long i = static_cast<long long>(blockIdx.x) * EW_BLOCK + threadIdx.x; i < n; i += step) {
    long long rest = i, ii = 0, oi = 0;
    for (int d = p.ndim - 1; d >= 0; --d) {
      const long long c = rest % p.shape[d];
      rest /= p.shape[d];
      ii += c * p.in_strides[d];
      oi += c * p.out_strides[d];
    }
    out[oi] = op(in[ii]);
  }
}

#endif  // CUINLINE_ELEMENTWISE_CUH
