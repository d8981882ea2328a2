#include "ops/elementwise/render.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cuinline/error.hpp>

#include "reference/half_bits.hpp"

namespace cuinline::detail {

const char* storage_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "float";
    case DType::f16:
      return "ew_half";
    case DType::bf16:
      return "ew_bf16";
    case DType::f64:
      return "double";
  }
  throw InvalidArgument("unsupported dtype " + std::to_string(static_cast<int>(dtype)));
}

namespace {

std::string hex_literal(double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", value);  // exact: every bit of the double is printed
  return buf;
}

// PyTorch: the reciprocal of the divisor computed on the host in double, from the Scalar as given
// (a double), then rounded to opmath (div_true_kernel_cuda: static_cast<opmath_t>(1.0 / b) in
// PyTorch 2.11; releases before it divided in opmath, 1.0f / float(b), which differs for divisors such
// as 0.001: 999.99994f instead of 1000.0f).
double reciprocal_in_opmath(double divisor, DType dtype) {
  if (dtype == DType::f64) return 1.0 / divisor;
  return static_cast<double>(static_cast<float>(1.0 / divisor));
}

// PyTorch: a product of two scalars converted to opmath first (at::elu's alpha * scale).
double product_in_opmath(double a, double b, DType dtype) {
  if (dtype == DType::f64) return a * b;
  return static_cast<double>(static_cast<float>(a) * static_cast<float>(b));
}

// ATen's SELU constants (Activation.cpp).
constexpr double kSeluAlpha = 1.6732632423543772848170429916717;
constexpr double kSeluScale = 1.0507009873554804934193349852946;

}  // namespace

std::uint64_t scalar_storage_bits(double value, DType dtype) {
  if (dtype == DType::f64) {
    std::uint64_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    return bits;
  }
  const float f = static_cast<float>(value);  // c10::Half(float(s)): through float first
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  switch (dtype) {
    case DType::f32:
      return u;
    case DType::bf16:
      // c10::BFloat16's round_to_nearest_even (NaN → 0x7fc0).
      if (std::isnan(f)) return 0x7fc0u;
      return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    case DType::f16:
      return float_to_half(f);  // NaN: the quiet NaN, as c10's fp16_ieee_from_fp32_value
    case DType::f64:
      break;
  }
  throw InvalidArgument("unsupported dtype " + std::to_string(static_cast<int>(dtype)));
}

std::string storage_literal(double value, DType dtype) {
  const std::uint64_t bits = scalar_storage_bits(value, dtype);
  char buf[64];
  switch (dtype) {
    case DType::f64:
      std::snprintf(buf, sizeof buf, "__longlong_as_double(0x%016llxll)", static_cast<unsigned long long>(bits));
      break;
    case DType::f32:
      std::snprintf(buf, sizeof buf, "__int_as_float(0x%08x)", static_cast<unsigned>(bits));
      break;
    default:
      std::snprintf(buf, sizeof buf, "%s{0x%04x}", storage_type(dtype), static_cast<unsigned>(bits));
      break;
  }
  return buf;
}

std::string opmath_literal(double value, DType dtype) {
  if (dtype == DType::f64) {
    if (std::isfinite(value)) return hex_literal(value);
    std::uint64_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    char buf[64];
    std::snprintf(buf, sizeof buf, "__longlong_as_double(0x%016llxll)",
                  static_cast<unsigned long long>(bits));
    return buf;
  }
  storage_type(dtype);  // rejects unknown dtypes
  const float f = static_cast<float>(value);
  if (std::isfinite(f)) return hex_literal(static_cast<double>(f)) + "f";
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  char buf[48];
  std::snprintf(buf, sizeof buf, "__int_as_float(0x%08x)", static_cast<unsigned>(bits));
  return buf;
}

namespace {

// A scalar as ATen's kernels take it (Scalar::to<scalar_t>: through float to the dtype), as a
// double: hardshrink's / softshrink's lambd, threshold's threshold and value.
double storage_value(double value, DType dtype) {
  const std::uint64_t bits = scalar_storage_bits(value, dtype);
  switch (dtype) {
    case DType::f64:
      return value;
    case DType::f32:
      return static_cast<double>(static_cast<float>(value));
    case DType::bf16:
      return static_cast<double>(bf16_to_float(static_cast<std::uint16_t>(bits)));
    case DType::f16:
      return static_cast<double>(half_to_float(static_cast<std::uint16_t>(bits)));
  }
  throw InvalidArgument("unsupported dtype " + std::to_string(static_cast<int>(dtype)));
}

}  // namespace

std::vector<LoweredStep> lower_chain(const ops::Op& op, DType dtype) {
  std::vector<LoweredStep> out;
  out.reserve(op.steps.size() + 1);
  auto push = [&](LoweredFn fn, std::initializer_list<double> c = {}) -> LoweredStep& {
    LoweredStep s;
    s.fn = fn;
    int i = 0;
    for (double v : c) s.c[i++] = v;
    out.push_back(s);
    return out.back();
  };
  for (const ops::Step& step : op.steps) {
    switch (step.kind) {
      case ops::StepKind::add:
        push(LoweredFn::add, {step.a});
        break;
      case ops::StepKind::sub:
        push(LoweredFn::sub, {step.a});
        break;
      case ops::StepKind::mul:
        push(LoweredFn::mul, {step.a});
        break;
      case ops::StepKind::div:
        push(LoweredFn::mul, {reciprocal_in_opmath(step.a, dtype)}).divisor = step.a;
        break;
      case ops::StepKind::relu:
        push(LoweredFn::relu);
        break;
      case ops::StepKind::leaky_relu:
        push(LoweredFn::leaky_relu, {step.a});
        break;
      case ops::StepKind::clamp:
        push(LoweredFn::clamp, {step.a, step.b});
        break;
      case ops::StepKind::add_tensor:
        push(LoweredFn::add_tensor).operand = step.operand;
        break;
      case ops::StepKind::sub_tensor:
        push(LoweredFn::sub_tensor).operand = step.operand;
        break;
      case ops::StepKind::mul_tensor:
        push(LoweredFn::mul_tensor).operand = step.operand;
        break;
      case ops::StepKind::div_tensor:
        push(LoweredFn::div_tensor).operand = step.operand;
        break;
      case ops::StepKind::where_tensor: {
        LoweredStep& s = push(LoweredFn::where_tensor);
        s.cond = step.cond;
        s.operand = step.operand;
        break;
      }
      case ops::StepKind::where_scalar: {
        LoweredStep& s = push(LoweredFn::where_scalar);
        s.cond = step.cond;
        s.has_storage = true;
        s.storage = step.a;
        break;
      }
      case ops::StepKind::div_leaky_relu:
        push(LoweredFn::mul, {reciprocal_in_opmath(step.a, dtype)}).divisor = step.a;
        push(LoweredFn::leaky_relu, {step.b});
        break;
      // Activations: the constants as PyTorch's kernels hold them (opmath_t values made from its
      // double Scalars / C constants).
      case ops::StepKind::sigmoid:
        push(LoweredFn::sigmoid);
        break;
      case ops::StepKind::tanh:
        push(LoweredFn::tanh);
        break;
      case ops::StepKind::silu:
        push(LoweredFn::silu);
        break;
      case ops::StepKind::gelu:  // constexpr opmath_t kAlpha = M_SQRT1_2
        push(LoweredFn::gelu, {0.70710678118654752440});
        break;
      case ops::StepKind::gelu_tanh:  // kBeta = M_SQRT2 * M_2_SQRTPI * 0.5 (in double), kKappa = 0.044715
        push(LoweredFn::gelu_tanh, {1.41421356237309504880 * 1.12837916709551257390 * 0.5, 0.044715});
        break;
      case ops::StepKind::mish:
        push(LoweredFn::mish);
        break;
      case ops::StepKind::softplus:
        push(LoweredFn::softplus, {step.a, step.b});
        break;
      case ops::StepKind::elu:  // at::elu(x, alpha, scale = 1, input_scale = 1)
        push(LoweredFn::elu, {product_in_opmath(step.a, 1.0, dtype), 1.0, 1.0});
        break;
      case ops::StepKind::selu:  // at::elu(x, SELU_ALPHA, SELU_SCALE, 1)
        push(LoweredFn::elu, {product_in_opmath(kSeluAlpha, kSeluScale, dtype), kSeluScale, 1.0});
        break;
      case ops::StepKind::celu:  // at::elu(x, alpha, 1, 1 / alpha), 1 / alpha in double
        push(LoweredFn::elu, {product_in_opmath(step.a, 1.0, dtype), 1.0, 1.0 / step.a});
        break;
      case ops::StepKind::hardswish:  // const opmath_t one_sixth(1.0f / 6.0f)
        push(LoweredFn::hardswish, {static_cast<double>(1.0f / 6.0f)});
        break;
      case ops::StepKind::hardsigmoid:
        push(LoweredFn::hardsigmoid, {static_cast<double>(1.0f / 6.0f)});
        break;
      case ops::StepKind::exp:
        push(LoweredFn::exp);
        break;
      case ops::StepKind::log:
        push(LoweredFn::log);
        break;
      case ops::StepKind::sqrt:
        push(LoweredFn::sqrt);
        break;
      case ops::StepKind::abs:
        push(LoweredFn::abs);
        break;
      case ops::StepKind::neg:
        push(LoweredFn::neg);
        break;
      case ops::StepKind::softsign:  // input / (input.abs() + 1): two ops, rounded between
        push(LoweredFn::softsign);
        break;
      case ops::StepKind::tanhshrink:  // input - input.tanh()
        push(LoweredFn::tanhshrink);
        break;
      case ops::StepKind::logsigmoid:
        push(LoweredFn::logsigmoid);
        break;
      case ops::StepKind::hardshrink:  // auto lambd = value.to<scalar_t>()
        push(LoweredFn::hardshrink, {storage_value(step.a, dtype)});
        break;
      case ops::StepKind::softshrink:
        push(LoweredFn::softshrink, {storage_value(step.a, dtype)});
        break;
      case ops::StepKind::threshold: {  // threshold.to<scalar_t>(), value.to<scalar_t>()
        LoweredStep& s = push(LoweredFn::threshold, {storage_value(step.a, dtype)});
        s.has_storage = true;
        s.storage = step.b;
        break;
      }
    }
  }
  return out;
}

std::optional<std::uint16_t> exact_16bit_constant(const LoweredStep& step, DType dtype) {
  if (dtype != DType::f16 && dtype != DType::bf16) return std::nullopt;
  if (step.fn != LoweredFn::add && step.fn != LoweredFn::sub && step.fn != LoweredFn::mul)
    return std::nullopt;
  const float c = static_cast<float>(step.c[0]);  // the opmath constant, as opmath_literal writes it
  if (!std::isfinite(c)) return std::nullopt;
  const auto bits = static_cast<std::uint16_t>(scalar_storage_bits(static_cast<double>(c), dtype));
  const float back = dtype == DType::bf16 ? bf16_to_float(bits) : half_to_float(bits);
  if (std::memcmp(&back, &c, sizeof c) != 0) return std::nullopt;  // not held exactly (-0.0 kept apart)
  if (dtype == DType::bf16 && step.fn == LoweredFn::mul) {
    const double scaled = static_cast<double>(c) * 65536.0;  // exact: c has 8 significant bits
    if (scaled != std::floor(scaled)) return std::nullopt;   // a bit under 2^-16
  }
  return bits;
}

bool chain_is_scalar_arithmetic(const ops::Op& op) noexcept {
  if (!op.expression.empty() || op.steps.empty()) return false;
  for (const ops::Step& step : op.steps) {
    // (Each lowers to one LoweredFn::add, sub or mul step.)
    if (step.kind != ops::StepKind::add && step.kind != ops::StepKind::sub &&
        step.kind != ops::StepKind::mul && step.kind != ops::StepKind::div) {
      return false;
    }
  }
  return true;
}

double opmath_value(double value, DType dtype) {
  if (dtype == DType::f64) return value;
  storage_type(dtype);  // rejects unknown dtypes
  return static_cast<double>(static_cast<float>(value));
}

namespace {

// The function each lowered step calls (ew_ops.cuh) and how many opmath constants it takes.
struct FnInfo {
  const char* name;
  int constants;
};
FnInfo fn_info(LoweredFn fn) {
  switch (fn) {
    case LoweredFn::add: return {"ew_add", 1};
    case LoweredFn::sub: return {"ew_sub", 1};
    case LoweredFn::mul: return {"ew_mul", 1};
    case LoweredFn::relu: return {"ew_relu", 0};
    case LoweredFn::leaky_relu: return {"ew_leaky_relu", 1};
    case LoweredFn::clamp: return {"ew_clamp", 2};
    case LoweredFn::add_tensor: return {"ew_add_tensor", 0};
    case LoweredFn::sub_tensor: return {"ew_sub_tensor", 0};
    case LoweredFn::mul_tensor: return {"ew_mul_tensor", 0};
    case LoweredFn::div_tensor: return {"ew_div_tensor", 0};
    case LoweredFn::where_tensor: return {"ew_where", 0};
    case LoweredFn::where_scalar: return {"ew_where", 0};
    case LoweredFn::sigmoid: return {"ew_sigmoid", 0};
    case LoweredFn::tanh: return {"ew_tanh", 0};
    case LoweredFn::silu: return {"ew_silu", 0};
    case LoweredFn::gelu: return {"ew_gelu", 1};
    case LoweredFn::gelu_tanh: return {"ew_gelu_tanh", 2};
    case LoweredFn::mish: return {"ew_mish", 0};
    case LoweredFn::softplus: return {"ew_softplus", 2};
    case LoweredFn::elu: return {"ew_elu", 3};
    case LoweredFn::hardswish: return {"ew_hardswish", 1};
    case LoweredFn::hardsigmoid: return {"ew_hardsigmoid", 1};
    case LoweredFn::exp: return {"ew_exp", 0};
    case LoweredFn::log: return {"ew_log", 0};
    case LoweredFn::sqrt: return {"ew_sqrt", 0};
    case LoweredFn::abs: return {"ew_abs", 0};
    case LoweredFn::neg: return {"ew_neg", 0};
    case LoweredFn::softsign: return {"ew_softsign", 0};
    case LoweredFn::tanhshrink: return {"ew_tanhshrink", 0};
    case LoweredFn::logsigmoid: return {"ew_logsigmoid", 0};
    case LoweredFn::hardshrink: return {"ew_hardshrink", 1};
    case LoweredFn::softshrink: return {"ew_softshrink", 1};
    case LoweredFn::threshold: return {"ew_threshold", 1};
  }
  throw InvalidArgument("unknown lowered step " + std::to_string(static_cast<int>(fn)));
}

// The steps of a chain as statements on the storage value `x` (and, for tensor steps, the inputs
// xs[k] of an N-ary functor), from the lowered steps the generic kernel runs too.
std::string render_chain_steps(const ops::Op& op, DType dtype) {
  std::string out;
  auto lit = [&](double v) { return opmath_literal(v, dtype); };
  for (const LoweredStep& step : lower_chain(op, dtype)) {
    const FnInfo info = fn_info(step.fn);
    std::string args;
    switch (step.fn) {
      case LoweredFn::add_tensor:
      case LoweredFn::sub_tensor:
      case LoweredFn::mul_tensor:
      case LoweredFn::div_tensor:
        args = "x, xs[" + std::to_string(step.operand) + "]";
        break;
      case LoweredFn::where_tensor:
        args = "xs[" + std::to_string(step.cond) + "], x, xs[" + std::to_string(step.operand) + "]";
        break;
      case LoweredFn::where_scalar:
        args = "xs[" + std::to_string(step.cond) + "], x, " + storage_literal(step.storage, dtype);
        break;
      default:
        args = "x";
        if (const auto bits = exact_16bit_constant(step, dtype)) {
          char c[32];
          std::snprintf(c, sizeof c, "%s{0x%04x}", storage_type(dtype), static_cast<unsigned>(*bits));
          out += "    x = " + std::string(info.name) + "_exact(x, " + c + ");  // " + lit(step.c[0]);
          if (step.divisor) out += ", / " + lit(*step.divisor);
          out += "\n";
          continue;
        }
        for (int i = 0; i < info.constants; ++i) args += ", " + lit(step.c[i]);
        if (step.has_storage) args += ", " + storage_literal(step.storage, dtype);
        break;
    }
    out += "    x = " + std::string(info.name) + "(" + args + ");";
    if (step.divisor) out += "  // / " + lit(*step.divisor);
    out += "\n";
  }
  return out;
}

}  // namespace

std::string render_op_functor(const ops::Op& op, DType dtype, std::string_view name) {
  op.validate();
  if (op.min_inputs() > 1 || op.outputs() > 1 || !op.input_names.empty()) {
    throw InvalidArgument("elementwise " + op.describe() + ": an op over several tensors (" +
                          std::to_string(op.min_inputs()) + " inputs, " + std::to_string(op.outputs()) +
                          " outputs) is not a one-tensor functor (use ops::apply with tensor lists)");
  }
  const std::string s = storage_type(dtype);
  std::string out = "struct " + std::string(name) + " {\n";
  if (!op.expression.empty()) {
    out += "  __device__ __forceinline__ " + s + " operator()(" + s + " x_storage) const {\n";
    out += "    typedef ew_traits<" + s + "> T;\n";
    out += "    const T::op x = T::to_op(x_storage);\n";
    for (const auto& c : op.constants) {
      out += "    const T::op " + c.name + " = " + opmath_literal(c.value, dtype) + ";\n";
    }
    out += "    return T::from_op(static_cast<T::op>(" + op.expression + "));\n";
    out += "  }\n};\n";
    return out;
  }
  out += "  __device__ __forceinline__ " + s + " operator()(" + s + " x) const {\n";
  out += render_chain_steps(op, dtype);
  out += "    return x;\n  }\n};\n";
  return out;
}

}  // namespace cuinline::detail

namespace cuinline::detail {

std::string render_nary_functor(const ops::Op& op, DType dtype, int inputs, std::string_view name) {
  op.validate();
  const std::string s = storage_type(dtype);
  const int outputs = op.outputs();
  std::string out = "struct " + std::string(name) + " {\n";
  out += "  __device__ __forceinline__ void operator()(const " + s + " (&xs)[" + std::to_string(inputs) + "], " + s +
         " (&ys)[" + std::to_string(outputs) + "]) const {\n";
  out += "    typedef ew_traits<" + s + "> T;\n";
  if (op.expression.empty()) {
    out += "    " + s + " x = xs[0];\n" + render_chain_steps(op, dtype) + "    ys[0] = x;\n  }\n};\n";
    return out;
  }
  for (int i = 0; i < inputs; ++i) {
    const std::string n = op.input_names.empty() ? (inputs == 1 ? std::string("x") : std::string(1, static_cast<char>('a' + i)))
                                                 : op.input_names[static_cast<std::size_t>(i)];
    out += "    const T::op " + n + " = T::to_op(xs[" + std::to_string(i) + "]);\n";
  }
  for (const auto& c : op.constants) out += "    const T::op " + c.name + " = " + opmath_literal(c.value, dtype) + ";\n";
  for (int k = 0; k < outputs; ++k) {
    const std::string& e = k == 0 ? op.expression : op.more_outputs[static_cast<std::size_t>(k - 1)];
    out += "    ys[" + std::to_string(k) + "] = T::from_op(static_cast<T::op>(" + e + "));\n";
    if (k + 1 < outputs) out += "    const T::op y" + std::to_string(k) + " = T::to_op(ys[" + std::to_string(k) + "]);\n";
  }
  out += "  }\n};\n";
  return out;
}

}  // namespace cuinline::detail
