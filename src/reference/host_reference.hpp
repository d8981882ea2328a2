#pragma once
// Host reference for `cuinline run --check` and the tests: f16/bf16 conversions (round to nearest even),
// a CPU reference of the elementwise steps (computed in opmath, rounded after each step as the
// eager PyTorch ops do), the conv2d check's tolerance, and a parallel loop.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cuinline/conv2d.hpp>
#include <cuinline/ops.hpp>
#include <thread>
#include <vector>

#include "reference/half_bits.hpp"

namespace cuinline::cli {

using detail::bf16_to_float;
using detail::bits_float;
using detail::float_bits;
using detail::float_to_half;
using detail::half_to_float;

inline std::uint16_t float_to_bf16(float f) {
  std::uint32_t u = float_bits(f);
  if (std::isnan(f)) return static_cast<std::uint16_t>((u >> 16) | 0x40);
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<std::uint16_t>(u >> 16);
}

/// Calls fn(begin, end) on chunks of [0, n) from all cores.
template <class Fn>
void parallel_for(std::size_t n, Fn fn) {
  std::size_t threads = std::max(1u, std::thread::hardware_concurrency());
  threads = std::min<std::size_t>(threads, std::max<std::size_t>(1, n / 65536));
  std::vector<std::thread> pool;
  std::size_t chunk = (n + threads - 1) / threads;
  for (std::size_t t = 0; t < threads; ++t) {
    std::size_t begin = t * chunk, end = std::min(n, begin + chunk);
    if (begin >= end) break;
    pool.emplace_back([=] { fn(begin, end); });
  }
  for (auto& th : pool) th.join();
}

/// An activation / math step (ops::is_function_step) in opmath T, with PyTorch's formula and
/// constants (as the device code, kernel_templates/ew_ops.cuh). The host's libm is not CUDA's: a
/// result may differ from the GPU's by a few units in the last place (more where the formula
/// cancels, e.g. gelu's 1 + erf(x) for x << 0), so callers compare these with a tolerance.
/// `round` rounds an opmath value to the tensor's dtype: softsign's and tanhshrink's intermediate
/// (two PyTorch ops) and the scalars ATen converts to the dtype (hardshrink, softshrink,
/// threshold); the identity for an fp32 conv epilogue or a float64 reference.
struct NoRounding {
  template <class T>
  T operator()(T v) const {
    return v;
  }
};
template <class T, class Round = NoRounding>
T reference_function(const ops::Step& step, T v, Round round = {}) {
  // An opmath constant as PyTorch makes it (opmath_t(double)); products of two such (at::elu).
  auto c = [](double d) { return static_cast<T>(d); };
  // A Scalar as ATen's kernels take it (Scalar::to<scalar_t>): through float to the dtype, or a double.
  auto scalar = [&](double d) { return round(sizeof(T) == 8 ? static_cast<T>(d) : static_cast<T>(static_cast<float>(d))); };
  auto std_max = [](T a, T b) { return (a < b) ? b : a; };
  auto std_min = [](T a, T b) { return (b < a) ? b : a; };
  auto elu = [&](T negcoef, T poscoef, T negiptcoef) {
    return v > T(0) ? v * poscoef : std::expm1(v * negiptcoef) * negcoef;
  };
  switch (step.kind) {
    case ops::StepKind::sigmoid:
      return T(1) / (T(1) + std::exp(-v));
    case ops::StepKind::tanh:
      return std::tanh(v);
    case ops::StepKind::silu:
      return v / (T(1) + std::exp(-v));
    case ops::StepKind::gelu:
      return v * T(0.5) * (T(1) + std::erf(v * c(0.70710678118654752440)));
    case ops::StepKind::gelu_tanh: {
      const T beta = c(1.41421356237309504880 * 1.12837916709551257390 * 0.5), kappa = c(0.044715);
      const T inner = beta * std::fma(kappa, v * v * v, v);  // contracted, as nvcc compiles PyTorch's
      return T(0.5) * v * (T(1) + std::tanh(inner));
    }
    case ops::StepKind::mish:
      return v * std::tanh(std::log1p(std::exp(v)));
    case ops::StepKind::softplus:
      return v * c(step.a) > c(step.b) ? v : std::log1p(std::exp(v * c(step.a))) / c(step.a);
    case ops::StepKind::elu:
      return elu(c(step.a) * T(1), T(1), T(1));
    case ops::StepKind::selu:
      return elu(c(1.6732632423543772848170429916717) * c(1.0507009873554804934193349852946),
                 c(1.0507009873554804934193349852946), T(1));
    case ops::StepKind::celu:
      return elu(c(step.a) * T(1), T(1), c(1.0 / step.a));
    case ops::StepKind::hardswish:
      return v * std_min(std_max(v + T(3), T(0)), T(6)) * c(1.0f / 6.0f);
    case ops::StepKind::hardsigmoid:
      return std_min(std_max(v + T(3), T(0)), T(6)) * c(1.0f / 6.0f);
    case ops::StepKind::exp:
      return std::exp(v);
    case ops::StepKind::log:
      return std::log(v);
    case ops::StepKind::sqrt:
      return std::sqrt(v);
    case ops::StepKind::abs:
      return std::fabs(v);
    case ops::StepKind::neg:
      return -v;
    case ops::StepKind::softsign:
      return v / round(std::fabs(v) + T(1));
    case ops::StepKind::tanhshrink:
      return v - round(std::tanh(v));
    case ops::StepKind::logsigmoid:
      return std_min(T(0), v) - std::log1p(std::exp(-std::fabs(v)));
    case ops::StepKind::hardshrink: {
      const T lambd = scalar(step.a);
      return (v >= -lambd && v <= lambd) ? T(0) : v;
    }
    case ops::StepKind::softshrink: {
      const T lambd = scalar(step.a);
      return std::isnan(v) ? v : v > lambd ? v - lambd : v < -lambd ? v + lambd : T(0);
    }
    case ops::StepKind::threshold:
      return v <= scalar(step.a) ? scalar(step.b) : v;
    default:
      return v;
  }
}

/// Whether a chain has activation / math steps (then the CPU reference is not bit-exact).
inline bool has_function_steps(const ops::Op& op) {
  for (const auto& s : op.steps) {
    if (ops::is_function_step(s.kind)) return true;
  }
  return false;
}

/// Whether a tensor operand enters the chain after one of its function steps (close_to_reference's
/// operands_may_meet_zero).
inline bool has_operand_after_function_step(const ops::Op& op) {
  bool function = false;
  for (const auto& s : op.steps) {
    function = function || ops::is_function_step(s.kind);
    const bool operand = s.kind == ops::StepKind::add_tensor || s.kind == ops::StepKind::sub_tensor ||
                         s.kind == ops::StepKind::mul_tensor || s.kind == ops::StepKind::div_tensor ||
                         s.kind == ops::StepKind::where_tensor;
    if (function && operand) return true;
  }
  return false;
}

/// Whether `got` is the reference `want` of a chain with function steps, to the host-libm
/// tolerance of the dtype: the same class (NaN, ±inf), or within rel * |want| + abs.
/// `operands_may_meet_zero`: a chain with tensor operands after a step, where NaN against ±inf
/// counts as agreeing — an infinite operand times a step's result that one libm rounds to zero and
/// the other does not gives NaN on one side and ±inf on the other (an H100 run: gelu(-5.536f), its
/// 1 + erff(x / sqrt 2) 0 on the GPU and not on the host, times an inf operand: 1 of 262144 outputs
/// of `cuinline run`, in f32 and in f64). A finite result against a non-finite one, or +inf against
/// -inf, still fails; without it every non-finite kind must match.
inline bool close_to_reference(double want, double got, DType dtype, bool operands_may_meet_zero = false) {
  if (operands_may_meet_zero && !std::isfinite(want) && !std::isfinite(got) &&
      !(std::isinf(want) && std::isinf(got))) {
    return true;
  }
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
  if (std::isinf(want) || std::isinf(got)) return want == got;
  // The absolute part covers formulas that cancel: gelu's 1 + erf(x) for x << 0 leaves the erf's
  // ulp (of 1) times |x| / 2, and a later mul(in2) scales it: on `cuinline run`'s inputs (|x| <= 16
  // after an add, operands up to 8) 7.6e-6 in f32 for a 2-ulp erff (an H100 run found 276 of 262144
  // f32 outputs of add(in1)|gelu|mul(in2) beyond the first bound, 1e-6; f64 3272 beyond 1e-15).
  double rel = 1e-5, abs = 3e-5;  // f32: ~80 ulp
  if (dtype == DType::f16) rel = 2e-3, abs = 1e-5;   // 2 ulp of half
  if (dtype == DType::bf16) rel = 1.6e-2, abs = 1e-5;  // 2 ulp of bfloat16
  if (dtype == DType::f64) rel = 1e-12, abs = 1e-12;
  return std::fabs(want - got) <= rel * std::fabs(want) + abs;
}

/// One step in opmath T; `round` rounds a value to the tensor's dtype (between two-op steps);
/// `inputs[k]` is input k's value (tensor-operand steps of N-ary chains).
template <class T, class Round>
T reference_step(const ops::Step& step, T x, Round round, const T* inputs = nullptr) {
  switch (step.kind) {
    case ops::StepKind::add_tensor:
      return x + inputs[step.operand];
    case ops::StepKind::sub_tensor:
      return x - inputs[step.operand];
    case ops::StepKind::mul_tensor:
      return x * inputs[step.operand];
    case ops::StepKind::div_tensor:
      return x / inputs[step.operand];
    case ops::StepKind::where_tensor:  // a select: true where nonzero (NaN true, -0.0 false)
      return inputs[step.cond] != T(0) ? x : inputs[step.operand];
    case ops::StepKind::where_scalar:  // the scalar as PyTorch converts it: through float, to the dtype
      return inputs[step.cond] != T(0) ? x : round(static_cast<T>(step.a));
    case ops::StepKind::add:
      return x + static_cast<T>(step.a);
    case ops::StepKind::sub:
      return x - static_cast<T>(step.a);
    case ops::StepKind::mul:
      return x * static_cast<T>(step.a);
    case ops::StepKind::div:
      return x * static_cast<T>(1.0 / step.a);  // PyTorch: the reciprocal in double, then opmath
    case ops::StepKind::relu:
      return std::isnan(x) ? x : (x > T(0) ? x : T(0));
    case ops::StepKind::leaky_relu:
      return x > T(0) ? x : x * static_cast<T>(step.a);
    case ops::StepKind::clamp:
      return std::isnan(x) ? x : std::min(std::max(x, static_cast<T>(step.a)), static_cast<T>(step.b));
    case ops::StepKind::div_leaky_relu: {
      T t = round(x * static_cast<T>(1.0 / step.a));
      return t > T(0) ? t : t * static_cast<T>(step.b);
    }
    default:
      return reference_function(step, x, round);
  }
}

/// The whole chain on one value: each step rounded to the dtype, as a sequence of PyTorch ops.
template <class T, class Round>
T reference_chain(const std::vector<ops::Step>& steps, T x, Round round, const T* inputs = nullptr) {
  for (const auto& step : steps) x = round(reference_step(step, x, round, inputs));
  return x;
}

/// The error `cuinline run conv2d` allows in one output, relative to its magnitude |bias| +
/// sum |x * w|: fp32 FMA and 3xTF32 give fp32-level sums; TF32 rounds both operands to 11
/// significant bits (cvt.rna), so a product is off by at most 2 * 2^-11 < 1e-3 of its size.
inline double conv2d_relative_tolerance(ops::Conv2dPrecision precision) {
  return precision == ops::Conv2dPrecision::tf32 ? 1e-3 : 1e-5;
}

/// Whether `got` is LeakyReLU(conv / divisor, slope) for some conv value within `bound` of the
/// float64 reference `conv`, plus `slack` (1e-6: an fp32 output's; 1e-12 for f64).
inline bool conv2d_output_ok(double conv, double bound, double divisor, double slope, double got,
                             double slack = 1e-6) {
  auto epilogue = [&](double v) {
    double t = v / divisor;
    return t > 0 ? t : t * slope;
  };
  const double ref = epilogue(conv);
  if (ref == got || (std::isnan(ref) && std::isnan(got))) return true;  // also the same infinity
  if (divisor != 0) return std::fabs(ref - got) <= bound / std::fabs(divisor) + slack;
  // x / 0 is ±inf by the sign of x (NaN for 0 / 0): within the bound of 0 that sign is unknown.
  return std::fabs(conv) <= bound && !std::isfinite(got);
}

}  // namespace cuinline::cli
