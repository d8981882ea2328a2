// ew_generic.cuh — the generic elementwise kernel: one binary per dtype that runs any chain of steps,
// its steps, constants and input patterns passed as run-time data (ewg_program). It serves a
// never-seen chain at once while the specialized kernel (ew_nary.cuh, constants baked in) compiles in
// the background (src/ops/specialize.cpp). Built with the library by nvcc for every supported arch
// (src/ops/elementwise/ew_generic.cu), never by NVRTC at run time.
//
// Each step calls the same ew_ops.cuh function the specialized kernel's functor calls, with the same
// opmath constants (the host lowers a chain once, detail::lower_chain in src/templates/render.cpp,
// for both), and the module is compiled as a chain with activation steps is (contraction on,
// CUINLINE_EW_FMAD: the arithmetic steps spell their rounding out), so the generic kernel computes
// the specialized one's results bit for bit. Loads and stores are the specialized kernel's 16-byte
// vectors (W elements). Two bodies: ew_generic_body runs the steps on one vector at a time (each
// dispatched once for its W elements); ew_generic_body_wide runs each step once over all of a
// thread's vectors, each input's pattern tested once for them (ew_generic.cu says which kernel
// takes which). Indices are of type I: 32-bit where the tensor allows (fewer instructions an
// element, and 32 registers a thread for full occupancy), 64-bit past 2^31 elements.
#ifndef CUINLINE_EW_GENERIC_CUH
#define CUINLINE_EW_GENERIC_CUH

#include "ew_generic_steps.cuh"
#include "ew_nary.cuh"
#include "ew_table.cuh"

#define EWG_FULL EWN_FULL
#define EWG_SCALAR EWN_SCALAR
#define EWG_ROW EWN_ROW
#define EWG_COL EWN_COL

// e / period of input k: the host's multiply-shift divisor where it set one (32-bit indices).
template <class I>
__device__ __forceinline__ I ewg_quotient(const ew_nary_args& a, const ewg_program& p, int k, I e) {
  if (sizeof(I) == 4 && p.div_mul[k] != 0) {
    return static_cast<I>(__umulhi(static_cast<unsigned>(e), p.div_mul[k]) >> p.div_shift[k]);
  }
  return e / static_cast<I>(a.period[k]);
}

// Input k's element i (the scalar head and tail).
template <class S, class I>
__device__ __forceinline__ S ewg_load_one(const ew_nary_args& a, const ewg_program& p, int k, I i) {
  const int pattern = p.pattern[k];
  const S* in = static_cast<const S*>(a.in[k]);
  return pattern == EWG_SCALAR ? in[0]
         : pattern == EWG_COL  ? in[ewg_quotient(a, p, k, i)]
         : pattern == EWG_ROW  ? in[i - ewg_quotient(a, p, k, i) * static_cast<I>(a.period[k])]
                               : in[i];
}

// Input k's vectors of a thread: U block-strided vectors of W elements (vector u at head + (first +
// u * EW_BLOCK) * W), zero past the last one (nv). The input's pattern is tested once for all U.
template <class S, int W, int U, class I>
__device__ __forceinline__ void ewg_load_vectors(const ew_nary_args& a, const ewg_program& p, int k, I head, I first,
                                                 I nv, S (&x)[U * W]) {
  typedef typename ew_raw<sizeof(S) * W>::type R;
  union V {
    R raw;
    S s[W];
  };
  const int pattern = p.pattern[k];
  const S* in = static_cast<const S*>(a.in[k]);
  if (pattern == EWG_SCALAR) {
    const S s = ewn_ldg1(in);
#pragma unroll
    for (int i = 0; i < U * W; ++i) x[i] = s;
    return;
  }
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const I v = first + static_cast<I>(u) * EW_BLOCK;
    const I e = head + v * W;
    V r;
    if (v >= nv) {
#pragma unroll
      for (int w = 0; w < W; ++w) r.s[w] = ewg_storage<S>(0);
    } else if (pattern == EWG_FULL) {
      r.raw = EW_LOAD(reinterpret_cast<const R*>(in + e));
    } else if (pattern == EWG_ROW) {
      r.raw = EW_LOAD(reinterpret_cast<const R*>(in + (e - ewg_quotient(a, p, k, e) * static_cast<I>(a.period[k]))));
    } else {
      const S s = ewn_ldg1(in + ewg_quotient(a, p, k, e));
#pragma unroll
      for (int w = 0; w < W; ++w) r.s[w] = s;
    }
#pragma unroll
    for (int w = 0; w < W; ++w) x[u * W + w] = r.s[w];
  }
}

// Input k's W elements at e: a vector (W > 1, aligned by the host's plan) or one element.
template <class S, int W, class I>
__device__ __forceinline__ void ewg_operand(const ew_nary_args& a, const ewg_program& p, int k, I e, S (&x)[W]) {
  if (W == 1) {
    x[0] = ewg_load_one<S>(a, p, k, e);
  } else {
    ewg_load_vectors<S, W, 1, I>(a, p, k, e, I(0), I(1), x);
  }
}

// The chain's steps before `to` on W elements at e: y holds input 0 and receives the result. A
// tensor operand is loaded where a step uses it (few live registers: the occupancy a memory-bound
// chain needs). Functions: the activation / math steps are compiled in (the light kernels run
// chains without them).
template <class S, int W, bool Functions, class I>
__device__ __forceinline__ void ewg_run_to(const ew_nary_args& a, const ewg_program& p, I e, S (&y)[W],
                                           int to) {
  for (int s = 0; s < to; ++s) {
    const ewg_step& st = p.step[s];
    const ewg_opmath<S> k(st);
    if (st.fn >= EWG_ADD_T && st.fn <= EWG_WHERE_S) {  // a tensor operand or a condition
      S o[W], c[W];
      if (st.fn <= EWG_WHERE_T) ewg_operand<S, W, I>(a, p, st.operand, e, o);
      if (st.fn >= EWG_WHERE_T) ewg_operand<S, W, I>(a, p, st.cond, e, c);
      ewg_step_values<S, W, false>(st, k, y, o, c);
    } else {
      ewg_step_values<S, W, Functions>(st, k, y, y, y);
    }
  }
}

// The whole chain on W elements at e.
template <class S, int W, bool Functions, class I>
__device__ __forceinline__ void ewg_run(const ew_nary_args& a, const ewg_program& p, I e, S (&y)[W]) {
  ewg_run_to<S, W, Functions, I>(a, p, e, y, p.steps);
}

// The scalar head (`head` elements) and tail (from `tail` to n) of a vector kernel, one element a
// thread of the last block (fewer than 2W in all).
template <class S, bool Functions, class I>
__device__ __forceinline__ void ewg_ends(const ew_nary_args& a, const ewg_program& p, I n, I head, I tail) {
  const I t = threadIdx.x;
  if (t < head + (n - tail)) {
    const I i = t < head ? t : tail + (t - head);
    S x[1];
    x[0] = ewg_load_one<S>(a, p, 0, i);
    ewg_run<S, 1, Functions, I>(a, p, i, x);
    static_cast<S*>(a.out[0])[i] = x[0];
  }
}

// The generic kernel: contiguous output, n elements; `head` (< W) scalar elements, then whole
// vectors of W, each thread kUnroll (16 bytes a thread, ew_nary's) times Reps block-strided vectors,
// every load issued first, then the scalar tail in the last block. The grid covers the vectors once.
// I: the index type (the host passes 32-bit kernels only n < 2^31).
template <class S, int W, bool Functions, int Reps, class I>
__device__ __forceinline__ void ew_generic_body(const ew_nary_args& a, long long n64, long long head64,
                                                const ewg_program& p) {
  typedef typename ew_raw<sizeof(S) * W>::type R;
  enum { kUnroll = ew_tile<S, W>::kUnroll * Reps };
  const I n = static_cast<I>(n64), head = static_cast<I>(head64);
  const I nv = (n - head) / W;
  const I first = static_cast<I>(blockIdx.x) * (EW_BLOCK * kUnroll) + threadIdx.x;
  union V {
    R raw;
    S s[W];
  };
  V y[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {  // every load issued first
    const I v = first + static_cast<I>(u) * EW_BLOCK;
    if (v < nv) ewg_operand<S, W, I>(a, p, 0, head + v * W, y[u].s);
  }
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const I v = first + static_cast<I>(u) * EW_BLOCK;
    if (v >= nv) break;
    ewg_run<S, W, Functions, I>(a, p, head + v * W, y[u].s);
    EW_STORE(reinterpret_cast<R*>(static_cast<S*>(a.out[0]) + head) + v, y[u].raw);
  }
  if (W > 1 && blockIdx.x == gridDim.x - 1) ewg_ends<S, Functions, I>(a, p, n, head, head + nv * W);
}

// The kernel with the steps as the outer loop: each step dispatched once for all of a thread's
// kUnroll vectors (kUnroll * W values), its tensor operand loaded for all of them before its first
// use. Values past the last vector are zero and never stored.
template <class S, int W, bool Functions, int Reps, class I>
__device__ __forceinline__ void ew_generic_body_wide(const ew_nary_args& a, long long n64, long long head64,
                                                     const ewg_program& p) {
  typedef typename ew_raw<sizeof(S) * W>::type R;
  enum { kUnroll = ew_tile<S, W>::kUnroll * Reps, kN = kUnroll * W };
  const I n = static_cast<I>(n64), head = static_cast<I>(head64);
  const I nv = (n - head) / W;
  const I first = static_cast<I>(blockIdx.x) * (EW_BLOCK * kUnroll) + threadIdx.x;
  S y[kN];
  ewg_load_vectors<S, W, kUnroll, I>(a, p, 0, head, first, nv, y);  // every load issued first
  for (int s = 0; s < p.steps; ++s) {
    const ewg_step& st = p.step[s];
    const ewg_opmath<S> k(st);
    if (st.fn >= EWG_ADD_T && st.fn <= EWG_WHERE_S) {  // a tensor operand or a condition
      S o[kN], c[kN];
      if (st.fn <= EWG_WHERE_T) ewg_load_vectors<S, W, kUnroll, I>(a, p, st.operand, head, first, nv, o);
      if (st.fn >= EWG_WHERE_T) ewg_load_vectors<S, W, kUnroll, I>(a, p, st.cond, head, first, nv, c);
      ewg_step_values<S, kN, false>(st, k, y, o, c);
    } else {
      ewg_step_values<S, kN, Functions>(st, k, y, y, y);
    }
  }
  union V {
    R raw;
    S s[W];
  };
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const I v = first + static_cast<I>(u) * EW_BLOCK;
    if (v >= nv) break;
    V r;
#pragma unroll
    for (int w = 0; w < W; ++w) r.s[w] = y[u * W + w];
    EW_STORE(reinterpret_cast<R*>(static_cast<S*>(a.out[0]) + head) + v, r.raw);
  }
  if (W > 1 && blockIdx.x == gridDim.x - 1) ewg_ends<S, Functions, I>(a, p, n, head, head + nv * W);
}

// The table form (ew_table.cuh) of a bf16 chain over one input whose steps from `from` on hold an
// activation (the host's rule, src/ops/elementwise/table.cpp; no activation before it). The steps
// before `from` (scalar arithmetic) run on each vector; the steps from `from` on fill the table and
// serve the values outside it.
__device__ __forceinline__ ew_bf16 ewg_run_from(const ewg_program& p, int from, ew_bf16 x) {
  ew_bf16 y[1] = {x};
  for (int s = from; s < p.steps; ++s) {
    const ewg_step& st = p.step[s];
    const ewg_opmath<ew_bf16> k(st);
    ewg_step_values<ew_bf16, 1, true>(st, k, y, y, y);
  }
  return y[0];
}

// r[w] = the table's value of x[w]; the values outside the table go through one copy of the
// interpreted run, on that rare path only (their arrays in local memory there): a copy a value
// inline made the kernel's code too large to run at speed.
template <int W>
__device__ __forceinline__ void ewg_table_values(const unsigned short* table, const ewg_program& p, int from,
                                                 const ew_bf16 (&x)[W], ew_bf16 (&r)[W]) {
  unsigned mask = 0;
#pragma unroll
  for (int w = 0; w < W; ++w) {
    const unsigned t = ewt_slot(x[w].bits);
    mask |= (t < EWT_SIZE ? 0u : 1u) << w;
    r[w].bits = table[t < EWT_SIZE ? t : 0u];
  }
  if (mask != 0) {
    ew_bf16 in[W], out[W];
#pragma unroll
    for (int w = 0; w < W; ++w) in[w] = x[w], out[w] = r[w];
#pragma unroll 1
    for (int w = 0; w < W; ++w) {
      if ((mask >> w) & 1u) out[w] = ewg_run_from(p, from, in[w]);
    }
#pragma unroll
    for (int w = 0; w < W; ++w) r[w] = out[w];
  }
}

// Blocks of Block threads (each with its table), U block-strided vectors a thread, loaded an
// iteration ahead.
template <class I, int Block, int U>
__device__ __forceinline__ void ew_generic_body_table(const ew_nary_args& a, long long n64, long long head64,
                                                      const ewg_program& p, int from) {
  static_assert(U == 1 || Block == EW_BLOCK, "ewg_load_vectors strides a thread's vectors by EW_BLOCK");
  typedef ew_bf16 S;
  typedef typename ew_raw<16>::type R;
  enum { W = 8 };
  __shared__ unsigned short table[EWT_SIZE];
  const I n = static_cast<I>(n64), head = static_cast<I>(head64);
  const I nv = (n - head) / W;
  const I stride = static_cast<I>(gridDim.x) * (Block * U);
  I first = static_cast<I>(blockIdx.x) * (Block * U) + threadIdx.x;
  S x[U * W];
  ewg_load_vectors<S, W, U, I>(a, p, 0, head, first, nv, x);  // in flight while the table is built
  for (unsigned t = threadIdx.x; t < EWT_SIZE; t += Block)
    table[t] = ewg_run_from(p, from, S{ewt_bits(t)}).bits;
  __syncthreads();
  for (; first < nv; first += stride) {
    S y[U][W];
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
      for (int w = 0; w < W; ++w) y[u][w] = x[u * W + w];
    }
    if (first + stride < nv) ewg_load_vectors<S, W, U, I>(a, p, 0, head, first + stride, nv, x);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const I v = first + static_cast<I>(u) * Block;
      if (v >= nv) break;
      for (int s = 0; s < from; ++s) {
        const ewg_step& st = p.step[s];
        const ewg_opmath<S> k(st);
        ewg_step_values<S, W, false>(st, k, y[u], y[u], y[u]);
      }
      union {
        R raw;
        S s[W];
      } r;
      ewg_table_values(table, p, from, y[u], r.s);
      EW_STORE(reinterpret_cast<R*>(static_cast<S*>(a.out[0]) + head) + v, r.raw);
    }
  }
  if (blockIdx.x == gridDim.x - 1) {
    const I tail = head + nv * W;
    const I t = threadIdx.x;
    if (t < head + (n - tail)) {
      const I i = t < head ? t : tail + (t - head);
      S y[1], r[1];
      y[0] = ewg_load_one<S>(a, p, 0, i);
      ewg_run_to<S, 1, false, I>(a, p, i, y, from);
      ewg_table_values(table, p, from, y, r);
      static_cast<S*>(a.out[0])[i] = r[0];
    }
  }
}

#endif  // CUINLINE_EW_GENERIC_CUH
