// ew_generic.cuh — the generic elementwise kernel: one binary per dtype that runs any chain of steps,
// its steps, constants and input patterns passed as run-time data (ewg_program). It serves a
// never-seen chain at once while the specialized kernel (ew_nary.cuh, constants baked in) compiles in
// the background (src/ops/specialize.cpp). Built with the library by nvcc for every supported arch
// (src/ops/elementwise/ew_generic.cu), never by NVRTC at run time.
//
// Each step calls the same ew_ops.cuh function the specialized kernel's functor calls, with the same
// opmath constants (the host lowers a chain once, src/ops/elementwise/lower.cpp, for both), and the
// module is compiled as a chain with activation steps is (contraction on, CUINLINE_EW_FMAD: the
// arithmetic steps spell their rounding out), so the generic kernel computes the specialized one's
// results bit for bit. Loads and stores are the specialized kernel's 16-byte vectors (W elements);
// the steps run as an outer loop, each dispatched once for the thread's W elements.
#ifndef CUINLINE_EW_GENERIC_CUH
#define CUINLINE_EW_GENERIC_CUH

#include "ew_nary.cuh"

#define EWG_MAX_STEPS 32
#define EWG_MAX_INPUTS 8

// The step functions (their order is the host's GenericFn, src/ops/elementwise/lower.hpp).
#define EWG_ADD 0
#define EWG_SUB 1
#define EWG_MUL 2
#define EWG_RELU 3
#define EWG_LEAKY_RELU 4
#define EWG_CLAMP 5
#define EWG_ADD_T 6
#define EWG_SUB_T 7
#define EWG_MUL_T 8
#define EWG_DIV_T 9
#define EWG_WHERE_T 10
#define EWG_WHERE_S 11
#define EWG_SIGMOID 12
#define EWG_TANH 13
#define EWG_SILU 14
#define EWG_GELU 15
#define EWG_GELU_TANH 16
#define EWG_MISH 17
#define EWG_SOFTPLUS 18
#define EWG_ELU 19
#define EWG_HARDSWISH 20
#define EWG_HARDSIGMOID 21
#define EWG_EXP 22
#define EWG_LOG 23
#define EWG_SQRT 24
#define EWG_ABS 25
#define EWG_NEG 26
#define EWG_SOFTSIGN 27
#define EWG_TANHSHRINK 28
#define EWG_LOGSIGMOID 29
#define EWG_HARDSHRINK 30
#define EWG_SOFTSHRINK 31
#define EWG_THRESHOLD 32

// One lowered step: the function, its tensor operand and condition inputs, up to three opmath
// constants (exact as doubles: a float constant widened) and one storage constant (its bits).
struct ewg_step {
  int fn;
  int operand;
  int cond;
  int pad;
  double c[3];
  unsigned long long storage;
};

struct ewg_program {
  int steps;
  int inputs;
  int pattern[EWG_MAX_INPUTS];  // EWN_FULL / EWN_SCALAR / EWN_ROW / EWN_COL (ew_nary.cuh)
  ewg_step step[EWG_MAX_STEPS];
};

#define EWG_FULL EWN_FULL
#define EWG_SCALAR EWN_SCALAR
#define EWG_ROW EWN_ROW
#define EWG_COL EWN_COL

template <class S>
__device__ __forceinline__ S ewg_storage(unsigned long long bits) {
  typedef typename ew_raw<sizeof(S)>::type R;
  union {
    R raw;
    S s;
  } u;
  u.raw = static_cast<R>(bits);
  return u.s;
}
template <>
__device__ __forceinline__ double ewg_storage<double>(unsigned long long bits) {
  return __longlong_as_double(static_cast<long long>(bits));
}
template <>
__device__ __forceinline__ float ewg_storage<float>(unsigned long long bits) {
  return __int_as_float(static_cast<int>(bits));
}

template <class S>
__device__ __forceinline__ S ewg_ldg1(const S* p) {
  typedef typename ew_raw<sizeof(S)>::type R;
  union {
    R raw;
    S s;
  } u;
  u.raw = __ldg(reinterpret_cast<const R*>(p));
  return u.s;
}

// Input k's W elements e .. e + W - 1 (aligned for FULL and ROW: the host's plan).
template <class S, int W>
__device__ __forceinline__ void ewg_load(const ew_nary_args& a, int pattern, int k, long long e, S (&x)[W]) {
  typedef typename ew_raw<sizeof(S) * W>::type R;
  union V {
    R raw;
    S s[W];
  };
  const S* in = static_cast<const S*>(a.in[k]);
  if (pattern == EWG_SCALAR) {
    const S s = ewg_ldg1(in);
#pragma unroll
    for (int w = 0; w < W; ++w) x[w] = s;
  } else if (pattern == EWG_COL) {
    const S s = ewg_ldg1(in + e / a.period[k]);
#pragma unroll
    for (int w = 0; w < W; ++w) x[w] = s;
  } else {
    V u;
    u.raw = EW_LOAD(reinterpret_cast<const R*>(in + (pattern == EWG_ROW ? e % a.period[k] : e)));
#pragma unroll
    for (int w = 0; w < W; ++w) x[w] = u.s[w];
  }
}

// Input k's element w, k a run-time value: a switch keeps the array in registers.
template <class S, int W>
__device__ __forceinline__ S ewg_pick(const S (&x)[EWG_MAX_INPUTS][W], int k, int w) {
  switch (k) {
    case 1:
      return x[1][w];
    case 2:
      return x[2][w];
    case 3:
      return x[3][w];
    case 4:
      return x[4][w];
    case 5:
      return x[5][w];
    case 6:
      return x[6][w];
    case 7:
      return x[7][w];
    default:
      return x[0][w];
  }
}

// The chain on W elements: x[0] holds input 0, the result is left in y.
template <class S, int W>
__device__ __forceinline__ void ewg_run(const ewg_program& p, const S (&x)[EWG_MAX_INPUTS][W], S (&y)[W]) {
  typedef typename ew_traits<S>::op Op;
#pragma unroll
  for (int w = 0; w < W; ++w) y[w] = x[0][w];
  for (int s = 0; s < p.steps; ++s) {
    const ewg_step& st = p.step[s];
    const Op c0 = static_cast<Op>(st.c[0]), c1 = static_cast<Op>(st.c[1]), c2 = static_cast<Op>(st.c[2]);
    switch (st.fn) {
#define EWG_EACH(expr)                             \
  _Pragma("unroll") for (int w = 0; w < W; ++w) {  \
    const S v = y[w];                              \
    y[w] = (expr);                                 \
  }                                                \
  break;
      case EWG_ADD:
        EWG_EACH(ew_add(v, c0))
      case EWG_SUB:
        EWG_EACH(ew_sub(v, c0))
      case EWG_MUL:
        EWG_EACH(ew_mul(v, c0))
      case EWG_RELU:
        EWG_EACH(ew_relu(v))
      case EWG_LEAKY_RELU:
        EWG_EACH(ew_leaky_relu(v, c0))
      case EWG_CLAMP:
        EWG_EACH(ew_clamp(v, c0, c1))
      case EWG_ADD_T:
        EWG_EACH(ew_add_tensor(v, ewg_pick(x, st.operand, w)))
      case EWG_SUB_T:
        EWG_EACH(ew_sub_tensor(v, ewg_pick(x, st.operand, w)))
      case EWG_MUL_T:
        EWG_EACH(ew_mul_tensor(v, ewg_pick(x, st.operand, w)))
      case EWG_DIV_T:
        EWG_EACH(ew_div_tensor(v, ewg_pick(x, st.operand, w)))
      case EWG_WHERE_T:
        EWG_EACH(ew_where(ewg_pick(x, st.cond, w), v, ewg_pick(x, st.operand, w)))
      case EWG_WHERE_S:
        EWG_EACH(ew_where(ewg_pick(x, st.cond, w), v, ewg_storage<S>(st.storage)))
      case EWG_SIGMOID:
        EWG_EACH(ew_sigmoid(v))
      case EWG_TANH:
        EWG_EACH(ew_tanh(v))
      case EWG_SILU:
        EWG_EACH(ew_silu(v))
      case EWG_GELU:
        EWG_EACH(ew_gelu(v, c0))
      case EWG_GELU_TANH:
        EWG_EACH(ew_gelu_tanh(v, c0, c1))
      case EWG_MISH:
        EWG_EACH(ew_mish(v))
      case EWG_SOFTPLUS:
        EWG_EACH(ew_softplus(v, c0, c1))
      case EWG_ELU:
        EWG_EACH(ew_elu(v, c0, c1, c2))
      case EWG_HARDSWISH:
        EWG_EACH(ew_hardswish(v, c0))
      case EWG_HARDSIGMOID:
        EWG_EACH(ew_hardsigmoid(v, c0))
      case EWG_EXP:
        EWG_EACH(ew_exp(v))
      case EWG_LOG:
        EWG_EACH(ew_log(v))
      case EWG_SQRT:
        EWG_EACH(ew_sqrt(v))
      case EWG_ABS:
        EWG_EACH(ew_abs(v))
      case EWG_NEG:
        EWG_EACH(ew_neg(v))
      case EWG_SOFTSIGN:
        EWG_EACH(ew_softsign(v))
      case EWG_TANHSHRINK:
        EWG_EACH(ew_tanhshrink(v))
      case EWG_LOGSIGMOID:
        EWG_EACH(ew_logsigmoid(v))
      case EWG_HARDSHRINK:
        EWG_EACH(ew_hardshrink(v, c0))
      case EWG_SOFTSHRINK:
        EWG_EACH(ew_softshrink(v, c0))
      case EWG_THRESHOLD:
        EWG_EACH(ew_threshold(v, c0, ewg_storage<S>(st.storage)))
      default:
        break;
#undef EWG_EACH
    }
  }
}

// The generic kernel: contiguous output, n elements; `head` (< W) scalar elements, then whole
// vectors of W, each thread kUnroll block-strided vectors, then the scalar tail in the last block —
// ew_nary's schedule. The grid covers the vectors once.
template <class S, int W>
__device__ __forceinline__ void ew_generic_body(const ew_nary_args& a, long long n, long long head,
                                                const ewg_program& p) {
  typedef typename ew_raw<sizeof(S) * W>::type R;
  enum { kUnroll = ew_tile<S, W>::kUnroll };
  const long long nv = (n - head) / W;
  const long long first = static_cast<long long>(blockIdx.x) * (EW_BLOCK * kUnroll) + threadIdx.x;
#pragma unroll 1
  for (int u = 0; u < kUnroll; ++u) {
    const long long v = first + static_cast<long long>(u) * EW_BLOCK;
    if (v >= nv) break;
    const long long e = head + v * W;
    S x[EWG_MAX_INPUTS][W];
#pragma unroll
    for (int k = 0; k < EWG_MAX_INPUTS; ++k) {
      if (k < p.inputs) ewg_load<S, W>(a, p.pattern[k], k, e, x[k]);
    }
    union V {
      R raw;
      S s[W];
    } y;
    ewg_run<S, W>(p, x, y.s);
    EW_STORE(reinterpret_cast<R*>(static_cast<S*>(a.out[0]) + head) + v, y.raw);
  }
  if (W > 1 && blockIdx.x == gridDim.x - 1) {
    const long long tail = head + nv * W;
    const long long t = threadIdx.x;
    if (t < head + (n - tail)) {
      const long long i = t < head ? t : tail + (t - head);
      S x[EWG_MAX_INPUTS][1];
#pragma unroll
      for (int k = 0; k < EWG_MAX_INPUTS; ++k) {
        if (k < p.inputs) {
          const S* in = static_cast<const S*>(a.in[k]);
          const int pattern = p.pattern[k];
          x[k][0] = pattern == EWG_SCALAR ? in[0]
                    : pattern == EWG_COL  ? in[i / a.period[k]]
                    : pattern == EWG_ROW  ? in[i % a.period[k]]
                                          : in[i];
        }
      }
      S y[1];
      ewg_run<S, 1>(p, x, y);
      static_cast<S*>(a.out[0])[i] = y[0];
    }
  }
}

#endif  // CUINLINE_EW_GENERIC_CUH
