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
// the steps run as an outer loop, each dispatched once for all of a thread's vectors.
#ifndef CUINLINE_EW_GENERIC_CUH
#define CUINLINE_EW_GENERIC_CUH

#include "ew_nary.cuh"
#include "ew_generic_steps.cuh"

#define EWG_FULL EWN_FULL
#define EWG_SCALAR EWN_SCALAR
#define EWG_ROW EWN_ROW
#define EWG_COL EWN_COL

// The reciprocals of the broadcast inputs' periods (ew_nary_args::period), UINT64_MAX / period (0 for
// an input without one), computed by the host (launch_generic, src/ops/elementwise/generic.cpp), so
// that a row's or a column's index is a multiply-high and one correction, not a division: a 64-bit
// division is a called subroutine (the registers live across it saved on the stack), and it ran for
// every vector of every step that reads a row or a column. (A second, 32-bit reciprocal for launches
// that fit in 32 bits cost the 16-bit full kernels spills: both paths' registers.) Passed as a
// __grid_constant__ parameter: its entry is picked by a run-time input index, which otherwise makes
// NVVM copy the whole parameter to the stack.
struct ewg_divisors {
  unsigned long long m[EWG_MAX_INPUTS];
};

// e / period of input k, its remainder in r; 0 <= e < 2^63. With m = floor((2^64 - 1) / period),
// e * m / 2^64 lies in (e / period - 1, e / period], so the estimate is the quotient or one less,
// and r = e - q * period (at most e: no wrap) is below 2 * period: one correction.
__device__ __forceinline__ long long ewg_divmod(const ewg_divisors& dv, const ew_nary_args& a, int k,
                                                long long e, long long& r) {
  const unsigned long long e64 = static_cast<unsigned long long>(e),
                           d64 = static_cast<unsigned long long>(a.period[k]);
  unsigned long long q = __umul64hi(e64, dv.m[k]);
  unsigned long long rr = e64 - q * d64;
  if (rr >= d64) ++q, rr -= d64;
  r = static_cast<long long>(rr);
  return static_cast<long long>(q);
}

// Input k's index for element e under its pattern (FULL: e; SCALAR: 0; ROW: e % period; COL: e / period).
__device__ __forceinline__ long long ewg_index(const ewg_divisors& dv, const ew_nary_args& a, int pattern,
                                               int k, long long e) {
  if (pattern == EWG_SCALAR) return 0;
  if (pattern == EWG_FULL) return e;
  long long r;
  const long long q = ewg_divmod(dv, a, k, e, r);
  return pattern == EWG_ROW ? r : q;
}

// Input k's W elements e .. e + W - 1 into x[0 .. W - 1] (aligned for FULL and ROW: the host's plan).
template <class S, int W>
__device__ __forceinline__ void ewg_load(const ew_nary_args& a, const ewg_divisors& dv, int pattern, int k,
                                         long long e, S* x) {
  typedef typename ew_raw<sizeof(S) * W>::type R;
  union V {
    R raw;
    S s[W];
  };
  const S* in = static_cast<const S*>(a.in[k]) + ewg_index(dv, a, pattern, k, e);
  if (pattern == EWG_SCALAR || pattern == EWG_COL) {
    const S s = ewn_ldg1(in);
#pragma unroll
    for (int w = 0; w < W; ++w) x[w] = s;
  } else {
    V u;
    u.raw = EW_LOAD(reinterpret_cast<const R*>(in));
#pragma unroll
    for (int w = 0; w < W; ++w) x[w] = u.s[w];
  }
}

// Input k's element i (the scalar head and tail, and the single-element kernels).
template <class S>
__device__ __forceinline__ S ewg_load_one(const ew_nary_args& a, const ewg_divisors& dv, int pattern, int k,
                                          long long i) {
  return static_cast<const S*>(a.in[k])[ewg_index(dv, a, pattern, k, i)];
}

// A thread's N values of S as the kernel holds them between steps: 16-bit values two to a 32-bit
// word. ptxas gives every 16-bit PTX register a whole 32-bit one, so unpacked the 16-bit kernels'
// values, operands and conditions for two vectors (3 x 16 registers) spilled; packed, a step unpacks
// them as it uses them (a shift or a byte permute, as the load's unpacking already was).
template <class S, int N, bool Packed = sizeof(S) == 2 && N % 2 == 0>
struct ewg_values {
  S v[N];
  __device__ __forceinline__ void get(S (&x)[N]) const {
#pragma unroll
    for (int i = 0; i < N; ++i) x[i] = v[i];
  }
  __device__ __forceinline__ void set(int at, const S* x, int count) {
#pragma unroll
    for (int i = 0; i < count; ++i) v[at + i] = x[i];
  }
};
template <class S, int N>
struct ewg_values<S, N, true> {
  unsigned int w[N / 2];
  __device__ __forceinline__ void get(S (&x)[N]) const {
#pragma unroll
    for (int i = 0; i < N / 2; ++i) {
      x[2 * i].bits = static_cast<unsigned short>(w[i]);
      x[2 * i + 1].bits = static_cast<unsigned short>(w[i] >> 16);
    }
  }
  // Values at .. at + count - 1 (whole words for a vector of 16-bit values: the masks fold away; single
  // elements fill a word half by half).
  __device__ __forceinline__ void set(int at, const S* x, int count) {
#pragma unroll
    for (int i = 0; i < count; ++i) {
      const int j = at + i;
      const unsigned int b = x[i].bits;
      w[j / 2] = j % 2 == 0 ? (w[j / 2] & 0xffff0000u) | b : (w[j / 2] & 0xffffu) | (b << 16);
    }
  }
};

// Input k on a thread's U vectors of W elements (vector u at e[u], into x's values u * W ...): every
// load issued back to back. A vector past the tensor (!live[u]) is not read; its values are zeros
// (the chain computes on them, nothing stores them).
template <class S, int W, int U>
__device__ __forceinline__ void ewg_operands(const ew_nary_args& a, const ewg_divisors& dv, int pattern,
                                             int k, const long long (&e)[U], const bool (&live)[U],
                                             ewg_values<S, U * W>& x) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    S t[W];
    if (live[u]) {
      if (W == 1) {
        t[0] = ewg_load_one<S>(a, dv, pattern, k, e[u]);
      } else {
        ewg_load<S, W>(a, dv, pattern, k, e[u], t);
      }
    } else {
#pragma unroll
      for (int w = 0; w < W; ++w) t[w] = ewg_storage<S>(0);
    }
    x.set(u * W, t, W);
  }
}

// The chain on a thread's U vectors: y holds input 0 (vector u at values u * W) and receives the
// result. Step-outer: a step's constants are converted once, its tensor operand (and condition)
// loads for all U vectors are issued back to back, and its switch dispatches once for the U * W
// values, so the interpreter's per-step cost (param reads, the compare tree, the conversions) is paid
// once a thread rather than once a vector, and the loads of every vector are in flight together. An
// operand is loaded only for the step that uses it (few live registers: the occupancy a memory-bound
// chain needs). Each value still goes through the same ew_ops.cuh call in the same order (bit
// identity). Functions: the activation / math steps are compiled in (the light kernels run chains
// without them).
template <class S, int W, int U, bool Functions>
__device__ __forceinline__ void ewg_run(const ew_nary_args& a, const ewg_divisors& dv, const ewg_program& p,
                                        const long long (&e)[U], const bool (&live)[U],
                                        ewg_values<S, U * W>& y) {
  for (int s = 0; s < p.steps; ++s) {
    const ewg_step& st = p.step[s];
    const ewg_opmath<S> k(st);
    ewg_values<S, U * W> o, c;
    if (st.fn >= EWG_ADD_T && st.fn <= EWG_WHERE_T) {
      ewg_operands<S, W, U>(a, dv, p.pattern[st.operand], st.operand, e, live, o);
    }
    if (st.fn == EWG_WHERE_T || st.fn == EWG_WHERE_S)
      ewg_operands<S, W, U>(a, dv, p.pattern[st.cond], st.cond, e, live, c);
    S yv[U * W], ov[U * W], cv[U * W];
    y.get(yv), o.get(ov), c.get(cv);
    ewg_step_values<S, U * W, Functions>(st, k, yv, ov, cv);
    y.set(0, yv, U * W);
  }
}

// The generic kernel: contiguous output, n elements; `head` (< W) scalar elements, then whole
// vectors of W, each thread kUnroll block-strided vectors (ew_nary's kUnroll, 16 bytes a thread,
// times Reps), input 0's loads issued first, the chain run step-outer on all of them, then the scalar
// head and tail in the last block. The grid covers the vectors once (the host's launch_generic).
template <class S, int W, bool Functions, int Reps>
__device__ __forceinline__ void ew_generic_body(const ew_nary_args& a, long long n, long long head,
                                                const ewg_program& p, const ewg_divisors& dv) {
  typedef typename ew_raw<sizeof(S) * W>::type R;
  enum { kUnroll = ew_tile<S, W>::kUnroll * Reps };
  const long long nv = (n - head) / W;
  const long long first = static_cast<long long>(blockIdx.x) * (EW_BLOCK * kUnroll) + threadIdx.x;
  long long e[kUnroll];
  bool live[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const long long v = first + static_cast<long long>(u) * EW_BLOCK;
    live[u] = v < nv;
    e[u] = head + v * W;
  }
  ewg_values<S, kUnroll * W> y;
  ewg_operands<S, W, kUnroll>(a, dv, p.pattern[0], 0, e, live, y);
  ewg_run<S, W, kUnroll, Functions>(a, dv, p, e, live, y);
  S out[kUnroll * W];
  y.get(out);
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    if (!live[u]) continue;
    if (W == 1) {
      static_cast<S*>(a.out[0])[e[u]] = out[u];
    } else {
      union V {
        R raw;
        S s[W];
      } r;
#pragma unroll
      for (int w = 0; w < W; ++w) r.s[w] = out[u * W + w];
      EW_STORE(reinterpret_cast<R*>(static_cast<S*>(a.out[0]) + e[u]), r.raw);
    }
  }
  if (W > 1 && blockIdx.x == gridDim.x - 1) {
    const long long tail = head + nv * W;
    const long long t = threadIdx.x;
    if (t < head + (n - tail)) {
      const long long i[1] = {t < head ? t : tail + (t - head)};
      const bool one[1] = {true};
      ewg_values<S, 1> x;
      ewg_operands<S, 1, 1>(a, dv, p.pattern[0], 0, i, one, x);
      ewg_run<S, 1, 1, Functions>(a, dv, p, i, one, x);
      static_cast<S*>(a.out[0])[i[0]] = x.v[0];
    }
  }
}

#endif  // CUINLINE_EW_GENERIC_CUH
