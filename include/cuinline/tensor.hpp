#pragma once
/// @file tensor.hpp
/// A framework-independent view of a device tensor: pointer, dtype, shape, strides (in elements).

#include <cuda.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace cuinline {

enum class DType : std::uint8_t { f32, f16, bf16, f64 };

/// "f32", "f16", "bf16", "f64".
const char* to_string(DType dtype) noexcept;
/// Parses "f32"/"float32"/"float", "f16"/"float16"/"half", "bf16"/"bfloat16", "f64"/"float64"/"double".
std::optional<DType> parse_dtype(std::string_view text) noexcept;
/// Bytes per element.
std::size_t dtype_size(DType dtype) noexcept;

/// Up to kMaxDims dimensions; strides in elements (not bytes). A view owns nothing.
struct TensorView {
  static constexpr int kMaxDims = 8;

  void* data = nullptr;  ///< device pointer
  DType dtype = DType::f32;
  int ndim = 0;
  std::array<std::int64_t, kMaxDims> shape{};
  std::array<std::int64_t, kMaxDims> strides{};

  /// A contiguous (row-major) view.
  static TensorView contiguous(void* data, DType dtype, std::initializer_list<std::int64_t> shape);
  /// A view with explicit strides (elements). Throws InvalidArgument on a mismatch of sizes.
  static TensorView strided(void* data, DType dtype, std::initializer_list<std::int64_t> shape,
                            std::initializer_list<std::int64_t> strides);

  std::int64_t numel() const noexcept;
  std::size_t nbytes() const noexcept { return static_cast<std::size_t>(numel()) * dtype_size(dtype); }
  bool is_contiguous() const noexcept;
  /// "f32[4096, 393216]".
  std::string describe() const;
};

}  // namespace cuinline
