#pragma once
// A CPU reference of the elementwise ops with PyTorch's semantics (compute in float for
// f16/bf16/f32, in double for f64; round once per step to the dtype), on raw element bits.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cuinline/ops.hpp>
#include <cuinline/tensor.hpp>

#include "reference/host_reference.hpp"

namespace cuinline::test {

inline float bits_to_float(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
inline std::uint32_t float_to_bits(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

inline float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ffu;
  if (exp == 0x1f) return bits_to_float(sign | 0x7f800000u | (man << 13));
  if (exp != 0) return bits_to_float(sign | ((exp + 112) << 23) | (man << 13));
  const float mag = std::ldexp(static_cast<float>(man), -24);  // subnormal: exact
  return sign ? -mag : mag;
}

// Round to nearest even; NaN -> a quiet NaN (only NaN-ness is compared).
inline std::uint16_t float_to_half(float f) {
  const std::uint32_t b = float_to_bits(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((b >> 16) & 0x8000u);
  if (std::isnan(f)) return sign | 0x7e00u;
  const float a = std::fabs(f);
  if (a >= 65520.0f) return sign | 0x7c00u;  // rounds to infinity
  if (a < std::ldexp(1.0f, -14)) {
    // Subnormal range: the value in units of 2^-24, rounded to nearest even.
    const float units = a * 16777216.0f;  // exact (power-of-two scaling)
    return sign | static_cast<std::uint16_t>(std::nearbyint(units));
  }
  const std::uint32_t ab = float_to_bits(a);
  std::uint32_t exp = (ab >> 23) - 112, man = ab & 0x7fffffu;
  std::uint32_t h = (exp << 10) | (man >> 13);
  const std::uint32_t rest = man & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // may carry into the exponent: correct
  return sign | static_cast<std::uint16_t>(h);
}

inline float bf16_to_float(std::uint16_t h) {
  return bits_to_float(static_cast<std::uint32_t>(h) << 16);
}
inline std::uint16_t float_to_bf16(float f) {
  const std::uint32_t u = float_to_bits(f);
  if (std::isnan(f)) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline float to_op(DType dt, std::uint64_t bits) {
  switch (dt) {
    case DType::f16:
      return half_to_float(static_cast<std::uint16_t>(bits));
    case DType::bf16:
      return bf16_to_float(static_cast<std::uint16_t>(bits));
    default:
      return bits_to_float(static_cast<std::uint32_t>(bits));
  }
}
inline std::uint64_t from_op(DType dt, float f) {
  switch (dt) {
    case DType::f16:
      return float_to_half(f);
    case DType::bf16:
      return float_to_bf16(f);
    default:
      return float_to_bits(f);
  }
}

/// An element's value from its bits (f64: the double; else through opmath float).
inline double value_of(DType dt, std::uint64_t bits) {
  if (dt == DType::f64) {
    double d;
    std::memcpy(&d, &bits, 8);
    return d;
  }
  return to_op(dt, bits);
}
/// The bits of v in the dtype: f64 keeps the double; else double → float → dtype (round to nearest
/// even), as PyTorch converts a Python scalar (c10::Half(float(s))).
inline std::uint64_t bits_of(DType dt, double v) {
  if (dt == DType::f64) {
    std::uint64_t b;
    std::memcpy(&b, &v, 8);
    return b;
  }
  return from_op(dt, static_cast<float>(v));
}

template <class F>
std::uint64_t reference_step(const ops::Step& st, DType dt, std::uint64_t bits) {
  F v;
  if constexpr (sizeof(F) == 8) {
    std::memcpy(&v, &bits, 8);
  } else {
    v = to_op(dt, bits);
  }
  auto out = [&](F r) -> std::uint64_t {
    if constexpr (sizeof(F) == 8) {
      std::uint64_t b;
      std::memcpy(&b, &r, 8);
      return b;
    } else {
      return from_op(dt, r);
    }
  };
  const F a = static_cast<F>(st.a), b = static_cast<F>(st.b);
  switch (st.kind) {
    case ops::StepKind::add:
      return out(v + a);
    case ops::StepKind::sub:
      return out(v - a);
    case ops::StepKind::mul:
      return out(v * a);
    case ops::StepKind::div:  // the reciprocal in double, then opmath (PyTorch 2.11)
      return out(v * static_cast<F>(1.0 / st.a));
    case ops::StepKind::relu:
      return std::isnan(v) ? bits : out(v > F(0) ? v : F(0));
    case ops::StepKind::leaky_relu:
      return out(v > F(0) ? v : v * a);
    case ops::StepKind::clamp:
      return std::isnan(v) ? bits : out(v < a ? a : (v > b ? b : v));
    case ops::StepKind::div_leaky_relu: {
      const std::uint64_t q = out(v * static_cast<F>(1.0 / st.a));
      return reference_step<F>(ops::Step::leaky_relu(st.b), dt, q);
    }
    default:  // activations: the host's libm, a few ulp from CUDA's (compare with close_to_reference)
      if (ops::is_function_step(st.kind)) {
        const auto round = [&](F r) -> F {
          if constexpr (sizeof(F) == 8) {
            return r;
          } else {
            return to_op(dt, from_op(dt, r));
          }
        };
        return out(cli::reference_function<F>(st, v, round));
      }
      return bits;
  }
}

/// The reference of a chain op on one element's bits.
inline std::uint64_t reference(const ops::Op& op, DType dt, std::uint64_t bits) {
  for (const ops::Step& st : op.steps) {
    bits = dt == DType::f64 ? reference_step<double>(st, dt, bits) : reference_step<float>(st, dt, bits);
  }
  return bits;
}

/// Equal bits, or both NaN; with `any_zero_sign`, +0 and -0 match each other (max(-0, +0) may give
/// either sign, and the GPU and the host libm need not agree: the PyTorch comparison is exact).
inline bool same_result(DType dt, std::uint64_t got, std::uint64_t want, bool any_zero_sign) {
  if (got == want) return true;
  const std::uint64_t mask = dt == DType::f64   ? 0x7fffffffffffffffull
                             : dt == DType::f32 ? 0x7fffffffull
                                                : 0x7fffull;
  const std::uint64_t inf = dt == DType::f64   ? 0x7ff0000000000000ull
                            : dt == DType::f32 ? 0x7f800000ull
                            : dt == DType::f16 ? 0x7c00ull
                                               : 0x7f80ull;
  if ((got & mask) > inf && (want & mask) > inf) return true;
  return any_zero_sign && (got & mask) == 0 && (want & mask) == 0;
}

}  // namespace cuinline::test
