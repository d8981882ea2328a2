#pragma once
// What the host-emulated kernel tests whose blocks run on one host thread share, to compile a
// kernel template as host C++: the CUDA keywords, the built-in indices, the storage types and bit
// casts ew_common.cuh would give (its guard is defined, so the template's include of it adds
// nothing), and the check that every global read falls inside a tensor of the running case.
// Included once per test binary, before the template; each test adds what its kernel needs beyond
// this (its loads, its barrier, its step functions).
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "elementwise_reference.hpp"

#define __device__
#define __global__
#define __forceinline__ inline
#define __restrict__
#define __launch_bounds__(...)
#define CUINLINE_EW_COMMON_CUH

namespace {

struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};
Dim3 threadIdx, blockIdx;  // set by the test's launch before each thread runs

// The tensors of the running case: every read must fall inside one of them.
struct Extent {
  const void* begin;
  std::size_t bytes;
};
std::vector<Extent> g_tensors;
inline bool in_a_tensor(const void* p, std::size_t bytes) {
  for (const Extent& e : g_tensors) {
    const auto* b = static_cast<const unsigned char*>(e.begin);
    const auto* q = static_cast<const unsigned char*>(p);
    if (q >= b && q + bytes <= b + e.bytes) return true;
  }
  return false;
}

}  // namespace

struct uint4 {
  unsigned x, y, z, w;
};
inline float __int_as_float(int v) {
  float f;
  std::memcpy(&f, &v, 4);
  return f;
}
inline float __uint_as_float(unsigned v) {
  float f;
  std::memcpy(&f, &v, 4);
  return f;
}
inline double __longlong_as_double(long long v) {
  double d;
  std::memcpy(&d, &v, 8);
  return d;
}

// ew_common.cuh's storage types: float and double are their own opmath type, half and bfloat16
// compute in float.
struct ew_half {
  unsigned short bits;
};
struct ew_bf16 {
  unsigned short bits;
};
template <class S>
struct ew_traits {
  typedef S op;
  static S to_op(S x) { return x; }
  static S from_op(S x) { return x; }
};
template <>
struct ew_traits<ew_half> {
  typedef float op;
  static float to_op(ew_half h) { return cuinline::test::half_to_float(h.bits); }
  static ew_half from_op(float x) { return {cuinline::test::float_to_half(x)}; }
};
template <>
struct ew_traits<ew_bf16> {
  typedef float op;
  static float to_op(ew_bf16 h) { return cuinline::test::bf16_to_float(h.bits); }
  static ew_bf16 from_op(float x) { return {cuinline::test::float_to_bf16(x)}; }
};
template <int B>
struct ew_raw;
template <>
struct ew_raw<2> {
  typedef unsigned short type;
};
template <>
struct ew_raw<4> {
  typedef unsigned type;
};
