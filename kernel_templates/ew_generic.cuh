// ew_generic.cuh — the generic elementwise kernel: one binary per dtype that runs any chain of steps,
// its steps, constants and input patterns passed as run-time data (ewg_program). It serves a
// never-seen chain at once while the specialized kernel (ew_nary.cuh, constants baked in) compiles in
// the background (src/ops/specialize.cpp). Built with the library by nvcc for every supported arch
// (src/ops/elementwise/ew_generic.cu), never by NVRTC at run time.
//
// Each step calls the same ew_ops.cuh function the specialized kernel's functor calls, with the same
// opmath constants (the host lowers a chain once, detail::lower_chain in src/templates/render.cpp,
// for both), and the
// module is compiled as a chain with activation steps is (contraction on, CUINLINE_EW_FMAD: the
// arithmetic steps spell their rounding out), so the generic kernel computes the specialized one's
// results bit for bit. Loads and stores are the specialized kernel's 16-byte vectors (W elements);
// the steps run as an outer loop, each dispatched once for the thread's W elements. Indices are of
// type I: 32-bit where the tensor allows (fewer instructions an element, and 32 registers a thread
// for full occupancy), 64-bit past 2^31 elements.
#ifndef CUINLINE_EW_GENERIC_CUH
#define CUINLINE_EW_GENERIC_CUH

#include "ew_nary.cuh"
#include "ew_generic_steps.cuh"

#define EWG_FULL EWN_FULL
#define EWG_SCALAR EWN_SCALAR
#define EWG_ROW EWN_ROW
#define EWG_COL EWN_COL

// Input k's W elements e .. e + W - 1 (aligned for FULL and ROW: the host's plan).
template <class S, int W, class I>
__device__ __forceinline__ void ewg_load(const ew_nary_args& a, int pattern, int k, I e, S (&x)[W]) {
  typedef typename ew_raw<sizeof(S) * W>::type R;
  union V {
    R raw;
    S s[W];
  };
  const S* in = static_cast<const S*>(a.in[k]);
  if (pattern == EWG_SCALAR) {
    const S s = ewn_ldg1(in);
#pragma unroll
    for (int w = 0; w < W; ++w) x[w] = s;
  } else if (pattern == EWG_COL) {
    const S s = ewn_ldg1(in + e / static_cast<I>(a.period[k]));
#pragma unroll
    for (int w = 0; w < W; ++w) x[w] = s;
  } else {
    V u;
    u.raw = EW_LOAD(reinterpret_cast<const R*>(in + (pattern == EWG_ROW ? e % static_cast<I>(a.period[k]) : e)));
#pragma unroll
    for (int w = 0; w < W; ++w) x[w] = u.s[w];
  }
}

// Input k's element i (the scalar head and tail).
template <class S, class I>
__device__ __forceinline__ S ewg_load_one(const ew_nary_args& a, int pattern, int k, I i) {
  const S* in = static_cast<const S*>(a.in[k]);
  return pattern == EWG_SCALAR ? in[0]
         : pattern == EWG_COL  ? in[i / static_cast<I>(a.period[k])]
         : pattern == EWG_ROW  ? in[i % static_cast<I>(a.period[k])]
                               : in[i];
}

// Input k's W elements at e: a vector (W > 1, aligned by the host's plan) or one element.
template <class S, int W, class I>
__device__ __forceinline__ void ewg_operand(const ew_nary_args& a, const ewg_program& p, int k, I e, S (&x)[W]) {
  if (W == 1) {
    x[0] = ewg_load_one<S>(a, p.pattern[k], k, e);
  } else {
    ewg_load<S, W>(a, p.pattern[k], k, e, x);
  }
}

// The chain on W elements at e: y holds input 0 and receives the result. A tensor operand is loaded
// where a step uses it (few live registers: the occupancy a memory-bound chain needs). Functions:
// the activation / math steps are compiled in (the light kernels run chains without them).
template <class S, int W, bool Functions, class I>
__device__ __forceinline__ void ewg_run(const ew_nary_args& a, const ewg_program& p, I e, S (&y)[W]) {
  for (int s = 0; s < p.steps; ++s) {
    const ewg_step& st = p.step[s];
    const ewg_opmath<S> k(st);
    S o[W], c[W];
    if (st.fn >= EWG_ADD_T && st.fn <= EWG_WHERE_T) ewg_operand<S, W, I>(a, p, st.operand, e, o);
    if (st.fn == EWG_WHERE_T || st.fn == EWG_WHERE_S) ewg_operand<S, W, I>(a, p, st.cond, e, c);
    ewg_step_values<S, W, Functions>(st, k, y, o, c);
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
  if (W > 1 && blockIdx.x == gridDim.x - 1) {
    const I tail = head + nv * W;
    const I t = threadIdx.x;
    if (t < head + (n - tail)) {
      const I i = t < head ? t : tail + (t - head);
      S x[1];
      x[0] = ewg_load_one<S>(a, p.pattern[0], 0, i);
      ewg_run<S, 1, Functions, I>(a, p, i, x);
      static_cast<S*>(a.out[0])[i] = x[0];
    }
  }
}

#endif  // CUINLINE_EW_GENERIC_CUH
