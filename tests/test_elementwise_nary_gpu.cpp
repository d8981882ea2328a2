// GPU tests of the N-ary elementwise ops against a CPU reference with PyTorch's rounding: chains
// with tensor operands bit-identical in every dtype, on random bit patterns (NaN, ±Inf, −0.0 and
// subnormals included) in every operand, for each broadcast pattern (whole, row, column, scalar,
// size-1 middle dimension), misaligned pointers, in place and non-contiguous views; expressions
// (SwiGLU, two outputs) against a float64 reference on fresh random data; outputs poisoned before
// each launch; bad input launches nothing; every mode of graph capture replays bit-exactly; where
// (tensor and scalar others) bit-exact with special values in the conditions and the operands.
#include <gtest/gtest.h>

#include <cmath>
#include <cuinline/cuinline.hpp>
#include <cuinline/ops.hpp>
#include <random>

#include "elementwise_reference.hpp"
#include "test_support.hpp"

namespace cuinline {
namespace {

using ops::Op;
using ops::Step;

class NaryGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (device_count() == 0) GTEST_SKIP() << "no GPU: " << driver_unavailable_reason();
    rng_.seed(test::fresh_seed());
  }
  std::mt19937_64 rng_;
};

// A host tensor of raw element bits with its device copy (storage of `elements` elements).
struct Operand {
  DType dt;
  std::vector<std::uint64_t> bits;  // one per storage element
  DeviceBuffer buf;
  TensorView view;
};

std::size_t es(DType dt) {
  return dtype_size(dt);
}

Operand make_operand(DType dt, std::vector<std::int64_t> shape, std::mt19937_64& rng, bool finite,
                     std::int64_t offset = 0, std::vector<std::int64_t> strides = {}) {
  Operand o;
  o.dt = dt;
  std::int64_t storage = 1;
  if (strides.empty()) {
    for (auto d : shape) storage *= d;
  } else {
    storage = 1;
    for (std::size_t d = 0; d < shape.size(); ++d) storage += (shape[d] - 1) * strides[d];
  }
  storage += offset;
  o.bits.resize(static_cast<std::size_t>(storage));
  std::uniform_real_distribution<double> u(-3.0, 3.0);
  for (auto& b : o.bits) {
    if (!finite) {
      b = rng() & (es(dt) == 8 ? ~0ull : (1ull << (8 * es(dt))) - 1);
    } else if (dt == DType::f64) {
      const double v = u(rng);
      std::memcpy(&b, &v, 8);
    } else {
      b = test::from_op(dt, static_cast<float>(u(rng)));
    }
  }
  o.buf = DeviceBuffer((o.bits.size() * es(dt) + 3) / 4 * 4);
  std::vector<unsigned char> raw(o.buf.bytes());
  for (std::size_t i = 0; i < o.bits.size(); ++i) std::memcpy(raw.data() + i * es(dt), &o.bits[i], es(dt));
  o.buf.copy_from_host(raw.data(), raw.size());
  o.view.data = reinterpret_cast<unsigned char*>(o.buf.ptr()) + offset * static_cast<std::int64_t>(es(dt));
  o.view.dtype = dt;
  o.view.ndim = static_cast<int>(shape.size());
  std::int64_t s = 1;
  for (int d = o.view.ndim - 1; d >= 0; --d) {
    o.view.shape[d] = shape[d];
    o.view.strides[d] = strides.empty() ? s : strides[d];
    s *= shape[d];
  }
  return o;
}

std::vector<std::uint64_t> read_back(const Operand& o) {
  std::vector<unsigned char> raw(o.buf.bytes());
  o.buf.copy_to_host(raw.data(), raw.size());
  std::vector<std::uint64_t> bits(o.bits.size(), 0);
  for (std::size_t i = 0; i < bits.size(); ++i) std::memcpy(&bits[i], raw.data() + i * es(o.dt), es(o.dt));
  return bits;
}

// Storage index of element (multi-index of the broadcast shape `shape`) in operand `t`.
std::int64_t index_in(const TensorView& t, std::int64_t base_offset, const std::vector<std::int64_t>& shape,
                      std::int64_t flat) {
  std::int64_t idx = base_offset;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    const std::int64_t c = flat % shape[d];
    flat /= shape[d];
    const int td = d - (static_cast<int>(shape.size()) - t.ndim);
    if (td >= 0 && t.shape[td] != 1) idx += c * t.strides[td];
  }
  return idx;
}

double op_value(DType dt, std::uint64_t b) {
  return test::value_of(dt, b);
}

// The bits of a where step's scalar in the dtype: double → float → dtype (PyTorch's conversion of
// a Python scalar, c10::Half(float(s))); f64 keeps the double.
std::uint64_t scalar_bits(DType dt, double s) {
  return test::bits_of(dt, s);
}

// Reference of a chain with tensor operands: PyTorch's op-by-op rounding; where selects bits
// (true where the condition is nonzero: NaN true, -0.0 false).
std::uint64_t chain_reference(const Op& op, DType dt, const std::vector<std::uint64_t>& in) {
  std::uint64_t x = in[0];
  for (const Step& st : op.steps) {
    if (st.kind == ops::StepKind::where_tensor || st.kind == ops::StepKind::where_scalar) {
      if (!(op_value(dt, in[st.cond]) != 0.0)) {
        x = st.kind == ops::StepKind::where_tensor ? in[st.operand] : scalar_bits(dt, st.a);
      }
      continue;
    }
    if (st.kind < ops::StepKind::add_tensor) {
      x = dt == DType::f64 ? test::reference_step<double>(st, dt, x) : test::reference_step<float>(st, dt, x);
      continue;
    }
    auto apply2 = [&](auto a, auto b) -> decltype(a) {
      switch (st.kind) {
        case ops::StepKind::add_tensor:
          return a + b;
        case ops::StepKind::sub_tensor:
          return a - b;
        case ops::StepKind::mul_tensor:
          return a * b;
        default:
          return a / b;
      }
    };
    if (dt == DType::f64) {
      double a, b;
      std::memcpy(&a, &x, 8);
      std::memcpy(&b, &in[st.operand], 8);
      const double r = apply2(a, b);
      std::memcpy(&x, &r, 8);
    } else {
      x = test::from_op(dt, apply2(test::to_op(dt, x), test::to_op(dt, in[st.operand])));
    }
  }
  return x;
}

struct Layout {
  const char* what;
  std::vector<std::vector<std::int64_t>> shapes;  // per input
  std::vector<std::int64_t> out_shape;
};

TEST_F(NaryGpu, ChainsAreBitExactForEveryPatternAndDtype) {
  const Op op = Op::chain({Step::add_input(1), Step::mul_input(2), Step::sub(0.5), Step::relu()});
  const std::vector<Layout> layouts = {
      {"whole tensors", {{37, 129}, {37, 129}, {37, 129}}, {37, 129}},
      {"bias row", {{64, 256}, {256}, {64, 256}}, {64, 256}},
      {"column", {{64, 256}, {64, 1}, {1, 256}}, {64, 256}},
      {"scalar", {{1000}, {}, {1}}, {1000}},
      {"size-1 middle dimension", {{8, 16, 32}, {8, 1, 32}, {16, 32}}, {8, 16, 32}},
  };
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
    for (const Layout& l : layouts) {
      for (int misaligned = 0; misaligned < 2; ++misaligned) {
        SCOPED_TRACE(std::string(to_string(dt)) + " " + l.what + (misaligned ? " misaligned" : ""));
        std::vector<Operand> in;
        for (const auto& s : l.shapes) in.push_back(make_operand(dt, s, rng_, false, misaligned));
        Operand out = make_operand(dt, l.out_shape, rng_, false);
        out.buf.fill_u32(0x7fbadbadu);
        std::vector<TensorView> views;
        for (auto& o : in) views.push_back(o.view);
        Stream s;
        ops::apply(op, views, {out.view}, s);
        s.synchronize();
        const auto got = read_back(out);
        std::int64_t n = 1;
        for (auto d : l.out_shape) n *= d;
        std::int64_t mismatches = 0;
        for (std::int64_t i = 0; i < n; ++i) {
          std::vector<std::uint64_t> xs;
          for (std::size_t k = 0; k < in.size(); ++k) xs.push_back(in[k].bits[index_in(in[k].view, misaligned, l.out_shape, i)]);
          const std::uint64_t want = chain_reference(op, dt, xs);
          if (!test::same_result(dt, got[i], want, true) && mismatches++ < 5) {
            ADD_FAILURE() << "element " << i << ": got 0x" << std::hex << got[i] << " want 0x" << want;
          }
        }
        EXPECT_EQ(mismatches, 0);
      }
    }
  }
}

// Writes o.bits to its device buffer.
void upload(Operand& o) {
  std::vector<unsigned char> raw(o.buf.bytes());
  for (std::size_t i = 0; i < o.bits.size(); ++i) std::memcpy(raw.data() + i * es(o.dt), &o.bits[i], es(o.dt));
  o.buf.copy_from_host(raw.data(), raw.size());
}

// Special values of a dtype: +0, -0, a quiet NaN, a negative signaling NaN with a payload, the
// smallest subnormal, -inf, 1.0, -1.0.
std::uint64_t special_bits(DType dt, int which) {
  const int bits = static_cast<int>(8 * es(dt));
  const std::uint64_t sign = 1ull << (bits - 1);
  const std::uint64_t inf = dt == DType::f64 ? 0x7ff0000000000000ull
                            : dt == DType::f32 ? 0x7f800000ull
                            : dt == DType::f16 ? 0x7c00ull
                                               : 0x7f80ull;
  const std::uint64_t quiet = dt == DType::f64 ? 0x0008000000000000ull
                              : dt == DType::f32 ? 0x00400000ull
                              : dt == DType::f16 ? 0x0200ull
                                                 : 0x0040ull;
  const std::uint64_t one = dt == DType::f64 ? 0x3ff0000000000000ull
                            : dt == DType::f32 ? 0x3f800000ull
                            : dt == DType::f16 ? 0x3c00ull
                                               : 0x3f80ull;
  switch (which % 8) {
    case 0:
      return 0;
    case 1:
      return sign;
    case 2:
      return inf | quiet;
    case 3:
      return sign | inf | 5;
    case 4:
      return 1;
    case 5:
      return sign | inf;
    case 6:
      return one;
    default:
      return sign | one;
  }
}

// where(cond, x, other) with tensor and scalar others, conditions broadcast as a row, a column, a
// scalar and across a middle dimension (the strided path), special values (NaN, -0.0, signaling NaN,
// subnormal, ±inf) in the conditions and the operands, every dtype, aligned and misaligned. A chain of
// selects must give the exact bits (NaN payloads included); a chain with arithmetic, PyTorch's
// op-by-op rounding. Each launch runs twice over two different poisons and must give equal bits.
TEST_F(NaryGpu, WhereIsBitExactForEveryPatternAndDtype) {
  struct Case {
    Op op;
    bool selects_only;
  };
  const std::vector<Case> cases = {
      {Op::chain({Step::where_input(1, 2), Step::where_scalar(3, 0.1)}), true},
      {Op::chain({Step::where_scalar(1, -0.0), Step::where_scalar(3, 1e-5), Step::where_input(3, 2)}), true},
      {Op::chain({Step::mul_input(2), Step::where_input(1, 2), Step::add(0.5), Step::where_scalar(3, -0.0), Step::relu()}),
       false},
  };
  const std::vector<Layout> layouts = {
      {"row condition, column condition", {{64, 256}, {256}, {64, 256}, {64, 1}}, {64, 256}},
      {"whole-tensor conditions", {{37, 129}, {37, 129}, {37, 129}, {37, 129}}, {37, 129}},
      {"scalar condition and other", {{1000}, {}, {1}, {1000}}, {1000}},
      {"middle broadcast (strided)", {{8, 16, 32}, {8, 1, 32}, {16, 32}, {8, 16, 1}}, {8, 16, 32}},
  };
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
    for (const Case& c : cases) {
      for (const Layout& l : layouts) {
        for (int misaligned = 0; misaligned < 2; ++misaligned) {
          SCOPED_TRACE(std::string(to_string(dt)) + " " + c.op.describe() + " " + l.what + (misaligned ? " misaligned" : ""));
          std::vector<Operand> in;
          for (const auto& shape : l.shapes) in.push_back(make_operand(dt, shape, rng_, false, misaligned));
          // Conditions: mostly special values (so about half select each side); operands: special
          // values mixed into random bits.
          for (int k : {1, 3}) {
            for (std::size_t i = 0; i < in[k].bits.size(); ++i) {
              if (rng_() % 4 != 0) in[k].bits[i] = special_bits(dt, static_cast<int>(rng_() % 8));
            }
          }
          for (int k : {0, 2}) {
            for (std::size_t i = 0; i < in[k].bits.size(); ++i) {
              if (rng_() % 3 == 0) in[k].bits[i] = special_bits(dt, static_cast<int>(rng_() % 8));
            }
          }
          for (auto& o : in) upload(o);
          std::vector<TensorView> views;
          for (auto& o : in) views.push_back(o.view);
          Operand out = make_operand(dt, l.out_shape, rng_, false);
          Stream s;
          out.buf.fill_u32(0x7fbadbadu);
          ops::apply(c.op, views, {out.view}, s);
          s.synchronize();
          const auto got = read_back(out);
          out.buf.fill_u32(0x01234567u);  // a second poison: an element never written differs
          ops::apply(c.op, views, {out.view}, s);
          s.synchronize();
          ASSERT_EQ(read_back(out), got) << "an output element was not written, or the result is not deterministic";
          std::int64_t n = 1;
          for (auto d : l.out_shape) n *= d;
          std::int64_t mismatches = 0, selected_other = 0;
          for (std::int64_t i = 0; i < n; ++i) {
            std::vector<std::uint64_t> xs;
            for (std::size_t k = 0; k < in.size(); ++k) xs.push_back(in[k].bits[index_in(in[k].view, misaligned, l.out_shape, i)]);
            const std::uint64_t want = chain_reference(c.op, dt, xs);
            selected_other += want != xs[0] ? 1 : 0;
            const bool ok = c.selects_only ? got[i] == want : test::same_result(dt, got[i], want, true);
            if (!ok && mismatches++ < 5) {
              ADD_FAILURE() << "element " << i << ": got 0x" << std::hex << got[i] << " want 0x" << want
                            << " (x 0x" << xs[0] << ", in1 0x" << xs[1] << ", in2 0x" << xs[2] << ", in3 0x" << xs[3] << ")";
            }
          }
          EXPECT_EQ(mismatches, 0);
          if (n > 1) EXPECT_GT(selected_other, 0) << "the data never took the other side";
        }
      }
    }
  }
}

TEST_F(NaryGpu, InPlaceAndNonContiguousViews) {
  const Op op = Op::chain({Step::div_input(1), Step::add(1)});
  // In place: the output is input 0.
  Operand a = make_operand(DType::f32, {1000, 33}, rng_, true), b = make_operand(DType::f32, {33}, rng_, true);
  const std::vector<std::uint64_t> before = a.bits;
  Stream s;
  ops::apply(op, {a.view, b.view}, {a.view}, s);
  s.synchronize();
  auto got = read_back(a);
  for (std::int64_t i = 0; i < 1000 * 33; ++i) {
    const std::uint64_t want = chain_reference(op, DType::f32, {before[i], b.bits[i % 33]});
    ASSERT_TRUE(test::same_result(DType::f32, got[i], want, true)) << i;
  }
  // A transposed input and a strided output: the strided path.
  Operand t = make_operand(DType::bf16, {64, 48}, rng_, false, 0, {1, 64});
  Operand u = make_operand(DType::bf16, {64, 48}, rng_, false);
  Operand o = make_operand(DType::bf16, {64, 48}, rng_, false, 0, {96, 2});
  o.buf.fill_u32(0x7fbadbadu);
  ops::apply(op, {t.view, u.view}, {o.view}, s);
  s.synchronize();
  got = read_back(o);
  for (std::int64_t i = 0; i < 64 * 48; ++i) {
    const std::int64_t r = i / 48, c = i % 48;
    const std::uint64_t want = chain_reference(op, DType::bf16, {t.bits[r + c * 64], u.bits[i]});
    ASSERT_TRUE(test::same_result(DType::bf16, got[r * 96 + c * 2], want, true)) << i;
  }
}

// SwiGLU and a two-output expression against float64, fresh random data, every dtype.
TEST_F(NaryGpu, ExpressionsAgainstAFloat64Reference) {
  const Op two = Op::exprs({"a", "b"}, {"a + b * s", "y0 > 0 ? y0 : y0 * 0.01f"}, {{"s", 0.5}});
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
    SCOPED_TRACE(to_string(dt));
    // In f64 the opmath is double: exp, not expf (which would compute in float, as in C++).
    const Op swiglu = Op::exprs({"a", "b"}, {dt == DType::f64 ? "a / (1.0 + exp(-a)) * b" : "a / (1.0f + expf(-a)) * b"});
    const double eps = dt == DType::f64 ? 0x1p-52 : dt == DType::f32 ? 0x1p-23 : dt == DType::f16 ? 0x1p-10 : 0x1p-7;
    // The dtype's smallest subnormal: below the normal range a rounding is off by up to half of it.
    const double tiny = dt == DType::f64 ? 0x1p-1074 : dt == DType::f32 ? 0x1p-149 : dt == DType::f16 ? 0x1p-24 : 0x1p-133;
    Operand a = make_operand(dt, {4096, 17}, rng_, true), b = make_operand(dt, {4096, 17}, rng_, true);
    Operand y = make_operand(dt, {4096, 17}, rng_, true), z = make_operand(dt, {4096, 17}, rng_, true);
    y.buf.fill_u32(0x7fbadbadu);
    z.buf.fill_u32(0x7fbadbadu);
    Stream s;
    ops::apply(swiglu, {a.view, b.view}, {y.view}, s);
    s.synchronize();
    auto got = read_back(y);
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double x0 = op_value(dt, a.bits[i]), x1 = op_value(dt, b.bits[i]);
      const double want = x0 / (1.0 + std::exp(-x0)) * x1;
      // expf's error (2 ulp of float) and the one rounding to the dtype.
      const double tol = (dt == DType::f64 ? 4 * eps : std::max(eps, 4 * 0x1p-23)) * (std::fabs(want) + 1e-30);
      ASSERT_LE(std::fabs(op_value(dt, got[i]) - want), tol + tiny) << i << " a=" << x0 << " b=" << x1;
    }
    ops::apply(two, {a.view, b.view}, {y.view, z.view}, s);
    s.synchronize();
    got = read_back(y);
    const auto got2 = read_back(z);
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double x0 = op_value(dt, a.bits[i]), x1 = op_value(dt, b.bits[i]);
      const double want = x0 + x1 * 0.5;
      ASSERT_LE(std::fabs(op_value(dt, got[i]) - want), eps * std::fabs(want) + tiny) << i;
      // Output 1 is computed from output 0 as stored (rounded), like eager PyTorch.
      const double y0 = op_value(dt, got[i]);
      const double want2 = y0 > 0 ? y0 : y0 * static_cast<double>(0.01f);
      ASSERT_LE(std::fabs(op_value(dt, got2[i]) - want2), 2 * eps * std::fabs(want2) + tiny) << i;
    }
  }
}

// Every whole tensor offset alike (1 or 3 elements): the scalar head keeps 16-byte vectors (ops::plan
// of the N-ary planner); odd sizes give a tail too. Output 0 is input 0 in place in the second pass.
TEST_F(NaryGpu, WholeTensorsMisalignedAlikeTakeTheHeadBitExactly) {
  const Op op = Op::chain({Step::add_input(1), Step::mul_input(2), Step::sub(0.5), Step::relu()});
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
    for (std::int64_t offset : {1, 3}) {
      for (std::int64_t n : {std::int64_t{7}, std::int64_t{1000}, std::int64_t{65543}}) {
        for (bool in_place : {false, true}) {
          SCOPED_TRACE(std::string(to_string(dt)) + " +" + std::to_string(offset) + " n=" + std::to_string(n) +
                       (in_place ? " in place" : ""));
          std::vector<Operand> in;
          for (int k = 0; k < 3; ++k) in.push_back(make_operand(dt, {n}, rng_, false, offset));
          Operand out = make_operand(dt, {n}, rng_, false, offset);
          out.buf.fill_u32(0x7fbadbadu);
          const std::vector<std::uint64_t> x0 = in[0].bits;
          Stream s;
          ops::apply(op, {in[0].view, in[1].view, in[2].view}, {in_place ? in[0].view : out.view}, s);
          s.synchronize();
          const auto got = read_back(in_place ? in[0] : out);
          std::int64_t mismatches = 0;
          for (std::int64_t i = 0; i < n; ++i) {
            const auto at = static_cast<std::size_t>(i + offset);
            const std::uint64_t want = chain_reference(op, dt, {x0[at], in[1].bits[at], in[2].bits[at]});
            if (!test::same_result(dt, got[at], want, true) && mismatches++ < 5) {
              ADD_FAILURE() << "element " << i << ": got 0x" << std::hex << got[at] << " want 0x" << want;
            }
          }
          EXPECT_EQ(mismatches, 0);
        }
      }
    }
  }
}

TEST_F(NaryGpu, BadInputLaunchesNothing) {
  Operand a = make_operand(DType::f32, {128}, rng_, true), b = make_operand(DType::f32, {64}, rng_, true);
  const std::uint64_t launches = ops::nary_stats().launches;
  Stream s;
  EXPECT_THROW(ops::apply(Op::chain({Step::add_input(1)}), {a.view, b.view}, {a.view}, s), InvalidArgument);
  std::vector<float> host(128);
  const TensorView h = TensorView::contiguous(host.data(), DType::f32, {128});
  EXPECT_THROW(ops::apply(Op::chain({Step::add_input(1)}), {a.view, h}, {a.view}, s), InvalidArgument);
  EXPECT_EQ(ops::nary_stats().launches, launches);
}

TEST_F(NaryGpu, CapturedInEveryModeReplaysBitExactly) {
  const Op op = Op::exprs({"x", "bias", "r"}, {"fmaxf(x + bias + r, 0.0f)"});
  for (CaptureMode mode : {CaptureMode::global, CaptureMode::thread_local_mode, CaptureMode::relaxed}) {
    Operand x = make_operand(DType::f32, {256, 512}, rng_, true), bias = make_operand(DType::f32, {512}, rng_, true);
    Operand r = make_operand(DType::f32, {256, 512}, rng_, true), y = make_operand(DType::f32, {256, 512}, rng_, true);
    Operand ref = make_operand(DType::f32, {256, 512}, rng_, true);
    Stream s;
    ops::apply(op, {x.view, bias.view, r.view}, {ref.view}, s);  // cached before the capture
    Graph g = Graph::capture(s, [&] { ops::apply(op, {x.view, bias.view, r.view}, {y.view}, s); }, mode);
    // New input data, then replay and compare with the eager call on that data.
    Operand x2 = make_operand(DType::f32, {256, 512}, rng_, true);
    std::vector<unsigned char> raw(x2.buf.bytes());
    x2.buf.copy_to_host(raw.data(), raw.size());
    x.buf.copy_from_host(raw.data(), raw.size());
    y.buf.fill_u32(0x7fbadbadu);
    g.launch(s);
    ops::apply(op, {x.view, bias.view, r.view}, {ref.view}, s);
    s.synchronize();
    EXPECT_EQ(read_back(y), read_back(ref));
  }
}

}  // namespace
}  // namespace cuinline
