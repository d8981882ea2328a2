#include <cuinline/error.hpp>
#include <cuinline/tensor.hpp>
#include <string>

namespace cuinline {

const char* to_string(DType dtype) noexcept {
  switch (dtype) {
    case DType::f32:
      return "f32";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
    case DType::f64:
      return "f64";
  }
  return "unknown";
}

std::optional<DType> parse_dtype(std::string_view text) noexcept {
  if (text == "f32" || text == "float32" || text == "float") return DType::f32;
  if (text == "f16" || text == "float16" || text == "half") return DType::f16;
  if (text == "bf16" || text == "bfloat16") return DType::bf16;
  if (text == "f64" || text == "float64" || text == "double") return DType::f64;
  return std::nullopt;
}

std::size_t dtype_size(DType dtype) noexcept {
  switch (dtype) {
    case DType::f32:
      return 4;
    case DType::f16:
      return 2;
    case DType::bf16:
      return 2;
    case DType::f64:
      return 8;
  }
  return 0;
}

namespace {

void check_shape(const TensorView& view, std::initializer_list<std::int64_t> shape) {
  if (shape.size() > static_cast<std::size_t>(TensorView::kMaxDims)) {
    throw InvalidArgument("tensor view: " + std::to_string(shape.size()) + " dimensions, at most " +
                          std::to_string(TensorView::kMaxDims) + " are supported");
  }
  for (std::int64_t d : shape) {
    if (d < 0) throw InvalidArgument("tensor view: negative dimension " + std::to_string(d));
  }
  if (dtype_size(view.dtype) == 0) throw InvalidArgument("tensor view: unknown dtype");
}

// A view of `shape` (checked) without strides.
TensorView with_shape(void* data, DType dtype, std::initializer_list<std::int64_t> shape) {
  TensorView view;
  view.data = data;
  view.dtype = dtype;
  check_shape(view, shape);
  view.ndim = static_cast<int>(shape.size());
  int i = 0;
  for (std::int64_t d : shape) view.shape[i++] = d;
  return view;
}

}  // namespace

TensorView TensorView::contiguous(void* data, DType dtype, std::initializer_list<std::int64_t> shape) {
  TensorView view = with_shape(data, dtype, shape);
  std::int64_t stride = 1;
  for (int d = view.ndim - 1; d >= 0; --d) {
    view.strides[d] = stride;
    stride *= view.shape[d] > 0 ? view.shape[d] : 1;
  }
  return view;
}

TensorView TensorView::strided(void* data, DType dtype, std::initializer_list<std::int64_t> shape,
                               std::initializer_list<std::int64_t> strides) {
  if (shape.size() != strides.size()) {
    throw InvalidArgument("tensor view: " + std::to_string(shape.size()) + " dimensions but " +
                          std::to_string(strides.size()) + " strides");
  }
  TensorView view = with_shape(data, dtype, shape);
  int i = 0;
  for (std::int64_t s : strides) view.strides[i++] = s;
  return view;
}

std::int64_t TensorView::numel() const noexcept {
  std::int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= shape[d];
  return n;
}

bool TensorView::is_contiguous() const noexcept {
  std::int64_t expected = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    if (shape[d] == 0) return true;
    if (shape[d] != 1 && strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

std::string TensorView::describe() const {
  std::string s = to_string(dtype);
  s += '[';
  for (int d = 0; d < ndim; ++d) {
    if (d > 0) s += ", ";
    s += std::to_string(shape[d]);
  }
  s += ']';
  if (!is_contiguous()) {
    s += " strides (";
    for (int d = 0; d < ndim; ++d) {
      if (d > 0) s += ", ";
      s += std::to_string(strides[d]);
    }
    s += ')';
  }
  return s;
}

}  // namespace cuinline
