#pragma once
// IEEE half and bfloat16 bit patterns on the host: float to half (round to nearest even, as
// c10::Half and __float2half_rn), half and bfloat16 back to float (exact). Used by the renderer
// (scalars as ATen converts them) and the CLI's CPU reference.

#include <cmath>
#include <cstdint>
#include <cstring>

namespace cuinline::detail {

inline std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float bf16_to_float(std::uint16_t h) {
  return bits_float(static_cast<std::uint32_t>(h) << 16);
}

inline float half_to_float(std::uint16_t h) {
  std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000) << 16;
  std::uint32_t exp = (h >> 10) & 0x1F;
  std::uint32_t mant = h & 0x3FF;
  if (exp == 0x1F) return bits_float(sign | 0x7F800000 | (mant << 13));
  if (exp == 0) {
    float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  return bits_float(sign | ((exp + 112) << 23) | (mant << 13));
}

// NaN becomes the quiet NaN 0x7e00 with its sign (c10's fp16_ieee_from_fp32_value).
inline std::uint16_t float_to_half(float f) {
  std::uint32_t u = float_bits(f);
  std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000);
  std::uint32_t abs = u & 0x7FFFFFFF;
  if (abs > 0x7F800000) return static_cast<std::uint16_t>(sign | 0x7E00);   // NaN
  if (abs >= 0x477FF000) return static_cast<std::uint16_t>(sign | 0x7C00);  // rounds to inf
  if (abs < 0x38800000) {  // subnormal or zero in half: round |f| * 2^24 to an integer (RNE)
    float scaled = bits_float(abs) * 16777216.0f;
    return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(std::nearbyint(scaled)));
  }
  std::uint32_t mant = abs & 0x7FFFFF;
  std::uint32_t exp = (abs >> 23) - 112;
  std::uint32_t h = (exp << 10) | (mant >> 13);
  std::uint32_t rest = mant & 0x1FFF;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;  // a carry into the exponent is right
  return static_cast<std::uint16_t>(sign | h);
}

}  // namespace cuinline::detail
