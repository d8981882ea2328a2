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
// the steps run as an outer loop, each dispatched once for the thread's W elements.
#ifndef CUINLINE_EW_GENERIC_CUH
#define CUINLINE_EW_GENERIC_CUH

#include "ew_nary.cuh"

#define EWG_MAX_STEPS 32
#define EWG_MAX_INPUTS 8

// The step functions (their order is the host's LoweredFn, src/templates/render.hpp).
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
    const S s = ewn_ldg1(in);
#pragma unroll
    for (int w = 0; w < W; ++w) x[w] = s;
  } else if (pattern == EWG_COL) {
    const S s = ewn_ldg1(in + e / a.period[k]);
#pragma unroll
    for (int w = 0; w < W; ++w) x[w] = s;
  } else {
    V u;
    u.raw = EW_LOAD(reinterpret_cast<const R*>(in + (pattern == EWG_ROW ? e % a.period[k] : e)));
#pragma unroll
    for (int w = 0; w < W; ++w) x[w] = u.s[w];
  }
}

// Input k's element i (the scalar head and tail).
template <class S>
__device__ __forceinline__ S ewg_load_one(const ew_nary_args& a, int pattern, int k, long long i) {
  const S* in = static_cast<const S*>(a.in[k]);
  return pattern == EWG_SCALAR ? in[0]
         : pattern == EWG_COL  ? in[i / a.period[k]]
         : pattern == EWG_ROW  ? in[i % a.period[k]]
                               : in[i];
}

// Input k's W elements at e: a vector (W > 1, aligned by the host's plan) or one element.
template <class S, int W>
__device__ __forceinline__ void ewg_operand(const ew_nary_args& a, const ewg_program& p, int k, long long e,
                                            S (&x)[W]) {
  if (W == 1) {
    x[0] = ewg_load_one<S>(a, p.pattern[k], k, e);
  } else {
    ewg_load<S, W>(a, p.pattern[k], k, e, x);
  }
}

// Each step's result pinned where its case computed it: without it NVVM merged the cases' trailing
// ew_fn_out (an inline add.rn) into one block and dropped the f64 results of several cases (tanh,
// exp, log, elu, ...: the step left its input unchanged). An empty volatile asm per case keeps each
// case's result flowing into the loop's value; it emits no instruction.
__device__ __forceinline__ void ewg_pin(float& v) {
  asm volatile("" : "+f"(v));
}
__device__ __forceinline__ void ewg_pin(double& v) {
  asm volatile("" : "+d"(v));
}
__device__ __forceinline__ void ewg_pin(ew_half& v) {
  asm volatile("" : "+h"(v.bits));
}
__device__ __forceinline__ void ewg_pin(ew_bf16& v) {
  asm volatile("" : "+h"(v.bits));
}

// The chain on W elements at e: y holds input 0 and receives the result. A tensor operand is loaded
// where a step uses it (few live registers: the occupancy a memory-bound chain needs). Functions:
// the activation / math steps are compiled in (the light kernels run chains without them).
template <class S, int W, bool Functions>
__device__ __forceinline__ void ewg_run(const ew_nary_args& a, const ewg_program& p, long long e, S (&y)[W]) {
  typedef typename ew_traits<S>::op Op;
  for (int s = 0; s < p.steps; ++s) {
    const ewg_step& st = p.step[s];
    const Op c0 = static_cast<Op>(st.c[0]), c1 = static_cast<Op>(st.c[1]), c2 = static_cast<Op>(st.c[2]);
    S o[W], c[W];
    if (st.fn >= EWG_ADD_T && st.fn <= EWG_WHERE_T) ewg_operand<S, W>(a, p, st.operand, e, o);
    if (st.fn == EWG_WHERE_T || st.fn == EWG_WHERE_S) ewg_operand<S, W>(a, p, st.cond, e, c);
    if (!Functions && st.fn >= EWG_SIGMOID) continue;  // never planned: the host picks the full kernel
    switch (st.fn) {
#define EWG_EACH(expr)                             \
  _Pragma("unroll") for (int w = 0; w < W; ++w) {  \
    const S v = y[w];                              \
    S r = (expr);                                  \
    ewg_pin(r);                                    \
    y[w] = r;                                      \
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
        EWG_EACH(ew_add_tensor(v, o[w]))
      case EWG_SUB_T:
        EWG_EACH(ew_sub_tensor(v, o[w]))
      case EWG_MUL_T:
        EWG_EACH(ew_mul_tensor(v, o[w]))
      case EWG_DIV_T:
        EWG_EACH(ew_div_tensor(v, o[w]))
      case EWG_WHERE_T:
        EWG_EACH(ew_where(c[w], v, o[w]))
      case EWG_WHERE_S:
        EWG_EACH(ew_where(c[w], v, ewg_storage<S>(st.storage)))
#define EWG_FN(expr) \
  if (Functions) {   \
    EWG_EACH(expr)   \
  }                  \
  break;
      case EWG_SIGMOID:
        EWG_FN(ew_sigmoid(v))
      case EWG_TANH:
        EWG_FN(ew_tanh(v))
      case EWG_SILU:
        EWG_FN(ew_silu(v))
      case EWG_GELU:
        EWG_FN(ew_gelu(v, c0))
      case EWG_GELU_TANH:
        EWG_FN(ew_gelu_tanh(v, c0, c1))
      case EWG_MISH:
        EWG_FN(ew_mish(v))
      case EWG_SOFTPLUS:
        EWG_FN(ew_softplus(v, c0, c1))
      case EWG_ELU:
        EWG_FN(ew_elu(v, c0, c1, c2))
      case EWG_HARDSWISH:
        EWG_FN(ew_hardswish(v, c0))
      case EWG_HARDSIGMOID:
        EWG_FN(ew_hardsigmoid(v, c0))
      case EWG_EXP:
        EWG_FN(ew_exp(v))
      case EWG_LOG:
        EWG_FN(ew_log(v))
      case EWG_SQRT:
        EWG_FN(ew_sqrt(v))
      case EWG_ABS:
        EWG_FN(ew_abs(v))
      case EWG_NEG:
        EWG_FN(ew_neg(v))
      case EWG_SOFTSIGN:
        EWG_FN(ew_softsign(v))
      case EWG_TANHSHRINK:
        EWG_FN(ew_tanhshrink(v))
      case EWG_LOGSIGMOID:
        EWG_FN(ew_logsigmoid(v))
      case EWG_HARDSHRINK:
        EWG_FN(ew_hardshrink(v, c0))
      case EWG_SOFTSHRINK:
        EWG_FN(ew_softshrink(v, c0))
      case EWG_THRESHOLD:
        EWG_FN(ew_threshold(v, c0, ewg_storage<S>(st.storage)))
      default:
        break;
#undef EWG_EACH
#undef EWG_FN
    }
  }
}

// The generic kernel: contiguous output, n elements; `head` (< W) scalar elements, then whole
// vectors of W, each thread kUnroll (16 bytes a thread, ew_nary's) times Reps block-strided vectors,
// every load issued first, then the scalar tail in the last block. The grid covers the vectors once.
template <class S, int W, bool Functions, int Reps>
__device__ __forceinline__ void ew_generic_body(const ew_nary_args& a, long long n, long long head,
                                                const ewg_program& p) {
  typedef typename ew_raw<sizeof(S) * W>::type R;
  enum { kUnroll = ew_tile<S, W>::kUnroll * Reps };
  const long long nv = (n - head) / W;
  const long long first = static_cast<long long>(blockIdx.x) * (EW_BLOCK * kUnroll) + threadIdx.x;
  union V {
    R raw;
    S s[W];
  };
  V y[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {  // every load issued first
    const long long v = first + static_cast<long long>(u) * EW_BLOCK;
    if (v < nv) ewg_operand<S, W>(a, p, 0, head + v * W, y[u].s);
  }
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const long long v = first + static_cast<long long>(u) * EW_BLOCK;
    if (v >= nv) break;
    ewg_run<S, W, Functions>(a, p, head + v * W, y[u].s);
    EW_STORE(reinterpret_cast<R*>(static_cast<S*>(a.out[0]) + head) + v, y[u].raw);
  }
  if (W > 1 && blockIdx.x == gridDim.x - 1) {
    const long long tail = head + nv * W;
    const long long t = threadIdx.x;
    if (t < head + (n - tail)) {
      const long long i = t < head ? t : tail + (t - head);
      S x[1];
      x[0] = ewg_load_one<S>(a, p.pattern[0], 0, i);
      ewg_run<S, 1, Functions>(a, p, i, x);
      static_cast<S*>(a.out[0])[i] = x[0];
    }
  }
}

#endif  // CUINLINE_EW_GENERIC_CUH
