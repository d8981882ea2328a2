// GPU tests of the activation / math steps of the elementwise ops (sigmoid, tanh, silu, gelu,
// gelu_tanh, mish, softplus, elu, selu, celu, hardswish, hardsigmoid, hardtanh / relu6, exp, log,
// sqrt, abs, neg; softsign, tanhshrink, logsigmoid, hardshrink, softshrink, threshold, rrelu) through ops::apply, as an application calls them: every step in every dtype on
// fresh random data with special values (NaN, ±Inf, ±0, subnormals, the largest finite values,
// the edges of hardswish and softplus's threshold) mixed in, outputs poisoned first, vectorized and
// scalar tails, the CPU reference with PyTorch's formulas compared within the host-libm tolerance
// (the host's exp / erf are not CUDA's; the comparison against PyTorch itself, bit for bit, is
// bench/torch_capi_check.py's section 10); chains mixing them with arithmetic steps and tensor
// operands; the functions as a conv2d epilogue against a float64 reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <cuinline/conv2d.hpp>
#include <cuinline/cuinline.hpp>
#include <cuinline/ops.hpp>
#include <random>

#include "elementwise_reference.hpp"
#include "reference/host_reference.hpp"
#include "test_support.hpp"

namespace cuinline {
namespace {

using ops::Op;
using ops::Step;

class FunctionsGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (device_count() == 0) GTEST_SKIP() << "no GPU: " << driver_unavailable_reason();
    set_device(0);
    seed_ = test::fresh_seed();
    rng_.seed(seed_);
  }
  std::uint64_t seed_ = 0;
  std::mt19937_64 rng_;
};

std::uint64_t get_bits(const std::vector<unsigned char>& buf, DType dt, std::size_t i) {
  std::uint64_t b = 0;
  std::memcpy(&b, buf.data() + i * dtype_size(dt), dtype_size(dt));
  return b;
}
void set_bits(std::vector<unsigned char>& buf, DType dt, std::size_t i, std::uint64_t b) {
  std::memcpy(buf.data() + i * dtype_size(dt), &b, dtype_size(dt));
}
double value_of(DType dt, std::uint64_t bits) {
  return test::value_of(dt, bits);
}
std::uint64_t bits_of(DType dt, double v) {
  return test::bits_of(dt, v);
}

// Values where the formulas branch or saturate, in every dtype: NaN, ±Inf, ±0, the smallest
// subnormal, the largest finite, ±1, hardswish's ±3, softplus's threshold (20) and around it,
// exp's overflow (88.7) and tanh's / erf's saturation.
std::vector<std::uint64_t> specials(DType dt) {
  std::vector<std::uint64_t> s;
  for (double v : std::initializer_list<double>{NAN, INFINITY, -INFINITY, 0.0, -0.0, 1.0, -1.0, 3.0, -3.0, 2.999, -2.999, 20.0, 19.99, 20.01, 88.5,
                   89.0, -88.5, -104.0, 9.0, -9.0, 15.0, -15.0, 1e-3, -1e-3}) {
    s.push_back(bits_of(dt, v));
  }
  switch (dt) {
    case DType::f32:
      s.insert(s.end(), {0x1u, 0x80000001u, 0x007fffffu, 0x7f7fffffu, 0xff7fffffu});
      break;
    case DType::f16:
      s.insert(s.end(), {0x1u, 0x8001u, 0x03ffu, 0x7bffu, 0xfbffu});
      break;
    case DType::bf16:
      s.insert(s.end(), {0x1u, 0x8001u, 0x007fu, 0x7f7fu, 0xff7fu});
      break;
    case DType::f64:
      s.insert(s.end(), {0x1ull, 0x8000000000000001ull, 0x7fefffffffffffffull, 0xffefffffffffffffull});
      break;
  }
  return s;
}

std::vector<unsigned char> random_input(DType dt, std::size_t n, std::mt19937_64& rng, double lo, double hi) {
  std::vector<unsigned char> buf((n * dtype_size(dt) + 3) / 4 * 4);
  std::uniform_real_distribution<double> dist(lo, hi);
  const auto sp = specials(dt);
  for (std::size_t i = 0; i < n; ++i) {
    // Every special value once at the front, then one in 16 at random places.
    const std::uint64_t b = i < sp.size() ? sp[i] : (rng() % 16 == 0 ? sp[rng() % sp.size()] : bits_of(dt, dist(rng)));
    set_bits(buf, dt, i, b);
  }
  return buf;
}

// The CPU reference of a chain of steps on one element (PyTorch's op-by-op rounding).
std::uint64_t reference(const Op& op, DType dt, std::uint64_t x) {
  return test::reference(op, dt, x);
}

struct Named {
  const char* text;  // as parse_op reads it
  double lo, hi;     // the random inputs' range
};

const Named kFunctions[] = {
    {"sigmoid", -12, 12},          {"tanh", -6, 6},          {"silu", -12, 12},
    {"swish", -12, 12},            {"gelu", -8, 8},          {"gelu_tanh", -8, 8},
    {"mish", -12, 12},             {"softplus", -30, 30},    {"softplus(2, 5)", -10, 10},
    {"elu", -8, 8},                {"elu(0.3)", -8, 8},      {"selu", -8, 8},
    {"celu(1.7)", -8, 8},          {"hardswish", -6, 6},     {"hardsigmoid", -6, 6},
    {"hardtanh", -3, 3},           {"hardtanh(-0.5, 2)", -3, 3}, {"relu6", -3, 9},
    {"exp", -20, 20},              {"log", -1, 100},         {"sqrt", -1, 100},
    {"abs", -8, 8},                {"neg", -8, 8},           {"mish|mish", -12, 12},
    {"add(0.5)|gelu|mul(2)|sigmoid", -6, 6}, {"exp|hardswish|tanh", -4, 2},
    {"softsign", -3000, 3000},     {"softsign", -4, 4},      {"tanhshrink", -4, 4},
    {"logsigmoid", -30, 30},       {"hardshrink", -2, 2},    {"hardshrink(0.1)", -1, 1},
    {"softshrink", -2, 2},         {"softshrink(0.3)", -1, 1}, {"threshold(0.1, 20)", -1, 1},
    {"rrelu", -4, 4},              {"add(0.5)|softshrink|logsigmoid|mul(3)|softsign", -4, 4},
};

TEST_F(FunctionsGpu, EveryFunctionInEveryDtypeAgainstTheCpuReference) {
  SCOPED_TRACE("CUINLINE_TEST_SEED=" + std::to_string(seed_));
  Stream stream;
  // 4099: the vectorized body and a scalar tail; the input 1 element off 16 bytes: a scalar head.
  const std::size_t n = 4099;
  std::uint64_t poison = 0;
  for (const Named& f : kFunctions) {
    const Op op = ops::parse_op(f.text);
    for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
      SCOPED_TRACE(std::string(f.text) + " " + to_string(dt));
      const std::size_t es = dtype_size(dt);
      std::memset(&poison, 0x5a, es);
      for (std::size_t offset : {std::size_t{0}, std::size_t{1}}) {
        const auto host = random_input(dt, n + offset, rng_, f.lo, f.hi);
        DeviceBuffer in(host.size()), out(host.size());
        in.copy_from_host(host.data(), host.size());
        out.fill_u32(0x5a5a5a5au);
        const auto vin = TensorView::contiguous(in.as<unsigned char>() + offset * es, dt, {static_cast<std::int64_t>(n)});
        const auto vout = TensorView::contiguous(out.as<unsigned char>(), dt, {static_cast<std::int64_t>(n)});
        ops::apply(op, vin, vout, stream);
        stream.synchronize();
        std::vector<unsigned char> got(host.size());
        out.copy_to_host(got.data(), got.size());
        std::size_t identical = 0, bad = 0;
        for (std::size_t i = 0; i < n; ++i) {
          const std::uint64_t x = get_bits(host, dt, i + offset), g = get_bits(got, dt, i);
          if (g == poison && dt != DType::f64) {
            if (bad++ < 3) ADD_FAILURE() << "element " << i << " never written";
            continue;
          }
          const std::uint64_t want = reference(op, dt, x);
          if (g == want) {
            ++identical;
            continue;
          }
          if (!cli::close_to_reference(value_of(dt, want), value_of(dt, g), dt) && bad++ < 3) {
            ADD_FAILURE() << "element " << i << ": input " << value_of(dt, x) << " (0x" << std::hex << x
                          << ") got " << std::dec << value_of(dt, g) << " want " << value_of(dt, want);
          }
        }
        ASSERT_EQ(bad, 0u);
        // A sanity floor: the host's libm and CUDA's agree on most elements (CUDA's expf is not
        // correctly rounded, glibc's is: 60-75 % of exp / mish outputs identical on an H100); the
        // bit-for-bit comparison with PyTorch's own kernels is torch_capi_check.py's.
        EXPECT_GE(identical, n * 4 / 10) << identical << " of " << n << " identical to the CPU reference";
      }
    }
  }
}

// Named steps beside tensor operands and a broadcast row, as a fused bias + activation: the
// bias row added in opmath and rounded, then the activation.
TEST_F(FunctionsGpu, AfterATensorOperand) {
  SCOPED_TRACE("CUINLINE_TEST_SEED=" + std::to_string(seed_));
  Stream stream;
  const std::int64_t rows = 33, cols = 257;
  for (const char* text : {"add(in1)|gelu", "add(in1)|silu|mul(in2)", "mul(in1)|softplus(2,10)|sub(in2)"}) {
    const Op op = ops::parse_op(text);
    for (DType dt : {DType::f32, DType::bf16}) {
      SCOPED_TRACE(std::string(text) + " " + to_string(dt));
      const std::size_t es = dtype_size(dt);
      const std::size_t n = static_cast<std::size_t>(rows * cols);
      const auto x = random_input(dt, n, rng_, -5, 5), b = random_input(dt, static_cast<std::size_t>(cols), rng_, -2, 2),
                 g = random_input(dt, n, rng_, -2, 2);
      DeviceBuffer dx(x.size()), db(b.size()), dg(g.size()), dy(x.size());
      dx.copy_from_host(x.data(), x.size());
      db.copy_from_host(b.data(), b.size());
      dg.copy_from_host(g.data(), g.size());
      dy.fill_u32(0x5a5a5a5au);
      std::vector<TensorView> ins = {TensorView::contiguous(dx.as<void>(), dt, {rows, cols}),
                                     TensorView::contiguous(db.as<void>(), dt, {cols})};
      if (op.min_inputs() > 2) ins.push_back(TensorView::contiguous(dg.as<void>(), dt, {rows, cols}));
      ops::apply(op, ins, {TensorView::contiguous(dy.as<void>(), dt, {rows, cols})}, stream);
      stream.synchronize();
      std::vector<unsigned char> got(x.size());
      dy.copy_to_host(got.data(), got.size());
      std::size_t bad = 0;
      for (std::size_t i = 0; i < n; ++i) {
        // The chain by hand: tensor steps rounded to the dtype, the others through the reference.
        std::uint64_t v = get_bits(x, dt, i);
        for (const Step& st : op.steps) {
          if (st.kind == ops::StepKind::add_tensor || st.kind == ops::StepKind::mul_tensor ||
              st.kind == ops::StepKind::sub_tensor) {
            const std::uint64_t o = st.operand == 1 ? get_bits(b, dt, i % cols) : get_bits(g, dt, i);
            const double a = value_of(dt, v), c = value_of(dt, o);
            const double r = st.kind == ops::StepKind::add_tensor   ? static_cast<double>(static_cast<float>(a) + static_cast<float>(c))
                             : st.kind == ops::StepKind::mul_tensor ? static_cast<double>(static_cast<float>(a) * static_cast<float>(c))
                                                                    : static_cast<double>(static_cast<float>(a) - static_cast<float>(c));
            v = bits_of(dt, r);
          } else {
            v = reference(Op::chain({st}), dt, v);
          }
        }
        const std::uint64_t have = get_bits(got, dt, i);
        if (have != v && !cli::close_to_reference(value_of(dt, v), value_of(dt, have), dt) && bad++ < 3) {
          ADD_FAILURE() << "element " << i << ": got " << value_of(dt, have) << " want " << value_of(dt, v);
        }
      }
      EXPECT_EQ(bad, 0u);
    }
  }
}

// The steps as a conv2d epilogue (computed in fp32 on the accumulator, rounded once): a small
// conv in f32 (fp32 FMA) and f16 (tensor cores) against a float64 conv and the step in double.
TEST_F(FunctionsGpu, AsAConvEpilogue) {
  SCOPED_TRACE("CUINLINE_TEST_SEED=" + std::to_string(seed_));
  Stream stream;
  const int N = 2, C = 16, H = 12, W = 12, K = 24;
  const int OH = H - 2, OW = W - 2;
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> xin(static_cast<std::size_t>(N) * C * H * W), win(static_cast<std::size_t>(K) * C * 9), bias(K);
  for (auto& v : xin) v = u(rng_);
  for (auto& v : win) v = u(rng_) * 0.5;
  for (auto& v : bias) v = u(rng_);
  std::vector<double> conv(static_cast<std::size_t>(N) * K * OH * OW);
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k)
      for (int y = 0; y < OH; ++y)
        for (int x = 0; x < OW; ++x) {
          double s = bias[k];
          for (int c = 0; c < C; ++c)
            for (int r = 0; r < 3; ++r)
              for (int q = 0; q < 3; ++q)
                s += xin[((static_cast<std::size_t>(n) * C + c) * H + y + r) * W + x + q] *
                     win[((static_cast<std::size_t>(k) * C + c) * 3 + r) * 3 + q];
          conv[((static_cast<std::size_t>(n) * K + k) * OH + y) * OW + x] = s;
        }
  for (const char* text : {"gelu", "mish|mish", "silu", "hardswish", "softplus(2,5)", "softplus", "selu", "elu",
                           "celu(0.5)", "sigmoid", "softsign", "logsigmoid|tanhshrink", "softshrink(0.25)"}) {
    // (Not the discontinuous hardshrink / threshold: with f16 operands rounded and the reference's
    // not, a value at the step can land on the other side — AsAConvEpilogueOnSpecialValues has them,
    // on exact inputs.)
    const Op op = ops::parse_op(text);
    for (DType dt : {DType::f32, DType::f16}) {
      SCOPED_TRACE(std::string(text) + " " + to_string(dt));
      auto to_dev = [&](const std::vector<double>& v, DeviceBuffer& buf) {
        std::vector<unsigned char> raw((v.size() * dtype_size(dt) + 3) / 4 * 4);
        for (std::size_t i = 0; i < v.size(); ++i) set_bits(raw, dt, i, bits_of(dt, v[i]));
        buf = DeviceBuffer(raw.size());
        buf.copy_from_host(raw.data(), raw.size());
      };
      DeviceBuffer dx, dw, db, dy(((conv.size() * dtype_size(dt)) + 3) / 4 * 4);
      to_dev(xin, dx);
      to_dev(win, dw);
      to_dev(bias, db);
      dy.fill_u32(0x5a5a5a5au);
      const TensorView vx = TensorView::contiguous(dx.as<void>(), dt, {N, C, H, W});
      const TensorView vw = TensorView::contiguous(dw.as<void>(), dt, {K, C, 3, 3});
      const TensorView vb = TensorView::contiguous(db.as<void>(), dt, {K});
      const TensorView vy = TensorView::contiguous(dy.as<void>(), dt, {N, K, OH, OW});
      ops::conv2d(vx, vw, vb, vy, ops::Conv2dParams{}, op, stream);
      stream.synchronize();
      std::vector<unsigned char> got(dy.bytes());
      dy.copy_to_host(got.data(), got.size());
      // The reference: the operands as the dtype holds them, the conv in double, the steps in double.
      double err = 0, norm = 0;
      std::size_t unwritten = 0;
      std::uint64_t poison = 0;
      std::memset(&poison, 0x5a, dtype_size(dt));
      for (std::size_t i = 0; i < conv.size(); ++i) {
        double want = conv[i];  // (f16: on unrounded operands; the bound covers the rounding)
        for (const Step& st : op.steps) want = cli::reference_function<double>(st, want);
        const std::uint64_t g = get_bits(got, dt, i);
        if (g == poison) ++unwritten;
        const double have = value_of(dt, g);
        err += (have - want) * (have - want);
        norm += want * want;
      }
      EXPECT_EQ(unwritten, 0u);
      const double rel = std::sqrt(err / norm);
      // f32: fp32 sums of 144 products; f16: operands rounded to half (the reference is not), output rounded.
      EXPECT_LT(rel, dt == DType::f32 ? 1e-5 : 5e-3) << "relative L2 error " << rel;
    }
  }
}

// The steps as a conv2d epilogue on special values: a 1 x 1 conv of one input channel with weights 1
// (no bias) hands the epilogue each input value exactly (±0 as +0: the sum starts at +0), so NaN,
// ±Inf, the largest finite, subnormals and each formula's edges (softplus's threshold, exp's
// overflow, mish's 20) reach the conv forms (mish's closed form, the log1p series of softplus and
// logsigmoid, the selects of elu and softplus). Against the step in fp32 (host libm) rounded to the dtype:
// NaN where it is NaN, the same infinity, finite values within the host-libm tolerance.
TEST_F(FunctionsGpu, AsAConvEpilogueOnSpecialValues) {
  SCOPED_TRACE("CUINLINE_TEST_SEED=" + std::to_string(seed_));
  Stream stream;
  const int K = 8;
  for (DType dt : {DType::f32, DType::f16}) {
    const std::vector<unsigned char> x = random_input(dt, 96, rng_, -30, 30);
    const int W = 96;
    std::vector<unsigned char> w((K * dtype_size(dt) + 3) / 4 * 4);
    for (int k = 0; k < K; ++k) set_bits(w, dt, static_cast<std::size_t>(k), bits_of(dt, 1.0));
    DeviceBuffer dx(x.size()), dw(w.size()), dy((static_cast<std::size_t>(K) * W * dtype_size(dt) + 3) / 4 * 4);
    dx.copy_from_host(x.data(), x.size());
    dw.copy_from_host(w.data(), w.size());
    for (const char* text : {"sigmoid", "silu", "gelu", "gelu_tanh", "mish", "mish|mish", "softplus", "softplus(2,5)",
                             "elu", "selu", "celu(0.5)", "logsigmoid", "softsign", "tanhshrink", "hardswish", "exp",
                             "log", "sqrt", "hardshrink", "softshrink", "threshold(0.1,20)"}) {
      SCOPED_TRACE(std::string(text) + " " + to_string(dt));
      const Op op = ops::parse_op(text);
      dy.fill_u32(0x5a5a5a5au);
      const TensorView vx = TensorView::contiguous(dx.as<void>(), dt, {1, 1, 1, W});
      const TensorView vw = TensorView::contiguous(dw.as<void>(), dt, {K, 1, 1, 1});
      const TensorView vy = TensorView::contiguous(dy.as<void>(), dt, {1, K, 1, W});
      ops::conv2d(vx, vw, TensorView{}, vy, ops::Conv2dParams{}, op, stream);
      stream.synchronize();
      std::vector<unsigned char> got(dy.bytes());
      dy.copy_to_host(got.data(), got.size());
      int bad = 0;
      for (int k = 0; k < K; ++k) {
        for (int i = 0; i < W; ++i) {
          // In fp32, as the epilogue computes (hardswish(FLT_MAX) is inf there, as in PyTorch's f32
          // kernel, not in double), rounded to the dtype.
          float v = 0.0f + static_cast<float>(value_of(dt, get_bits(x, dt, static_cast<std::size_t>(i))));
          for (const Step& st : op.steps) v = cli::reference_function<float>(st, v);
          const double want = value_of(dt, bits_of(dt, v));
          const double have = value_of(dt, get_bits(got, dt, static_cast<std::size_t>(k) * W + i));
          if (!cli::close_to_reference(want, have, dt) && bad++ < 3) {
            ADD_FAILURE() << "x = " << value_of(dt, get_bits(x, dt, static_cast<std::size_t>(i))) << ": got " << have
                          << ", want " << want;
          }
        }
      }
      EXPECT_EQ(bad, 0);
    }
  }
}

}  // namespace
}  // namespace cuinline
