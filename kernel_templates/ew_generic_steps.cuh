// ew_generic_steps.cuh — the generic kernels' step interpreter: one lowered step of a chain
// (detail::lower_chain, src/templates/render.cpp) applied to W values, the step's function, constants
// and operands run-time data. The generic elementwise kernel (ew_generic.cuh) runs a chain's steps
// on a thread's vector with it; the generic conv2d kernel (conv2d_generic_rt.cuh) runs a conv
// epilogue's steps on single opmath values (S = float or double, as the specialized conv's rendered
// epilogue functor is instantiated). Each case calls the ew_ops.cuh function the rendered functor
// calls, with the same opmath constant, so a generic kernel computes what the specialized one does
// in a module compiled with the same options.
#ifndef CUINLINE_EW_GENERIC_STEPS_CUH
#define CUINLINE_EW_GENERIC_STEPS_CUH

#include "ew_ops.cuh"

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

// div_mul / div_shift: input k's period as a multiply-shift divisor (q = umulhi(e, div_mul) >>
// div_shift, exact for e and the period under 2^31), set by the host for the elementwise kernels
// with 32-bit indices; div_mul 0: a plain division.
struct ewg_program {
  int steps;
  int inputs;
  int pattern[EWG_MAX_INPUTS];  // EWN_FULL / EWN_SCALAR / EWN_ROW / EWN_COL (ew_nary.cuh)
  unsigned div_mul[EWG_MAX_INPUTS];
  unsigned div_shift[EWG_MAX_INPUTS];
  ewg_step step[EWG_MAX_STEPS];
};

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

// Each step's result pinned where its case computed it: without it NVVM merged the cases' trailing
// ew_fn_out (an inline add.rn) into one block and dropped the f64 results of several cases (tanh,
// exp, log, elu, ...: the step left its input unchanged). An empty volatile asm per case keeps each
// case's result flowing into the loop's value; it emits no instruction. (A host emulation of the
// kernels defines CUINLINE_EWG_HOST_EMULATED: no PTX constraints there.)
#ifdef CUINLINE_EWG_HOST_EMULATED
template <class S>
inline void ewg_pin(S&) {}
#else
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
#endif

// A step's opmath constants, converted before its operands are loaded (the elementwise kernel's
// schedule).
template <class S>
struct ewg_opmath {
  typename ew_traits<S>::op c[3];
  __device__ __forceinline__ explicit ewg_opmath(const ewg_step& st) {
    typedef typename ew_traits<S>::op Op;
    c[0] = static_cast<Op>(st.c[0]), c[1] = static_cast<Op>(st.c[1]), c[2] = static_cast<Op>(st.c[2]);
  }
};

// Step st (its constants k) on W values y (in place): o holds the step's tensor operand and c its condition where the
// step has them (the caller loads them: the elementwise kernel from its inputs, the conv kernel from
// the conv value and its channel operands). The switch dispatches once for the W values. Functions:
// the activation / math steps are compiled in (the light elementwise kernels run chains without
// them).
template <class S, int W, bool Functions>
__device__ __forceinline__ void ewg_step_values(const ewg_step& st, const ewg_opmath<S>& k, S (&y)[W],
                                                const S (&o)[W], const S (&c)[W]) {
  typedef typename ew_traits<S>::op Op;
  const Op c0 = k.c[0], c1 = k.c[1], c2 = k.c[2];
  if (!Functions && st.fn >= EWG_SIGMOID) return;  // never planned: the host picks the full kernel
  switch (st.fn) {
#define EWG_EACH(expr)                            \
  _Pragma("unroll") for (int w = 0; w < W; ++w) { \
    const S v = y[w];                             \
    S r = (expr);                                 \
    ewg_pin(r);                                   \
    y[w] = r;                                     \
  }                                               \
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

#endif  // CUINLINE_EW_GENERIC_STEPS_CUH
