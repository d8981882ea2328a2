// GPU tests of the row reductions against a float64 reference computed on the host: every op in
// every dtype over row lengths from 1 to 2^20 + 3 (each form: warp, block, looped), fresh random
// data each run, special values (NaN, ±inf, a row all -inf, -0.0, subnormals, eps 0), outputs
// poisoned before each launch (gaps between strided rows must stay poisoned), strided and
// misaligned rows, in place, add_rms_norm's residual bit for bit, and CUDA-graph capture.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cuinline/driver.hpp>
#include <cuinline/reductions.hpp>
#include <random>
#include <string>
#include <vector>

#include "elementwise_reference.hpp"
#include "test_support.hpp"

namespace {

using cuinline::DType;
using cuinline::TensorView;
using cuinline::ops::RowOp;
using cuinline::test::bits_of;
using cuinline::test::from_op;
using cuinline::test::to_op;
using cuinline::test::value_of;

constexpr std::uint32_t kPoison = 0x5a5a5a5au;

#define SKIP_WITHOUT_GPU() \
  if (cuinline::device_count() == 0) GTEST_SKIP() << "no CUDA device"

const RowOp kOps[] = {RowOp::softmax, RowOp::log_softmax, RowOp::rms_norm, RowOp::add_rms_norm, RowOp::layer_norm};
const DType kDtypes[] = {DType::f32, DType::f16, DType::bf16, DType::f64};

std::uint64_t get_bits(const std::vector<unsigned char>& buf, DType dt, std::int64_t i) {
  std::uint64_t b = 0;
  std::memcpy(&b, buf.data() + i * cuinline::dtype_size(dt), cuinline::dtype_size(dt));
  return b;
}
void set_bits(std::vector<unsigned char>& buf, DType dt, std::int64_t i, std::uint64_t b) {
  std::memcpy(buf.data() + i * cuinline::dtype_size(dt), &b, cuinline::dtype_size(dt));
}

// Relative tolerance: the output's rounding plus the accumulation's error (float for f32 / f16 /
// bf16 over up to ~1000 sequential terms a thread, double for f64).
double rtol(DType dt) {
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
// Absolute tolerance near zero: outputs of O(1) (norms), O(30) (log_softmax), or probabilities
// (softmax: down to the dtype's subnormals, which f16 flushes to multiples of 2^-24).
double atol(RowOp op, DType dt) {
  if (op == RowOp::softmax) return dt == DType::f16 ? 6e-8 : 1e-300;
  return rtol(dt) * (op == RowOp::log_softmax ? 32 : 4);
}

bool close(double got, double want, double rel, double abs) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= abs + rel * std::fabs(want);
}

// One call's host data: x (rows with stride sx), weight, bias, residual (stride sr), all as bits.
struct Problem {
  RowOp op = RowOp::softmax;
  DType dt = DType::f32;
  std::int64_t rows = 1, n = 1, sx = 0, sy = 0, sr = 0;
  std::int64_t offset = 0;  // elements into each buffer (misaligned rows)
  bool weight = true, bias = true;
  double eps = 1e-5;
  std::vector<unsigned char> x, w, b, r;

  std::int64_t span(std::int64_t stride) const { return offset + (rows - 1) * stride + n; }
  bool has_w() const { return op != RowOp::softmax && op != RowOp::log_softmax && weight; }
  bool has_b() const { return op == RowOp::layer_norm && bias; }
};

std::vector<unsigned char> random_values(DType dt, std::int64_t count, double lo, double hi, std::mt19937_64& rng) {
  std::vector<unsigned char> buf(static_cast<std::size_t>(count) * cuinline::dtype_size(dt));
  std::uniform_real_distribution<double> u(lo, hi);
  for (std::int64_t i = 0; i < count; ++i) set_bits(buf, dt, i, bits_of(dt, u(rng)));
  return buf;
}

Problem make_problem(RowOp op, DType dt, std::int64_t rows, std::int64_t n, std::mt19937_64& rng,
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

// The float64 reference of row `row`: y (n values) and, for add_rms_norm, the residual's new bits
// (x + r computed in the accumulation type and rounded once, as the kernel and PyTorch's add do).
void reference_row(const Problem& p, std::int64_t row, std::vector<double>& y, std::vector<std::uint64_t>& z_bits) {
  const std::int64_t n = p.n;
  std::vector<double> v(static_cast<std::size_t>(n));
  z_bits.assign(static_cast<std::size_t>(n), 0);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint64_t xb = get_bits(p.x, p.dt, p.offset + row * p.sx + i);
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
  const auto w = [&](std::int64_t i) { return p.has_w() ? value_of(p.dt, get_bits(p.w, p.dt, p.offset + i)) : 1.0; };
  const auto b = [&](std::int64_t i) { return p.has_b() ? value_of(p.dt, get_bits(p.b, p.dt, p.offset + i)) : 0.0; };
  y.assign(static_cast<std::size_t>(n), 0);
  if (p.op == RowOp::softmax || p.op == RowOp::log_softmax) {
    double m = -INFINITY, s = 0;
    for (double e : v) m = e > m ? e : m;
    for (double e : v) s += std::exp(e - m);
    for (std::int64_t i = 0; i < n; ++i) {
      const double e = v[static_cast<std::size_t>(i)];
      y[static_cast<std::size_t>(i)] = p.op == RowOp::softmax ? std::exp(e - m) / s : (e - m) - std::log(s);
    }
  } else if (p.op == RowOp::rms_norm || p.op == RowOp::add_rms_norm) {
    double ss = 0;
    for (double e : v) ss += e * e;
    const double r = 1 / std::sqrt(ss / static_cast<double>(n) + p.eps);
    for (std::int64_t i = 0; i < n; ++i) y[static_cast<std::size_t>(i)] = v[static_cast<std::size_t>(i)] * r * w(i);
  } else {
    double sum = 0, sq = 0;
    for (double e : v) sum += e;
    const double mean = sum / static_cast<double>(n);
    for (double e : v) sq += (e - mean) * (e - mean);
    const double r = 1 / std::sqrt(sq / static_cast<double>(n) + p.eps);
    for (std::int64_t i = 0; i < n; ++i) {
      y[static_cast<std::size_t>(i)] = (v[static_cast<std::size_t>(i)] - mean) * r * w(i) + b(i);
    }
  }
}

struct DeviceProblem {
  cuinline::DeviceBuffer x, y, w, b, r;
  TensorView xv, yv, wv, bv, rv;
};

cuinline::DeviceBuffer upload(const std::vector<unsigned char>& host) {
  cuinline::DeviceBuffer buf((host.size() + 3) / 4 * 4 + 4);
  buf.copy_from_host(host.data(), host.size());
  return buf;
}

TensorView rows_view(const cuinline::DeviceBuffer& buf, const Problem& p, std::int64_t stride) {
  void* at = reinterpret_cast<unsigned char*>(buf.ptr()) + p.offset * cuinline::dtype_size(p.dt);
  return TensorView::strided(at, p.dt, {p.rows, p.n}, {stride, 1});
}

// Device copies of p; the output poisoned, `in_place`: the output is x.
DeviceProblem to_device(const Problem& p, bool in_place = false) {
  DeviceProblem d;
  d.x = upload(p.x);
  d.xv = rows_view(d.x, p, p.sx);
  if (!in_place) {
    d.y = cuinline::DeviceBuffer((static_cast<std::size_t>(p.span(p.sy)) * cuinline::dtype_size(p.dt) + 3) / 4 * 4);
    d.y.fill_u32(kPoison);
    d.yv = rows_view(d.y, p, p.sy);
  } else {
    d.yv = d.xv;
  }
  if (p.has_w()) {
    d.w = upload(p.w);
    d.wv = TensorView::contiguous(reinterpret_cast<unsigned char*>(d.w.ptr()) + p.offset * cuinline::dtype_size(p.dt),
                                  p.dt, {p.n});
  }
  if (p.has_b()) {
    d.b = upload(p.b);
    d.bv = TensorView::contiguous(reinterpret_cast<unsigned char*>(d.b.ptr()) + p.offset * cuinline::dtype_size(p.dt),
                                  p.dt, {p.n});
  }
  if (p.op == RowOp::add_rms_norm) {
    d.r = upload(p.r);
    d.rv = rows_view(d.r, p, p.sr);
  }
  return d;
}

void call(const Problem& p, const DeviceProblem& d, CUstream stream = nullptr) {
  switch (p.op) {
    case RowOp::softmax:
      return cuinline::ops::softmax(d.xv, d.yv, stream);
    case RowOp::log_softmax:
      return cuinline::ops::log_softmax(d.xv, d.yv, stream);
    case RowOp::rms_norm:
      return cuinline::ops::rms_norm(d.xv, d.wv, d.yv, p.eps, stream);
    case RowOp::add_rms_norm:
      return cuinline::ops::add_rms_norm(d.xv, d.rv, d.wv, d.yv, p.eps, stream);
    case RowOp::layer_norm:
      return cuinline::ops::layer_norm(d.xv, d.wv, d.bv, d.yv, p.eps, stream);
  }
}

std::string what(const Problem& p) {
  return std::string(cuinline::ops::to_string(p.op)) + " " + cuinline::to_string(p.dt) + " [" + std::to_string(p.rows) +
         ", " + std::to_string(p.n) + "] strides " + std::to_string(p.sx) + "/" + std::to_string(p.sy) + " offset " +
         std::to_string(p.offset) + " eps " + std::to_string(p.eps);
}

// Checks the output (and the residual) against the reference; gaps between output rows keep the
// poison. At most a few mismatches are printed.
void check(const Problem& p, const DeviceProblem& d, bool in_place = false) {
  const std::size_t es = cuinline::dtype_size(p.dt);
  std::vector<unsigned char> y(static_cast<std::size_t>(in_place ? p.span(p.sx) : p.span(p.sy)) * es);
  (in_place ? d.x : d.y).copy_to_host(y.data(), y.size());
  std::vector<unsigned char> r;
  if (p.op == RowOp::add_rms_norm) {
    r.resize(p.r.size());
    d.r.copy_to_host(r.data(), r.size());
  }
  const std::int64_t sy = in_place ? p.sx : p.sy;
  int bad = 0;
  std::vector<double> want;
  std::vector<std::uint64_t> z;
  for (std::int64_t row = 0; row < p.rows && bad < 5; ++row) {
    reference_row(p, row, want, z);
    for (std::int64_t i = 0; i < p.n && bad < 5; ++i) {
      const double got = value_of(p.dt, get_bits(y, p.dt, p.offset + row * sy + i));
      if (!close(got, want[static_cast<std::size_t>(i)], rtol(p.dt), atol(p.op, p.dt))) {
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
    // The gap after the row (strided output) is untouched.
    if (!in_place && row + 1 < p.rows) {
      for (std::int64_t i = p.n; i < p.sy && bad < 5; ++i) {
        std::uint64_t poison = 0;
        std::memcpy(&poison, y.data() + (p.offset + row * p.sy + i) * es, es);
        std::uint64_t want_poison = 0;
        const std::uint32_t pw = kPoison;
        std::memcpy(&want_poison, &pw, std::min<std::size_t>(es, 4));
        if (es == 8) want_poison = (std::uint64_t{kPoison} << 32) | kPoison;
        if (poison != want_poison) {
          ADD_FAILURE() << what(p) << ": the gap after row " << row << " was written at " << i;
          ++bad;
        }
      }
    }
  }
}

class ReductionsGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    cuinline::set_device(0);
    seed_ = cuinline::test::fresh_seed();
    rng_.seed(seed_);
  }
  std::uint64_t seed_ = 0;
  std::mt19937_64 rng_;
};

// Each op, dtype and row length (the three forms, odd lengths on the scalar path), fresh data.
TEST_F(ReductionsGpu, RowLengthsDtypesAndOps) {
  SCOPED_TRACE("seed " + std::to_string(seed_) + " (CUINLINE_TEST_SEED replays it)");
  const std::int64_t lengths[] = {1, 7, 64, 128, 1000, 4096, 32768, 262144, (1 << 20) + 3};
  for (DType dt : kDtypes) {
    for (RowOp op : kOps) {
      for (std::int64_t n : lengths) {
        const std::int64_t rows = std::clamp<std::int64_t>((std::int64_t{1} << 19) / n, 2, 37);
        Problem p = make_problem(op, dt, rows, n, rng_);
        p.eps = op == RowOp::layer_norm ? 1e-5 : 1e-6;
        const DeviceProblem d = to_device(p);
        call(p, d);
        check(p, d);
      }
    }
  }
}

// Strided rows (gaps poisoned and kept), rows misaligned to the vector (the scalar path), in
// place, and absent weight / bias, in each form.
TEST_F(ReductionsGpu, StridedMisalignedInPlaceAndOptionalParameters) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  for (DType dt : kDtypes) {
    for (RowOp op : kOps) {
      for (std::int64_t n : {48, 2048, 40000}) {
        Problem strided = make_problem(op, dt, 5, n, rng_, 24, 40, 0);
        {
          const DeviceProblem d = to_device(strided);
          call(strided, d);
          check(strided, d);
        }
        Problem misaligned = make_problem(op, dt, 3, n + 1, rng_, 3, 1, 1);
        misaligned.weight = n != 2048;  // rms / layer_norm without a weight too
        misaligned.bias = false;
        {
          const DeviceProblem d = to_device(misaligned);
          call(misaligned, d);
          check(misaligned, d);
        }
        Problem in_place = make_problem(op, dt, 4, n, rng_);
        in_place.weight = false;
        {
          const DeviceProblem d = to_device(in_place, true);
          call(in_place, d);
          check(in_place, d, true);
        }
      }
    }
  }
}

// Special values, one kind a row, in each form: NaN, +inf, a row all -inf, -inf among finite
// values, -0.0 with subnormals, all zeros; eps 0 for the norms.
TEST_F(ReductionsGpu, SpecialValues) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  for (DType dt : kDtypes) {
    const std::uint64_t nan = bits_of(dt, std::nan("")), inf = bits_of(dt, INFINITY), ninf = bits_of(dt, -INFINITY);
    const std::uint64_t nzero = bits_of(dt, -0.0), sub = dt == DType::f64 ? 1 : dt == DType::f32 ? 7 : 3;
    for (RowOp op : kOps) {
      for (std::int64_t n : {7, 256, 3000, 20000}) {
        const std::int64_t rows = 7;
        Problem p = make_problem(op, dt, rows, n, rng_);
        p.eps = 0;
        std::uniform_int_distribution<std::int64_t> at(0, n - 1);
        set_bits(p.x, dt, 0 * n + at(rng_), nan);
        set_bits(p.x, dt, 1 * n + at(rng_), inf);
        for (std::int64_t i = 0; i < n; ++i) set_bits(p.x, dt, 2 * n + i, ninf);
        for (std::int64_t i = 0; i < n; i += 2) set_bits(p.x, dt, 3 * n + i, ninf);
        for (std::int64_t i = 0; i < n; i += 3) set_bits(p.x, dt, 4 * n + i, i % 2 ? nzero : sub | (i % 4 ? 0 : nzero));
        for (std::int64_t i = 0; i < n; ++i) set_bits(p.x, dt, 5 * n + i, i % 2 ? nzero : 0);
        if (op == RowOp::add_rms_norm) {  // the residual leaves the special rows as they are
          for (std::int64_t row = 0; row < 6; ++row) {
            for (std::int64_t i = 0; i < n; ++i) set_bits(p.r, dt, row * n + i, row == 5 ? nzero : 0);
          }
        }
        const DeviceProblem d = to_device(p);
        call(p, d);
        check(p, d);
      }
    }
  }
}

// Each op captured into a CUDA graph, replayed on new data; the second call of a variant is a
// map hit.
TEST_F(ReductionsGpu, GraphCaptureAndKernelMap) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  for (RowOp op : kOps) {
    for (std::int64_t n : {100, 5000, 70000}) {
      Problem p = make_problem(op, DType::bf16, 6, n, rng_);
      DeviceProblem d = to_device(p);
      cuinline::Stream s;
      const cuinline::ops::OpsStats before = cuinline::ops::reduction_stats();
      cuinline::Graph g = cuinline::Graph::capture(s, [&] { call(p, d, s); });
      // New input (and residual) in the same buffers, then the replay.
      p.x = random_values(p.dt, p.span(p.sx), -8, 8, rng_);
      d.x.copy_from_host(p.x.data(), p.x.size());
      if (op == RowOp::add_rms_norm) d.r.copy_from_host(p.r.data(), p.r.size());
      d.y.fill_u32(kPoison);
      g.launch(s);
      s.synchronize();
      check(p, d);
      call(p, d);  // eager again: the map holds the variant
      const cuinline::ops::OpsStats after = cuinline::ops::reduction_stats();
      EXPECT_EQ(after.launches - before.launches, 2u);
      EXPECT_GE(after.map_hits - before.map_hits, 1u);
    }
  }
}

}  // namespace
