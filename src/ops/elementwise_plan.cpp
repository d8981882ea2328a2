#include "ops/elementwise_plan.hpp"

#include <algorithm>
#include <atomic>
#include <cuinline/driver.hpp>
#include <cuinline/error.hpp>
#include <limits>
#include <string>

namespace cuinline::ops::detail {

namespace {

[[noreturn]] void bad(const Op& op, const std::string& what) {
  throw InvalidArgument("elementwise " + op.describe() + ": " + what);
}

// Byte range [lo, hi) a view touches (numel > 0).
void extent(const TensorView& v, std::uintptr_t* lo, std::uintptr_t* hi) {
  const auto es = static_cast<std::int64_t>(dtype_size(v.dtype));
  std::int64_t neg = 0, pos = 0;
  for (int d = 0; d < v.ndim; ++d) {
    const std::int64_t span = (v.shape[d] - 1) * v.strides[d] * es;
    (span < 0 ? neg : pos) += span;
  }
  const auto base = reinterpret_cast<std::uintptr_t>(v.data);
  *lo = base + static_cast<std::uintptr_t>(neg);  // neg <= 0: wraps to base - |neg|
  *hi = base + static_cast<std::uintptr_t>(pos + es);
}

}  // namespace

PlanCore plan_core(const Op& op, const TensorView& in, const TensorView& out) {
  op.validate();
  PlanCore p;
  const std::size_t es = dtype_size(in.dtype);
  if (es == 0) bad(op, "unsupported input dtype " + std::to_string(static_cast<int>(in.dtype)));
  if (in.dtype != out.dtype) {
    bad(op, std::string("dtype mismatch: input ") + to_string(in.dtype) + ", output " + to_string(out.dtype));
  }
  if (in.ndim < 0 || in.ndim > TensorView::kMaxDims || out.ndim < 0 || out.ndim > TensorView::kMaxDims) {
    bad(op, "bad number of dimensions");
  }
  bool same_shape = in.ndim == out.ndim;
  for (int d = 0; same_shape && d < in.ndim; ++d) same_shape = in.shape[d] == out.shape[d];
  if (!same_shape) bad(op, "shape mismatch: input " + in.describe() + ", output " + out.describe());
  std::int64_t n = 1;
  for (int d = 0; d < in.ndim; ++d) {
    if (in.shape[d] < 0) bad(op, "negative dimension in " + in.describe());
    if (in.shape[d] != 0 && n > std::numeric_limits<std::int64_t>::max() / in.shape[d]) {
      bad(op, "too many elements in " + in.describe());
    }
    n *= in.shape[d];
  }
  p.dtype = in.dtype;
  p.numel = n;
  if (n == 0) return p;
  if (in.data == nullptr || out.data == nullptr) {
    bad(op, std::string("null ") + (in.data == nullptr ? "input" : "output") + " pointer with " +
                std::to_string(n) + " elements");
  }
  if (reinterpret_cast<std::uintptr_t>(in.data) % es != 0 ||
      reinterpret_cast<std::uintptr_t>(out.data) % es != 0) {
    bad(op, "pointer not aligned to its element size");
  }
  for (int d = 0; d < out.ndim; ++d) {
    if (out.shape[d] > 1 && out.strides[d] == 0) {
      bad(op, "output " + out.describe() + " has several elements at one address (stride 0)");
    }
  }
  // In place needs the identical view; any other overlap is rejected (conservatively, by range).
  bool identical = in.data == out.data;
  for (int d = 0; identical && d < in.ndim; ++d)
    identical = in.shape[d] <= 1 || in.strides[d] == out.strides[d];
  if (!identical) {
    std::uintptr_t in_lo, in_hi, out_lo, out_hi;
    extent(in, &in_lo, &in_hi);
    extent(out, &out_lo, &out_hi);
    if (in_lo < out_hi && out_lo < in_hi) bad(op, "output overlaps the input without being the same view");
  }

  // Merge dimensions: drop size-1 ones, join neighbours contiguous in both tensors.
  StridedParams& s = p.strided;
  for (int d = 0; d < in.ndim; ++d) {
    if (in.shape[d] == 1) continue;
    if (s.ndim > 0) {
      const int k = s.ndim - 1;
      if (s.in_strides[k] == in.strides[d] * in.shape[d] &&
          s.out_strides[k] == out.strides[d] * in.shape[d]) {
        s.shape[k] *= in.shape[d];
        s.in_strides[k] = in.strides[d];
        s.out_strides[k] = out.strides[d];
        continue;
      }
    }
    s.shape[s.ndim] = in.shape[d];
    s.in_strides[s.ndim] = in.strides[d];
    s.out_strides[s.ndim] = out.strides[d];
    ++s.ndim;
  }
  p.in = in.data;
  p.out = out.data;
  const bool flat = s.ndim == 0 || (s.ndim == 1 && s.in_strides[0] == 1 && s.out_strides[0] == 1);
  if (!flat) {
    p.layout = Layout::strided;
    p.vector_width = 1;
    p.index = IndexWidth::i64;
    const std::int64_t blocks = (n + kBlock - 1) / kBlock;
    p.grid = static_cast<std::uint32_t>(std::min<std::int64_t>(blocks, std::int64_t{1} << 20));
    return p;
  }
  if (s.ndim == 0) {
    s.ndim = 1;
    s.shape[0] = 1;
    s.in_strides[0] = s.out_strides[0] = 1;
  }

  // Widest vector (<= 16 bytes) that both pointers can reach after the same scalar prologue.
  const auto a_in = reinterpret_cast<std::uintptr_t>(in.data);
  const auto a_out = reinterpret_cast<std::uintptr_t>(out.data);
  p.vector_width = 1;
  p.head = 0;
  for (int w = static_cast<int>(16 / es); w > 1; w /= 2) {
    const std::uintptr_t vb = es * static_cast<std::uintptr_t>(w);
    if ((a_in - a_out) % vb != 0) continue;
    const std::int64_t head = static_cast<std::int64_t>(((vb - a_in % vb) % vb) / es);
    if (n < head + w) continue;
    p.vector_width = w;
    p.head = head;
    break;
  }
  p.index = n > std::numeric_limits<std::int32_t>::max() ? IndexWidth::i64 : IndexWidth::i32;
  const std::int64_t vectors = (n - p.head) / p.vector_width;
  const std::int64_t per_block =
      std::int64_t{kBlock} * unroll_for(es * static_cast<std::size_t>(p.vector_width));
  const std::int64_t blocks = std::max<std::int64_t>(1, (vectors + per_block - 1) / per_block);
  if (blocks > std::numeric_limits<std::int32_t>::max()) bad(op, "tensor too large for one launch");
  p.grid = static_cast<std::uint32_t>(blocks);
  return p;
}

int multiprocessors(int device) {
  static std::atomic<int> counts[64] = {};
  if (device < 0 || device >= 64) return device_info(device).multiprocessors;
  int c = counts[device].load(std::memory_order_relaxed);
  if (c == 0) {
    c = device_info(device).multiprocessors;
    counts[device].store(c, std::memory_order_relaxed);
  }
  return c;
}

}  // namespace cuinline::ops::detail
