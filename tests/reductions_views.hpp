#pragma once
// Row-reduction calls planned and checked without a device: tensor views at fake, 256-byte aligned
// addresses (as cudaMalloc's), far enough apart that no two tensors overlap, and the message of the
// InvalidArgument a call throws. Shared by test_reductions.cpp and test_reductions_fusion.cpp.
#include <cuinline/error.hpp>
#include <cuinline/tensor.hpp>
#include <cstdint>
#include <exception>
#include <string>

namespace cuinline::test {

inline void* fake(std::uintptr_t address) {
  return reinterpret_cast<void*>(address);
}
inline constexpr std::uintptr_t kIn = 0x7f0000000000;
inline constexpr std::uintptr_t kOut = 0x7f1000000000;
inline constexpr std::uintptr_t kW = 0x7f2000000000;
inline constexpr std::uintptr_t kB = 0x7f3000000000;
inline constexpr std::uintptr_t kRes = 0x7f4000000000;
inline constexpr std::uintptr_t kGate = 0x7f5000000000;

/// A contiguous [rows, n] tensor at `at`.
inline TensorView rows_of(std::uintptr_t at, DType dt, std::int64_t rows, std::int64_t n) {
  return TensorView::contiguous(fake(at), dt, {rows, n});
}
/// A contiguous 1-D tensor of n elements at `at` (a weight or bias).
inline TensorView vec(std::uintptr_t at, DType dt, std::int64_t n) {
  return TensorView::contiguous(fake(at), dt, {n});
}

/// The message of the InvalidArgument `f` throws ("" when it throws nothing or something else).
template <class F>
std::string refusal(F&& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not InvalidArgument: ") + e.what();
  }
  return "";
}

}  // namespace cuinline::test
