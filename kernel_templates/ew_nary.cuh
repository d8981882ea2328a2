// ew_nary.cuh — the elementwise kernels (ops::apply, one input or several; relu and the other
// one-input ops are its one-input case).
//
// The rendered program defines the op functor F (`void operator()(const S (&xs)[NI], S (&ys)[NO])`,
// src/templates/render.cpp) and a shape struct Sh with kInputs, kOutputs and, per input k, kPattern<k>:
//   EWN_FULL    the input has the output's shape and layout: element i is in[i]
//   EWN_SCALAR  one element, broadcast: in[0]
//   EWN_ROW     repeated along leading dimensions (a bias row): in[i % period]
//   EWN_COL     repeated along trailing dimensions (a column): in[i / period]
// ew_nary: contiguous outputs, n elements. The host picks W (elements per access, up to 16 bytes)
// and `head` (< W) scalar elements so that every whole-tensor operand + head is W-element aligned
// (head is 0 when an input is a row or a column; the host makes every period a multiple of W, so a
// row is loaded as whole vectors and a column element once per vector). Each thread moves kUnroll
// block-strided vectors (16 bytes per thread and operand), all loads first; the exact grid covers
// the vectors once, and the last block also does the scalar head and tail (fewer than 2W elements),
// so nothing is read or written outside [0, n). ew_nary_strided: any strides, one element per
// thread, 64-bit indices.
#ifndef CUINLINE_EW_NARY_CUH
#define CUINLINE_EW_NARY_CUH

#include "elementwise.cuh"

#define EWN_FULL 0
#define EWN_SCALAR 1
#define EWN_ROW 2
#define EWN_COL 3

struct ew_nary_args {
  const void* in[8];
  void* out[4];
  long long period[8];
  // period[k] as a multiply-shift divisor: the host's for every row and column of a launch with
  // 32-bit indices (their periods are 2 to 2^31 - 1)
  unsigned div_mul[8];
  unsigned div_shift[8];
};

// e / period of input K: with 32-bit indices umulhi(e, div_mul) >> div_shift (exact for e and the
// period under 2^31: CUTLASS's FastDivmod; no division's code beside it, which cost NVVM and ptxas
// 4-6 ms a compile), with 64-bit ones a division.
template <int K, class I>
__device__ __forceinline__ I ewn_quotient(const ew_nary_args& a, I e) {
  if (sizeof(I) == 4) {
    return static_cast<I>(__umulhi(static_cast<unsigned>(e), a.div_mul[K]) >> a.div_shift[K]);
  }
  return e / static_cast<I>(a.period[K]);
}
template <int K, class I>
__device__ __forceinline__ I ewn_remainder(const ew_nary_args& a, I e) {
  return e - ewn_quotient<K>(a, e) * static_cast<I>(a.period[K]);
}

template <class Sh, int K>
struct ewn_pattern;
#define EWN_PATTERN(K)                                 \
  template <class Sh>                                  \
  struct ewn_pattern<Sh, K> {                          \
    enum { value = Sh::kPattern##K };                  \
  };
EWN_PATTERN(0)
EWN_PATTERN(1)
EWN_PATTERN(2)
EWN_PATTERN(3)
EWN_PATTERN(4)
EWN_PATTERN(5)
EWN_PATTERN(6)
EWN_PATTERN(7)

// One element through the non-coherent path (its raw bits: __ldg has no overload for ew_half).
template <class S>
__device__ __forceinline__ S ewn_ldg1(const S* p) {
  typedef typename ew_raw<sizeof(S)>::type R;
  union {
    R raw;
    S s;
  } u;
  u.raw = __ldg(reinterpret_cast<const R*>(p));
  return u.s;
}

// Input K's W elements e .. e + W - 1 (e = head + v * W for vector v; aligned for FULL and ROW).
template <class Sh, int K, class S, int W, class I>
__device__ __forceinline__ void ewn_load(const ew_nary_args& a, I e, S (&x)[W]) {
  typedef typename ew_raw<sizeof(S) * W>::type R;
  union V {
    R raw;
    S s[W];
  };
  const S* in = static_cast<const S*>(a.in[K]);
  const int pattern = ewn_pattern<Sh, K>::value;
  if (pattern == EWN_SCALAR) {
    const S s = ewn_ldg1(in);
#pragma unroll
    for (int w = 0; w < W; ++w) x[w] = s;
  } else if (pattern == EWN_COL) {
    const S s = ewn_ldg1(in + ewn_quotient<K>(a, e));
#pragma unroll
    for (int w = 0; w < W; ++w) x[w] = s;
  } else {
    V u;
    u.raw = EW_LOAD(reinterpret_cast<const R*>(in + (pattern == EWN_ROW ? ewn_remainder<K>(a, e) : e)));
#pragma unroll
    for (int w = 0; w < W; ++w) x[w] = u.s[w];
  }
}

// Input K's element i (scalar tail).
template <class Sh, int K, class S, class I>
__device__ __forceinline__ S ewn_load_one(const ew_nary_args& a, I i) {
  const S* in = static_cast<const S*>(a.in[K]);
  const int pattern = ewn_pattern<Sh, K>::value;
  if (pattern == EWN_SCALAR) return in[0];
  if (pattern == EWN_COL) return in[ewn_quotient<K>(a, i)];
  if (pattern == EWN_ROW) return in[ewn_remainder<K>(a, i)];
  return in[i];
}

template <class Sh, class S, int W, class I, int K = 0>
struct ewn_inputs {
  static __device__ __forceinline__ void load(const ew_nary_args& a, I e, S (&x)[Sh::kInputs][W]) {
    ewn_load<Sh, K>(a, e, x[K]);
    ewn_inputs<Sh, S, W, I, K + 1>::load(a, e, x);
  }
  static __device__ __forceinline__ void load_one(const ew_nary_args& a, I i, S (&x)[Sh::kInputs]) {
    x[K] = ewn_load_one<Sh, K, S>(a, i);
    ewn_inputs<Sh, S, W, I, K + 1>::load_one(a, i, x);
  }
};
template <class Sh, class S, int W, class I>
struct ewn_inputs<Sh, S, W, I, Sh::kInputs> {
  static __device__ __forceinline__ void load(const ew_nary_args&, I, S (&)[Sh::kInputs][W]) {}
  static __device__ __forceinline__ void load_one(const ew_nary_args&, I, S (&)[Sh::kInputs]) {}
};

// U vectors of thread `first` (block-strided: u * EW_BLOCK apart, coalesced), every load issued
// before the first use. Checked: some of the U vectors may lie past the last one (nv).
template <int U, bool Checked, class Sh, class F, class S, int W, class I>
__device__ __forceinline__ void ewn_vectors(const ew_nary_args& a, I head, I first, I nv, const F& f) {
  typedef typename ew_raw<sizeof(S) * W>::type R;
  enum { NI = Sh::kInputs, NO = Sh::kOutputs };
  S x[U][NI][W];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const I v = first + u * EW_BLOCK;
    if (!Checked || v < nv) ewn_inputs<Sh, S, W, I>::load(a, head + v * W, x[u]);
  }
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const I v = first + u * EW_BLOCK;
    if (Checked && v >= nv) continue;
    union V {
      R raw;
      S s[W];
    } y[NO];
#pragma unroll
    for (int w = 0; w < W; ++w) {
      S xs[NI], ys[NO];
#pragma unroll
      for (int k = 0; k < NI; ++k) xs[k] = x[u][k][w];
      f(xs, ys);
#pragma unroll
      for (int k = 0; k < NO; ++k) y[k].s[w] = ys[k];
    }
#pragma unroll
    for (int k = 0; k < NO; ++k) EW_STORE(reinterpret_cast<R*>(static_cast<S*>(a.out[k]) + head) + v, y[k].raw);
  }
}

// Whether the one-input kernel has its second, two-tile body (see ew_nary): not for chains with
// activation steps, which the host compiles with CUINLINE_EW_FMAD.
#ifdef CUINLINE_EW_FMAD
#define EWN_REPS_BODY 0
#else
#define EWN_REPS_BODY 1
#endif

// U vectors a thread, from the thread's place in the grid.
template <int U, class Sh, class F, class S, int W, class I>
__device__ __forceinline__ void ewn_pass(const ew_nary_args& a, I head, I nv, const F& f) {
  const I first = static_cast<I>(blockIdx.x) * (EW_BLOCK * U) + threadIdx.x;
  if (first + (U - 1) * EW_BLOCK < nv) {
    ewn_vectors<U, false, Sh, F, S, W, I>(a, head, first, nv, f);  // the whole grid but its last block
  } else if (U > 1) {
    ewn_vectors<U, true, Sh, F, S, W, I>(a, head, first, nv, f);
  }
}

// The bounds of the tuned one-input kernel (8 blocks of 256 threads with 32-bit indices: at most 32
// registers). Measured on an H200 (bench/nary_bench.cpp): bf16 bias + GELU (erff on 8 elements a
// thread, compute-bound) took 0.332 ms with these and 0.379 ms with 4 blocks (64 registers); the
// memory-bound ops were the same either way. 16 bytes per thread and operand (kUnroll narrower
// vectors): one 16-byte vector per thread in an exact grid reached a device-to-device copy's
// bandwidth for relu (bench/ew_tune.cu), more work per thread or a grid-stride loop did not.
// reps (1 or 2, from the host) doubles the vectors per thread when one would need between one and
// two waves of resident blocks, so the launch fits in one wave (2^21 float32 ReLU on an H200: 8.2 µs
// against 8.6). Compiled for one input and one output (more operands would double the registers the
// loads hold) without activation steps (EWN_REPS_BODY 0; the host passes reps 1): those are
// compute-bound at such sizes, and a second copy of their body cost a third of their NVVM and ptxas
// time and slowed the kernel too (mul(0.5)|gelu on an H200: f32 on 2^21 8.4 µs against 8.7-8.8,
// bf16 on 8192 x 28672 0.322 ms against 0.328). A uniform branch, no extra registers in the common
// path.
// Sh::kWide (the host's choice for an expression over one whole tensor and broadcast operands):
// twice the vectors a thread and half the resident blocks, so the registers hold them (f32 bias +
// GELU on an H200, bench/gelu_tune.cu: 99.1 % of a copy's bandwidth against 96.2 %).
template <class Sh, class F, class S, int W, class I>
__global__ void __launch_bounds__(EW_BLOCK, (sizeof(I) == 8 ? 4 : 8) / (Sh::kWide ? 2 : 1))
    ew_nary(ew_nary_args a, I n, I head, int reps) {
  enum { NI = Sh::kInputs, NO = Sh::kOutputs, kUnroll = ew_tile<S, W>::kUnroll * (Sh::kWide ? 2 : 1) };
  const F f;
  const I nv = (n - head) / W;
  if (NI == 1 && NO == 1 && EWN_REPS_BODY && reps == 2) {
    // (kReps: 1 for more operands or activation steps, so no second body is instantiated for them;
    // the host passes reps 1 to those kernels)
    enum { kReps = NI == 1 && NO == 1 && EWN_REPS_BODY ? 2 : 1 };
    ewn_pass<kReps * kUnroll, Sh, F, S, W, I>(a, head, nv, f);
  } else {
    ewn_pass<kUnroll, Sh, F, S, W, I>(a, head, nv, f);
  }
  if (W > 1 && blockIdx.x == gridDim.x - 1) {
    const I tail = head + nv * W;
    const I t = threadIdx.x;
    if (t < head + (n - tail)) {
      const I i = t < head ? t : tail + (t - head);
      S xs[NI], ys[NO];
      ewn_inputs<Sh, S, W, I>::load_one(a, i, xs);
      f(xs, ys);
#pragma unroll
      for (int k = 0; k < NO; ++k) static_cast<S*>(a.out[k])[i] = ys[k];
    }
  }
}

struct ew_nary_strided_params {
  int ndim;
  long long shape[8];
  long long in_strides[8][8];   // [input][dim], elements; 0 where broadcast
  long long out_strides[4][8];  // [output][dim]
};

template <class Sh, class F, class S>
__global__ void __launch_bounds__(EW_BLOCK) ew_nary_strided(ew_nary_args a, long long n, ew_nary_strided_params p) {
  enum { NI = Sh::kInputs, NO = Sh::kOutputs };
  const F f;
  const long long step = static_cast<long long>(gridDim.x) * EW_BLOCK;
  for (long long i = static_cast<long long>(blockIdx.x) * EW_BLOCK + threadIdx.x; i < n; i += step) {
    long long rest = i, ii[NI], oi[NO];
#pragma unroll
    for (int k = 0; k < NI; ++k) ii[k] = 0;
#pragma unroll
    for (int k = 0; k < NO; ++k) oi[k] = 0;
    for (int d = p.ndim - 1; d >= 0; --d) {
      const long long c = rest % p.shape[d];
      rest /= p.shape[d];
#pragma unroll
      for (int k = 0; k < NI; ++k) ii[k] += c * p.in_strides[k][d];
#pragma unroll
      for (int k = 0; k < NO; ++k) oi[k] += c * p.out_strides[k][d];
    }
    S xs[NI], ys[NO];
#pragma unroll
    for (int k = 0; k < NI; ++k) xs[k] = static_cast<const S*>(a.in[k])[ii[k]];
    f(xs, ys);
#pragma unroll
    for (int k = 0; k < NO; ++k) static_cast<S*>(a.out[k])[oi[k]] = ys[k];
  }
}

#endif  // CUINLINE_EW_NARY_CUH
