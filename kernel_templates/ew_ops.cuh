// ew_ops.cuh — the elementwise steps, each a function S -> S on a storage value that computes in
// opmath and rounds once to S, exactly as the PyTorch CUDA op of the same name (eager mode).
//
// A rendered op is a functor `struct <Name> { __device__ S operator()(S x) const; }` whose body is
// a sequence `x = ew_relu(x); x = ew_leaky_relu(x, 0x1.47ae14p-7f); ...` (constants baked in as
// hex float literals). Reusing it in another kernel (e.g. a conv2d epilogue on float
// accumulators): include "ew_ops.cuh" in the rendered program and paste
// cuinline::detail::render_op_functor(op, DType::f32, "E") (src/templates/render.hpp) before the
// kernel; E then has exactly the signature `__device__ float operator()(float) const`.
#ifndef CUINLINE_EW_OPS_CUH
#define CUINLINE_EW_OPS_CUH

#include "ew_common.cuh"

__device__ __forceinline__ float ew_fmax(float a, float b) {
  return fmaxf(a, b);
}
__device__ __forceinline__ double ew_fmax(double a, double b) {
  return fmax(a, b);
}
__device__ __forceinline__ float ew_fmin(float a, float b) {
  return fminf(a, b);
}
__device__ __forceinline__ double ew_fmin(double a, double b) {
  return fmin(a, b);
}

// Opmath arithmetic. A module compiled with contraction on (CUINLINE_EW_FMAD: the elementwise
// kernels of chains with activation steps, compiled as nvcc compiles PyTorch's kernels) spells the
// rounding out (add.rn / mul.rn ...: never contracted into an FMA), so a step rounds as the PyTorch
// op does; elsewhere (--fmad=false: every other kernel, conv2d epilogues included) the plain
// operators compile to the same .rn instructions and leave the optimizer its freedom.
#ifdef CUINLINE_EW_FMAD
__device__ __forceinline__ float ew_op_add(float a, float b) {
  return __fadd_rn(a, b);
}
__device__ __forceinline__ double ew_op_add(double a, double b) {
  return __dadd_rn(a, b);
}
__device__ __forceinline__ float ew_op_sub(float a, float b) {
  return __fsub_rn(a, b);
}
__device__ __forceinline__ double ew_op_sub(double a, double b) {
  return __dsub_rn(a, b);
}
__device__ __forceinline__ float ew_op_mul(float a, float b) {
  return __fmul_rn(a, b);
}
__device__ __forceinline__ double ew_op_mul(double a, double b) {
  return __dmul_rn(a, b);
}
__device__ __forceinline__ float ew_op_div(float a, float b) {
  return __fdiv_rn(a, b);
}
__device__ __forceinline__ double ew_op_div(double a, double b) {
  return __ddiv_rn(a, b);
}
#else
template <class T>
__device__ __forceinline__ T ew_op_add(T a, T b) {
  return a + b;
}
template <class T>
__device__ __forceinline__ T ew_op_sub(T a, T b) {
  return a - b;
}
template <class T>
__device__ __forceinline__ T ew_op_mul(T a, T b) {
  return a * b;
}
template <class T>
__device__ __forceinline__ T ew_op_div(T a, T b) {
  return a / b;
}
#endif

// torch.relu = clamp_min(x, 0): a NaN input is returned as is (its bits), else max(x, 0).
template <class S>
__device__ __forceinline__ S ew_relu(S x) {
  typedef ew_traits<S> T;
  const typename T::op v = T::to_op(x);
  if (v != v) return x;
  return T::from_op(ew_fmax(v, typename T::op(0)));
}

// F.leaky_relu: x > 0 ? x : x * slope (slope in opmath).
template <class S>
__device__ __forceinline__ S ew_leaky_relu(S x, typename ew_traits<S>::op slope) {
  typedef ew_traits<S> T;
  const typename T::op v = T::to_op(x);
  return T::from_op(v > typename T::op(0) ? v : ew_op_mul(v, slope));
}

// torch.clamp(x, lo, hi): NaN returned as is, else min(max(x, lo), hi) (bounds in opmath).
template <class S>
__device__ __forceinline__ S ew_clamp(S x, typename ew_traits<S>::op lo, typename ew_traits<S>::op hi) {
  typedef ew_traits<S> T;
  const typename T::op v = T::to_op(x);
  if (v != v) return x;
  return T::from_op(ew_fmin(ew_fmax(v, lo), hi));
}

template <class S>
__device__ __forceinline__ S ew_add(S x, typename ew_traits<S>::op a) {
  return ew_traits<S>::from_op(ew_op_add(ew_traits<S>::to_op(x), a));
}
template <class S>
__device__ __forceinline__ S ew_sub(S x, typename ew_traits<S>::op a) {
  return ew_traits<S>::from_op(ew_op_sub(ew_traits<S>::to_op(x), a));
}
// Also division by a scalar: PyTorch multiplies by the reciprocal, rounded to opmath on the host.
template <class S>
__device__ __forceinline__ S ew_mul(S x, typename ew_traits<S>::op a) {
  return ew_traits<S>::from_op(ew_op_mul(ew_traits<S>::to_op(x), a));
}

// Steps with a tensor operand (N-ary chains): both operands to opmath, one rounding, like the
// PyTorch op on two tensors of the same dtype (torch.div of two tensors is a true division).
template <class S>
__device__ __forceinline__ S ew_add_tensor(S x, S y) {
  return ew_traits<S>::from_op(ew_op_add(ew_traits<S>::to_op(x), ew_traits<S>::to_op(y)));
}
template <class S>
__device__ __forceinline__ S ew_sub_tensor(S x, S y) {
  return ew_traits<S>::from_op(ew_op_sub(ew_traits<S>::to_op(x), ew_traits<S>::to_op(y)));
}
template <class S>
__device__ __forceinline__ S ew_mul_tensor(S x, S y) {
  return ew_traits<S>::from_op(ew_op_mul(ew_traits<S>::to_op(x), ew_traits<S>::to_op(y)));
}
// f16 and bf16: the half-precision instruction's one rounding of the exact result, which is the
// rounding of the float result (a float holds 24 bits, at least twice the 11 or 8 of the storage
// type and 2 more, so rounding to float first cannot move the final rounding: double rounding is
// innocuous for +, - and *). One instruction on the storage bits, no conversions.
// T name<T>(x, y) as the instruction `op.rn.type`.
#define EW_16BIT_TENSOR_STEP(T, type, name, op)                                  \
  template <>                                                                    \
  __device__ __forceinline__ T name<T>(T x, T y) {                               \
    T r;                                                                         \
    asm(op ".rn." type " %0, %1, %2;" : "=h"(r.bits) : "h"(x.bits), "h"(y.bits)); \
    return r;                                                                    \
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 530
EW_16BIT_TENSOR_STEP(ew_half, "f16", ew_add_tensor, "add")
EW_16BIT_TENSOR_STEP(ew_half, "f16", ew_sub_tensor, "sub")
EW_16BIT_TENSOR_STEP(ew_half, "f16", ew_mul_tensor, "mul")
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
EW_16BIT_TENSOR_STEP(ew_bf16, "bf16", ew_add_tensor, "add")
EW_16BIT_TENSOR_STEP(ew_bf16, "bf16", ew_sub_tensor, "sub")
EW_16BIT_TENSOR_STEP(ew_bf16, "bf16", ew_mul_tensor, "mul")
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
// Before sm_90 bf16 has only fma: x + y = fma(x, 1, y), x - y = fma(y, -1, x), x * y = fma(x, y, -0)
// (%1 x, %2 y, %3 the constant).
#define EW_BF16_FMA_STEP(name, operands, constant)                                                  \
  template <>                                                                                       \
  __device__ __forceinline__ ew_bf16 name<ew_bf16>(ew_bf16 x, ew_bf16 y) {                          \
    ew_bf16 r;                                                                                      \
    asm("fma.rn.bf16 %0, " operands ";"                                                             \
        : "=h"(r.bits)                                                                              \
        : "h"(x.bits), "h"(y.bits), "h"(static_cast<unsigned short>(constant)));                    \
    return r;                                                                                       \
  }
EW_BF16_FMA_STEP(ew_add_tensor, "%1, %3, %2", 0x3f80)
EW_BF16_FMA_STEP(ew_sub_tensor, "%2, %3, %1", 0xbf80)
EW_BF16_FMA_STEP(ew_mul_tensor, "%1, %2, %3", 0x8000)
#undef EW_BF16_FMA_STEP
#endif
#undef EW_16BIT_TENSOR_STEP
// A scalar add, sub or mul whose constant the storage type holds exactly and whose float result
// rounds as the exact one (the renderer's exact_16bit_constant): the step above on the constant as
// a storage value, so f16 and bf16 take one instruction of the storage type (two elements an
// instruction where ptxas pairs them) instead of a widening, a float operation and a rounding.
// The bits of ew_add / ew_sub / ew_mul (the generic kernel's), elsewhere the same computation.
template <class S>
__device__ __forceinline__ S ew_add_exact(S x, S c) {
  return ew_add_tensor(x, c);
}
template <class S>
__device__ __forceinline__ S ew_sub_exact(S x, S c) {
  return ew_sub_tensor(x, c);
}
template <class S>
__device__ __forceinline__ S ew_mul_exact(S x, S c) {
  return ew_mul_tensor(x, c);
}
template <class S>
__device__ __forceinline__ S ew_div_tensor(S x, S y) {
  return ew_traits<S>::from_op(ew_op_div(ew_traits<S>::to_op(x), ew_traits<S>::to_op(y)));
}

// torch.where(c != 0, x, other) on storage values: a select, no arithmetic (bits kept, NaN
// payloads included). The condition is true where nonzero: NaN is true, -0.0 false (tensor.bool()).
template <class S>
__device__ __forceinline__ S ew_where(S c, S x, S other) {
  typedef ew_traits<S> T;
  return T::to_op(c) != typename T::op(0) ? x : other;
}

// ---------------------------------------------------------------------------------------------
// Activations and math functions: the formulas of PyTorch's CUDA kernels (ATen/native/cuda:
// ActivationSiluKernel.cu, ActivationGeluKernel.cu, ... UnarySpecialOpsKernel.cu), written as
// those kernels write them, on v = the input in opmath, rounded once to S. The math functions are
// the CUDA math library's (expf / exp ...), as PyTorch calls them; constants come from the
// renderer, converted as PyTorch converts them (src/templates/render.cpp). A module holding them
// is compiled with FMA contraction on, as nvcc compiles PyTorch: e.g. sigmoid's 1 + exp(-x) is one
// FFMA of expf's last multiply there, and so here.
__device__ __forceinline__ float ew_fn_exp(float v) {
  return expf(v);
}
__device__ __forceinline__ double ew_fn_exp(double v) {
  return exp(v);
}
__device__ __forceinline__ float ew_fn_expm1(float v) {
  return expm1f(v);
}
__device__ __forceinline__ double ew_fn_expm1(double v) {
  return expm1(v);
}
__device__ __forceinline__ float ew_fn_log(float v) {
  return logf(v);
}
__device__ __forceinline__ double ew_fn_log(double v) {
  return log(v);
}
__device__ __forceinline__ float ew_fn_log1p(float v) {
  return log1pf(v);
}
__device__ __forceinline__ double ew_fn_log1p(double v) {
  return log1p(v);
}
__device__ __forceinline__ float ew_fn_tanh(float v) {
  return tanhf(v);
}
__device__ __forceinline__ double ew_fn_tanh(double v) {
  return tanh(v);
}
__device__ __forceinline__ float ew_fn_erf(float v) {
  return erff(v);
}
__device__ __forceinline__ double ew_fn_erf(double v) {
  return erf(v);
}
__device__ __forceinline__ float ew_fn_sqrt(float v) {
  return sqrtf(v);
}
__device__ __forceinline__ double ew_fn_sqrt(double v) {
  return sqrt(v);
}
__device__ __forceinline__ float ew_fn_abs(float v) {
  return fabsf(v);
}
__device__ __forceinline__ double ew_fn_abs(double v) {
  return fabs(v);
}
// std::min / std::max as PyTorch's kernels call them (a comparison: a NaN first operand is kept).
template <class T>
__device__ __forceinline__ T ew_std_max(T a, T b) {
  return (a < b) ? b : a;
}
template <class T>
__device__ __forceinline__ T ew_std_min(T a, T b) {
  return (b < a) ? b : a;
}

// x > y ? a : b as a select of two values already computed, never a branch: a conv epilogue runs
// once for each of a thread's accumulators (64-128), and a branch around each one's math leaves ptxas
// nothing to interleave (elu as `x > 0 ? x : expm1f(x)` cost a large f16 conv +1.26 ms, computed on
// both sides and selected +0.54, on an H100). NaN compares false, as in C.
__device__ __forceinline__ float ew_select_gt(float x, float y, float a, float b) {
  float r;
  asm("{\n\t.reg .pred p;\n\tsetp.gt.f32 p, %1, %2;\n\tselp.f32 %0, %3, %4, p;\n\t}"
      : "=f"(r)
      : "f"(x), "f"(y), "f"(a), "f"(b));
  return r;
}

// A function step's result, rounded to S. With contraction on (CUINLINE_EW_FMAD), f32 / f64 (no
// conversion) pass an add.rn of -0.0 (exact for every value, ±0 included; ptxas keeps it): the next
// step's first add could otherwise absorb this step's last multiply (expf ends in one) into an FMA,
// which the separate PyTorch ops never do. f16 / bf16 round with a cvt, a barrier already.
template <class S>
__device__ __forceinline__ S ew_fn_out(typename ew_traits<S>::op r) {
  return ew_traits<S>::from_op(r);
}
#ifdef CUINLINE_EW_FMAD
template <>
__device__ __forceinline__ float ew_fn_out<float>(float r) {
  asm("add.rn.f32 %0, %0, 0f80000000;" : "+f"(r));
  return r;
}
template <>
__device__ __forceinline__ double ew_fn_out<double>(double r) {
  asm("add.rn.f64 %0, %0, 0d8000000000000000;" : "+d"(r));
  return r;
}
#endif

// torch.sigmoid: one / (one + exp(-x)); F.silu: x / (1 + exp(-x)). In a conv2d epilogue on fp32
// accumulators (no CUINLINE_EW_FMAD) the division is the fast one (2 ulp; 0 where 1 + exp(-x)
// passes 2^126, i.e. for results under 1e-37): the IEEE division's slow path, unrolled over every
// accumulator, made sigmoid cost a bare f16 conv 70 % more (KernelBench L2-4's shape, H100).
__device__ __forceinline__ double ew_quotient(double a, double b) {
  return a / b;
}
__device__ __forceinline__ float ew_quotient(float a, float b) {
#ifdef CUINLINE_EW_FMAD
  return a / b;
#else
  return __fdividef(a, b);
#endif
}
template <class S>
__device__ __forceinline__ S ew_sigmoid(S x) {
  typedef ew_traits<S> T;
  typedef typename T::op O;
  const O v = T::to_op(x);
  return ew_fn_out<S>(ew_quotient(O(1), O(1) + ew_fn_exp(-v)));
}
// torch.tanh.
template <class S>
__device__ __forceinline__ S ew_tanh(S x) {
  typedef ew_traits<S> T;
  return ew_fn_out<S>(ew_fn_tanh(T::to_op(x)));
}
template <class S>
__device__ __forceinline__ S ew_silu(S x) {
  typedef ew_traits<S> T;
  typedef typename T::op O;
  const O v = T::to_op(x);
  return ew_fn_out<S>(ew_quotient(v, O(1) + ew_fn_exp(-v)));
}
// F.gelu: x * 0.5 * (1 + erf(x * alpha)), alpha = M_SQRT1_2 in opmath.
template <class S>
__device__ __forceinline__ S ew_gelu(S x, typename ew_traits<S>::op alpha) {
  typedef ew_traits<S> T;
  typedef typename T::op O;
  const O v = T::to_op(x);
  return ew_fn_out<S>(v * O(0.5) * (O(1) + ew_fn_erf(v * alpha)));
}
// F.gelu(approximate="tanh"): 0.5 * x * (1 + tanh(beta * (x + kappa * x^3))).
template <class S>
__device__ __forceinline__ S ew_gelu_tanh(S x, typename ew_traits<S>::op beta, typename ew_traits<S>::op kappa) {
  typedef ew_traits<S> T;
  typedef typename T::op O;
  const O v = T::to_op(x);
  const O x_cube = v * v * v;
  const O inner = beta * (v + kappa * x_cube);
  return ew_fn_out<S>(O(0.5) * v * (O(1) + ew_fn_tanh(inner)));
}
// F.mish: x * tanh(log1p(exp(x))), as PyTorch computes it in the elementwise kernels
// (CUINLINE_EW_FMAD) and in double. A conv2d epilogue on fp32 accumulators (which no PyTorch op
// matches bit for bit) uses the closed form tanh(log1p(e^x)) = n / (n + 2), n = e^x (e^x + 2): one
// expf and a fast division (2 ulp) instead of expf, log1pf and tanhf, within 4 ulp of the formula's
// float result, a third of its instructions (KernelBench's Conv2d_Mish_Mish is bound by them);
// above x = 20 both are x (tanh(softplus(x)) rounds to 1 from x = 9.01), NaN and ±inf as the formula.
__device__ __forceinline__ double ew_mish_of(double v) {
  return v * ew_fn_tanh(ew_fn_log1p(ew_fn_exp(v)));
}
__device__ __forceinline__ float ew_mish_of(float v) {
#ifdef CUINLINE_EW_FMAD
  return v * ew_fn_tanh(ew_fn_log1p(ew_fn_exp(v)));
#else
  const float e = ew_fn_exp(v);
  const float n = e * (e + 2.0f);
  return ew_select_gt(v, 20.0f, v, v * __fdividef(n, n + 2.0f));
#endif
}
template <class S>
__device__ __forceinline__ S ew_mish(S x) {
  typedef ew_traits<S> T;
  return ew_fn_out<S>(ew_mish_of(T::to_op(x)));
}
// Conv2d epilogues (fp32, no CUINLINE_EW_FMAD): log1p(t) for t in [0, 1] (softplus's and
// logsigmoid's log1p(exp(-|z|))) as 2 atanh(s), s = t / (2 + t) <= 1/3 (a fast division), by its
// series to s^13 (the rest under 2^-26 relative): 6 FMAs, within 4 ulp of log1pf, which with its
// large-argument path cost a large f16 conv +1.2 ms for softplus (KernelBench L2-4's layer, H100).
__device__ __forceinline__ float ew_log1p_unit(float t) {
  const float s = __fdividef(t, 2.0f + t), u = s * s;
  float p = fmaf(1.0f / 13.0f, u, 1.0f / 11.0f);
  p = fmaf(p, u, 1.0f / 9.0f);
  p = fmaf(p, u, 1.0f / 7.0f);
  p = fmaf(p, u, 1.0f / 5.0f);
  p = fmaf(p, u, 1.0f / 3.0f);
  p = fmaf(p, u, 1.0f);
  return (2.0f * s) * p;
}
// F.softplus: (x * beta) > threshold ? x : log1p(exp(x * beta)) / beta. In a conv2d epilogue:
// (max(z, 0) + log1p(exp(-|z|))) * (1 / beta), z = x * beta (the same function, its log1p on [0, 1]).
__device__ __forceinline__ double ew_softplus_of(double v, double beta, double threshold) {
  return (v * beta) > threshold ? v : (ew_fn_log1p(ew_fn_exp(v * beta))) / beta;
}
__device__ __forceinline__ float ew_softplus_of(float v, float beta, float threshold) {
#ifdef CUINLINE_EW_FMAD
  // PyTorch's formula, both sides computed and selected (the same values; a branch per element
  // would keep a thread's 4-8 elements from overlapping).
  return ew_select_gt(v * beta, threshold, v, (ew_fn_log1p(ew_fn_exp(v * beta))) / beta);
#else
  const float z = v * beta;
  const float r = (fmaxf(z, 0.0f) + ew_log1p_unit(ew_fn_exp(-fabsf(z)))) * (1.0f / beta);
  return ew_select_gt(z, threshold, v, r);
#endif
}
template <class S>
__device__ __forceinline__ S ew_softplus(S x, typename ew_traits<S>::op beta, typename ew_traits<S>::op threshold) {
  typedef ew_traits<S> T;
  return ew_fn_out<S>(ew_softplus_of(T::to_op(x), beta, threshold));
}
// F.elu / F.selu / F.celu (at::elu with alpha, scale, input_scale): x > 0 ? x * poscoef :
// expm1(x * negiptcoef) * negcoef, negcoef = alpha * scale (in opmath), poscoef = scale,
// negiptcoef = input_scale.
__device__ __forceinline__ double ew_elu_of(double v, double negcoef, double poscoef, double negiptcoef) {
  return v > 0.0 ? v * poscoef : ew_fn_expm1(v * negiptcoef) * negcoef;
}
__device__ __forceinline__ float ew_elu_of(float v, float negcoef, float poscoef, float negiptcoef) {
  return ew_select_gt(v, 0.0f, v * poscoef, ew_fn_expm1(v * negiptcoef) * negcoef);
}
template <class S>
__device__ __forceinline__ S ew_elu(S x, typename ew_traits<S>::op negcoef, typename ew_traits<S>::op poscoef,
                                    typename ew_traits<S>::op negiptcoef) {
  typedef ew_traits<S> T;
  return ew_fn_out<S>(ew_elu_of(T::to_op(x), negcoef, poscoef, negiptcoef));
}
// F.hardswish: x * std::min(std::max(x + 3, 0), 6) * one_sixth (one_sixth = 1.0f / 6.0f).
template <class S>
__device__ __forceinline__ S ew_hardswish(S x, typename ew_traits<S>::op one_sixth) {
  typedef ew_traits<S> T;
  typedef typename T::op O;
  const O v = T::to_op(x);
  return ew_fn_out<S>(v * ew_std_min(ew_std_max(v + O(3), O(0)), O(6)) * one_sixth);
}
// F.hardsigmoid: std::min(std::max(x + 3, 0), 6) * one_sixth.
template <class S>
__device__ __forceinline__ S ew_hardsigmoid(S x, typename ew_traits<S>::op one_sixth) {
  typedef ew_traits<S> T;
  typedef typename T::op O;
  const O v = T::to_op(x);
  return ew_fn_out<S>(ew_std_min(ew_std_max(v + O(3), O(0)), O(6)) * one_sixth);
}
template <class S>
__device__ __forceinline__ S ew_exp(S x) {
  typedef ew_traits<S> T;
  return ew_fn_out<S>(ew_fn_exp(T::to_op(x)));
}
template <class S>
__device__ __forceinline__ S ew_log(S x) {
  typedef ew_traits<S> T;
  return ew_fn_out<S>(ew_fn_log(T::to_op(x)));
}
template <class S>
__device__ __forceinline__ S ew_sqrt(S x) {
  typedef ew_traits<S> T;
  return ew_fn_out<S>(ew_fn_sqrt(T::to_op(x)));
}
// torch.abs / torch.neg: the sign bit (NaN payloads kept, as the converted value's). No barrier:
// the input is already rounded, and a sign change leaves nothing to contract.
template <class S>
__device__ __forceinline__ S ew_abs(S x) {
  typedef ew_traits<S> T;
  return T::from_op(ew_fn_abs(T::to_op(x)));
}
template <class S>
__device__ __forceinline__ S ew_neg(S x) {
  typedef ew_traits<S> T;
  return T::from_op(-T::to_op(x));
}

// F.softsign: input / (input.abs() + 1), two PyTorch ops: the sum rounded to S between them (the
// abs is exact).
template <class S>
__device__ __forceinline__ S ew_softsign(S x) {
  typedef ew_traits<S> T;
  typedef typename T::op O;
  const O v = T::to_op(x);
  const O d = T::to_op(T::from_op(ew_fn_abs(v) + O(1)));
  return ew_fn_out<S>(v / d);
}
// F.tanhshrink: input - input.tanh(), the tanh rounded to S (and, with contraction on, kept from
// the subtraction by ew_fn_out's barrier) between the two ops.
template <class S>
__device__ __forceinline__ S ew_tanhshrink(S x) {
  typedef ew_traits<S> T;
  const typename T::op v = T::to_op(x);
  return ew_fn_out<S>(v - T::to_op(ew_fn_out<S>(ew_fn_tanh(v))));
}
// log1p on [0, 1]: log1pf, or in a conv2d epilogue ew_log1p_unit.
__device__ __forceinline__ double ew_logsigmoid_log1p(double t) {
  return ew_fn_log1p(t);
}
__device__ __forceinline__ float ew_logsigmoid_log1p(float t) {
#ifdef CUINLINE_EW_FMAD
  return ew_fn_log1p(t);
#else
  return ew_log1p_unit(t);
#endif
}
// F.logsigmoid (ActivationLogSigmoidKernel.cu): std::min(0, x) - log1p(exp(-|x|)).
template <class S>
__device__ __forceinline__ S ew_logsigmoid(S x) {
  typedef ew_traits<S> T;
  typedef typename T::op O;
  const O v = T::to_op(x);
  return ew_fn_out<S>(ew_std_min(O(0), v) - ew_logsigmoid_log1p(ew_fn_exp(-ew_fn_abs(v))));
}
// F.hardshrink: (x >= -lambd && x <= lambd) ? 0 : x, lambd already in S (the renderer's).
template <class S>
__device__ __forceinline__ S ew_hardshrink(S x, typename ew_traits<S>::op lambd) {
  typedef ew_traits<S> T;
  const typename T::op v = T::to_op(x);
  return (v >= -lambd && v <= lambd) ? T::from_op(typename T::op(0)) : x;
}
// F.softshrink: NaN as is, else x > lambd ? x - lambd : x < -lambd ? x + lambd : 0 (+0).
template <class S>
__device__ __forceinline__ S ew_softshrink(S x, typename ew_traits<S>::op lambd) {
  typedef ew_traits<S> T;
  typedef typename T::op O;
  const O v = T::to_op(x);
  if (v != v) return x;
  return T::from_op(v > lambd ? v - lambd : v < -lambd ? v + lambd : O(0));
}
// F.threshold: x <= threshold ? value : x (threshold and value in S, the renderer's).
template <class S>
__device__ __forceinline__ S ew_threshold(S x, typename ew_traits<S>::op threshold, S value) {
  typedef ew_traits<S> T;
  return T::to_op(x) <= threshold ? value : x;
}

#endif  // CUINLINE_EW_OPS_CUH
