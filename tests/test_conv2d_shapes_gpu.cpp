// conv2d on random valid shapes (non-square filters and images, stride, padding, dilation, bias or
// not, a residual or not, each precision) against a float64 CPU reference, outputs poisoned first:
// relative L2 error <= 1e-5 for fp32, <= 5e-5 for tf32x3, <= 5e-3 for tf32; and the C API's conv2d
// entry point against the C++ call. Skips without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cuinline/conv2d.hpp>
#include <cuinline/cuinline.h>
#include <cuinline/driver.hpp>
#include <random>
#include <vector>

#include "test_support.hpp"

namespace {

using namespace cuinline;
using namespace cuinline::ops;

struct Shape {
  int n, cin, h, w, cout, kh, kw;
  Conv2dParams p;
  bool bias;
  bool residual = false;
};

double rel_l2(const Shape& s, const std::vector<float>& x, const std::vector<float>& wt, const std::vector<float>& b,
              const std::vector<float>& r, const std::vector<float>& y, double slope) {
  const int oh = static_cast<int>(conv2d_out_extent(s.h, s.kh, s.p.stride_h, s.p.pad_h, s.p.dilation_h));
  const int ow = static_cast<int>(conv2d_out_extent(s.w, s.kw, s.p.stride_w, s.p.pad_w, s.p.dilation_w));
  double num = 0, den = 0;
  for (int n = 0; n < s.n; ++n)
    for (int co = 0; co < s.cout; ++co)
      for (int oy = 0; oy < oh; ++oy)
        for (int ox = 0; ox < ow; ++ox) {
          double acc = s.bias ? b[co] : 0.0;
          for (int ci = 0; ci < s.cin; ++ci)
            for (int ky = 0; ky < s.kh; ++ky) {
              const int iy = oy * s.p.stride_h - s.p.pad_h + ky * s.p.dilation_h;
              if (iy < 0 || iy >= s.h) continue;
              for (int kx = 0; kx < s.kw; ++kx) {
                const int ix = ox * s.p.stride_w - s.p.pad_w + kx * s.p.dilation_w;
                if (ix < 0 || ix >= s.w) continue;
                acc += static_cast<double>(x[((static_cast<std::size_t>(n) * s.cin + ci) * s.h + iy) * s.w + ix]) *
                       wt[((static_cast<std::size_t>(co) * s.cin + ci) * s.kh + ky) * s.kw + kx];
              }
            }
          const std::size_t at = ((static_cast<std::size_t>(n) * s.cout + co) * oh + oy) * ow + ox;
          if (s.residual) acc += r[at];
          const double ref = acc > 0 ? acc : acc * slope;
          const double got = y[at];
          num += (got - ref) * (got - ref);
          den += ref * ref;
        }
  return std::sqrt(num / (den > 0 ? den : 1));
}

// One call of `s` in `prec` on fresh normal data (inputs, bias, residual), the output poisoned
// first; its relative L2 error against the float64 reference (NaN where an output was not written).
double run_against_float64(const Shape& s, Conv2dPrecision prec, std::mt19937_64& rng, const Stream& stream) {
  const int oh = static_cast<int>(conv2d_out_extent(s.h, s.kh, s.p.stride_h, s.p.pad_h, s.p.dilation_h));
  const int ow = static_cast<int>(conv2d_out_extent(s.w, s.kw, s.p.stride_w, s.p.pad_w, s.p.dilation_w));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(std::size_t(s.n) * s.cin * s.h * s.w), wt(std::size_t(s.cout) * s.cin * s.kh * s.kw),
      b(s.cout), y(std::size_t(s.n) * s.cout * oh * ow), r(y.size());
  for (auto* v : {&x, &wt, &b, &r})
    for (float& f : *v) f = normal(rng);
  DeviceBuffer dx(x.size() * 4), dw(wt.size() * 4), db(b.size() * 4), dy(y.size() * 4), dr(r.size() * 4);
  dr.copy_from_host(r.data(), r.size() * 4);
  dx.copy_from_host(x.data(), x.size() * 4);
  dw.copy_from_host(wt.data(), wt.size() * 4);
  db.copy_from_host(b.data(), b.size() * 4);
  dy.fill_u32(0x7fbadbadu);
  const auto view = [](const DeviceBuffer& d, std::initializer_list<std::int64_t> shape) {
    return TensorView::contiguous(reinterpret_cast<void*>(d.ptr()), DType::f32, shape);
  };
  conv2d(view(dx, {s.n, s.cin, s.h, s.w}), view(dw, {s.cout, s.cin, s.kh, s.kw}),
         s.bias ? view(db, {s.cout}) : TensorView{}, view(dy, {s.n, s.cout, oh, ow}), s.p,
         div_leaky_relu_epilogue(1.0, 0.125), stream, prec,
         s.residual ? view(dr, {s.n, s.cout, oh, ow}) : TensorView{});
  stream.synchronize();
  dy.copy_to_host(y.data(), y.size() * 4);
  return rel_l2(s, x, wt, b, r, y, 0.125);
}

TEST(Conv2dShapesGpu, RandomShapesAgainstAFloat64Reference) {
  if (device_count() == 0) GTEST_SKIP() << "no GPU";
  const std::uint64_t seed = test::fresh_seed();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> k(1, 11), st(1, 4), pad(0, 5), dil(1, 4), coin(0, 1);
  std::vector<Shape> shapes = {
      {4, 16, 40, 40, 48, 3, 5, [] { Conv2dParams p; p.pad_h = 1; p.pad_w = 2; return p; }(), true},
      // ResNet's basic block: relu(conv(x) + b + residual), one of each kernel family's shapes.
      {2, 64, 56, 56, 64, 3, 3, Conv2dParams::square(1, 1), true, true},
      {2, 8, 34, 34, 32, 3, 3, Conv2dParams::square(1, 1), true, true}};
  while (shapes.size() < 16) {
    Shape s{1 + coin(rng), 1 + static_cast<int>(rng() % 40), 1 + static_cast<int>(rng() % 70),
            1 + static_cast<int>(rng() % 70), 1 + static_cast<int>(rng() % 70), k(rng), k(rng), {}, coin(rng) == 1,
            coin(rng) == 1};
    s.p.stride_h = st(rng), s.p.stride_w = st(rng), s.p.pad_h = pad(rng), s.p.pad_w = pad(rng);
    s.p.dilation_h = coin(rng) ? 1 : dil(rng), s.p.dilation_w = coin(rng) ? 1 : dil(rng);
    const auto oh = conv2d_out_extent(s.h, s.kh, s.p.stride_h, s.p.pad_h, s.p.dilation_h);
    const auto ow = conv2d_out_extent(s.w, s.kw, s.p.stride_w, s.p.pad_w, s.p.dilation_w);
    if (oh <= 0 || ow <= 0 || double(s.n) * s.cout * oh * ow * s.cin * s.kh * s.kw > 6e7) continue;
    shapes.push_back(s);
  }
  Stream stream;
  for (const Shape& s : shapes) {
    for (Conv2dPrecision prec : {Conv2dPrecision::fp32, Conv2dPrecision::tf32, Conv2dPrecision::tf32x3}) {
      const Conv2dVariant v = make_conv2d_variant(s.cin, s.h, s.w, s.cout, s.kh, s.kw, s.p, s.bias, Op::relu());
      SCOPED_TRACE(v.name() + " " + to_string(prec) + " batch " + std::to_string(s.n) +
                   (s.residual ? " residual" : ""));
      const double err = run_against_float64(s, prec, rng, stream);
      // fp32: 1e-5; 3xTF32 (fp32 emulated from TF32 parts): 1.3-1.5e-5 measured on long reductions, so
      // 5e-5; TF32: 5e-3. NaN (an unwritten output) fails too.
      EXPECT_LE(err, prec == Conv2dPrecision::tf32 ? 5e-3 : prec == Conv2dPrecision::tf32x3 ? 5e-5 : 1e-5);
    }
  }
}

}  // namespace

namespace {

// 3xTF32 (Conv2dPrecision::tf32x3) keeps fp32's accuracy on long reductions (Cin x KH x KW of
// 4608-14448). The tensor cores' fp32 accumulation truncates at every mma: chained into the running
// sum, 3xTF32's error grew with the reduction (rel L2 5.6e-5-1.3e-4 at these lengths, PyTorch's fp32
// conv 1-3e-6, found by bench/conv2d_fuzz.py); each k8 step's products are now summed from zero
// and added to the running sum in fp32. The limit is fp32's, 1e-5, for both precisions.
TEST(Conv2dShapesGpu, Tf32x3KeepsFp32AccuracyOnLongReductions) {
  if (device_count() == 0) GTEST_SKIP() << "no GPU";
  const std::uint64_t seed = test::fresh_seed();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  Conv2dParams wide;  // the fuzz's 7 x 8 filter, column stride 4, 4 columns of padding
  wide.stride_w = 4, wide.pad_w = 4;
  const std::vector<Shape> shapes = {{2, 1024, 7, 7, 64, 3, 3, Conv2dParams::square(1, 1), true},
                                     {2, 512, 14, 14, 32, 3, 3, Conv2dParams::square(1, 1), false, true},
                                     {1, 258, 57, 41, 17, 7, 8, wide, true}};
  Stream stream;
  for (const Shape& s : shapes) {
    for (Conv2dPrecision prec : {Conv2dPrecision::fp32, Conv2dPrecision::tf32x3}) {
      const Conv2dVariant v = make_conv2d_variant(s.cin, s.h, s.w, s.cout, s.kh, s.kw, s.p, s.bias, Op::relu());
      SCOPED_TRACE(v.name() + " " + to_string(prec));
      const double err = run_against_float64(s, prec, rng, stream);
      std::printf("%s %s: rel L2 %.3g\n", v.name().c_str(), to_string(prec), err);
      EXPECT_LE(err, 1e-5);  // NaN (an unwritten output) fails too
    }
  }
}

}  // namespace

namespace {

// The C API's entry point, cuinline_conv2d_run, and the older cuinline_conv2d_ex it replaces run the
// kernel the C++ call runs: the same bits, on a call that uses every field of the struct (bias,
// residual, a per-channel operand, groups, stride, padding, dilation, precision), and a call with
// every field left at its default (zero) value against the C++ call's defaults.
TEST(Conv2dShapesGpu, TheCEntryPointComputesWhatTheCppCallComputes) {
  if (device_count() == 0) GTEST_SKIP() << "no GPU";
  const std::uint64_t seed = test::fresh_seed();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const auto fresh = [&](std::size_t n) {
    std::vector<float> v(n);
    for (float& f : v) f = normal(rng);
    DeviceBuffer d(n * 4);
    d.copy_from_host(v.data(), n * 4);
    return d;
  };
  const std::int64_t n = 2, cin = 8, h = 13, w = 11, cout = 12, groups = 2;
  Conv2dParams p;
  p.stride_h = 1, p.stride_w = 2, p.pad_h = 1, p.pad_w = 2, p.dilation_h = 2;
  p.groups = static_cast<int>(groups);
  const std::int64_t oh = conv2d_out_extent(h, 3, p.stride_h, p.pad_h, p.dilation_h);
  const std::int64_t ow = conv2d_out_extent(w, 3, p.stride_w, p.pad_w, p.dilation_w);
  const std::int64_t ow1 = conv2d_out_extent(w, 3, 1, 0, 1), oh1 = conv2d_out_extent(h, 3, 1, 0, 1);
  DeviceBuffer x = fresh(n * cin * h * w), wg = fresh(cout * (cin / groups) * 9), w1 = fresh(cout * cin * 9),
               b = fresh(cout), r = fresh(n * cout * oh * ow), m = fresh(cout);
  const auto view = [](const DeviceBuffer& d, std::initializer_list<std::int64_t> shape) {
    return TensorView::contiguous(reinterpret_cast<void*>(d.ptr()), DType::f32, shape);
  };
  // The C descriptors of the same buffers (contiguous: strides NULL).
  const std::int64_t xs[4] = {n, cin, h, w}, wgs[4] = {cout, cin / groups, 3, 3}, w1s[4] = {cout, cin, 3, 3},
                     bs[1] = {cout}, ys[4] = {n, cout, oh, ow}, y1s[4] = {n, cout, oh1, ow1};
  const auto ctensor = [](const DeviceBuffer& d, int ndim, const std::int64_t* shape) {
    return cuinline_tensor{reinterpret_cast<void*>(d.ptr()), CUINLINE_F32, ndim, shape, nullptr};
  };
  const cuinline_tensor cx = ctensor(x, 4, xs), cwg = ctensor(wg, 4, wgs), cw1 = ctensor(w1, 4, w1s),
                        cb = ctensor(b, 1, bs), cr = ctensor(r, 4, ys), cm = ctensor(m, 1, bs);
  const Op epilogue = parse_op("relu|mul(in1)");
  Stream stream;
  const auto result = [&](const DeviceBuffer& y) {
    stream.synchronize();
    std::vector<std::uint32_t> bits(y.bytes() / 4);
    y.copy_to_host(bits.data(), y.bytes());
    return bits;
  };
  const auto poisoned = [](std::size_t elements) {
    DeviceBuffer y(elements * 4);
    y.fill_u32(0x7fbadbadu);
    return y;
  };

  DeviceBuffer want = poisoned(n * cout * oh * ow), got = poisoned(n * cout * oh * ow),
               old = poisoned(n * cout * oh * ow);
  conv2d(view(x, {n, cin, h, w}), view(wg, {cout, cin / groups, 3, 3}), view(b, {cout}),
         view(want, {n, cout, oh, ow}), p, epilogue, stream, Conv2dPrecision::tf32x3,
         view(r, {n, cout, oh, ow}), {view(m, {cout})});
  const int stride[2] = {p.stride_h, p.stride_w}, padding[2] = {p.pad_h, p.pad_w},
            dilation[2] = {p.dilation_h, p.dilation_w};
  const cuinline_tensor cgot = ctensor(got, 4, ys), cold = ctensor(old, 4, ys);
  cuinline_conv2d_params cp = CUINLINE_CONV2D_PARAMS_INIT;
  cp.input = &cx, cp.weight = &cwg, cp.output = &cgot, cp.bias = &cb, cp.residual = &cr;
  cp.stride = stride, cp.padding = padding, cp.dilation = dilation, cp.groups = static_cast<int>(groups);
  cp.channel_operands = &cm, cp.num_channel_operands = 1;
  cp.epilogue = "relu|mul(in1)", cp.precision = "tf32x3";
  cp.stream = stream.get();
  ASSERT_EQ(cuinline_conv2d_run(&cp), CUINLINE_SUCCESS) << cuinline_last_error();
  ASSERT_EQ(cuinline_conv2d_ex(&cx, &cwg, &cb, &cr, &cold, stride, padding, dilation,
                               static_cast<int>(groups), "relu|mul(in1)", &cm, 1, "tf32x3", stream.get()),
            CUINLINE_SUCCESS)
      << cuinline_last_error();
  const std::vector<std::uint32_t> expected = result(want);
  EXPECT_EQ(std::count(expected.begin(), expected.end(), 0x7fbadbadu), 0) << "every output written";
  EXPECT_EQ(result(got), expected) << "cuinline_conv2d_run";
  EXPECT_EQ(result(old), expected) << "cuinline_conv2d_ex";

  // Every optional field at zero: no bias, residual or operands, stride / dilation 1, no padding,
  // groups 1, no epilogue, fp32, the legacy default stream.
  DeviceBuffer want1 = poisoned(n * cout * oh1 * ow1), got1 = poisoned(n * cout * oh1 * ow1);
  conv2d(view(x, {n, cin, h, w}), view(w1, {cout, cin, 3, 3}), {}, view(want1, {n, cout, oh1, ow1}), {},
         Op::chain({}), nullptr);
  const cuinline_tensor cgot1 = ctensor(got1, 4, y1s);
  cuinline_conv2d_params defaults;
  std::memset(&defaults, 0, sizeof defaults);
  defaults.size = sizeof defaults;
  defaults.input = &cx, defaults.weight = &cw1, defaults.output = &cgot1;
  ASSERT_EQ(cuinline_conv2d_run(&defaults), CUINLINE_SUCCESS) << cuinline_last_error();
  const std::vector<std::uint32_t> expected1 = result(want1);
  EXPECT_EQ(std::count(expected1.begin(), expected1.end(), 0x7fbadbadu), 0) << "every output written";
  EXPECT_EQ(result(got1), expected1) << "cuinline_conv2d_run with its defaults";
}

}  // namespace
