#pragma once
// The row reductions' float64 host reference (docs/reductions.md) and its tolerances, shared by
// `cuinline run softmax|log_softmax|rms_norm|add_rms_norm|layer_norm` and the tests (GPU and
// host-emulated): the reference of one row from its values, the fused chains on one value (the
// elementwise reference's steps), and how far an output may be from it.
#include <cmath>
#include <cstdint>
#include <cuinline/reductions.hpp>
#include <cuinline/tensor.hpp>

#include "reference/host_reference.hpp"

namespace cuinline::reference {

/// The float64 reference of one row: `v` its n values (add_rms_norm: x + residual, already rounded
/// to the dtype as the kernel rounds it), `w` and `b` the weight and bias (null: 1 and 0), into `y`.
/// Softmax takes the max, then the sum of exp(v - max) (PyTorch's two passes); the norms the
/// biased variance (layer_norm: from the mean, corrected by the mean deviation from it, so no
/// cancellation).
inline void reduce_row(ops::RowOp op, const double* v, std::int64_t n, const double* w, const double* b, double eps,
                       double* y) {
  using ops::RowOp;
  const auto weight = [&](std::int64_t i) { return w != nullptr ? w[i] : 1.0; };
  if (op == RowOp::softmax || op == RowOp::log_softmax) {
    double m = -INFINITY, s = 0;
    for (std::int64_t i = 0; i < n; ++i) m = v[i] > m ? v[i] : m;
    for (std::int64_t i = 0; i < n; ++i) s += std::exp(v[i] - m);
    for (std::int64_t i = 0; i < n; ++i) y[i] = op == RowOp::softmax ? std::exp(v[i] - m) / s : (v[i] - m) - std::log(s);
  } else if (op == RowOp::rms_norm || op == RowOp::add_rms_norm) {
    double ss = 0;
    for (std::int64_t i = 0; i < n; ++i) ss += v[i] * v[i];
    const double r = 1 / std::sqrt(ss / static_cast<double>(n) + eps);
    for (std::int64_t i = 0; i < n; ++i) y[i] = v[i] * r * weight(i);
  } else {
    double sum = 0, dev = 0, sq = 0;
    for (std::int64_t i = 0; i < n; ++i) sum += v[i];
    double mean = sum / static_cast<double>(n);
    for (std::int64_t i = 0; i < n; ++i) dev += v[i] - mean;
    mean += dev / static_cast<double>(n);  // the sum's rounding taken back (exact on a constant row)
    for (std::int64_t i = 0; i < n; ++i) sq += (v[i] - mean) * (v[i] - mean);
    const double r = 1 / std::sqrt(sq / static_cast<double>(n) + eps);
    for (std::int64_t i = 0; i < n; ++i) y[i] = (v[i] - mean) * r * weight(i) + (b != nullptr ? b[i] : 0.0);
  }
}

/// `v` (a value of the dtype) rounded to the dtype's storage, as a double.
inline double round_to(DType dt, double v) {
  switch (dt) {
    case DType::f64:
      return v;
    case DType::f32:
      return static_cast<double>(static_cast<float>(v));
    case DType::f16:
      return static_cast<double>(cli::half_to_float(cli::float_to_half(static_cast<float>(v))));
    case DType::bf16:
      return static_cast<double>(cli::bf16_to_float(cli::float_to_bf16(static_cast<float>(v))));
  }
  return v;
}

/// A fused chain (RowFusion's prologue or epilogue) on one value of the dtype: each step in the
/// accumulation type (float; double for f64), rounded to the dtype, as the kernel's chain and the
/// eager ops; `inputs[k]` for k in 1..count the value of the chain's input k (the epilogue's tensors).
inline double apply_chain(const ops::Op& chain, DType dt, double x, const double* inputs = nullptr, int count = 0) {
  if (dt == DType::f64) return cli::reference_chain(chain.steps, x, cli::NoRounding{}, inputs);
  float in[8] = {};
  for (int k = 1; k <= count && k < 8; ++k) in[k] = static_cast<float>(inputs[k]);
  const auto round = [dt](float v) { return static_cast<float>(round_to(dt, v)); };
  return cli::reference_chain(chain.steps, static_cast<float>(x), round, inputs != nullptr ? in : nullptr);
}

/// Relative tolerance: the output's rounding plus the accumulation's error (float for f32 / f16 /
/// bf16 over up to ~1000 sequential terms a thread, double for f64).
inline double row_rtol(DType dt) {
  switch (dt) {
    case DType::f32:
      return 1e-4;
    case DType::f16:
      return 2e-3;
    case DType::bf16:
      return 1e-2;
    case DType::f64:
      return 1e-11;
  }
  return 0;
}

/// Absolute tolerance near zero: the dtype's rounding at outputs of O(1) (norms) or O(30)
/// (log_softmax) and the accumulation's error; softmax's probabilities down to the dtype's
/// subnormals, which it holds only as multiples of 2^-24 (f16), 2^-133 (bf16), 2^-149 (f32).
inline double row_atol(ops::RowOp op, DType dt) {
  if (op == ops::RowOp::softmax) {
    return dt == DType::f16 ? 6e-8 : dt == DType::bf16 ? 0x1p-132 : dt == DType::f32 ? 0x1p-148 : 1e-300;
  }
  const double unit = dt == DType::f32 ? 2e-6 : dt == DType::f64 ? 1e-12 : row_rtol(dt);
  return unit * (op == ops::RowOp::log_softmax ? 32 : 4);
}

/// Whether `got` is within `abs + rel * |want|` of `want`; a NaN or infinite `want` must be matched.
inline bool within(double got, double want, double rel, double abs) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= abs + rel * std::fabs(want);
}

}  // namespace cuinline::reference
