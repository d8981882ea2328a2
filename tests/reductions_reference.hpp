#pragma once
// What the row reductions' GPU and host-emulated tests share: a problem's host data (rows with a
// stride, weight, bias, residual, as element bits), the float64 reference of a row (the one
// `cuinline run` checks against, src/reference/row_reference.hpp), and the comparison of an
// output (and add_rms_norm's residual) with it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cuinline/reductions.hpp>
#include <random>
#include <string>
#include <vector>

#include "elementwise_reference.hpp"
#include "reference/row_reference.hpp"

namespace cuinline::test {

using ops::RowOp;

constexpr std::uint32_t kRowPoison = 0x5a5a5a5au;

inline std::uint64_t get_bits(const std::vector<unsigned char>& buf, DType dt, std::int64_t i) {
  std::uint64_t b = 0;
  std::memcpy(&b, buf.data() + i * cuinline::dtype_size(dt), cuinline::dtype_size(dt));
  return b;
}
inline void set_bits(std::vector<unsigned char>& buf, DType dt, std::int64_t i, std::uint64_t b) {
  std::memcpy(buf.data() + i * cuinline::dtype_size(dt), &b, cuinline::dtype_size(dt));
}

// The reference's tolerances (src/reference/row_reference.hpp).
inline double rtol(DType dt) { return reference::row_rtol(dt); }
inline double atol(RowOp op, DType dt) { return reference::row_atol(op, dt); }
using reference::within;

// One call's host data: x (rows with stride sx), weight, bias, residual (stride sr), all as bits;
// with chains (RowFusion), the prologue, the epilogue and its extra tensors (rows with stride se).
struct Problem {
  RowOp op = RowOp::softmax;
  DType dt = DType::f32;
  std::int64_t rows = 1, n = 1, sx = 0, sy = 0, sr = 0;
  std::int64_t offset = 0;  // elements into each buffer (misaligned rows)
  bool weight = true, bias = true;
  double eps = 1e-5;
  std::vector<unsigned char> x, w, b, r;
  ops::Op prologue, epilogue;
  std::int64_t se = 0;
  std::vector<std::vector<unsigned char>> extra;

  std::int64_t span(std::int64_t stride) const { return offset + (rows - 1) * stride + n; }
  bool has_w() const { return op != RowOp::softmax && op != RowOp::log_softmax && weight; }
  bool has_b() const { return op == RowOp::layer_norm && bias; }
};

inline std::vector<unsigned char> random_values(DType dt, std::int64_t count, double lo, double hi, std::mt19937_64& rng) {
  std::vector<unsigned char> buf(static_cast<std::size_t>(count) * cuinline::dtype_size(dt));
  std::uniform_real_distribution<double> u(lo, hi);
  for (std::int64_t i = 0; i < count; ++i) set_bits(buf, dt, i, bits_of(dt, u(rng)));
  return buf;
}

// Chains on a problem: the prologue, the epilogue and its `inputs` extra tensors (values in
// [-2, 2], rows 8 elements further apart than x's, so the accesses stay as wide as x's).
inline void add_chains(Problem& p, const char* prologue, const char* epilogue, int inputs, std::mt19937_64& rng) {
  p.prologue = *prologue ? ops::parse_op(prologue) : ops::Op{};
  p.epilogue = *epilogue ? ops::parse_op(epilogue) : ops::Op{};
  p.se = p.sx + 8;
  p.extra.clear();
  for (int k = 0; k < inputs; ++k) p.extra.push_back(random_values(p.dt, p.span(p.se), -2, 2, rng));
}

inline Problem make_problem(RowOp op, DType dt, std::int64_t rows, std::int64_t n, std::mt19937_64& rng,
                     std::int64_t pad_x = 0, std::int64_t pad_y = 0, std::int64_t offset = 0) {
  Problem p;
  p.op = op;
  p.dt = dt;
  p.rows = rows;
  p.n = n;
  p.sx = n + pad_x;
  p.sy = n + pad_y;
  p.sr = n + pad_x;
  p.offset = offset;
  p.x = random_values(dt, p.span(p.sx), -8, 8, rng);
  p.w = random_values(dt, n + offset, -2, 2, rng);
  p.b = random_values(dt, n + offset, -1, 1, rng);
  p.r = random_values(dt, p.span(p.sr), -4, 4, rng);
  return p;
}

// Special values, one kind a row (rows 0-5 of a problem of at least 7 contiguous rows): a NaN, a
// +inf, all -inf, mostly -inf among finite values, -0.0 and subnormals among finite values, all ±0. For
// add_rms_norm the residual of those rows is ±0, so that x + residual keeps them.
inline void add_special_rows(Problem& p, std::mt19937_64& rng) {
  const DType dt = p.dt;
  const std::int64_t n = p.n;
  const std::uint64_t nan = bits_of(dt, std::nan("")), inf = bits_of(dt, INFINITY), ninf = bits_of(dt, -INFINITY);
  const std::uint64_t nzero = bits_of(dt, -0.0), sub = dt == DType::f64 ? 1 : dt == DType::f32 ? 7 : 3;
  std::uniform_int_distribution<std::int64_t> at(0, n - 1);
  set_bits(p.x, dt, 0 * p.sx + at(rng), nan);
  set_bits(p.x, dt, 1 * p.sx + at(rng), inf);
  for (std::int64_t i = 0; i < n; ++i) set_bits(p.x, dt, 2 * p.sx + i, ninf);
  // -inf but for every 97th element of the second half: many threads of a looped block and whole
  // chunks of a split row see only -inf, some threads see -inf before their first finite element
  // (the online softmax's -inf cases).
  for (std::int64_t i = 0; i < n; ++i) {
    if (i < n / 2 || i % 97 != 5) set_bits(p.x, dt, 3 * p.sx + i, ninf);
  }
  for (std::int64_t i = 0; i < n; i += 3) set_bits(p.x, dt, 4 * p.sx + i, i % 2 ? nzero : sub | (i % 4 ? 0 : nzero));
  for (std::int64_t i = 0; i < n; ++i) set_bits(p.x, dt, 5 * p.sx + i, i % 2 ? nzero : 0);
  // 0, -1, ..., -199 over and over: softmax's terms exp(x - max) reach float's subnormal range
  // (2^-126 = e^-87.3 down to 2^-149 = e^-103.3) and 0.
  if (p.rows > 6) {
    for (std::int64_t i = 0; i < n; ++i)
      set_bits(p.x, dt, 6 * p.sx + i, bits_of(dt, -static_cast<double>(i % 200)));
  }
  // -inf but one NaN: chunks whose max is -inf hold a NaN (the sum's NaN without an exp).
  if (p.rows > 7) {
    for (std::int64_t i = 0; i < n; ++i) set_bits(p.x, dt, 7 * p.sx + i, i == n / 3 ? nan : ninf);
  }
  // The first half near -100, the rest near 0: softmax's chunks of the first half scale their
  // exps by e^-100 / sum, under float's normal range (rd_chunk_scale).
  if (p.rows > 8) {
    for (std::int64_t i = 0; i < n; ++i)
      set_bits(p.x, dt, 8 * p.sx + i, bits_of(dt, (i < n / 2 ? -100.0 : 0.0) - static_cast<double>(i % 7)));
  }
  if (p.op == RowOp::add_rms_norm) {
    for (std::int64_t row = 0; row < 6; ++row) {
      for (std::int64_t i = 0; i < n; ++i) set_bits(p.r, dt, row * p.sr + i, row == 5 ? nzero : 0);
    }
  }
}

// The float64 reference of row `row`: y (n values) and, for add_rms_norm, the residual's new bits
// (x + r computed in the accumulation type and rounded once, as the kernel and PyTorch's add do).
inline void reference_row(const Problem& p, std::int64_t row, std::vector<double>& y, std::vector<std::uint64_t>& z_bits) {
  const std::int64_t n = p.n;
  std::vector<double> v(static_cast<std::size_t>(n));
  z_bits.assign(static_cast<std::size_t>(n), 0);
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint64_t xb = get_bits(p.x, p.dt, p.offset + row * p.sx + i);
    if (!p.prologue.steps.empty()) xb = bits_of(p.dt, reference::apply_chain(p.prologue, p.dt, value_of(p.dt, xb)));
    if (p.op == RowOp::add_rms_norm) {
      const std::uint64_t rb = get_bits(p.r, p.dt, p.offset + row * p.sr + i);
      const std::uint64_t zb = p.dt == DType::f64 ? bits_of(p.dt, value_of(p.dt, xb) + value_of(p.dt, rb))
                                                  : from_op(p.dt, to_op(p.dt, xb) + to_op(p.dt, rb));
      z_bits[static_cast<std::size_t>(i)] = zb;
      v[static_cast<std::size_t>(i)] = value_of(p.dt, zb);
    } else {
      v[static_cast<std::size_t>(i)] = value_of(p.dt, xb);
    }
  }
  std::vector<double> w, b;
  for (std::int64_t i = 0; p.has_w() && i < n; ++i) w.push_back(value_of(p.dt, get_bits(p.w, p.dt, p.offset + i)));
  for (std::int64_t i = 0; p.has_b() && i < n; ++i) b.push_back(value_of(p.dt, get_bits(p.b, p.dt, p.offset + i)));
  y.assign(static_cast<std::size_t>(n), 0);
  reference::reduce_row(p.op, v.data(), n, p.has_w() ? w.data() : nullptr, p.has_b() ? b.data() : nullptr, p.eps,
                        y.data());
  if (p.epilogue.steps.empty()) return;
  double in[8] = {};
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::size_t k = 0; k < p.extra.size(); ++k) {
      in[k + 1] = value_of(p.dt, get_bits(p.extra[k], p.dt, p.offset + row * p.se + i));
    }
    double& out = y[static_cast<std::size_t>(i)];
    out = reference::apply_chain(p.epilogue, p.dt, reference::round_to(p.dt, out), in, static_cast<int>(p.extra.size()));
  }
}

// Whether two outputs hold the same bits, any NaN matching any NaN: on the host (the emulated
// kernels) and in a GPU's f64 arithmetic a NaN keeps an operand's sign and payload (an input's
// 0x7ff8000000000000, -inf - -inf's 0xfff8000000000000 on an H200), so the order of operations that
// meet two NaNs picks the bits; a GPU's f32 and 16-bit NaN results are canonical (the GPU tests
// compare every bit of those).
inline bool same_bits_or_nans(DType dt, const std::vector<unsigned char>& a,
                              const std::vector<unsigned char>& b) {
  if (a.size() != b.size()) return false;
  const auto n = static_cast<std::int64_t>(a.size() / dtype_size(dt));
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint64_t x = get_bits(a, dt, i), y = get_bits(b, dt, i);
    if (x != y && !(std::isnan(value_of(dt, x)) && std::isnan(value_of(dt, y)))) return false;
  }
  return true;
}

inline std::string what(const Problem& p) {
  std::string chains;
  if (!p.prologue.steps.empty()) chains += " prologue " + p.prologue.describe();
  if (!p.epilogue.steps.empty()) chains += " epilogue " + p.epilogue.describe();
  return std::string(cuinline::ops::to_string(p.op)) + " " + cuinline::to_string(p.dt) + " [" + std::to_string(p.rows) +
         ", " + std::to_string(p.n) + "] strides " + std::to_string(p.sx) + "/" + std::to_string(p.sy) + " offset " +
         std::to_string(p.offset) + " eps " + std::to_string(p.eps) + chains;
}

// Checks an output (row stride sy, read back into `y`) and, for add_rms_norm, the residual read
// back into `r` against the reference; the gaps between output rows (sy > n) keep the poison. At
// most a few mismatches are reported.
inline void check_rows(const Problem& p, const std::vector<unsigned char>& y, std::int64_t sy,
                       const std::vector<unsigned char>& r, bool gaps_poisoned) {
  const std::size_t es = dtype_size(p.dt);
  int bad = 0;
  std::vector<double> want;
  std::vector<std::uint64_t> z;
  std::uint64_t poison = 0;
  std::memcpy(&poison, &kRowPoison, 4);
  if (es == 8) poison = (std::uint64_t{kRowPoison} << 32) | kRowPoison;
  if (es == 2) poison &= 0xffffu;
  // An epilogue's tensor operands (each |in_k| <= 2, multiplied in, one more rounding each) scale
  // the output's absolute error. Each of its steps rounds to the dtype, as the reference's do, but
  // from the op's own rounded output, which may be the reference's neighbour (the op's error, within
  // its tolerance): each step can then round the other way, an ulp more (bf16 softmax with "relu |
  // mul(in1) | mul(in2)": an output one ulp apart became two, 1.1 % of it, on an H200).
  const double abs = atol(p.op, p.dt) * static_cast<double>(1 << (2 * p.extra.size()));
  const double ulp = p.dt == DType::bf16 ? 0x1p-7 : p.dt == DType::f16 ? 0x1p-10 : p.dt == DType::f32 ? 0x1p-23 : 0x1p-52;
  const double rel = rtol(p.dt) + static_cast<double>(p.epilogue.steps.size()) * ulp;
  for (std::int64_t row = 0; row < p.rows && bad < 5; ++row) {
    reference_row(p, row, want, z);
    for (std::int64_t i = 0; i < p.n && bad < 5; ++i) {
      const double got = value_of(p.dt, get_bits(y, p.dt, p.offset + row * sy + i));
      if (!within(got, want[static_cast<std::size_t>(i)], rel, abs)) {
        ADD_FAILURE() << what(p) << ": row " << row << " element " << i << " got " << got << " want "
                      << want[static_cast<std::size_t>(i)];
        ++bad;
      }
      if (p.op == RowOp::add_rms_norm) {
        const std::uint64_t zb = get_bits(r, p.dt, p.offset + row * p.sr + i);
        if (zb != z[static_cast<std::size_t>(i)] &&
            !(std::isnan(value_of(p.dt, zb)) && std::isnan(value_of(p.dt, z[static_cast<std::size_t>(i)])))) {
          ADD_FAILURE() << what(p) << ": residual row " << row << " element " << i << " bits " << zb << " want "
                        << z[static_cast<std::size_t>(i)];
          ++bad;
        }
      }
    }
    if (gaps_poisoned && row + 1 < p.rows) {
      for (std::int64_t i = p.n; i < sy && bad < 5; ++i) {
        if (get_bits(y, p.dt, p.offset + row * sy + i) != poison) {
          ADD_FAILURE() << what(p) << ": the gap after row " << row << " was written at " << i;
          ++bad;
        }
      }
    }
  }
}

}  // namespace cuinline::test
