// GPU tests of the generic conv2d kernels (kernel_templates/conv2d_generic_rt.cuh and, for f16 / bf16
// with 16 or more output channels a group, conv2d_generic_rt_mma.cuh) through ops::conv2d,
// as an application calls it: under the `generic` policy against a float64 host reference for every
// dtype, NCHW and channels-last tensors, groups and depthwise, stride / padding / dilation, bias and
// residual, epilogues with constants and channel operands (outputs poisoned first); under `async` a
// never-seen variant served at once by the generic kernel, then, after wait_for_specializations(), by
// the specialized one (both within tolerance of the reference and of each other), and a variant's
// split-K form swapped in after its plain kernel; a graph capture
// waits for the specialized kernel (sync); an expression epilogue compiles under every policy.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <cuinline/conv2d.hpp>
#include <cuinline/cuinline.hpp>
#include <cuinline/ops.hpp>
#include <random>
#include <string>
#include <vector>

#include "elementwise_reference.hpp"
#include "test_support.hpp"

namespace cuinline {
namespace {

using ops::Conv2dParams;

// The epilogues the cases use, with their float64 meaning (ch: the channel operands' values).
struct Epilogue {
  const char* text;
  int operands;
  double (*f)(double x, const double* ch);
};
const Epilogue kIdentity{"", 0, [](double x, const double*) { return x; }};
const Epilogue kDivLeaky{"div(3)|leaky_relu(0.01)", 0, [](double x, const double*) {
                           const double y = x / 3;
                           return y > 0 ? y : 0.01 * y;
                         }};
const Epilogue kScaleShiftRelu{"mul(in1)|add(in2)|relu", 2,
                               [](double x, const double* ch) { return std::max(x * ch[0] + ch[1], 0.0); }};
const Epilogue kSiluScale{"add(0.25)|silu|mul(in1)", 1, [](double x, const double* ch) {
                            const double s = x + 0.25;
                            return s / (1 + std::exp(-s)) * ch[0];
                          }};
const Epilogue kWhereTanh{"where(in1, 0.1)|tanh", 1,
                          [](double x, const double* ch) { return std::tanh(ch[0] != 0 ? x : 0.1); }};

struct Case {
  int n, cin, h, w, cout, k;
  Conv2dParams p;
  bool x_nhwc, w_nhwc, y_nhwc, bias, residual;
  const Epilogue* epilogue;
};

Conv2dParams params(int stride, int pad, int dilation, int groups) {
  Conv2dParams p;
  p.stride_h = p.stride_w = stride;
  p.pad_h = p.pad_w = pad;
  p.dilation_h = p.dilation_w = dilation;
  p.groups = groups;
  return p;
}

// A value as text that parses back to the same double.
std::string exact(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// A tensor [n, c, h, w]: its values as stored (rounded to the dtype), logical NCHW order.
struct Host {
  std::int64_t n = 0, c = 0, h = 0, w = 0;
  bool nhwc = false;
  std::vector<double> values;
  std::int64_t offset(std::int64_t i, std::int64_t ch, std::int64_t y, std::int64_t x) const {
    return nhwc ? ((i * h + y) * w + x) * c + ch : ((i * c + ch) * h + y) * w + x;
  }
  double at(std::int64_t i, std::int64_t ch, std::int64_t y, std::int64_t x) const {
    return values[static_cast<std::size_t>(((i * c + ch) * h + y) * w + x)];
  }
};

Host random_host(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, bool nhwc, DType dt,
                 std::mt19937_64& rng, bool binary = false) {
  Host t{n, c, h, w, nhwc, {}};
  std::normal_distribution<double> normal(0.0, 1.0);
  t.values.resize(static_cast<std::size_t>(n * c * h * w));
  for (double& v : t.values) {
    v = binary ? static_cast<double>(rng() % 2) : test::value_of(dt, test::bits_of(dt, normal(rng)));
  }
  return t;
}

struct Device {
  DeviceBuffer buffer;
  TensorView view;
};

Device upload(const Host& t, DType dt, int ndim = 4) {
  const std::size_t es = dtype_size(dt);
  Device d{DeviceBuffer(t.values.size() * es + 16), {}};
  std::vector<unsigned char> raw(t.values.size() * es);
  for (std::int64_t i = 0; i < t.n; ++i)
    for (std::int64_t ch = 0; ch < t.c; ++ch)
      for (std::int64_t y = 0; y < t.h; ++y)
        for (std::int64_t x = 0; x < t.w; ++x) {
          const std::uint64_t bits = test::bits_of(dt, t.at(i, ch, y, x));
          std::memcpy(raw.data() + t.offset(i, ch, y, x) * es, &bits, es);
        }
  d.buffer.copy_from_host(raw.data(), raw.size());
  void* p = reinterpret_cast<void*>(d.buffer.ptr());
  if (ndim == 1) {
    d.view = TensorView::contiguous(p, dt, {t.c});
  } else if (t.nhwc) {
    d.view = TensorView::strided(p, dt, {t.n, t.c, t.h, t.w}, {t.h * t.w * t.c, 1, t.w * t.c, t.c});
  } else {
    d.view = TensorView::contiguous(p, dt, {t.n, t.c, t.h, t.w});
  }
  return d;
}

// One case's tensors on the host and the device, and its float64 reference.
struct Problem {
  Case c;
  DType dt;
  std::int64_t oh, ow;
  Host x, wt, b, r;
  std::vector<Host> ch;
  Device dx, dw, db, dr;
  std::vector<Device> dch;
  std::vector<double> conv;  // conv + bias [+ residual], float64, before the epilogue

  Problem(const Case& cs, DType d, std::mt19937_64& rng) : c(cs), dt(d) {
    const Conv2dParams& p = c.p;
    oh = (c.h + 2 * p.pad_h - p.dilation_h * (c.k - 1) - 1) / p.stride_h + 1;
    ow = (c.w + 2 * p.pad_w - p.dilation_w * (c.k - 1) - 1) / p.stride_w + 1;
    x = random_host(c.n, c.cin, c.h, c.w, c.x_nhwc, dt, rng);
    wt = random_host(c.cout, c.cin / p.groups, c.k, c.k, c.w_nhwc, dt, rng);
    b = random_host(1, c.cout, 1, 1, false, dt, rng);
    r = random_host(c.n, c.cout, oh, ow, c.y_nhwc, dt, rng);
    const bool binary = std::string(c.epilogue->text).find("where") != std::string::npos;
    for (int k = 0; k < c.epilogue->operands; ++k) ch.push_back(random_host(1, c.cout, 1, 1, false, dt, rng, binary));
    dx = upload(x, dt);
    dw = upload(wt, dt);
    if (c.bias) db = upload(b, dt, 1);
    if (c.residual) dr = upload(r, dt);
    for (const Host& h : ch) dch.push_back(upload(h, dt, 1));
    const int cin_g = c.cin / p.groups, cout_g = c.cout / p.groups;
    conv.resize(static_cast<std::size_t>(c.n * c.cout * oh * ow));
    for (int n = 0; n < c.n; ++n)
      for (int co = 0; co < c.cout; ++co)
        for (std::int64_t oy = 0; oy < oh; ++oy)
          for (std::int64_t ox = 0; ox < ow; ++ox) {
            double acc = c.bias ? b.at(0, co, 0, 0) : 0.0;
            const int g = co / cout_g;
            for (int cl = 0; cl < cin_g; ++cl)
              for (int ky = 0; ky < c.k; ++ky) {
                const std::int64_t iy = oy * p.stride_h - p.pad_h + ky * p.dilation_h;
                if (iy < 0 || iy >= c.h) continue;
                for (int kx = 0; kx < c.k; ++kx) {
                  const std::int64_t ix = ox * p.stride_w - p.pad_w + kx * p.dilation_w;
                  if (ix < 0 || ix >= c.w) continue;
                  acc += x.at(n, g * cin_g + cl, iy, ix) * wt.at(co, cl, ky, kx);
                }
              }
            if (c.residual) acc += r.at(n, co, oy, ox);
            conv[static_cast<std::size_t>(((n * c.cout + co) * oh + oy) * ow + ox)] = acc;
          }
  }

  // The float64 reference: the epilogue of scale x the conv value.
  std::vector<double> reference(double scale = 1) const {
    std::vector<double> ref(conv.size());
    for (std::size_t i = 0; i < conv.size(); ++i) {
      const int co = static_cast<int>(i / static_cast<std::size_t>(oh * ow) % static_cast<std::size_t>(c.cout));
      double chv[4] = {};
      for (std::size_t k = 0; k < ch.size(); ++k) chv[k] = ch[k].at(0, co, 0, 0);
      ref[i] = c.epilogue->f(conv[i] * scale, chv);
    }
    return ref;
  }

  ops::Op epilogue(double scale = 0) const {
    // (scale != 0: a leading mul(scale), a variant no earlier call compiled; the reference is scaled.)
    std::string text = c.epilogue->text;
    if (scale != 0) text = "mul(" + exact(scale) + ")" + (text.empty() ? "" : "|" + text);
    return text.empty() ? ops::Op::chain({}) : ops::parse_op(text);
  }

  // An output buffer poisoned (NaN in every dtype) and its view in the case's layout.
  Device output() const {
    const std::size_t bytes = conv.size() * dtype_size(dt);
    Device d{DeviceBuffer(bytes + 16), {}};
    const std::vector<unsigned char> raw(bytes, 0xFF);
    d.buffer.copy_from_host(raw.data(), raw.size());
    void* p = reinterpret_cast<void*>(d.buffer.ptr());
    d.view = c.y_nhwc ? TensorView::strided(p, dt, {c.n, c.cout, oh, ow}, {oh * ow * c.cout, 1, ow * c.cout, c.cout})
                      : TensorView::contiguous(p, dt, {c.n, c.cout, oh, ow});
    return d;
  }

  // One conv2d call into y under `policy`.
  void call(const TensorView& y, const ops::Op& epilogue, JitPolicy policy, CUstream stream) const {
    std::vector<TensorView> chan;
    for (const Device& d : dch) chan.push_back(d.view);
    ScopedJitPolicy guard(policy);
    ops::conv2d(dx.view, dw.view, c.bias ? db.view : TensorView{}, y, c.p, epilogue, stream,
                ops::Conv2dPrecision::fp32, c.residual ? dr.view : TensorView{}, chan);
  }

  // The output's values, logical NCHW order.
  std::vector<double> read(const Device& y) const {
    const std::size_t es = dtype_size(dt);
    std::vector<unsigned char> raw(conv.size() * es);
    y.buffer.copy_to_host(raw.data(), raw.size());
    const Host shape{c.n, c.cout, oh, ow, c.y_nhwc, {}};
    std::vector<double> got(conv.size());
    for (int n = 0; n < c.n; ++n)
      for (int co = 0; co < c.cout; ++co)
        for (std::int64_t oy = 0; oy < oh; ++oy)
          for (std::int64_t ox = 0; ox < ow; ++ox) {
            std::uint64_t bits = 0;
            std::memcpy(&bits, raw.data() + shape.offset(n, co, oy, ox) * es, es);
            got[static_cast<std::size_t>(((n * c.cout + co) * oh + oy) * ow + ox)] = test::value_of(dt, bits);
          }
    return got;
  }

  // The output of one eager conv2d call.
  std::vector<double> run(const ops::Op& epilogue, JitPolicy policy) const {
    const Device y = output();
    call(y.view, epilogue, policy, nullptr);
    Event done;
    done.record(nullptr);
    done.synchronize();
    return read(y);
  }
};

// As test_conv2d_dtypes_gpu: relative L2 bounds of one rounding to the dtype at the store, with
// room for the order of the sums.
double tolerance(DType dt) {
  return dt == DType::f16 ? 2e-3 : dt == DType::bf16 ? 1.6e-2 : dt == DType::f64 ? 1e-12 : 1e-5;
}

// The relative L2 distance of got from want; every element written (a NaN fails).
double distance(const std::vector<double>& got, const std::vector<double>& want, double scale = 1) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i])) {
      ADD_FAILURE() << "element " << i << " unwritten (NaN)";
      return INFINITY;
    }
    const double w = want[i] * scale;
    num += (got[i] - w) * (got[i] - w);
    den += w * w;
  }
  return std::sqrt(num / (den > 0 ? den : 1));
}

std::string describe(const Case& c, DType dt) {
  return std::string(to_string(dt)) + " " + std::to_string(c.n) + "x" + std::to_string(c.cin) + "x" +
         std::to_string(c.h) + "x" + std::to_string(c.w) + "->" + std::to_string(c.cout) + " k" +
         std::to_string(c.k) + " s" + std::to_string(c.p.stride_h) + " p" + std::to_string(c.p.pad_h) + " d" +
         std::to_string(c.p.dilation_h) + " g" + std::to_string(c.p.groups) + (c.x_nhwc ? " x:nhwc" : "") +
         (c.w_nhwc ? " w:nhwc" : "") + (c.y_nhwc ? " y:nhwc" : "") + (c.bias ? " bias" : "") +
         (c.residual ? " residual" : "") + " [" + c.epilogue->text + "]";
}

const Case kCases[] = {
    {2, 12, 50, 50, 20, 3, params(1, 0, 1, 1), false, false, false, true, false, &kDivLeaky},
    {2, 16, 17, 13, 24, 3, params(2, 1, 1, 1), true, true, true, true, true, &kScaleShiftRelu},
    {1, 8, 11, 9, 10, 3, params(1, 2, 2, 1), true, false, false, false, true, &kSiluScale},
    {2, 12, 9, 9, 20, 3, params(1, 1, 1, 4), false, true, true, true, false, &kWhereTanh},
    {2, 32, 14, 14, 32, 3, params(1, 1, 1, 32), true, false, true, true, true, &kDivLeaky},
    {1, 16, 10, 12, 32, 5, params(2, 2, 1, 16), false, false, false, false, false, &kIdentity},
    {1, 16, 10, 12, 32, 5, params(1, 2, 1, 16), true, true, false, true, false, &kScaleShiftRelu},
    {3, 5, 7, 6, 3, 1, params(1, 0, 1, 1), false, false, true, true, true, &kIdentity},
    // f16 / bf16 with channels-last inputs of whole 16-byte channel runs take the tensor-core
    // kernel's vector form (sm_80+): partial pixel and channel tiles, tiles spanning images, an
    // element-wise gathered NCHW weight and an NCHW output; a partial K tile (40 channels); groups
    // with dilation.
    {3, 64, 15, 13, 72, 3, params(1, 1, 1, 1), true, false, false, true, true, &kSiluScale},
    {2, 40, 12, 12, 48, 1, params(2, 0, 1, 1), true, true, true, true, false, &kDivLeaky},
    {2, 64, 11, 11, 64, 3, params(1, 2, 2, 2), true, true, true, false, true, &kWhereTanh},
    // A 1 x 1 filter with an NCHW weight: its channels contiguous, read 16 bytes a load.
    {3, 48, 9, 7, 40, 1, params(1, 0, 1, 1), true, false, true, true, true, &kScaleShiftRelu},
    // Its gathered form (3 input channels: a stem), as the first case (an NCHW input) takes it.
    {2, 3, 23, 21, 32, 7, params(2, 3, 1, 1), true, true, true, true, false, &kDivLeaky},
    // Few tiles of a long reduction (ResNet-50's 512-channel 3 x 3 on 7²: 8 tiles at batch 1): the
    // tensor-core kernel splits K (16 slices on a GPU of 128 or more SMs; most cases above split
    // in 2-4).
    {1, 512, 7, 7, 512, 3, params(1, 1, 1, 1), true, true, true, true, true, &kScaleShiftRelu},
    // f32 on a scalar-read input with 32+ output channels a group and tiles for a wave (528 and 576
    // tiles of 128 pixels x 64 channels): the implicit GEMM, with an NCHW output and a partial channel
    // tile; groups of 32 with a channels-last weight and output.
    {8, 8, 66, 64, 72, 3, params(1, 1, 1, 1), false, false, false, true, true, &kScaleShiftRelu},
    {16, 16, 48, 48, 64, 3, params(1, 1, 1, 2), false, true, true, true, false, &kWhereTanh},
    // The tensor-core kernel's wide tiling: 48 tiles of 128 pixels x 128 channels, 72 K tiles split
    // in 3 slices on a GPU of 97-144 SMs; 146 tiles of 18 K tiles, on a GPU of up to 146 SMs unsplit,
    // with partial pixel, channel and K tiles (40 channels) and a residual.
    {8, 256, 16, 16, 384, 3, params(1, 1, 1, 1), true, true, true, true, false, &kDivLeaky},
    {8, 40, 35, 33, 192, 3, params(1, 1, 1, 1), true, true, true, true, true, &kSiluScale},
    // A stem of many tiles (1152 of 64 pixels): f16 / bf16 on the gathered form with its weight
    // packed K-major first (8 or more tiles a multiprocessor); f32 on the implicit GEMM, K element
    // by element (3 channels).
    {32, 3, 96, 96, 64, 7, params(2, 3, 1, 1), true, true, true, true, false, &kDivLeaky},
};

class JitConv2dGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (device_count() == 0) GTEST_SKIP() << "no GPU: " << driver_unavailable_reason();
    if (!generic_kernels_built()) GTEST_SKIP() << "built without the generic kernels";
    set_device(0);
    seed_ = test::fresh_seed();
    rng_.seed(seed_);
  }
  // A scale no earlier call used (the variant is new to this process), exact in fp32.
  double fresh_scale() { return 1.0 + std::ldexp(static_cast<double>(rng_() % 1000000 + 1), -21); }
  std::uint64_t seed_ = 0;
  std::mt19937_64 rng_;
};

TEST_F(JitConv2dGpu, GenericMatchesTheReference) {
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
    for (const Case& c : kCases) {
      const Problem p(c, dt, rng_);
      const JitStats before = jit_stats();
      const std::vector<double> got = p.run(p.epilogue(), JitPolicy::generic);
      const JitStats after = jit_stats();
      EXPECT_EQ(after.generic_launches, before.generic_launches + 1) << describe(c, dt);
      EXPECT_EQ(after.submitted, before.submitted) << "generic: nothing compiled";
      const double err = distance(got, p.reference());
      EXPECT_LE(err, tolerance(dt)) << describe(c, dt) << " (seed " << seed_ << ")";
      std::printf("  generic %-90s rel L2 %.2e\n", describe(c, dt).c_str(), err);
    }
  }
}

// The depthwise kernel (channels-last input, one input channel a group) sums each output's taps in
// the specialized kernel's order and runs the same epilogue steps: its outputs are the specialized
// kernel's bit for bit, in every dtype. Cases: channel pairs (16-bit) with a residual over row
// groups with a partial last one; the 3 x 3 filter at stride 1 (input rows reused across output
// rows) and at stride and dilation 2; a 5 x 5 filter read at run time; an odd channel count; two
// output channels a group.
TEST_F(JitConv2dGpu, DepthwiseGenericEqualsSpecializedBitForBit) {
  const Case cases[] = {
      {2, 32, 14, 14, 32, 3, params(1, 1, 1, 32), true, false, true, true, true, &kDivLeaky},
      {2, 6, 19, 5, 6, 3, params(1, 1, 1, 6), true, true, true, true, true, &kScaleShiftRelu},
      {2, 8, 12, 10, 8, 3, params(2, 2, 2, 8), true, true, false, false, false, &kSiluScale},
      {1, 7, 17, 9, 7, 5, params(2, 2, 1, 7), true, false, false, true, false, &kWhereTanh},
      {1, 16, 10, 12, 32, 5, params(1, 2, 1, 16), true, true, false, true, false, &kScaleShiftRelu},
  };
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
    for (const Case& c : cases) {
      const Problem p(c, dt, rng_);
      const ops::Op ep = p.epilogue(fresh_scale());
      const std::vector<double> generic = p.run(ep, JitPolicy::generic);
      const std::vector<double> specialized = p.run(ep, JitPolicy::sync);
      std::size_t differ = 0, first = 0;
      for (std::size_t i = 0; i < generic.size(); ++i) {
        const bool same = generic[i] == specialized[i] && std::signbit(generic[i]) == std::signbit(specialized[i]);
        if (!same && differ++ == 0) first = i;
      }
      EXPECT_EQ(differ, 0u) << describe(c, dt) << ": first at " << first << ": " << generic[first] << " vs "
                            << specialized[first] << " (seed " << seed_ << ")";
    }
  }
}

TEST_F(JitConv2dGpu, AsyncServesAtOnceThenSwapsTheSpecializedKernelIn) {
  // (One compile each: a plain f32 conv, a channels-last f16 one with a residual and channel
  // operands, bf16 depthwise, f64 grouped.)
  const std::pair<DType, const Case*> runs[] = {
      {DType::f32, &kCases[0]}, {DType::f16, &kCases[1]}, {DType::bf16, &kCases[4]}, {DType::f64, &kCases[6]}};
  for (const auto& [dt, cp] : runs) {
    {
      const Case& c = *cp;
      const Problem p(c, dt, rng_);
      const double scale = fresh_scale();
      const ops::Op epilogue = p.epilogue(scale);
      const std::vector<double> ref = p.reference(scale);
      const JitStats before = jit_stats();
      const std::vector<double> first = p.run(epilogue, JitPolicy::async);
      const JitStats after_first = jit_stats();
      EXPECT_EQ(after_first.generic_launches, before.generic_launches + 1) << describe(c, dt);
      EXPECT_EQ(after_first.submitted, before.submitted + 1) << describe(c, dt);
      wait_for_specializations();
      const JitStats drained = jit_stats();
      EXPECT_EQ(drained.pending, 0u);
      EXPECT_EQ(drained.swaps, before.swaps + 1) << describe(c, dt);
      EXPECT_EQ(drained.background_failures, before.background_failures);
      const std::vector<double> second = p.run(epilogue, JitPolicy::async);
      EXPECT_EQ(jit_stats().generic_launches, drained.generic_launches) << "the specialized kernel now";
      EXPECT_LE(distance(first, ref), tolerance(dt)) << describe(c, dt) << " generic (seed " << seed_ << ")";
      EXPECT_LE(distance(second, ref), tolerance(dt)) << describe(c, dt) << " specialized (seed " << seed_ << ")";
      EXPECT_LE(distance(first, second), 2 * tolerance(dt)) << describe(c, dt) << " generic vs specialized";
    }
  }
}

// A variant with a split-K form (ResNet-50's 512-channel 3 x 3 on 7 x 7, f16 channels-last, batch
// 1: 4 tiles, a launch that wants the split form) under `async`: the first call runs the generic
// kernel and submits the plain one; once that is loaded, the next call runs it and submits the
// split form; once that is loaded, calls run it and submit nothing. Every output within tolerance
// of the reference. Skipped where the variant has no split form on this device (no wgmma, or
// CUINLINE_CONV2D_SPLIT_K=0).
TEST_F(JitConv2dGpu, AsyncSwapsTheSplitKFormInAfterThePlainKernel) {
  Case c{1, 512, 7, 7, 512, 3, params(1, 1, 1, 1), true, true, true, true, true, &kDivLeaky};
  const Problem p(c, DType::f16, rng_);
  const double scale = fresh_scale();
  const ops::Op epilogue = p.epilogue(scale);
  const ops::Conv2dVariant v = ops::conv2d_variant_for(p.dx.view, p.dw.view, p.db.view, p.output().view, c.p, epilogue,
                                                       ops::Conv2dPrecision::fp32, p.dr.view);
  if (!ops::make_split_request(ops::conv2d_variant_for_device(v, current_device()))) {
    GTEST_SKIP() << "no split-K form on this device";
  }
  const std::vector<double> ref = p.reference(scale);
  const JitStats before = jit_stats();
  const std::vector<double> generic = p.run(epilogue, JitPolicy::async);
  EXPECT_EQ(jit_stats().generic_launches, before.generic_launches + 1);
  EXPECT_EQ(jit_stats().submitted, before.submitted + 1) << "the plain kernel";
  wait_for_specializations();
  const JitStats plain_loaded = jit_stats();
  const std::vector<double> plain = p.run(epilogue, JitPolicy::async);
  const JitStats after_plain = jit_stats();
  EXPECT_EQ(after_plain.generic_launches, plain_loaded.generic_launches) << "the plain kernel runs";
  EXPECT_EQ(after_plain.submitted, plain_loaded.submitted + 1) << "the split form";
  EXPECT_EQ(after_plain.sync_waits, plain_loaded.sync_waits);
  wait_for_specializations();
  const JitStats split_loaded = jit_stats();
  EXPECT_EQ(split_loaded.swaps, before.swaps + 2);
  EXPECT_EQ(split_loaded.background_failures, before.background_failures);
  const std::vector<double> split = p.run(epilogue, JitPolicy::async);
  const JitStats after_split = jit_stats();
  EXPECT_EQ(after_split.submitted, split_loaded.submitted) << "nothing more to compile";
  EXPECT_EQ(after_split.generic_launches, split_loaded.generic_launches);
  EXPECT_EQ(after_split.sync_waits, split_loaded.sync_waits);
  EXPECT_LE(distance(generic, ref), tolerance(DType::f16)) << "generic (seed " << seed_ << ")";
  EXPECT_LE(distance(plain, ref), tolerance(DType::f16)) << "plain (seed " << seed_ << ")";
  EXPECT_LE(distance(split, ref), tolerance(DType::f16)) << "split (seed " << seed_ << ")";
  EXPECT_LE(distance(split, plain), 2 * tolerance(DType::f16)) << "split vs plain";
}

// Inside a capture `async` waits for the specialized kernel (no generic launch recorded); `generic`
// launches the generic kernel there too. Both graphs replay to the reference.
TEST_F(JitConv2dGpu, CaptureWaitsForTheSpecializedKernel) {
  const Problem p(kCases[1], DType::f16, rng_);
  p.run(p.epilogue(), JitPolicy::generic);  // (the generic module loaded eagerly, as an application's warm-up)
  Stream stream;
  for (JitPolicy policy : {JitPolicy::async, JitPolicy::generic}) {
    const double scale = fresh_scale();  // (a variant of its own for each policy)
    const ops::Op epilogue = p.epilogue(scale);
    const std::vector<double> ref = p.reference(scale);
    const Device y = p.output();
    const JitStats before = jit_stats();
    Graph graph = Graph::capture(
        stream.get(), [&] { p.call(y.view, epilogue, policy, stream.get()); }, CaptureMode::global);
    const JitStats after = jit_stats();
    if (policy == JitPolicy::async) {
      EXPECT_EQ(after.generic_launches, before.generic_launches) << "a capture waits for the specialized kernel";
      EXPECT_EQ(after.sync_waits, before.sync_waits + 1);
      EXPECT_EQ(after.submitted, before.submitted);
    } else {
      EXPECT_EQ(after.generic_launches, before.generic_launches + 1) << "generic inside a capture too";
    }
    graph.launch(stream.get());
    stream.synchronize();
    EXPECT_LE(distance(p.read(y), ref), tolerance(DType::f16)) << to_string(policy);
  }
}

// An expression epilogue has no generic form: it compiles under every policy, generic included.
// `generic` inside a capture records the generic kernel's workspace with it: the gathered form's
// packed weight (the stem case of many tiles: the pack kernel between the workspace's allocation
// and free nodes) and split K (512 channels on 7²: its counters' memset); and the wide tiling,
// launched with dynamic shared memory, whole and split. Each graph replays twice, the output
// poisoned before each, to the reference.
TEST_F(JitConv2dGpu, GenericCaptureRecordsItsWorkspace) {
  const Case* const cases[] = {&kCases[std::size(kCases) - 1], &kCases[13], &kCases[std::size(kCases) - 2],
                               &kCases[std::size(kCases) - 3]};
  ASSERT_EQ(kCases[13].cin, 512);
  ASSERT_EQ(kCases[std::size(kCases) - 2].cout, 192);
  ASSERT_EQ(kCases[std::size(kCases) - 3].cout, 384);
  ASSERT_EQ(kCases[std::size(kCases) - 1].k, 7);
  Stream stream;
  for (const Case* c : cases) {
    const Problem p(*c, DType::f16, rng_);
    p.run(p.epilogue(), JitPolicy::generic);  // (the generic module loaded before the capture)
    const double scale = fresh_scale();
    const ops::Op epilogue = p.epilogue(scale);
    const std::vector<double> ref = p.reference(scale);
    Device y = p.output();
    const JitStats before = jit_stats();
    Graph graph = Graph::capture(
        stream.get(), [&] { p.call(y.view, epilogue, JitPolicy::generic, stream.get()); }, CaptureMode::global);
    EXPECT_EQ(jit_stats().generic_launches, before.generic_launches + 1) << describe(*c, DType::f16);
    const std::vector<unsigned char> poison(p.conv.size() * 2, 0xFF);
    for (int replay = 0; replay < 2; ++replay) {
      y.buffer.copy_from_host(poison.data(), poison.size());
      graph.launch(stream.get());
      stream.synchronize();
      EXPECT_LE(distance(p.read(y), ref), tolerance(DType::f16))
          << describe(*c, DType::f16) << " replay " << replay << " (seed " << seed_ << ")";
    }
  }
}

TEST_F(JitConv2dGpu, ExpressionEpiloguesCompileUnderEveryPolicy) {
  Case c = kCases[0];
  c.epilogue = &kIdentity;
  const Problem p(c, DType::f32, rng_);
  const double scale = fresh_scale();
  const ops::Op epilogue = ops::Op::expr("x * " + exact(scale));
  const JitStats before = jit_stats();
  const std::vector<double> got = p.run(epilogue, JitPolicy::generic);
  const JitStats after = jit_stats();
  EXPECT_EQ(after.generic_launches, before.generic_launches);
  EXPECT_EQ(after.sync_waits, before.sync_waits + 1);
  EXPECT_LE(distance(got, p.reference(scale)), 1e-5);
}

}  // namespace
}  // namespace cuinline
