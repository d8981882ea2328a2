// ew_table.cuh — the bf16 table form of the elementwise kernels. A chain rounds to the dtype after
// every step, so a run of one-input steps maps a bf16 value to a bf16 value: a function of 16 bits.
// Where such a run ends the chain and holds a compute-bound activation (gelu, mish, softplus, ...:
// src/ops/elementwise/table.hpp), each block computes the run once for the 8192 bf16 values of
// magnitude 2^-16 to 2^16 (both signs) into shared memory, with the very code the plain kernel
// runs, and then looks each element up: the same bits at a few instructions an element instead of
// the function's 20-40. Values outside the table (zeros, |x| < 2^-16, |x| >= 2^16, Inf, NaN) run
// the steps themselves.
//
// A block of EWT_BLOCK threads, EWT_BLOCKS_PER_SM a multiprocessor (16 KiB of table each), walks the
// vectors grid-stride, its first vector's loads in flight while the table is built and each next
// vector's loaded before the current one is stored; the last block also does the scalar head and
// tail. The planner takes this form for large tensors only (table.hpp: kTableMinElements), where
// the table's 8 evaluations a thread are small beside the elements a thread looks up; it is a
// module of its own (NaryKey::table), so a variant's small calls compile none of it.
//
// ew_nary_table: the specialized kernel. P is the chain's steps before the run (the rendered N-ary
// functor, one output), R the run (the rendered one-input functor). The generic kernel's table form
// (ew_generic.cuh) interprets the same two parts.
#ifndef CUINLINE_EW_TABLE_CUH
#define CUINLINE_EW_TABLE_CUH

#include "ew_nary.cuh"

#define EWT_BLOCK 1024
#define EWT_BLOCKS_PER_SM 2
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define EWT_MIN_BLOCKS 1  // sm_75 holds 1024 threads a multiprocessor
#else
#define EWT_MIN_BLOCKS EWT_BLOCKS_PER_SM
#endif
#define EWT_FIRST 0x3780u  // 111 << 7: the bf16 magnitude bits of 2^-16
#define EWT_HALF 4096u     // entries of a sign: the 32 binades [2^-16, 2^16)
#define EWT_SIZE 8192u

// The table slot of bf16 bits b (the sign in bit 12), or EWT_SIZE where b is outside the table.
__device__ __forceinline__ unsigned ewt_slot(unsigned b) {
  const unsigned d = (b & 0x7fffu) - EWT_FIRST;
  return d < EWT_HALF ? (d | ((b >> 3) & 0x1000u)) : EWT_SIZE;
}

// The bf16 bits of slot t.
__device__ __forceinline__ unsigned short ewt_bits(unsigned t) {
  return static_cast<unsigned short>(((t >> 12) << 15) | (EWT_FIRST + (t & (EWT_HALF - 1u))));
}

// The table's value of x, or the run R computed where x is outside the table, inline at each
// element. Through one copy of the run for a vector's values outside the table (a mask, the values
// in local memory on that rare path) the kernel ran add(in1)|gelu 1.22x slower (0.334 against 0.273
// ms, H200, [8192, 28672]: the two inputs' vectors and the mask leave the common path short of its
// 32 registers); a call (__noinline__) spilled the common path's values around it.
template <class R>
__device__ __forceinline__ ew_bf16 ewt_lookup(const unsigned short* table, ew_bf16 x) {
  const unsigned t = ewt_slot(x.bits);
  if (t < EWT_SIZE) return ew_bf16{table[t]};
  const R run;
  return run(x);
}

// The table: slot t holds the run's value of ewt_bits(t).
template <class R>
__device__ __forceinline__ void ewt_fill(unsigned short* table, unsigned threads) {
  const R run;
  for (unsigned t = threadIdx.x; t < EWT_SIZE; t += threads) table[t] = run(ew_bf16{ewt_bits(t)}).bits;
}

template <class Sh, class P, class R, class I>
__global__ void __launch_bounds__(EWT_BLOCK, EWT_MIN_BLOCKS) ew_nary_table(ew_nary_args a, I n, I head) {
  typedef ew_bf16 S;
  typedef typename ew_raw<16>::type Raw;
  enum { NI = Sh::kInputs, W = 8 };
  __shared__ unsigned short table[EWT_SIZE];
  const P pre;
  const I nv = (n - head) / W;
  const I stride = static_cast<I>(gridDim.x) * EWT_BLOCK;
  I v = static_cast<I>(blockIdx.x) * EWT_BLOCK + threadIdx.x;
  S x[NI][W];
  if (v < nv) ewn_inputs<Sh, S, W, I>::load(a, head + v * W, x);  // in flight while the table is built
  ewt_fill<R>(table, EWT_BLOCK);
  __syncthreads();
  for (; v < nv; v += stride) {
    union {
      Raw raw;
      S s[W];
    } y;
#pragma unroll
    for (int w = 0; w < W; ++w) {
      S xs[NI], ys[1];
#pragma unroll
      for (int k = 0; k < NI; ++k) xs[k] = x[k][w];
      pre(xs, ys);
      y.s[w] = ewt_lookup<R>(table, ys[0]);
    }
    if (v + stride < nv) ewn_inputs<Sh, S, W, I>::load(a, head + (v + stride) * W, x);
    EW_STORE(reinterpret_cast<Raw*>(static_cast<S*>(a.out[0]) + head) + v, y.raw);
  }
  if (blockIdx.x == gridDim.x - 1) {
    const I tail = head + nv * W;
    const I t = threadIdx.x;
    if (t < head + (n - tail)) {
      const I i = t < head ? t : tail + (t - head);
      S xs[NI], ys[1];
      ewn_inputs<Sh, S, W, I>::load_one(a, i, xs);
      pre(xs, ys);
      static_cast<S*>(a.out[0])[i] = ewt_lookup<R>(table, ys[0]);
    }
  }
}

#endif  // CUINLINE_EW_TABLE_CUH
