// conv2d in f16, bf16 and f32 with NCHW and channels-last (NHWC) tensors on random valid shapes
// (grouped and depthwise ones among them),
// against a float64 CPU reference computed from the inputs as stored (rounded to the dtype), outputs
// poisoned (NaN in every dtype) before each launch (f16 and bf16 on the tensor-core kernel); the
// seed, ResNet-like and UNet-like shapes on it, sampled; and the special values (rounding ties, fp32
// intermediate sums beyond f16's range, NaN and infinity) compared bit for bit. Skips without a
// device.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <cuinline/conv2d.hpp>
#include <cuinline/driver.hpp>
#include <cuinline/jit.hpp>
#include <cuinline/kernel_cache.hpp>
#include <cuinline/log.hpp>
#include <cuinline/module.hpp>
#include <iterator>
#include <limits>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "conv2d_past_limits.hpp"
#include "elementwise_reference.hpp"
#include "ops/conv2d/conv2d_internal.hpp"
#include "ops/conv2d/select.hpp"
#include "ops/conv2d/tiling.hpp"
#include "ops/conv2d/tuning.hpp"
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

// A host tensor of logical shape [n, c, h, w]: the values as the device reads them (already rounded
// to the dtype) and its storage in a layout.
struct HostTensor {
  std::int64_t n = 0, c = 0, h = 0, w = 0;
  DType dtype = DType::f32;
  bool nhwc = false;
  std::vector<double> values;  // logical NCHW order

  std::size_t size() const { return values.size(); }
  std::int64_t offset(std::int64_t i, std::int64_t ch, std::int64_t y, std::int64_t x) const {
    return nhwc ? ((i * h + y) * w + x) * c + ch : ((i * c + ch) * h + y) * w + x;
  }
  std::size_t bytes() const { return size() * dtype_size(dtype); }
  // The strides of the view ([N, C, H, W] order, elements).
  std::vector<std::int64_t> strides() const {
    return nhwc ? std::vector<std::int64_t>{h * w * c, 1, w * c, c}
                : std::vector<std::int64_t>{c * h * w, h * w, w, 1};
  }
  std::vector<unsigned char> storage() const {
    std::vector<unsigned char> out(bytes());
    const std::size_t es = dtype_size(dtype);
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t ch = 0; ch < c; ++ch)
        for (std::int64_t y = 0; y < h; ++y)
          for (std::int64_t x = 0; x < w; ++x) {
            const std::uint64_t bits = test::bits_of(dtype, values[((i * c + ch) * h + y) * w + x]);
            std::memcpy(out.data() + offset(i, ch, y, x) * es, &bits, es);  // little-endian
          }
    return out;
  }
  // Element (i, ch, y, x) of a device copy in this layout, widened to double.
  double read(const std::vector<unsigned char>& raw, std::int64_t i, std::int64_t ch, std::int64_t y,
              std::int64_t x) const {
    std::uint64_t bits = 0;
    const std::size_t es = dtype_size(dtype);
    std::memcpy(&bits, raw.data() + offset(i, ch, y, x) * es, es);
    return test::value_of(dtype, bits);
  }
};

HostTensor random_tensor(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, DType dt, bool nhwc,
                         std::mt19937_64& rng) {
  HostTensor t{n, c, h, w, dt, nhwc, {}};
  std::normal_distribution<float> normal(0.0f, 1.0f);
  t.values.resize(static_cast<std::size_t>(n * c * h * w));
  // Rounded to the dtype first: the reference sees exactly what the kernel reads. (f64: every
  // mantissa bit drawn.)
  std::normal_distribution<double> normal64(0.0, 1.0);
  for (double& v : t.values) {
    v = dt == DType::f64 ? normal64(rng) : test::value_of(dt, test::bits_of(dt, normal(rng)));
  }
  return t;
}

struct DeviceCopy {
  DeviceBuffer buffer;
  TensorView view;
};

// `shift`: the tensor starts that many bytes into its buffer (0: the allocation's alignment).
DeviceCopy upload(const HostTensor& t, std::size_t shift = 0) {
  DeviceCopy d{DeviceBuffer((t.bytes() + shift + 3) / 4 * 4), {}};
  const std::vector<unsigned char> raw = t.storage();
  d.buffer.copy_from_host(raw.data(), raw.size(), shift);
  const auto s = t.strides();
  d.view = TensorView::strided(reinterpret_cast<void*>(d.buffer.ptr() + shift), t.dtype, {t.n, t.c, t.h, t.w},
                               {s[0], s[1], s[2], s[3]});
  return d;
}

// conv + bias [+ residual] at one output, in float64 (before the epilogue).
double conv_value(const Shape& s, const HostTensor& x, const HostTensor& wt, const HostTensor& b,
                  const HostTensor& r, int n, int co, int oy, int ox) {
  double acc = s.bias ? b.values[co] : 0.0;
  // F.conv2d's groups: output channel co reads the input channels of its group; the weight is
  // [cout][cin / groups][kh][kw].
  const int cin_g = s.cin / s.p.groups, group = co / (s.cout / s.p.groups);
  for (int cl = 0; cl < cin_g; ++cl)
    for (int ky = 0; ky < s.kh; ++ky) {
      const int ci = group * cin_g + cl;
      const int iy = oy * s.p.stride_h - s.p.pad_h + ky * s.p.dilation_h;
      if (iy < 0 || iy >= s.h) continue;
      for (int kx = 0; kx < s.kw; ++kx) {
        const int ix = ox * s.p.stride_w - s.p.pad_w + kx * s.p.dilation_w;
        if (ix < 0 || ix >= s.w) continue;
        acc += x.values[((std::size_t(n) * s.cin + ci) * s.h + iy) * s.w + ix] *
               wt.values[((std::size_t(co) * cin_g + cl) * s.kh + ky) * s.kw + kx];
      }
    }
  const int oh = static_cast<int>(r.h), ow = static_cast<int>(r.w);
  if (s.residual) acc += r.values[((std::size_t(n) * s.cout + co) * oh + oy) * ow + ox];
  return acc;
}

// relu-like epilogue of the tests: div(1) | leaky_relu(0.125).
double reference(const Shape& s, const HostTensor& x, const HostTensor& wt, const HostTensor& b,
                 const HostTensor& r, int n, int co, int oy, int ox) {
  const double acc = conv_value(s, x, wt, b, r, n, co, oy, ox);
  return acc > 0 ? acc : acc * 0.125;
}

bool hmma_disabled() {
  const char* e = std::getenv("CUINLINE_CONV2D_HMMA");
  return e != nullptr && std::string(e) == "0";
}

// The target calls on this process's device plan for (Conv2dTarget: the device's, or
// CUINLINE_CONV2D_TARGET's), and the tiling a call of v runs there.
Conv2dTarget device_target() {
  return conv2d_variant_for_device(Conv2dVariant{}, current_device()).target;
}
Conv2dTiling planned(const Conv2dVariant& v) {
  return conv2d_tiling(conv2d_variant_for_device(v, current_device()));
}
// The split-K form's tiling of v on this device (split_k: its most slices), where v has one.
std::optional<HmmaTiling> planned_split(const Conv2dVariant& v) {
  const Conv2dVariant d = conv2d_variant_for_device(v, current_device());
  return conv2d_impl::split_tiling_of(conv2d_impl::conv2d_algo(d), d);
}

// Whether the halo form is switched off (CUINLINE_CONV2D_HMMA, _WGMMA or _HALO = 0), or not planned
// for this device's target (sm90 only).
bool halo_disabled() {
  for (const char* name : {"CUINLINE_CONV2D_HMMA", "CUINLINE_CONV2D_WGMMA", "CUINLINE_CONV2D_HALO"}) {
    const char* e = std::getenv(name);
    if (e != nullptr && std::string(e) == "0") return true;
  }
  return device_target() != Conv2dTarget::sm90;
}

// Relative L2 error allowed. The kernel sums exact fp32 products of the stored values in fp32 (about
// 1e-7 relative), then rounds each output once to the dtype: a relative error of at most 2^-11
// (f16) or 2^-8 (bf16) per element, about a third of that in RMS for uniformly spread mantissas
// (f16 ~1.6e-4, bf16 ~1.3e-3). The bounds leave ~10x room for accumulation-order effects on
// cancelling sums (outputs near zero weigh little in the L2 norm) and catch any second rounding of
// the sums to the dtype (a f16 or bf16 accumulator on reductions of hundreds of terms is well above).
// f64 sums in double: ~1e-16 a term, in another order than the reference's.
double tolerance(DType dt) {
  return dt == DType::f16 ? 2e-3 : dt == DType::bf16 ? 1.6e-2 : dt == DType::f64 ? 1e-12 : 1e-5;
}

// The output of a conv2d call on dy (y's shape and layout, out_shift bytes into its buffer) against
// the float64 reference: every output written (a NaN fails: outputs are poisoned first), the
// relative L2 error within tolerance(y.dtype).
void expect_matches_reference(const Shape& s, const HostTensor& x, const HostTensor& wt, const HostTensor& b,
                              const HostTensor& y, const DeviceCopy& dy, std::size_t out_shift, const std::string& name) {
  std::vector<unsigned char> raw(y.bytes() + out_shift);
  dy.buffer.copy_to_host(raw.data(), raw.size());
  raw.erase(raw.begin(), raw.begin() + static_cast<std::ptrdiff_t>(out_shift));
  double num = 0, den = 0;
  for (int n = 0; n < s.n; ++n)
    for (int co = 0; co < s.cout; ++co)
      for (int oy = 0; oy < y.h; ++oy)
        for (int ox = 0; ox < y.w; ++ox) {
          const double ref = reference(s, x, wt, b, y, n, co, oy, ox);
          const double got = y.read(raw, n, co, oy, ox);
          ASSERT_FALSE(std::isnan(got)) << "unwritten: channel " << co << " (" << oy << ", " << ox << ")";
          num += (got - ref) * (got - ref);
          den += ref * ref;
        }
  const double err = std::sqrt(num / (den > 0 ? den : 1));
  EXPECT_LE(err, tolerance(y.dtype));
  std::printf("  %-100s rel L2 %.2e\n", name.c_str(), err);
}

// The relative L2 error of the output copied back from dy (y's shape and layout, out_shift bytes into
// its buffer) against the float64 reference (the residual, where the shape has one, from r); NaN
// where an output was left unwritten (outputs are poisoned first). `raw`, where given, gets the
// output's bytes.
double output_error(const Shape& s, const HostTensor& x, const HostTensor& wt, const HostTensor& b,
                    const HostTensor& r, const HostTensor& y, const DeviceCopy& dy, std::size_t out_shift = 0,
                    std::vector<unsigned char>* raw_out = nullptr) {
  std::vector<unsigned char> raw(y.bytes() + out_shift);
  dy.buffer.copy_to_host(raw.data(), raw.size());
  raw.erase(raw.begin(), raw.begin() + static_cast<std::ptrdiff_t>(out_shift));
  if (raw_out != nullptr) *raw_out = raw;
  double num = 0, den = 0;
  for (int n = 0; n < s.n; ++n)
    for (int co = 0; co < s.cout; ++co)
      for (int oy = 0; oy < y.h; ++oy)
        for (int ox = 0; ox < y.w; ++ox) {
          const double ref = reference(s, x, wt, b, r, n, co, oy, ox);
          const double got = y.read(raw, n, co, oy, ox);
          num += (got - ref) * (got - ref);
          den += ref * ref;
        }
  return std::sqrt(num / (den > 0 ? den : 1));
}

TEST(Conv2dDtypesGpu, RandomShapesEveryDtypeAndLayout) {
  if (device_count() == 0) GTEST_SKIP() << "no GPU";
  const std::uint64_t seed = test::fresh_seed();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> k(1, 7), st(1, 3), pad(0, 3), dil(1, 3), coin(0, 1);
  std::vector<Shape> shapes = {
      {2, 16, 20, 20, 24, 3, 5, [] { Conv2dParams p; p.pad_h = 1; p.pad_w = 2; return p; }(), true, true},
      {1, 3, 33, 17, 9, 7, 7, Conv2dParams::square(2, 3), true, false},
      {2, 64, 14, 14, 32, 1, 1, Conv2dParams{}, false, true}};
  while (shapes.size() < 8) {
    Shape s{1 + coin(rng), 1 + static_cast<int>(rng() % 24), 1 + static_cast<int>(rng() % 40),
            1 + static_cast<int>(rng() % 40), 1 + static_cast<int>(rng() % 40), k(rng), k(rng), {},
            coin(rng) == 1, coin(rng) == 1};
    s.p.stride_h = st(rng), s.p.stride_w = st(rng), s.p.pad_h = pad(rng), s.p.pad_w = pad(rng);
    s.p.dilation_h = coin(rng) ? 1 : dil(rng), s.p.dilation_w = coin(rng) ? 1 : dil(rng);
    const auto oh = conv2d_out_extent(s.h, s.kh, s.p.stride_h, s.p.pad_h, s.p.dilation_h);
    const auto ow = conv2d_out_extent(s.w, s.kw, s.p.stride_w, s.p.pad_w, s.p.dilation_w);
    if (oh <= 0 || ow <= 0 || double(s.n) * s.cout * oh * ow * s.cin * s.kh * s.kw > 2e7) continue;
    shapes.push_back(s);
  }
  // Grouped and depthwise (F.conv2d's groups: the general kernel): MobileNet's depthwise, a
  // multiplier of 2, ResNeXt-like, and four random grouped shapes.
  auto grouped = [](int stride, int pad, int g) {
    Conv2dParams p = Conv2dParams::square(stride, pad);
    p.groups = g;
    return p;
  };
  shapes.push_back({4, 32, 28, 28, 32, 3, 3, grouped(1, 1, 32), true});
  shapes.push_back({2, 64, 14, 14, 128, 3, 3, grouped(1, 1, 8), false, true});
  shapes.push_back({2, 24, 19, 23, 48, 5, 5, grouped(2, 2, 24), true});
  // Depthwise, NCHW input: rows a thread (row-fast) with a dilated 3x5 filter, a row count that 8 does
  // not divide and a residual; and with a row stride of 3.
  Conv2dParams dilated = grouped(1, 0, 16);
  dilated.pad_h = 2, dilated.pad_w = 1, dilated.dilation_h = 2;
  shapes.push_back({2, 16, 37, 29, 32, 3, 5, dilated, true, true});
  shapes.push_back({3, 8, 40, 33, 8, 3, 3, grouped(3, 1, 8), false});
  // ConvNeXt's 7x7 depthwise (row-fast, 49 taps) and a 9x9 one (channel-fast with a channels-last
  // input, pixel-fast with NCHW).
  shapes.push_back({2, 32, 20, 20, 32, 7, 7, grouped(1, 3, 32), true});
  shapes.push_back({1, 16, 21, 18, 16, 9, 9, grouped(1, 4, 16), false, true});
  std::uniform_int_distribution<int> mult(1, 3), small_k(1, 5);
  while (shapes.size() < 19) {
    const int groups = 2 << (rng() % 3);  // 2, 4 or 8
    Shape s{1 + coin(rng), groups * (1 + static_cast<int>(rng() % 6)), 3 + static_cast<int>(rng() % 30),
            3 + static_cast<int>(rng() % 30), groups * mult(rng), small_k(rng), small_k(rng), grouped(1, 0, groups),
            coin(rng) == 1, coin(rng) == 1};
    s.p.stride_h = 1 + coin(rng), s.p.pad_h = pad(rng), s.p.pad_w = pad(rng), s.p.dilation_h = 1 + coin(rng);
    if (conv2d_out_extent(s.h, s.kh, s.p.stride_h, s.p.pad_h, s.p.dilation_h) <= 0 ||
        conv2d_out_extent(s.w, s.kw, s.p.stride_w, s.p.pad_w, s.p.dilation_w) <= 0) {
      continue;
    }
    shapes.push_back(s);
  }
  Stream stream;
  for (const Shape& s : shapes) {
    const int oh = static_cast<int>(conv2d_out_extent(s.h, s.kh, s.p.stride_h, s.p.pad_h, s.p.dilation_h));
    const int ow = static_cast<int>(conv2d_out_extent(s.w, s.kw, s.p.stride_w, s.p.pad_w, s.p.dilation_w));
    for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
      for (int layouts = 0; layouts < 4; ++layouts) {
        const bool in_nhwc = layouts & 1, out_nhwc = layouts & 2, w_nhwc = coin(rng) == 1;
        const HostTensor x = random_tensor(s.n, s.cin, s.h, s.w, dt, in_nhwc, rng);
        const HostTensor wt = random_tensor(s.cout, s.cin / s.p.groups, s.kh, s.kw, dt, w_nhwc, rng);
        const HostTensor b = random_tensor(1, s.cout, 1, 1, dt, false, rng);
        // The residual in the output's layout, or (a quarter of the calls) the other one: copied
        // into the output's layout first.
        const bool r_nhwc = rng() % 4 == 0 ? !out_nhwc : out_nhwc;
        const HostTensor r = random_tensor(s.n, s.cout, oh, ow, dt, r_nhwc, rng);
        HostTensor y{s.n, s.cout, oh, ow, dt, out_nhwc, {}};
        y.values.resize(r.size());
        DeviceCopy dx = upload(x), dw = upload(wt), db = upload(b), dr = upload(r), dy = upload(y);
        dy.buffer.fill_u32(0xffffffffu);  // NaN as f32, f16, bf16 and f64
        const TensorView bias = s.bias ? TensorView::contiguous(db.view.data, dt, {s.cout}) : TensorView{};
        const Conv2dVariant v = conv2d_variant_for(dx.view, dw.view, bias, dy.view, s.p,
                                                   div_leaky_relu_epilogue(1.0, 0.125), Conv2dPrecision::fp32,
                                                   s.residual ? dr.view : TensorView{});
        SCOPED_TRACE(v.name() + " batch " + std::to_string(s.n) +
                     (s.residual && r_nhwc != out_nhwc ? " residual in the other layout" : ""));
        EXPECT_EQ(v.dtype, dt);
        EXPECT_EQ(v.params.groups, s.p.groups);
        // f16 and bf16 run on tensor cores (conv2d_hmma.cuh) unless CUINLINE_CONV2D_HMMA=0, on sm_75 or
        // grouped (the general kernel).
        EXPECT_EQ(planned(v).half_mma(), (dt == DType::f16 || dt == DType::bf16) && !hmma_disabled() &&
                                           device_target() != Conv2dTarget::sm75 && s.p.groups == 1);
        if (dt == DType::f64) EXPECT_TRUE(planned(v).generic());
        // Where C, H or W is 1 both layouts describe the same addresses (NCHW is named then).
        if (s.cin > 1 && s.h * s.w > 1) {
          EXPECT_EQ(v.input_layout, in_nhwc ? Conv2dLayout::nhwc : Conv2dLayout::nchw);
        }
        conv2d(dx.view, dw.view, bias, dy.view, s.p, div_leaky_relu_epilogue(1.0, 0.125), stream,
               Conv2dPrecision::fp32, s.residual ? dr.view : TensorView{});
        stream.synchronize();
        EXPECT_LE(output_error(s, x, wt, b, r, y, dy), tolerance(dt));  // NaN (an unwritten output) fails too
      }
    }
  }
}

// One call of each kernel family, with a residual: f16 / bf16 on tensor cores (NCHW staged,
// channels-last), f32 direct and Winograd, tf32, a depthwise one on the general kernel.
struct FamilyCase {
  Shape s;
  DType dt;
  Conv2dPrecision prec;
};
std::vector<FamilyCase> kernel_family_cases() {
  Conv2dParams depthwise = Conv2dParams::square(1, 1);
  depthwise.groups = 32;
  return {{{2, 64, 20, 20, 96, 3, 3, Conv2dParams::square(1, 1), true, true}, DType::f16, Conv2dPrecision::fp32},
          {{2, 8, 40, 44, 32, 3, 3, Conv2dParams::square(1, 0), true, true}, DType::bf16, Conv2dPrecision::fp32},
          {{2, 8, 34, 34, 32, 3, 3, Conv2dParams::square(1, 1), true, true}, DType::f32, Conv2dPrecision::fp32},
          {{2, 24, 33, 31, 40, 5, 5, Conv2dParams::square(2, 2), false, true}, DType::f32, Conv2dPrecision::fp32},
          {{2, 32, 24, 24, 64, 3, 3, Conv2dParams::square(1, 1), true, true}, DType::f32, Conv2dPrecision::tf32},
          {{2, 32, 17, 19, 32, 3, 3, depthwise, true, true}, DType::f16, Conv2dPrecision::fp32}};
}

// A residual in the other layout than the output's (PyTorch's conv(x) + r takes either) is copied
// into the output's layout in a workspace first; the result equals, bit for bit, the call with the
// residual already in the output's layout — eagerly and captured (global mode, the variant's first
// call inside the capture, the workspace made there) and replayed on new data. Every kernel family:
// f16 / bf16 on tensor cores (NCHW staged, channels-last), f32 direct and Winograd, f32 channels-last
// between transposing copies, tf32, a depthwise one on the general kernel.
TEST(Conv2dDtypesGpu, ResidualInTheOtherLayoutEagerAndCaptured) {
  if (device_count() == 0) GTEST_SKIP() << "no GPU";
  const std::uint64_t seed = test::fresh_seed();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  const std::vector<FamilyCase> cases = kernel_family_cases();
  Stream stream;
  for (const FamilyCase& c : cases) {
    const Shape& s = c.s;
    const int oh = static_cast<int>(conv2d_out_extent(s.h, s.kh, s.p.stride_h, s.p.pad_h, s.p.dilation_h));
    const int ow = static_cast<int>(conv2d_out_extent(s.w, s.kw, s.p.stride_w, s.p.pad_w, s.p.dilation_w));
    for (bool out_nhwc : {false, true}) {
      const HostTensor x = random_tensor(s.n, s.cin, s.h, s.w, c.dt, out_nhwc, rng);
      const HostTensor wt = random_tensor(s.cout, s.cin / s.p.groups, s.kh, s.kw, c.dt, out_nhwc, rng);
      const HostTensor b = random_tensor(1, s.cout, 1, 1, c.dt, false, rng);
      const HostTensor r_same = random_tensor(s.n, s.cout, oh, ow, c.dt, out_nhwc, rng);
      HostTensor r_other = r_same;
      r_other.nhwc = !out_nhwc;
      HostTensor y{s.n, s.cout, oh, ow, c.dt, out_nhwc, {}};
      y.values.resize(r_same.size());
      DeviceCopy dx = upload(x), dw = upload(wt), db = upload(b), dsame = upload(r_same), dother = upload(r_other),
                 dy = upload(y), dref = upload(y);
      const TensorView bias = s.bias ? TensorView::contiguous(db.view.data, c.dt, {s.cout}) : TensorView{};
      const Op epi = Op::relu();
      const Conv2dVariant v = conv2d_variant_for(dx.view, dw.view, bias, dy.view, s.p, epi, c.prec, dother.view);
      SCOPED_TRACE(v.name() + " " + to_string(c.prec));
      const auto run = [&](const DeviceCopy& out, const DeviceCopy& r) {
        conv2d(dx.view, dw.view, bias, out.view, s.p, epi, stream, c.prec, r.view);
      };
      const auto bytes_of = [&](const DeviceCopy& d) {
        std::vector<unsigned char> raw(y.bytes());
        stream.synchronize();
        d.buffer.copy_to_host(raw.data(), raw.size());
        return raw;
      };
      dref.buffer.fill_u32(0xffffffffu);
      run(dref, dsame);
      const std::vector<unsigned char> want = bytes_of(dref);
      dy.buffer.fill_u32(0xffffffffu);
      run(dy, dother);
      EXPECT_EQ(bytes_of(dy), want) << "eager";
      // The conv itself is right (a sample against float64), so the equality above means something.
      double num = 0, den = 0;
      for (int k = 0; k < 512; ++k) {
        const int n = static_cast<int>(rng() % s.n), co = static_cast<int>(rng() % s.cout);
        const int oy = static_cast<int>(rng() % oh), ox = static_cast<int>(rng() % ow);
        const double ref = std::max(0.0, conv_value(s, x, wt, b, r_same, n, co, oy, ox));
        const double got = y.read(want, n, co, oy, ox);
        num += (got - ref) * (got - ref), den += ref * ref;
      }
      EXPECT_LE(std::sqrt(num / (den > 0 ? den : 1)), c.prec == Conv2dPrecision::tf32 ? 5e-3 : tolerance(c.dt));
      // Captured: new variants of this call compile inside the capture (a fresh kernel map is not
      // needed: the copy's workspace is made inside the capture either way).
      Graph g = Graph::capture(stream.get(), [&] { run(dy, dother); }, CaptureMode::global);
      for (int round = 0; round < 2; ++round) {
        HostTensor r_new = random_tensor(s.n, s.cout, oh, ow, c.dt, out_nhwc, rng);
        const std::vector<unsigned char> raw_same = r_new.storage();
        dsame.buffer.copy_from_host(raw_same.data(), raw_same.size());
        r_new.nhwc = !out_nhwc;
        const std::vector<unsigned char> raw_other = r_new.storage();
        dother.buffer.copy_from_host(raw_other.data(), raw_other.size());
        dref.buffer.fill_u32(0xffffffffu);
        run(dref, dsame);
        const std::vector<unsigned char> expect = bytes_of(dref);
        dy.buffer.fill_u32(0xffffffffu);
        stream.synchronize();
        g.launch(stream.get());
        EXPECT_EQ(bytes_of(dy), expect) << "replay " << round;
      }
    }
  }
}

// A device buffer of `elems` elements, every one `fill` (bits), with t's element (i, ch, y, x) at
// i * st[0] + ch * st[1] + y * st[2] + x * st[3]: a view with any strides (a slice, a step, a
// permutation; stride 0 where t's values repeat along that axis).
DeviceCopy upload_strided(const HostTensor& t, const std::array<std::int64_t, 4>& st, std::int64_t elems,
                          std::uint64_t fill) {
  const std::size_t es = dtype_size(t.dtype);
  std::vector<unsigned char> raw(static_cast<std::size_t>(elems) * es);
  for (std::int64_t k = 0; k < elems; ++k) std::memcpy(raw.data() + k * es, &fill, es);
  for (std::int64_t i = 0; i < t.n; ++i)
    for (std::int64_t ch = 0; ch < t.c; ++ch)
      for (std::int64_t y = 0; y < t.h; ++y)
        for (std::int64_t x = 0; x < t.w; ++x) {
          const std::uint64_t bits =
              test::from_op(t.dtype, static_cast<float>(t.values[((i * t.c + ch) * t.h + y) * t.w + x]));
          std::memcpy(raw.data() + (i * st[0] + ch * st[1] + y * st[2] + x * st[3]) * es, &bits, es);
        }
  DeviceCopy d{DeviceBuffer((raw.size() + 3) / 4 * 4), {}};
  d.buffer.copy_from_host(raw.data(), raw.size());
  d.view = TensorView::strided(reinterpret_cast<void*>(d.buffer.ptr()), t.dtype, {t.n, t.c, t.h, t.w},
                               {st[0], st[1], st[2], st[3]});
  return d;
}

// Tensors with strides that are neither layout — what F.conv2d takes (and makes contiguous first): an
// input stored [N][H][C][W] with 3 elements of padding a row, a weight with H and W swapped, a bias of
// every other element, a residual of one image expanded over the batch (stride 0), a per-channel
// operand of every third element, and an output that is a slice of more channels (gaps between its
// pixels). The call reads and writes them through compact copies: its output equals, bit for bit,
// the call on compact tensors in the layout the copies take (the same kernel), every byte outside
// the output view stays as it was, and a sample matches float64 — eagerly and captured (global
// mode, the copies' workspace made in the capture), replayed on new input.
TEST(Conv2dDtypesGpu, StridedViewsEagerAndCaptured) {
  if (device_count() == 0) GTEST_SKIP() << "no GPU";
  const std::uint64_t seed = test::fresh_seed();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  const std::vector<FamilyCase> cases = kernel_family_cases();
  Stream stream;
  const Op epi = parse_op("mul(in1)|relu");
  for (const FamilyCase& c : cases) {
    const Shape& s = c.s;
    const std::int64_t oh = conv2d_out_extent(s.h, s.kh, s.p.stride_h, s.p.pad_h, s.p.dilation_h);
    const std::int64_t ow = conv2d_out_extent(s.w, s.kw, s.p.stride_w, s.p.pad_w, s.p.dilation_w);
    const bool nhwc = c.dt != DType::f32;  // the layout of the copies
    const std::int64_t cin_g = s.cin / s.p.groups;
    HostTensor x = random_tensor(s.n, s.cin, s.h, s.w, c.dt, nhwc, rng);
    const HostTensor wt = random_tensor(s.cout, cin_g, s.kh, s.kw, c.dt, nhwc, rng);
    const HostTensor b = random_tensor(1, s.cout, 1, 1, c.dt, false, rng);
    const HostTensor m = random_tensor(1, s.cout, 1, 1, c.dt, false, rng);
    // One residual image, repeated over the batch.
    const HostTensor r1 = random_tensor(1, s.cout, oh, ow, c.dt, nhwc, rng);
    HostTensor r = r1;
    r.n = s.n;
    for (int i = 1; i < s.n; ++i) r.values.insert(r.values.end(), r1.values.begin(), r1.values.end());
    HostTensor y{s.n, s.cout, oh, ow, c.dt, nhwc, {}};
    y.values.resize(static_cast<std::size_t>(s.n * s.cout * oh * ow));
    // Compact tensors in the copies' layout.
    DeviceCopy dx = upload(x), dw = upload(wt), dr = upload(r), dref = upload(y);
    const DeviceCopy db = upload(b), dm = upload(m);
    const TensorView bias = TensorView::contiguous(db.view.data, c.dt, {s.cout});
    const TensorView mul = TensorView::contiguous(dm.view.data, c.dt, {s.cout, 1, 1});
    // Their strided twins.
    const std::int64_t wp = s.w + 3;
    const std::uint64_t nan_bits = c.dt == DType::f32 ? 0x7fc00000u : c.dt == DType::f16 ? 0x7e00u : 0x7fc0u;
    DeviceCopy sx = upload_strided(x, {s.h * s.cin * wp, wp, s.cin * wp, 1}, s.n * s.h * s.cin * wp, nan_bits);
    const DeviceCopy sw = upload_strided(wt, {cin_g * s.kh * s.kw, s.kh * s.kw, 1, s.kh}, wt.size(), nan_bits);
    const DeviceCopy sb_buf = upload_strided(b, {0, 2, 0, 0}, 2 * s.cout, nan_bits);
    const DeviceCopy sm_buf = upload_strided(m, {0, 3, 0, 0}, 3 * s.cout, nan_bits);
    DeviceCopy sr = upload_strided(r1, {0, oh * ow, ow, 1}, s.cout * oh * ow, nan_bits);
    sr.view.shape[0] = s.n;  // (stride 0 over the batch)
    const std::int64_t cp = s.cout + 5;
    const std::uint64_t poison = c.dt == DType::f32 ? 0xffc01234u : 0xfe12u;
    const std::int64_t y_elems = s.n * oh * ow * cp;
    DeviceCopy sy = upload_strided(y, {oh * ow * cp, 1, ow * cp, cp}, y_elems, poison);
    const TensorView sbias = TensorView::strided(sb_buf.view.data, c.dt, {s.cout}, {2});
    const TensorView smul = TensorView::strided(sm_buf.view.data, c.dt, {s.cout, 1, 1}, {3, 1, 1});
    const TensorView bias_used = s.bias ? bias : TensorView{}, sbias_used = s.bias ? sbias : TensorView{};
    const Conv2dVariant v = conv2d_variant_for(sx.view, sw.view, sbias_used, sy.view, s.p, epi, c.prec, sr.view, {smul});
    const Conv2dVariant vc = conv2d_variant_for(dx.view, dw.view, bias_used, dref.view, s.p, epi, c.prec, dr.view, {mul});
    ASSERT_TRUE(v == vc) << v.name() << " inputs_aligned " << v.inputs_aligned << " output_aligned " << v.output_aligned
                         << " target " << static_cast<int>(v.target) << "; compact: " << vc.name() << " inputs_aligned "
                         << vc.inputs_aligned << " output_aligned " << vc.output_aligned << " target "
                         << static_cast<int>(vc.target);
    SCOPED_TRACE(v.name() + " " + to_string(c.prec));
    const auto raw_of = [&](const DeviceCopy& d) {
      std::vector<unsigned char> raw(d.buffer.bytes());
      stream.synchronize();
      d.buffer.copy_to_host(raw.data(), raw.size());
      return raw;
    };
    const auto run_compact = [&] {
      dref.buffer.fill_u32(0xffffffffu);
      conv2d(dx.view, dw.view, bias_used, dref.view, s.p, epi, stream, c.prec, dr.view, {mul});
      return raw_of(dref);
    };
    const auto run_strided = [&] {
      conv2d(sx.view, sw.view, sbias_used, sy.view, s.p, epi, stream, c.prec, sr.view, {smul});
    };
    // The strided output's elements, gathered in the compact layout; and whether every byte outside
    // the view still holds the poison.
    const std::size_t es = dtype_size(c.dt);
    const auto gather = [&](const std::vector<unsigned char>& raw, bool& rest_kept) {
      std::vector<unsigned char> out(y.bytes());
      std::vector<char> in_view(static_cast<std::size_t>(y_elems), 0);
      for (std::int64_t i = 0; i < s.n; ++i)
        for (std::int64_t ch = 0; ch < s.cout; ++ch)
          for (std::int64_t yy = 0; yy < oh; ++yy)
            for (std::int64_t xx = 0; xx < ow; ++xx) {
              const std::int64_t at = i * sy.view.strides[0] + ch + (yy * ow + xx) * cp;
              in_view[at] = 1;
              std::memcpy(out.data() + y.offset(i, ch, yy, xx) * es, raw.data() + at * es, es);
            }
      rest_kept = true;
      for (std::size_t k = 0; k < in_view.size(); ++k) {
        if (!in_view[k] && std::memcmp(raw.data() + k * es, &poison, es) != 0) rest_kept = false;
      }
      return out;
    };
    const std::vector<unsigned char> want = run_compact();
    run_strided();
    bool kept = false;
    EXPECT_EQ(gather(raw_of(sy), kept), want) << "eager";
    EXPECT_TRUE(kept) << "eager: bytes outside the output view were written";
    // The compact call is right (a sample against float64), so the equality means something.
    double num = 0, den = 0;
    for (int k = 0; k < 512; ++k) {
      const int n = static_cast<int>(rng() % s.n), co = static_cast<int>(rng() % s.cout);
      const int oy = static_cast<int>(rng() % oh), ox = static_cast<int>(rng() % ow);
      const double ref = std::max(0.0, conv_value(s, x, wt, b, r, n, co, oy, ox) * m.values[co]);
      const double got = y.read(want, n, co, oy, ox);
      num += (got - ref) * (got - ref), den += ref * ref;
    }
    EXPECT_LE(std::sqrt(num / (den > 0 ? den : 1)), c.prec == Conv2dPrecision::tf32 ? 5e-3 : tolerance(c.dt));
    // Captured, then replayed on new input (both tensors rewritten with the same values).
    Graph g = Graph::capture(stream.get(), run_strided, CaptureMode::global);
    for (int round = 0; round < 2; ++round) {
      x = random_tensor(s.n, s.cin, s.h, s.w, c.dt, nhwc, rng);
      const std::vector<unsigned char> compact = x.storage();
      dx.buffer.copy_from_host(compact.data(), compact.size());
      const DeviceCopy fresh = upload_strided(x, {s.h * s.cin * wp, wp, s.cin * wp, 1}, s.n * s.h * s.cin * wp, nan_bits);
      std::vector<unsigned char> strided(static_cast<std::size_t>(s.n * s.h * s.cin * wp) * es);
      fresh.buffer.copy_to_host(strided.data(), strided.size());
      sx.buffer.copy_from_host(strided.data(), strided.size());
      const std::vector<unsigned char> expect = run_compact();
      std::vector<unsigned char> poisoned(static_cast<std::size_t>(y_elems) * es);
      for (std::size_t k = 0; k < poisoned.size() / es; ++k) std::memcpy(poisoned.data() + k * es, &poison, es);
      sy.buffer.copy_from_host(poisoned.data(), poisoned.size());
      stream.synchronize();
      g.launch(stream.get());
      EXPECT_EQ(gather(raw_of(sy), kept), expect) << "replay " << round;
      EXPECT_TRUE(kept) << "replay " << round << ": bytes outside the output view were written";
    }
  }
}

// A batch past the kernels' grid limit (kMaxConv2dBatch images a launch) runs as consecutive launches
// on slices of it: every output written (poisoned first), each against float64 — f16 channels-last
// and f32 NCHW, with a residual, 70001 images (the last slice a partial one).
TEST(Conv2dDtypesGpu, BatchesPastTheGridLimitRunInSlices) {
  if (device_count() == 0) GTEST_SKIP() << "no GPU";
  const std::uint64_t seed = test::fresh_seed();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  Stream stream;
  const Shape s{static_cast<int>(kMaxConv2dBatch) + 4466, 2, 5, 6, 3, 3, 3, Conv2dParams::square(1, 1), true, true};
  for (DType dt : {DType::f16, DType::f32}) {
    const bool nhwc = dt != DType::f32;
    SCOPED_TRACE(to_string(dt));
    const HostTensor x = random_tensor(s.n, s.cin, s.h, s.w, dt, nhwc, rng);
    const HostTensor wt = random_tensor(s.cout, s.cin, s.kh, s.kw, dt, nhwc, rng);
    const HostTensor b = random_tensor(1, s.cout, 1, 1, dt, false, rng);
    const HostTensor r = random_tensor(s.n, s.cout, s.h, s.w, dt, nhwc, rng);
    HostTensor y{s.n, s.cout, s.h, s.w, dt, nhwc, {}};
    y.values.resize(r.size());
    DeviceCopy dx = upload(x), dw = upload(wt), db = upload(b), dr = upload(r), dy = upload(y);
    dy.buffer.fill_u32(0xffffffffu);
    const Op epi = parse_op("div(1)|leaky_relu(0.125)");
    conv2d(dx.view, dw.view, TensorView::contiguous(db.view.data, dt, {s.cout}), dy.view, s.p, epi, stream,
           Conv2dPrecision::fp32, dr.view);
    std::vector<unsigned char> raw(y.bytes());
    stream.synchronize();
    dy.buffer.copy_to_host(raw.data(), raw.size());
    double num = 0, den = 0;
    std::int64_t unwritten = 0;
    for (int n = 0; n < s.n; ++n)
      for (int co = 0; co < s.cout; ++co)
        for (int oy = 0; oy < s.h; ++oy)
          for (int ox = 0; ox < s.w; ++ox) {
            const double got = y.read(raw, n, co, oy, ox), ref = reference(s, x, wt, b, r, n, co, oy, ox);
            if (std::isnan(got)) ++unwritten;
            num += (got - ref) * (got - ref), den += ref * ref;
          }
    EXPECT_EQ(unwritten, 0);
    EXPECT_LE(std::sqrt(num / den), tolerance(dt));
  }
}

// Output planes of at most 128 pixels with a long reduction over more than one tap (ResNet-50's
// 7 x 7 stage, smaller): f16 / bf16 on sm_90 take per-image tiles of one m64 tile (two an image
// for the 12 x 10 plane), f32 in TF32 batch tiles — a tile's 128 pixels span images: odd batches,
// so tiles end mid-image and the last runs past the batch — and a 1 x 1 layer beside them does not:
// NCHW (staged) and channels-last, a residual in some, against float64, every output written; one
// call captured in a CUDA graph and replayed on new data, equal bit for bit to the eager call.
TEST(Conv2dDtypesGpu, SmallPlanesRunOnSmallTiles) {
  if (device_count() == 0) GTEST_SKIP() << "no GPU";
  const std::uint64_t seed = test::fresh_seed();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  Stream stream;
  const std::vector<Shape> shapes = {{5, 128, 7, 7, 96, 3, 3, Conv2dParams::square(1, 1), true, true},
                                     {3, 512, 7, 7, 64, 1, 1, Conv2dParams{}, false, false},
                                     {4, 64, 5, 6, 40, 3, 3, Conv2dParams::square(1, 1), false, true},
                                     {3, 40, 12, 10, 130, 3, 3, Conv2dParams::square(1, 1), true, false}};
  const bool sm90 = device_target() == Conv2dTarget::sm90 && !hmma_disabled();
  for (const Shape& s : shapes) {
    const int oh = static_cast<int>(conv2d_out_extent(s.h, s.kh, s.p.stride_h, s.p.pad_h, s.p.dilation_h));
    const int ow = static_cast<int>(conv2d_out_extent(s.w, s.kw, s.p.stride_w, s.p.pad_w, s.p.dilation_w));
    for (DType dt : {DType::f16, DType::bf16, DType::f32}) {
      const Conv2dPrecision prec = dt == DType::f32 ? Conv2dPrecision::tf32 : Conv2dPrecision::fp32;
      for (bool nhwc : {false, true}) {
        const HostTensor x = random_tensor(s.n, s.cin, s.h, s.w, dt, nhwc, rng);
        const HostTensor wt = random_tensor(s.cout, s.cin, s.kh, s.kw, dt, nhwc, rng);
        const HostTensor b = random_tensor(1, s.cout, 1, 1, dt, false, rng);
        const HostTensor r = random_tensor(s.n, s.cout, oh, ow, dt, nhwc, rng);
        HostTensor y{s.n, s.cout, oh, ow, dt, nhwc, {}};
        y.values.resize(r.size());
        DeviceCopy dx = upload(x), dw = upload(wt), db = upload(b), dr = upload(r), dy = upload(y);
        dy.buffer.fill_u32(0xffffffffu);
        const TensorView bias = s.bias ? TensorView::contiguous(db.view.data, dt, {s.cout}) : TensorView{};
        const TensorView res = s.residual ? dr.view : TensorView{};
        const Op epi = div_leaky_relu_epilogue(1.0, 0.125);
        const Conv2dVariant v = conv2d_variant_for(dx.view, dw.view, bias, dy.view, s.p, epi, prec, res);
        SCOPED_TRACE(v.name() + " " + to_string(prec) + " batch " + std::to_string(s.n));
        const Conv2dTiling t = planned(v);
        // f16 / bf16: one m64 tile a block on the cp.async wgmma tiling — channels-last, or NCHW
        // staged (by default from 64 input channels; fewer are gathered from NCHW as laid out;
        // CUINLINE_CONV2D_STAGE=1, the staged. run, stages them all). f32: batch tiles where TF32
        // runs on wgmma.
        if (sm90 && s.kh * s.kw > 1 && dt != DType::f32) {
          const bool staged = t.staged();
          EXPECT_FALSE(t.batch_tiles());
          if (nhwc || staged) EXPECT_EQ(t.as_hmma().tile_cols, 64);
          if (!nhwc && std::getenv("CUINLINE_CONV2D_STAGE") == nullptr) EXPECT_EQ(staged, s.cin >= 64);
        }
        if (sm90 && s.kh * s.kw > 1 && dt == DType::f32 && t.tf32_wgmma()) EXPECT_TRUE(t.batch_tiles());
        if (s.kh * s.kw == 1) EXPECT_FALSE(t.batch_tiles());
        conv2d(dx.view, dw.view, bias, dy.view, s.p, epi, stream, prec, res);
        stream.synchronize();
        const double err = output_error(s, x, wt, b, r, y, dy);
        std::printf("  %-90s %s rel L2 %.2e\n", v.name().c_str(), t.batch_tiles() ? "batch tiles" : "", err);
        EXPECT_LE(err, dt == DType::f32 ? 5e-3 : tolerance(dt));  // (TF32 for f32) NaN fails too
        if (&s == &shapes[0] && !nhwc) {
          // Captured, then replayed on new input: bit for bit the eager call on it.
          std::vector<unsigned char> eager(y.bytes()), replay(y.bytes());
          const HostTensor x2 = random_tensor(s.n, s.cin, s.h, s.w, dt, nhwc, rng);
          Graph graph = Graph::capture(
              stream.get(), [&] { conv2d(dx.view, dw.view, bias, dy.view, s.p, epi, stream, prec, res); },
              CaptureMode::global);
          const std::vector<unsigned char> raw2 = x2.storage();
          dx.buffer.copy_from_host(raw2.data(), raw2.size());
          dy.buffer.fill_u32(0xffffffffu);
          graph.launch(stream.get());
          stream.synchronize();
          dy.buffer.copy_to_host(replay.data(), replay.size());
          dy.buffer.fill_u32(0xffffffffu);
          conv2d(dx.view, dw.view, bias, dy.view, s.p, epi, stream, prec, res);
          stream.synchronize();
          dy.buffer.copy_to_host(eager.data(), eager.size());
          EXPECT_EQ(replay, eager);
        }
      }
    }
  }
}

// The residual copied while the main loop runs (conv2d_hmma/plan.cuh's kResPrefetch: the cp.async
// wgmma tiling where the k steps leave buffers unused): ResNet-50's block-closing 1 x 1 convs over 64
// and 128 channels (one and two k steps) + bias + the residual + leaky ReLU, channels-last, and a 1 x 1
// over 128 channels into 64 NCHW channels (the residual tile's rows are channels) on a plane of two
// tiles, the second partial; f16 and bf16, against float64, every output written; the first shape
// also captured in a CUDA graph and replayed on a new residual, equal bit for bit to the eager call.
TEST(Conv2dDtypesGpu, ResidualCopiedWhileTheMainLoopRuns) {
  if (device_count() == 0) GTEST_SKIP() << "no GPU";
  const std::uint64_t seed = test::fresh_seed();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  Stream stream;
  const std::vector<std::pair<Shape, bool>> shapes = {
      {{2, 64, 56, 56, 256, 1, 1, Conv2dParams{}, true, true}, true},
      {{3, 128, 28, 28, 512, 1, 1, Conv2dParams{}, true, true}, true},
      {{2, 128, 8, 17, 64, 1, 1, Conv2dParams{}, false, true}, false}};
  const bool sm90 = device_target() == Conv2dTarget::sm90 && !hmma_disabled();
  for (const auto& shape : shapes) {
    const Shape& s = shape.first;  // (not a structured binding: the graph's lambda captures it)
    const bool nhwc = shape.second;
    for (DType dt : {DType::f16, DType::bf16}) {
      const HostTensor x = random_tensor(s.n, s.cin, s.h, s.w, dt, true, rng);
      const HostTensor wt = random_tensor(s.cout, s.cin, 1, 1, dt, true, rng);
      const HostTensor b = random_tensor(1, s.cout, 1, 1, dt, false, rng);
      const HostTensor r = random_tensor(s.n, s.cout, s.h, s.w, dt, nhwc, rng);
      HostTensor y{s.n, s.cout, s.h, s.w, dt, nhwc, {}};
      y.values.resize(r.size());
      DeviceCopy dx = upload(x), dw = upload(wt), db = upload(b), dr = upload(r), dy = upload(y);
      dy.buffer.fill_u32(0xffffffffu);
      const TensorView bias = s.bias ? TensorView::contiguous(db.view.data, dt, {s.cout}) : TensorView{};
      const Op epi = div_leaky_relu_epilogue(1.0, 0.125);  // (reference's)
      const Conv2dVariant v =
          conv2d_variant_for(dx.view, dw.view, bias, dy.view, s.p, epi, Conv2dPrecision::fp32, dr.view);
      SCOPED_TRACE(v.name());
      const Conv2dTiling t = planned(v);
      if (sm90) {
        // The cp.async wgmma tiling, with buffers the k steps leave unused.
        ASSERT_TRUE(t.half_mma() && t.as_hmma().form == HmmaForm::wgmma);
        EXPECT_GT(t.as_hmma().stages, (s.cin + 63) / 64);
      }
      conv2d(dx.view, dw.view, bias, dy.view, s.p, epi, stream, Conv2dPrecision::fp32, dr.view);
      stream.synchronize();
      std::vector<unsigned char> eager;
      const double err = output_error(s, x, wt, b, r, y, dy, 0, &eager);
      std::printf("  %-90s rel L2 %.2e\n", v.name().c_str(), err);
      EXPECT_LE(err, tolerance(dt));  // NaN (an unwritten output) fails too
      if (&s == &shapes[0].first) {
        const Graph graph = Graph::capture(
            stream.get(),
            [&] {
              conv2d(dx.view, dw.view, bias, dy.view, s.p, epi, stream, Conv2dPrecision::fp32, dr.view);
            },
            CaptureMode::global);
        const HostTensor r2 = random_tensor(s.n, s.cout, s.h, s.w, dt, nhwc, rng);
        const std::vector<unsigned char> raw2 = r2.storage();
        dr.buffer.copy_from_host(raw2.data(), raw2.size());
        dy.buffer.fill_u32(0xffffffffu);
        graph.launch(stream.get());
        stream.synchronize();
        std::vector<unsigned char> replay(y.bytes()), again(y.bytes());
        dy.buffer.copy_to_host(replay.data(), replay.size());
        EXPECT_LE(output_error(s, x, wt, b, r2, y, dy), tolerance(dt));
        dy.buffer.fill_u32(0xffffffffu);
        conv2d(dx.view, dw.view, bias, dy.view, s.p, epi, stream, Conv2dPrecision::fp32, dr.view);
        stream.synchronize();
        dy.buffer.copy_to_host(again.data(), again.size());
        EXPECT_EQ(replay, again);
      }
    }
  }
}

// Split-K's layers (ResNet-50's 512-channel 3 x 3 on 7 x 7 and its stride-2 twin on 14 x 14, batch
// 1: 4 output tiles on a GPU of 100+ multiprocessors; a window-form layer; two mid planes, whose
// split form has tiles of its own) in f16 and bf16, channels-last and NCHW
// (staged), bias, a residual, leaky ReLU: against float64, every output written; a second call
// equal bit for bit (the slices' partials summed in a fixed order whichever block is last); and a
// CUDA graph of the call replayed twice (the workspace allocated in the graph, the tiles' counters
// zeroed by its memset node) equal bit for bit to the eager call. Skipped where the layers have no
// split form (CUINLINE_CONV2D_SPLIT_K=0; a target without wgmma). By default 8 slices on a device of
// 64+ multiprocessors; the ctest run splitk. forces 4 (CUINLINE_CONV2D_SPLIT_K=4).
TEST(Conv2dDtypesGpu, SplitKLayersMatchTheReferenceBitForBitRunToRun) {
  if (device_count() == 0) GTEST_SKIP() << "no GPU";
  {
    Conv2dVariant probe = make_conv2d_variant(512, 7, 7, 512, 3, 3, Conv2dParams::square(1, 1), true, Op::relu());
    probe.dtype = DType::f16;
    probe.input_layout = probe.weight_layout = probe.output_layout = Conv2dLayout::nhwc;
    if (!planned_split(probe)) GTEST_SKIP() << "no split-K form (CUINLINE_CONV2D_SPLIT_K=0, or no wgmma)";
  }
  const std::uint64_t seed = test::fresh_seed();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  Stream stream;
  // (The third: a layer of rows of 64 columns, no residual, 128 input channels: the TMA form on sm_90
  // (the window form where CUINLINE_CONV2D_TMA=0), whose split form is the cp.async tiling without
  // either. The last two: mid planes, whose split form has tiles of its
  // own, per-image m64 tiles: ResNet-50's 1 x 1 1024 -> 512 on 14 x 14 at batch 1, in slices, and its
  // 3 x 3 over 128 channels on 28 x 28 at batch 8, in one slice on 132 multiprocessors.)
  const std::vector<Shape> shapes = {{1, 512, 7, 7, 512, 3, 3, Conv2dParams::square(1, 1), true, true},
                                     {1, 512, 14, 14, 512, 3, 3, Conv2dParams::square(2, 1), true, true},
                                     {1, 128, 8, 64, 64, 3, 3, Conv2dParams::square(1, 1), true, false},
                                     {1, 1024, 14, 14, 512, 1, 1, Conv2dParams::square(1, 0), true, true},
                                     {8, 128, 28, 28, 128, 3, 3, Conv2dParams::square(1, 1), true, true}};
  const Op epi = div_leaky_relu_epilogue(1.0, 0.125);
  for (const Shape& s : shapes) {
    const int oh = static_cast<int>(conv2d_out_extent(s.h, s.kh, s.p.stride_h, s.p.pad_h, s.p.dilation_h));
    const int ow = static_cast<int>(conv2d_out_extent(s.w, s.kw, s.p.stride_w, s.p.pad_w, s.p.dilation_w));
    for (DType dt : {DType::f16, DType::bf16}) {
      for (bool nhwc : {true, false}) {
        const HostTensor x = random_tensor(s.n, s.cin, s.h, s.w, dt, nhwc, rng);
        const HostTensor wt = random_tensor(s.cout, s.cin, s.kh, s.kw, dt, nhwc, rng);
        const HostTensor b = random_tensor(1, s.cout, 1, 1, dt, false, rng);
        const HostTensor r = random_tensor(s.n, s.cout, oh, ow, dt, nhwc, rng);
        HostTensor y{s.n, s.cout, oh, ow, dt, nhwc, {}};
        y.values.resize(r.size());
        DeviceCopy dx = upload(x), dw = upload(wt), db = upload(b), dr = upload(r), dy = upload(y);
        const TensorView bias = TensorView::contiguous(db.view.data, dt, {s.cout});
        const TensorView res = s.residual ? dr.view : TensorView{};
        const Conv2dVariant v = conv2d_variant_for(dx.view, dw.view, bias, dy.view, s.p, epi, Conv2dPrecision::fp32, res);
        SCOPED_TRACE(v.name());
        ASSERT_TRUE(planned_split(v).has_value());
        if (!s.residual && nhwc) {
          EXPECT_TRUE(conv2d_impl::conv2d_knobs().tma ? planned(v).tma() : planned(v).window());
        }
        if (&s >= &shapes[3]) EXPECT_TRUE(planned_split(v)->few_tiles);
        EXPECT_TRUE(make_split_request(conv2d_variant_for_device(v, current_device())).has_value());
        const auto run = [&] { conv2d(dx.view, dw.view, bias, dy.view, s.p, epi, stream, Conv2dPrecision::fp32, res); };
        std::vector<unsigned char> first, again(y.bytes()), replay(y.bytes());
        dy.buffer.fill_u32(0xffffffffu);
        run();
        stream.synchronize();
        const double err = output_error(s, x, wt, b, r, y, dy, 0, &first);
        std::printf("  %-100s rel L2 %.2e\n", v.name().c_str(), err);
        EXPECT_LE(err, tolerance(dt));  // (NaN, an unwritten output, fails too)
        dy.buffer.fill_u32(0xffffffffu);
        run();
        stream.synchronize();
        dy.buffer.copy_to_host(again.data(), again.size());
        EXPECT_EQ(again, first) << "a second call differs";
        if (nhwc) {
          Graph graph = Graph::capture(stream.get(), run, CaptureMode::global);
          for (int replays = 0; replays < 2; ++replays) {
            dy.buffer.fill_u32(0xffffffffu);
            graph.launch(stream.get());
            stream.synchronize();
            dy.buffer.copy_to_host(replay.data(), replay.size());
            EXPECT_EQ(replay, first) << "replay " << replays << " of the captured call differs";
          }
        }
      }
    }
  }
}

// Split-K chosen at the launch, under sync (the kernels loaded by the call that first wants them):
// ResNet-50's 512-channel 3 x 3 on 7 x 7 (f16, channels-last) and its stride-2 twin on 14 x 14 (bf16,
// NCHW: staged), batch 32 then batch 1 after the maps are emptied. Batch 32 (128 tiles, more than half
// of an H200's multiprocessors) runs the plain kernel and loads nothing else; batch 1 (4 tiles) then
// loads the split form and runs it (8 slices). Each output against float64 (images 0 and 31 of the
// batch), and image 0 of the two calls — the plain and the split kernel, on the same image — within
// tolerance of each other. Under a forced CUINLINE_CONV2D_SPLIT_K=N (the splitk. run) both batches
// split, and the split form is loaded by the first call.
TEST(Conv2dDtypesGpu, SplitKRunsOnlyWhereTheTilesAreFew) {
  if (device_count() == 0) GTEST_SKIP() << "no GPU";
  const std::uint64_t seed = test::fresh_seed();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  Stream stream;
  ScopedJitPolicy sync(JitPolicy::sync);
  struct Case {
    Shape s;
    DType dt;
    bool nhwc;
  };
  const Case cases[] = {{{32, 512, 7, 7, 512, 3, 3, Conv2dParams::square(1, 1), true, true}, DType::f16, true},
                        {{32, 512, 14, 14, 512, 3, 3, Conv2dParams::square(2, 1), true, true}, DType::bf16, false}};
  const Op epi = div_leaky_relu_epilogue(1.0, 0.125);
  const int multiprocessors = device_info(current_device()).multiprocessors;
  const int knob = conv2d_impl::conv2d_knobs().split_k;
  for (const Case& c : cases) {
    const Shape& s = c.s;
    const int oh = static_cast<int>(conv2d_out_extent(s.h, s.kh, s.p.stride_h, s.p.pad_h, s.p.dilation_h));
    const int ow = static_cast<int>(conv2d_out_extent(s.w, s.kw, s.p.stride_w, s.p.pad_w, s.p.dilation_w));
    const HostTensor x = random_tensor(s.n, s.cin, s.h, s.w, c.dt, c.nhwc, rng);
    const HostTensor wt = random_tensor(s.cout, s.cin, s.kh, s.kw, c.dt, c.nhwc, rng);
    const HostTensor b = random_tensor(1, s.cout, 1, 1, c.dt, false, rng);
    const HostTensor r = random_tensor(s.n, s.cout, oh, ow, c.dt, c.nhwc, rng);
    HostTensor y{s.n, s.cout, oh, ow, c.dt, c.nhwc, {}};
    y.values.resize(r.size());
    DeviceCopy dx = upload(x), dw = upload(wt), db = upload(b), dr = upload(r), dy = upload(y);
    const TensorView bias = TensorView::contiguous(db.view.data, c.dt, {s.cout});
    // Image 0 alone: views of the batch's first image (the same bytes).
    const auto first = [](TensorView t) {
      t.shape[0] = 1;
      return t;
    };
    const Conv2dVariant v = conv2d_variant_for(dx.view, dw.view, bias, dy.view, s.p, epi, Conv2dPrecision::fp32, dr.view);
    SCOPED_TRACE(v.name());
    const std::optional<HmmaTiling> split = planned_split(v);
    if (!split) GTEST_SKIP() << "no split-K form (CUINLINE_CONV2D_SPLIT_K=0, or no wgmma)";
    const HmmaTiling plain = planned(v).as_hmma();
    const auto wanted = [&](std::int64_t n) {
      return conv2d_impl::split_k_choice(conv2d_impl::split_k_tiles(plain, s.cout, n), n, split->split_k,
                                         multiprocessors, knob > 0, true);
    };
    const conv2d_impl::SplitKChoice at32 = wanted(32), at1 = wanted(1);
    EXPECT_TRUE(at1.split);
    if (knob < 0 && multiprocessors < 256) EXPECT_FALSE(at32.split) << "128 tiles on " << multiprocessors << " SMs";
    std::printf("  %-100s batch 32: %d slice(s), batch 1: %d\n", v.name().c_str(), at32.slices, at1.slices);

    // The modules a call fetches: the plain kernel (and the staging copy), and the split form where
    // the call wants it and it is not loaded yet.
    const std::uint64_t copies = plain.stage_channels > 0 ? 1 : 0;
    clear_conv2d_kernel_map();
    std::uint64_t lookups = conv2d_stats().cache_lookups;
    dy.buffer.fill_u32(0xffffffffu);
    conv2d(dx.view, dw.view, bias, dy.view, s.p, epi, stream, Conv2dPrecision::fp32, dr.view);
    stream.synchronize();
    EXPECT_EQ(conv2d_stats().cache_lookups - lookups, 1 + copies + (at32.split ? 1u : 0u)) << "batch 32";
    std::vector<unsigned char> batch(y.bytes());
    dy.buffer.copy_to_host(batch.data(), batch.size());
    lookups = conv2d_stats().cache_lookups;
    dy.buffer.fill_u32(0xffffffffu);
    conv2d(first(dx.view), dw.view, bias, first(dy.view), s.p, epi, stream, Conv2dPrecision::fp32, first(dr.view));
    stream.synchronize();
    EXPECT_EQ(conv2d_stats().cache_lookups - lookups, at1.split && !at32.split ? 1u : 0u) << "batch 1";
    std::vector<unsigned char> one(y.bytes());
    dy.buffer.copy_to_host(one.data(), one.size());

    // Against float64 (images 0 and 31 of the batch; image 0 of the single call), and the two
    // calls' image 0 against each other.
    const auto error = [&](const std::vector<unsigned char>& raw, int n) {
      double num = 0, den = 0;
      for (int co = 0; co < s.cout; ++co)
        for (int oy = 0; oy < oh; ++oy)
          for (int ox = 0; ox < ow; ++ox) {
            const double ref = reference(s, x, wt, b, r, n, co, oy, ox);
            const double got = y.read(raw, n, co, oy, ox);
            num += (got - ref) * (got - ref);
            den += ref * ref;
          }
      return std::sqrt(num / (den > 0 ? den : 1));  // (NaN where an output was left unwritten)
    };
    EXPECT_LE(error(batch, 0), tolerance(c.dt)) << "batch 32, image 0";
    EXPECT_LE(error(batch, 31), tolerance(c.dt)) << "batch 32, image 31";
    EXPECT_LE(error(one, 0), tolerance(c.dt)) << "batch 1";
    double num = 0, den = 0;
    for (int co = 0; co < s.cout; ++co)
      for (int oy = 0; oy < oh; ++oy)
        for (int ox = 0; ox < ow; ++ox) {
          const double p = y.read(batch, 0, co, oy, ox), q = y.read(one, 0, co, oy, ox);
          num += (p - q) * (p - q);
          den += p * p;
        }
    EXPECT_LE(std::sqrt(num / (den > 0 ? den : 1)), tolerance(c.dt)) << "the two kernels' image 0";
  }
}

// Real layers past the limits conv2d once had (conv2d_past_limits.hpp: a ViT-B/32 patch
// embedding, ASPP dilations of 24 and 36, FCN's padding of 100, strides of 40, 4100 / 4200
// channels, 41- and 51-tap filters, a 1-D audio filter) in f32, f16 and bf16, all-NCHW and
// all-channels-last, bias and a residual: every output written, the relative L2 error against the
// float64 reference within tolerance(dtype).
TEST(Conv2dDtypesGpu, PastTheFormerLimitsEveryDtypeAndLayout) {
  if (device_count() == 0) GTEST_SKIP() << "no GPU";
  const std::uint64_t seed = test::fresh_seed();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  Stream stream;
  for (const test::PastLimitsShape& ps : test::past_limits_shapes()) {
    const Shape s{ps.n, ps.cin, ps.h, ps.w, ps.cout, ps.kh, ps.kw, ps.p, true, true};
    const int oh = static_cast<int>(conv2d_out_extent(s.h, s.kh, s.p.stride_h, s.p.pad_h, s.p.dilation_h));
    const int ow = static_cast<int>(conv2d_out_extent(s.w, s.kw, s.p.stride_w, s.p.pad_w, s.p.dilation_w));
    for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
      for (bool nhwc : {false, true}) {
        const HostTensor x = random_tensor(s.n, s.cin, s.h, s.w, dt, nhwc, rng);
        const HostTensor wt = random_tensor(s.cout, s.cin / s.p.groups, s.kh, s.kw, dt, nhwc, rng);
        const HostTensor b = random_tensor(1, s.cout, 1, 1, dt, false, rng);
        const HostTensor r = random_tensor(s.n, s.cout, oh, ow, dt, nhwc, rng);
        HostTensor y{s.n, s.cout, oh, ow, dt, nhwc, {}};
        y.values.resize(r.size());
        DeviceCopy dx = upload(x), dw = upload(wt), db = upload(b), dr = upload(r), dy = upload(y);
        dy.buffer.fill_u32(0xffffffffu);  // NaN as f32, f16 and bf16
        const TensorView bias = TensorView::contiguous(db.view.data, dt, {s.cout});
        const Conv2dVariant v = conv2d_variant_for(dx.view, dw.view, bias, dy.view, s.p,
                                                   div_leaky_relu_epilogue(1.0, 0.125), Conv2dPrecision::fp32, dr.view);
        SCOPED_TRACE(std::string(ps.what) + ": " + v.name());
        conv2d(dx.view, dw.view, bias, dy.view, s.p, div_leaky_relu_epilogue(1.0, 0.125), stream,
               Conv2dPrecision::fp32, dr.view);
        stream.synchronize();
        const double err = output_error(s, x, wt, b, r, y, dy);
        std::printf("  %-55s %-4s %s rel L2 %.2e\n", ps.what, to_string(dt), nhwc ? "nhwc" : "nchw", err);
        EXPECT_LE(err, tolerance(dt));  // NaN (an unwritten output) fails too
      }
    }
  }
}

// The seed, ResNet-like and UNet-like shapes (the seed 8x128^2 -> 64 3x3; ResNet-like 64x56^2 -> 64 3x3 pad 1; UNet-like
// 128x128^2 -> 128 3x3 pad 1, at small batches) in f16 and bf16, NCHW and channels-last, on the
// tensor-core kernel: every output written (the poison gone), a random sample of 4096 outputs (and
// the four corners of each image's first and last channel) against the float64 reference.
// The issue's shapes, each also with the input and weight one element (2 bytes) past their
// allocations' alignment (the kernel compiled for the register gather instead of cp.async where the
// layouts would copy) and with the output so (one element a store): the variants
// conv2d_variant_for gives those pointers.
TEST(Conv2dDtypesGpu, IssueShapesOnTensorCores) {
  if (device_count() == 0) GTEST_SKIP() << "no GPU";
  const std::uint64_t seed = test::fresh_seed();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  const std::vector<Shape> shapes = {{2, 8, 128, 128, 64, 3, 3, {}, true, false},
                                     {2, 64, 56, 56, 64, 3, 3, Conv2dParams::square(1, 1), true, true},
                                     {1, 128, 128, 128, 128, 3, 3, Conv2dParams::square(1, 1), true, false}};
  Stream stream;
  for (const Shape& s : shapes) {
    const int oh = static_cast<int>(conv2d_out_extent(s.h, s.kh, s.p.stride_h, s.p.pad_h, s.p.dilation_h));
    const int ow = static_cast<int>(conv2d_out_extent(s.w, s.kw, s.p.stride_w, s.p.pad_w, s.p.dilation_w));
    for (DType dt : {DType::f16, DType::bf16}) {
      for (int form = 0; form < 4; ++form) {
        const bool nhwc = form % 2 == 1;
        const std::size_t in_shift = form == 3 ? 2 : 0, out_shift = form == 2 ? 2 : 0;
        const HostTensor x = random_tensor(s.n, s.cin, s.h, s.w, dt, nhwc, rng);
        const HostTensor wt = random_tensor(s.cout, s.cin, s.kh, s.kw, dt, nhwc, rng);
        const HostTensor b = random_tensor(1, s.cout, 1, 1, dt, false, rng);
        const HostTensor r = random_tensor(s.n, s.cout, oh, ow, dt, nhwc, rng);
        HostTensor y{s.n, s.cout, oh, ow, dt, nhwc, {}};
        y.values.resize(r.size());
        DeviceCopy dx = upload(x, in_shift), dw = upload(wt, in_shift), db = upload(b), dr = upload(r),
                   dy = upload(y, out_shift);
        dy.buffer.fill_u32(0xffffffffu);  // NaN as f16 and bf16
        const TensorView bias = TensorView::contiguous(db.view.data, dt, {s.cout});
        const TensorView res = s.residual ? dr.view : TensorView{};
        const Op epi = div_leaky_relu_epilogue(1.0, 0.125);
        const Conv2dVariant v =
            conv2d_variant_for(dx.view, dw.view, bias, dy.view, s.p, epi, Conv2dPrecision::fp32, res);
        SCOPED_TRACE(v.name() + " batch " + std::to_string(s.n));
        EXPECT_EQ(planned(v).half_mma(), !hmma_disabled() && device_target() != Conv2dTarget::sm75);
        if (!hmma_disabled()) {
          EXPECT_EQ(v.inputs_aligned, in_shift == 0 || !nhwc);  // (cp.async: NHWC input and weight)
          EXPECT_EQ(v.output_aligned, out_shift == 0);          // (every shape here stores vectors)
        }
        conv2d(dx.view, dw.view, bias, dy.view, s.p, epi, stream, Conv2dPrecision::fp32, res);
        stream.synchronize();
        std::vector<unsigned char> raw(y.bytes());
        dy.buffer.copy_to_host(raw.data(), raw.size(), out_shift);
        if (out_shift) {  // nothing stored before the output
          std::uint16_t before = 0;
          dy.buffer.copy_to_host(&before, 2, 0);
          EXPECT_EQ(before, 0xffffu);
        }
        std::int64_t unwritten = 0;
        for (int n = 0; n < s.n; ++n)
          for (int co = 0; co < s.cout; ++co)
            for (int oy = 0; oy < oh; ++oy)
              for (int ox = 0; ox < ow; ++ox) unwritten += std::isnan(y.read(raw, n, co, oy, ox)) ? 1 : 0;
        EXPECT_EQ(unwritten, 0);
        std::vector<std::array<int, 4>> at;
        for (int n = 0; n < s.n; ++n)
          for (int co : {0, s.cout - 1})
            for (int oy : {0, oh - 1})
              for (int ox : {0, ow - 1}) at.push_back({n, co, oy, ox});
        for (int i = 0; i < 4096; ++i) {
          at.push_back({static_cast<int>(rng() % s.n), static_cast<int>(rng() % s.cout),
                        static_cast<int>(rng() % oh), static_cast<int>(rng() % ow)});
        }
        double num = 0, den = 0;
        for (const auto& a : at) {
          const double ref = reference(s, x, wt, b, r, a[0], a[1], a[2], a[3]);
          const double got = y.read(raw, a[0], a[1], a[2], a[3]);
          num += (got - ref) * (got - ref);
          den += ref * ref;
        }
        const double err = std::sqrt(num / (den > 0 ? den : 1));
        std::printf("  %-100s %s rel L2 %.2e\n", v.name().c_str(), nhwc ? "nhwc" : "nchw", err);
        EXPECT_LE(err, tolerance(dt));
      }
    }
  }
}

// A 1 x 1 convolution of 3 channels with weights (1, 1, -1), no bias, identity epilogue: each output
// pixel is x0 + x1 - x2, a sum exact in fp32. Compared bit for bit with the sum rounded once to
// nearest even: ties (1 + 2^-11 -> 1 and 1 + 3 * 2^-11 -> 1 + 2^-9 in f16; likewise 2^-8 for bf16),
// an intermediate 80000 beyond f16's range that a f16 accumulator would turn to infinity, NaN and
// infinity propagated. In both input and output layouts.
TEST(Conv2dDtypesGpu, SpecialValuesRoundOnceToNearestEven) {
  if (device_count() == 0) GTEST_SKIP() << "no GPU";
  const double inf = INFINITY, nan = NAN;
  const double u11 = std::ldexp(1.0, -11), u8 = std::ldexp(1.0, -8);
  const std::vector<std::vector<double>> pixels = {
      {40000, 40000, 40000}, {1, u11, 0}, {1, 3 * u11, 0}, {1, u8, 0}, {1, 3 * u8, 0},
      {nan, 1, 1},           {inf, 1, 0}, {1, 1, inf},     {-2, 0.5, 0.25}, {0, 0, 0}};
  const int w = static_cast<int>(pixels.size());
  Stream stream;
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    for (int layouts = 0; layouts < 4; ++layouts) {
      const bool in_nhwc = layouts & 1, out_nhwc = layouts & 2;
      HostTensor x{1, 3, 1, w, dt, in_nhwc, std::vector<double>(3 * w)};
      for (int px = 0; px < w; ++px)
        for (int c = 0; c < 3; ++c) x.values[c * w + px] = test::to_op(dt, test::from_op(dt, float(pixels[px][c])));
      HostTensor wt{1, 3, 1, 1, dt, false, {1, 1, -1}};
      HostTensor y{1, 1, 1, w, dt, out_nhwc, std::vector<double>(w)};
      DeviceCopy dx = upload(x), dw = upload(wt), dy = upload(y);
      dy.buffer.fill_u32(0xffffffffu);
      SCOPED_TRACE(std::string(to_string(dt)) + (in_nhwc ? " nhwc in" : " nchw in") +
                   (out_nhwc ? " nhwc out" : " nchw out"));
      conv2d(dx.view, dw.view, TensorView{}, dy.view, {}, Op::chain({}), stream);
      stream.synchronize();
      std::vector<unsigned char> raw(y.bytes());
      dy.buffer.copy_to_host(raw.data(), raw.size());
      const std::size_t es = dtype_size(dt);
      for (int px = 0; px < w; ++px) {
        const double exact = x.values[px] + x.values[w + px] - x.values[2 * w + px];
        std::uint64_t got = 0;
        std::memcpy(&got, raw.data() + px * es, es);
        const std::uint64_t want = test::from_op(dt, static_cast<float>(exact));
        if (std::isnan(exact)) {
          EXPECT_TRUE(std::isnan(test::to_op(dt, got))) << "pixel " << px;
        } else {
          EXPECT_EQ(got, want) << "pixel " << px << ": exact " << exact;
        }
      }
    }
  }
}

// Random shapes of the halo form (up to 8 input channels, column stride 1, no residual, 32 to 300
// output columns: one to three column blocks a row, 64- and 128-column tiles), filters 1-7 each way,
// row stride 1-3, padding, dilation, 1-200 output channels, every layout, f16 and bf16, the input and
// output pointers sometimes one element past alignment (the gathers, 1 output a store): against the
// float64 reference with outputs poisoned, each output checked (a NaN fails).
TEST(Conv2dDtypesGpu, RandomHaloShapes) {
  if (device_count() == 0) GTEST_SKIP() << "no GPU";
  const std::uint64_t seed = test::fresh_seed();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> cin(1, 8), k(1, 7), sh(1, 3), pad(0, 3), dil(1, 2), coin(0, 1);
  Stream stream;
  int tested = 0;
  while (tested < 12) {
    Shape s{1 + coin(rng), cin(rng), 2 + static_cast<int>(rng() % 12), 32 + static_cast<int>(rng() % 270),
            1 + static_cast<int>(rng() % 200), k(rng), k(rng), {}, coin(rng) == 1, false};
    s.p.stride_h = sh(rng), s.p.stride_w = 1, s.p.pad_h = pad(rng), s.p.pad_w = pad(rng);
    s.p.dilation_h = dil(rng), s.p.dilation_w = dil(rng);
    const auto oh = conv2d_out_extent(s.h, s.kh, s.p.stride_h, s.p.pad_h, s.p.dilation_h);
    const auto ow = conv2d_out_extent(s.w, s.kw, s.p.stride_w, s.p.pad_w, s.p.dilation_w);
    if (oh <= 0 || ow < 32) continue;
    const DType dt = coin(rng) ? DType::f16 : DType::bf16;
    const bool in_nhwc = coin(rng), w_nhwc = coin(rng), out_nhwc = coin(rng);
    const std::size_t in_shift = tested % 4 == 3 ? 2 : 0, out_shift = tested % 5 == 4 ? 2 : 0;
    const HostTensor x = random_tensor(s.n, s.cin, s.h, s.w, dt, in_nhwc, rng);
    const HostTensor wt = random_tensor(s.cout, s.cin, s.kh, s.kw, dt, w_nhwc, rng);
    const HostTensor b = random_tensor(1, s.cout, 1, 1, dt, false, rng);
    HostTensor y{s.n, s.cout, oh, ow, dt, out_nhwc, {}};
    y.values.resize(static_cast<std::size_t>(s.n * s.cout * oh * ow));
    DeviceCopy dx = upload(x, in_shift), dw = upload(wt), db = upload(b), dy = upload(y, out_shift);
    dy.buffer.fill_u32(0xffffffffu);
    const TensorView bias = s.bias ? TensorView::contiguous(db.view.data, dt, {s.cout}) : TensorView{};
    const Op epi = div_leaky_relu_epilogue(1.0, 0.125);
    const Conv2dVariant v = conv2d_variant_for(dx.view, dw.view, bias, dy.view, s.p, epi);
    SCOPED_TRACE(v.name() + " batch " + std::to_string(s.n));
    if (!halo_disabled()) ASSERT_TRUE(planned(v).halo());
    conv2d(dx.view, dw.view, bias, dy.view, s.p, epi, stream);
    stream.synchronize();
    ASSERT_NO_FATAL_FAILURE(expect_matches_reference(s, x, wt, b, y, dy, out_shift, v.name()));
    ++tested;
  }
}

// Sets s.h and s.w to the input extent whose output under s's filter, stride, padding and dilation
// is oh x ow; false where none is (padding past the filter's reach).
bool fit_input_to_output(Shape& s, int oh, int ow) {
  s.h = (oh - 1) * s.p.stride_h + (s.kh - 1) * s.p.dilation_h + 1 - 2 * s.p.pad_h;
  s.w = (ow - 1) * s.p.stride_w + (s.kw - 1) * s.p.dilation_w + 1 - 2 * s.p.pad_w;
  return s.h >= 1 && s.w >= 1 &&
         conv2d_out_extent(s.h, s.kh, s.p.stride_h, s.p.pad_h, s.p.dilation_h) == oh &&
         conv2d_out_extent(s.w, s.kw, s.p.stride_w, s.p.pad_w, s.p.dilation_w) == ow;
}

// The wgmma tiling's window form (more than 8 input channels in the cp.async form — channels-last
// input and weight, or an NCHW input staged — column stride 1, output rows of 64 to 256 columns,
// no residual): 10 random shapes a run (printed seed) of 16-168 input channels (one to several k
// chunks, some past Cin), 2-5 x 2-5 filters, row stride 1-2, padding, dilation, 1-6 output rows,
// 16-200 output channels, f16 and bf16, NCHW or channels-last output, the output sometimes one
// element past alignment: against the float64 reference with outputs poisoned, each output checked
// (a NaN fails). Only shapes the planner puts on the window form count.
TEST(Conv2dDtypesGpu, RandomWindowShapes) {
  if (device_count() == 0) GTEST_SKIP() << "no GPU";
  const std::uint64_t seed = test::fresh_seed();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> k(2, 5), sh(1, 2), pad(0, 2), dil(1, 2), coin(0, 1);
  Stream stream;
  int tested = 0, drawn = 0;
  while (tested < 10 && drawn < 2000) {
    ++drawn;
    const int ow = 64 * (1 + static_cast<int>(rng() % 4)), oh = 1 + static_cast<int>(rng() % 6);
    Shape s{1 + coin(rng), 16 + 8 * static_cast<int>(rng() % 20), 1, 1, 16 + static_cast<int>(rng() % 185), k(rng),
            k(rng), {}, coin(rng) == 1, false};
    s.p.stride_h = sh(rng), s.p.stride_w = 1, s.p.pad_h = pad(rng), s.p.pad_w = pad(rng);
    s.p.dilation_h = dil(rng), s.p.dilation_w = dil(rng);
    if (!fit_input_to_output(s, oh, ow)) continue;
    // (The float64 reference's work bounded.)
    if (double(s.n) * s.cout * oh * ow * s.cin * s.kh * s.kw > 3e8) continue;
    const DType dt = coin(rng) ? DType::f16 : DType::bf16;
    const bool in_nhwc = rng() % 3 != 0, out_nhwc = coin(rng);
    const std::size_t out_shift = tested % 4 == 3 ? 2 : 0;
    const HostTensor x = random_tensor(s.n, s.cin, s.h, s.w, dt, in_nhwc, rng);
    const HostTensor wt = random_tensor(s.cout, s.cin, s.kh, s.kw, dt, in_nhwc, rng);
    const HostTensor b = random_tensor(1, s.cout, 1, 1, dt, false, rng);
    HostTensor y{s.n, s.cout, oh, ow, dt, out_nhwc, {}};
    y.values.resize(static_cast<std::size_t>(s.n * s.cout * oh * ow));
    DeviceCopy dx = upload(x), dw = upload(wt), db = upload(b), dy = upload(y, out_shift);
    dy.buffer.fill_u32(0xffffffffu);
    const TensorView bias = s.bias ? TensorView::contiguous(db.view.data, dt, {s.cout}) : TensorView{};
    const Op epi = div_leaky_relu_epilogue(1.0, 0.125);
    const Conv2dVariant v = conv2d_variant_for(dx.view, dw.view, bias, dy.view, s.p, epi);
    if (!conv2d_tiling(v).window()) continue;
    SCOPED_TRACE(v.name() + " batch " + std::to_string(s.n));
    conv2d(dx.view, dw.view, bias, dy.view, s.p, epi, stream);
    stream.synchronize();
    ASSERT_NO_FATAL_FAILURE(expect_matches_reference(s, x, wt, b, y, dy, out_shift, v.name()));
    ++tested;
  }
  // (Unless the window form is switched off: CUINLINE_CONV2D_WINDOW, _WGMMA or _HMMA = 0.)
  const char* off = std::getenv("CUINLINE_CONV2D_WINDOW");
  if (!halo_disabled() && !(off != nullptr && std::string(off) == "0")) EXPECT_EQ(tested, 10);
}

// The wgmma tiling's TMA form (sm_90; conv2d_hmma/mainloop_tma.cuh: channels-last input and weight
// — or an NCHW input staged — with Cin a multiple of 64, or both tensors staged where Cin rounded up
// to 8 is one: every third shape, 1-7 channels short): random shapes (printed seed) until 4 of
// each of its kinds ran — a box of the input a tile (stride 1, tiles of whole output rows or equal
// parts of one), im2col copies for two warpgroups' tiles, and for per-image m64 tiles (planes of up
// to 128 pixels) — of 64-256 input channels, 1-5 x 1-5 filters, row and column strides of 1-2,
// padding, dilation, 8-512 or 1-60 output columns, 1-20 output rows (a last tile past the plane, or
// past the image into the next), 16-300 output channels (a partial block of channels), batches of
// 1-3, with or without bias and a residual, f16 and bf16, NCHW or channels-last output (in some two
// bytes past alignment): against the float64 reference with outputs poisoned (an unwritten output
// fails); then the same call captured in a graph and replayed on new inputs (the tensor maps are
// the launch's arguments), bit for bit the eager call's. Only shapes the device's plan puts on the
// TMA form count.
TEST(Conv2dDtypesGpu, RandomTmaShapes) {
  if (device_count() == 0) GTEST_SKIP() << "no GPU";
  const char* off = std::getenv("CUINLINE_CONV2D_TMA");
  if (halo_disabled() || (off != nullptr && std::string(off) == "0")) GTEST_SKIP() << "no TMA form on this plan";
  const std::uint64_t seed = test::fresh_seed();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> k(1, 5), pad(0, 2), dil(1, 2), coin(0, 1);
  static constexpr int kColumns[] = {8, 16, 32, 64, 128, 256, 512};
  Stream stream;
  // No call may fall back: a kernel that fails to load (the split form's, forced by the splitk.
  // run) is a warning, and its call runs the other kernel.
  std::vector<std::string> warnings;
  std::mutex warnings_mutex;
  set_log_sink([&](LogLevel level, std::string_view message) {
    if (level < LogLevel::warn) return;
    const std::lock_guard<std::mutex> lock(warnings_mutex);
    warnings.emplace_back(message);
  });
  // Shapes tested of each kind: a box, im2col with two warpgroups, im2col with one. (Under
  // CUINLINE_CONV2D_TMA=im2col no tile takes a box: the row-shaped ones are im2col's too.)
  const bool boxes = !conv2d_impl::conv2d_knobs().tma_im2col;
  int kinds[3] = {boxes ? 0 : 4, 0, 0};
  int tested = 0, drawn = 0, staged = 0;
  while ((kinds[0] < 4 || kinds[1] < 4 || kinds[2] < 4) && drawn < 8000) {
    ++drawn;
    const bool any = coin(rng) == 1;  // any plane and stride (im2col), or box-shaped rows
    const int ow = any ? 1 + static_cast<int>(rng() % 60) : kColumns[rng() % 7],
              oh = 1 + static_cast<int>(rng() % 20);
    // Every third shape's input channels 1-7 short of a multiple of 64: staged (both tensors copied
    // with their channels rounded up to 8), the conv of the copies on the TMA form.
    const int short_by = tested % 3 == 1 ? 1 + static_cast<int>(rng() % 7) : 0;
    Shape s{1 + static_cast<int>(rng() % 3), 64 * (1 + static_cast<int>(rng() % 4)) - short_by, 1, 1,
            16 + static_cast<int>(rng() % 285), k(rng), k(rng), {}, coin(rng) == 1, coin(rng) == 1};
    s.p.pad_h = pad(rng), s.p.pad_w = pad(rng), s.p.dilation_h = dil(rng), s.p.dilation_w = dil(rng);
    if (any) s.p.stride_h = 1 + coin(rng), s.p.stride_w = 1 + coin(rng);
    if (!fit_input_to_output(s, oh, ow)) continue;
    // (The float64 reference's work bounded.)
    if (double(s.n) * s.cout * oh * ow * s.cin * s.kh * s.kw > 4e8) continue;
    const DType dt = coin(rng) ? DType::f16 : DType::bf16;
    const bool in_nhwc = rng() % 4 != 0, out_nhwc = coin(rng);
    const std::size_t out_shift = tested % 4 == 3 ? 2 : 0;
    const HostTensor x = random_tensor(s.n, s.cin, s.h, s.w, dt, in_nhwc, rng);
    const HostTensor wt = random_tensor(s.cout, s.cin, s.kh, s.kw, dt, in_nhwc, rng);
    const HostTensor b = random_tensor(1, s.cout, 1, 1, dt, false, rng);
    const HostTensor r = random_tensor(s.n, s.cout, oh, ow, dt, out_nhwc, rng);
    HostTensor y{s.n, s.cout, oh, ow, dt, out_nhwc, {}};
    y.values.resize(r.size());
    DeviceCopy dx = upload(x), dw = upload(wt), db = upload(b), dr = upload(r, out_shift), dy = upload(y, out_shift),
               dg = upload(y, out_shift);
    const TensorView bias = s.bias ? TensorView::contiguous(db.view.data, dt, {s.cout}) : TensorView{};
    const TensorView residual = s.residual ? dr.view : TensorView{};
    const Op epi = div_leaky_relu_epilogue(1.0, 0.125);
    const Conv2dVariant v = conv2d_variant_for(dx.view, dw.view, bias, dy.view, s.p, epi, Conv2dPrecision::fp32,
                                               residual);
    const Conv2dTiling planned_tiling = planned(v);
    if (!planned_tiling.tma()) continue;
    const HmmaTiling& t = planned_tiling.as_hmma();
    const int kind = !t.tma_im2col ? 0 : t.threads() == 256 ? 1 : 2;
    if (kinds[kind] >= 4) continue;
    if (short_by > 0) ASSERT_GT(t.stage_channels, 0) << v.name();  // (an NCHW input is staged too)
    SCOPED_TRACE(v.name() + " batch " + std::to_string(s.n));
    const auto run = [&](const DeviceCopy& out) {
      conv2d(dx.view, dw.view, bias, out.view, s.p, epi, stream, Conv2dPrecision::fp32, residual);
    };
    dy.buffer.fill_u32(0xffffffffu);
    run(dy);
    stream.synchronize();
    std::vector<unsigned char> eager;
    const double err = output_error(s, x, wt, b, r, y, dy, out_shift, &eager);
    EXPECT_LE(err, tolerance(dt)) << "(NaN: an output left unwritten)";
    std::printf("  %-100s %-13s%s rel L2 %.2e\n", v.name().c_str(),
                kind == 0   ? "box"
                : kind == 1 ? "im2col"
                            : "im2col m64",
                short_by > 0 ? " staged" : "", err);
    // Captured, replayed: the eager call's bits, then those of new inputs.
    Graph g = Graph::capture(stream.get(), [&] { run(dg); }, CaptureMode::global);
    dg.buffer.fill_u32(0xffffffffu);
    g.launch(stream.get());
    stream.synchronize();
    std::vector<unsigned char> replayed(eager.size() + out_shift);
    dg.buffer.copy_to_host(replayed.data(), replayed.size());
    replayed.erase(replayed.begin(), replayed.begin() + static_cast<std::ptrdiff_t>(out_shift));
    EXPECT_EQ(replayed, eager) << "replay";
    const HostTensor x2 = random_tensor(s.n, s.cin, s.h, s.w, dt, in_nhwc, rng);
    const std::vector<unsigned char> raw_x2 = x2.storage();
    dx.buffer.copy_from_host(raw_x2.data(), raw_x2.size());
    dy.buffer.fill_u32(0xffffffffu);
    run(dy);
    dg.buffer.fill_u32(0xffffffffu);
    g.launch(stream.get());
    stream.synchronize();
    std::vector<unsigned char> want(eager.size() + out_shift), got(eager.size() + out_shift);
    dy.buffer.copy_to_host(want.data(), want.size());
    dg.buffer.copy_to_host(got.data(), got.size());
    EXPECT_EQ(got, want) << "replay on a new input";
    EXPECT_LE(output_error(s, x2, wt, b, r, y, dy, out_shift), tolerance(dt));
    ++tested;
    ++kinds[kind];
    if (short_by > 0) ++staged;
  }
  set_log_sink({});
  EXPECT_EQ(tested, boxes ? 12 : 8);
  EXPECT_GE(staged, 2);
  for (const std::string& w : warnings) ADD_FAILURE() << "warning: " << w;
}

// f32 with channels-last tensors past 2^22 multiply-adds an image runs the f32 NCHW kernels (Winograd,
// the direct kernel, TF32 tensor cores) between transposing copies: the tiling says so, the result
// (outputs poisoned first) is within the f32 bound of the float64 reference, and it is bit for bit
// the NCHW call's on the same values (the copies move bits; the kernel is the same). Each layout mix
// (input, weight, output channels-last or not), with and without a channels-last residual; Winograd
// writes a channels-last output itself (Cout of 4k and not); two cases with the output 4 bytes past
// alignment (the f32 kernels then store scalars, in either layout).
TEST(Conv2dDtypesGpu, F32ChannelsLastRunsTheNchwKernelsBitForBit) {
  if (device_count() == 0) GTEST_SKIP() << "no GPU";
  const std::uint64_t seed = test::fresh_seed();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  struct Case {
    Shape s;
    Conv2dPrecision precision;
  };
  // (Winograd writes a channels-last output itself: 16-byte stores of 4 channels, or one a channel
  // where Cout % 4 != 0 or the output is misaligned — the last case's output is 4 bytes off.)
  const Case cases[] = {
      {{2, 8, 64, 64, 64, 3, 3, Conv2dParams{}, true, false}, Conv2dPrecision::fp32},          // Winograd
      {{2, 8, 64, 60, 18, 3, 3, Conv2dParams::square(1, 1), true, true}, Conv2dPrecision::fp32},  // Winograd
      {{2, 16, 40, 36, 32, 3, 5, [] { Conv2dParams p; p.pad_h = 1; p.pad_w = 2; return p; }(), true, true},
       Conv2dPrecision::fp32},                                                                  // direct
      {{1, 24, 33, 47, 40, 5, 3, Conv2dParams::square(2, 2), false, true}, Conv2dPrecision::tf32},
      {{2, 8, 48, 48, 32, 3, 3, Conv2dParams::square(1, 1), true, false}, Conv2dPrecision::tf32x3},
      {{2, 8, 50, 46, 40, 3, 3, Conv2dParams::square(1, 0), false, true}, Conv2dPrecision::fp32}};  // Winograd
  const std::size_t last = sizeof cases / sizeof cases[0] - 1;
  Stream stream;
  int transposed = 0, on_tf32_wgmma = 0;
  for (const Case& c : cases) {
    const Shape& s = c.s;
    const int oh = static_cast<int>(conv2d_out_extent(s.h, s.kh, s.p.stride_h, s.p.pad_h, s.p.dilation_h));
    const int ow = static_cast<int>(conv2d_out_extent(s.w, s.kw, s.p.stride_w, s.p.pad_w, s.p.dilation_w));
    const Op epi = div_leaky_relu_epilogue(1.0, 0.125);
    for (int layouts = 1; layouts < 8; ++layouts) {
      const bool in_nhwc = layouts & 1, w_nhwc = layouts & 2, out_nhwc = layouts & 4;
      const DType dt = DType::f32;
      HostTensor x = random_tensor(s.n, s.cin, s.h, s.w, dt, in_nhwc, rng);
      HostTensor wt = random_tensor(s.cout, s.cin, s.kh, s.kw, dt, w_nhwc, rng);
      const HostTensor b = random_tensor(1, s.cout, 1, 1, dt, false, rng);
      HostTensor r = random_tensor(s.n, s.cout, oh, ow, dt, out_nhwc, rng);
      HostTensor y{s.n, s.cout, oh, ow, dt, out_nhwc, {}};
      y.values.resize(r.size());
      // (The direct kernel's case and the last Winograd case: the output and residual 4 bytes past
      // 16-byte alignment, as a contiguous batch slice of an odd-sized plane is.)
      const std::size_t out_shift = &c == &cases[last] || &c == &cases[2] ? 4 : 0;
      DeviceCopy dx = upload(x), dw = upload(wt), db = upload(b), dr = upload(r, out_shift), dy = upload(y, out_shift);
      dy.buffer.fill_u32(0xffffffffu);
      // The same values in NCHW, for the NCHW call.
      HostTensor x0 = x, w0 = wt, r0 = r, y0 = y;
      x0.nhwc = w0.nhwc = r0.nhwc = y0.nhwc = false;
      DeviceCopy dx0 = upload(x0), dw0 = upload(w0), dr0 = upload(r0), dy0 = upload(y0);
      dy0.buffer.fill_u32(0xffffffffu);
      const TensorView bias = s.bias ? TensorView::contiguous(db.view.data, dt, {s.cout}) : TensorView{};
      const TensorView res = s.residual ? dr.view : TensorView{}, res0 = s.residual ? dr0.view : TensorView{};
      const Conv2dVariant v = conv2d_variant_for(dx.view, dw.view, bias, dy.view, s.p, epi, c.precision, res);
      SCOPED_TRACE(v.name() + " " + to_string(c.precision));
      const Conv2dTiling t = planned(v);
      const bool transpose_on = std::getenv("CUINLINE_CONV2D_TRANSPOSE") == nullptr ||
                                std::string(std::getenv("CUINLINE_CONV2D_TRANSPOSE")) != "0";
      // (Only a channels-last output on Winograd: no copy at all, the kernel writes it.)
      const bool winograd_output_only = t.winograd() && !in_nhwc && !w_nhwc;
      if (t.tf32_wgmma()) {
        // (tf32 with 16+ channels on sm90: the TF32 wgmma kernel reads a staged channels-last copy
        // whatever the layouts; the NCHW call stages the same copy.)
        EXPECT_FALSE(t.transposes());
        EXPECT_TRUE(t.staged());
        ++on_tf32_wgmma;
      } else {
        EXPECT_EQ(t.transposes(), transpose_on && !winograd_output_only);
        if (transpose_on) EXPECT_FALSE(t.generic());
      }
      transposed += transpose_on && !t.generic() && !t.tf32_wgmma();
      if (t.transposes()) {
        EXPECT_EQ(t.transpose.input, in_nhwc);
        EXPECT_EQ(t.transpose.weight, w_nhwc);
        EXPECT_EQ(t.transpose.output, out_nhwc && !t.winograd());  // Winograd writes it itself
      }
      conv2d(dx.view, dw.view, bias, dy.view, s.p, epi, stream, c.precision, res);
      conv2d(dx0.view, dw0.view, bias, dy0.view, s.p, epi, stream, c.precision, res0);
      stream.synchronize();
      std::vector<unsigned char> raw(y.bytes() + out_shift), raw0(y0.bytes());
      dy.buffer.copy_to_host(raw.data(), raw.size());
      raw.erase(raw.begin(), raw.begin() + static_cast<std::ptrdiff_t>(out_shift));
      dy0.buffer.copy_to_host(raw0.data(), raw0.size());
      double num = 0, den = 0;
      std::size_t differ = 0;
      for (int n = 0; n < s.n; ++n)
        for (int co = 0; co < s.cout; ++co)
          for (int oy = 0; oy < oh; ++oy)
            for (int ox = 0; ox < ow; ++ox) {
              const double ref = reference(s, x, wt, b, r, n, co, oy, ox);
              const double got = y.read(raw, n, co, oy, ox), got0 = y0.read(raw0, n, co, oy, ox);
              ASSERT_FALSE(std::isnan(got)) << "unwritten: channel " << co << " (" << oy << ", " << ox << ")";
              if (!t.generic() && std::memcmp(&got, &got0, sizeof got) != 0 && ++differ <= 3) {
                ADD_FAILURE() << "not the NCHW call's bits at channel " << co << " (" << oy << ", " << ox
                              << "): " << got << " vs " << got0;
              }
              num += (got - ref) * (got - ref);
              den += ref * ref;
            }
      const double err = std::sqrt(num / (den > 0 ? den : 1));
      // (TF32 rounds its operands to 10-bit mantissas: PyTorch's allow_tf32 accuracy.)
      EXPECT_LE(err, c.precision == Conv2dPrecision::tf32 ? 2e-3 : 1e-5);
      std::printf("  %-100s %-6s rel L2 %.2e\n", v.name().c_str(), to_string(c.precision), err);
    }
  }
  if (std::getenv("CUINLINE_CONV2D_TRANSPOSE") == nullptr) EXPECT_EQ(transposed, 42 - on_tf32_wgmma);
}

// The halo tiling (up to 8 channels, column stride 1: a 3 x 3 filter over 40 columns, 9 taps, the
// tenth of the last k step read from a block of zeros): +infinity, -infinity (in the last column)
// and a NaN in the input reach exactly the outputs whose window holds them — an infinity read where
// the padding tap's zeros should be would make NaN elsewhere (infinity x 0) — and every other output
// is finite and within the tolerance. Every layout, f16 and bf16, outputs poisoned first.
TEST(Conv2dDtypesGpu, SpecialValuesThroughTheHaloWindow) {
  if (device_count() == 0) GTEST_SKIP() << "no GPU";
  std::mt19937_64 rng(20261124);
  const int cin = 8, h = 4, w = 40, cout = 16, oh = 2, ow = 38;
  Stream stream;
  for (DType dt : {DType::f16, DType::bf16}) {
    for (int layouts = 0; layouts < 8; ++layouts) {
      const bool in_nhwc = layouts & 1, out_nhwc = layouts & 2, w_nhwc = layouts & 4;
      HostTensor x = random_tensor(1, cin, h, w, dt, in_nhwc, rng);
      x.values[(3 * h + 1) * w + 20] = INFINITY;
      x.values[(0 * h + 0) * w + 39] = -INFINITY;
      x.values[(6 * h + 2) * w + 5] = NAN;
      HostTensor wt = random_tensor(cout, cin, 3, 3, dt, w_nhwc, rng);
      for (double& v : wt.values) v = v == 0.0 ? 0.5 : v;  // infinity x weight stays infinite
      HostTensor y{1, cout, oh, ow, dt, out_nhwc, std::vector<double>(std::size_t(cout) * oh * ow)};
      DeviceCopy dx = upload(x), dw = upload(wt), dy = upload(y);
      dy.buffer.fill_u32(0xffffffffu);
      SCOPED_TRACE(std::string(to_string(dt)) + (in_nhwc ? " nhwc in" : " nchw in") +
                   (w_nhwc ? " nhwc weight" : " nchw weight") + (out_nhwc ? " nhwc out" : " nchw out"));
      const Conv2dVariant v = conv2d_variant_for(dx.view, dw.view, TensorView{}, dy.view, {}, Op::chain({}));
      if (!halo_disabled()) ASSERT_TRUE(planned(v).halo());
      conv2d(dx.view, dw.view, TensorView{}, dy.view, {}, Op::chain({}), stream);
      stream.synchronize();
      std::vector<unsigned char> raw(y.bytes());
      dy.buffer.copy_to_host(raw.data(), raw.size());
      double num = 0, den = 0;
      int special = 0;
      for (int co = 0; co < cout; ++co)
        for (int oy = 0; oy < oh; ++oy)
          for (int ox = 0; ox < ow; ++ox) {
            double want = 0;
            for (int ci = 0; ci < cin; ++ci)
              for (int ky = 0; ky < 3; ++ky)
                for (int kx = 0; kx < 3; ++kx)
                  want += x.values[(std::size_t(ci) * h + oy + ky) * w + ox + kx] *
                          wt.values[((std::size_t(co) * cin + ci) * 3 + ky) * 3 + kx];
            const double got = y.read(raw, 0, co, oy, ox);
            if (std::isnan(want)) {
              ++special;
              EXPECT_TRUE(std::isnan(got)) << "channel " << co << " (" << oy << ", " << ox << ")";
            } else if (std::isinf(want)) {
              ++special;
              EXPECT_EQ(got, want) << "channel " << co << " (" << oy << ", " << ox << ")";
            } else {
              ASSERT_TRUE(std::isfinite(got)) << "channel " << co << " (" << oy << ", " << ox << "): " << got;
              num += (got - want) * (got - want);
              den += want * want;
            }
          }
      EXPECT_EQ(special, cout * (6 + 1 + 6));  // 3 x 2 windows each for +inf and NaN, one for -inf
      EXPECT_LE(std::sqrt(num / den), tolerance(dt));
    }
  }
}

// A call runs the plan for its device's target (conv2d_variant_for_device: the device's, or
// CUINLINE_CONV2D_TARGET's where the device has what it plans for, as ctest's sm75. and sm86. runs
// set it): after the call, exactly that plan's module is in the KernelCache's memory tier, and the
// result matches the float64 reference. One f32 Winograd shape (F(2x2); on sm_75 with plain copies
// and FMA products), one f32 tf32 shape (fp32 FMA on sm_75), f16 NCHW with 8 channels (the halo form
// on sm90, the mma.sync tilings on sm80 / sm86, the general kernel on sm_75) and bf16 channels-last.
TEST(Conv2dDtypesGpu, CallsRunThePlanForTheDevice) {
  if (device_count() == 0) GTEST_SKIP() << "no GPU";
  const int device = current_device();
  Conv2dTarget expect = conv2d_target_for(device_arch(device));
  if (const char* e = std::getenv("CUINLINE_CONV2D_TARGET"); e != nullptr && *e != '\0') {
    const Conv2dTarget forced = conv2d_target_for(Arch::parse(e));
    if (conv2d_max_shared_bytes(forced) <= conv2d_max_shared_bytes(expect) &&
        (forced != Conv2dTarget::sm90 || expect == Conv2dTarget::sm90)) {
      expect = forced;
    }
  }
  ASSERT_EQ(device_target(), expect);
  std::printf("device %d (%s) plans for %s\n", device, device_arch(device).name().c_str(), to_string(expect));
  std::mt19937_64 rng(test::fresh_seed());
  struct Case {
    Shape s;
    DType dt;
    bool nhwc;
    Conv2dPrecision precision;
  };
  const Case cases[] = {{{2, 8, 36, 36, 32, 3, 3, Conv2dParams{}, true}, DType::f32, false, Conv2dPrecision::fp32},
                        {{2, 16, 20, 20, 24, 3, 3, Conv2dParams::square(1, 1), true}, DType::f32, false, Conv2dPrecision::tf32},
                        {{2, 8, 40, 40, 16, 3, 3, Conv2dParams{}, true}, DType::f16, false, Conv2dPrecision::fp32},
                        {{2, 16, 24, 24, 32, 3, 3, Conv2dParams::square(1, 1), true}, DType::bf16, true, Conv2dPrecision::fp32}};
  Stream stream;
  clear_conv2d_kernel_map();
  for (const Case& c : cases) {
    const Shape& s = c.s;
    const int oh = static_cast<int>(conv2d_out_extent(s.h, s.kh, 1, s.p.pad_h, 1));
    const int ow = static_cast<int>(conv2d_out_extent(s.w, s.kw, 1, s.p.pad_w, 1));
    const HostTensor x = random_tensor(s.n, s.cin, s.h, s.w, c.dt, c.nhwc, rng);
    const HostTensor wt = random_tensor(s.cout, s.cin, s.kh, s.kw, c.dt, c.nhwc, rng);
    const HostTensor b = random_tensor(1, s.cout, 1, 1, c.dt, false, rng);
    HostTensor y{s.n, s.cout, oh, ow, c.dt, c.nhwc, std::vector<double>(std::size_t(s.n) * s.cout * oh * ow)};
    DeviceCopy dx = upload(x), dw = upload(wt), db = upload(b), dy = upload(y);
    dy.buffer.fill_u32(0xffffffffu);
    const TensorView bias = TensorView::contiguous(db.view.data, c.dt, {s.cout});
    const Op epi = div_leaky_relu_epilogue(1.0, 0.125);
    const Conv2dVariant v = conv2d_variant_for(dx.view, dw.view, bias, dy.view, s.p, epi, c.precision);
    const Conv2dVariant p = conv2d_variant_for_device(v, device);
    SCOPED_TRACE(p.name() + " " + to_string(c.precision));
    EXPECT_EQ(p.target, expect);
    const Conv2dTiling t = conv2d_tiling(p);
    if (expect == Conv2dTarget::sm75) {
      EXPECT_FALSE(t.tensor_cores() || t.half_mma() || (t.winograd() && t.as_winograd().tc_products));
    }
    if (expect != Conv2dTarget::sm90) EXPECT_FALSE(t.wgmma());
    conv2d(dx.view, dw.view, bias, dy.view, s.p, epi, stream, c.precision);
    stream.synchronize();
    // The module the call loaded: the plan's (a staged plan's conv is its channels-last copy's).
    CacheTier tier = CacheTier::compiled;
    default_cache().get(make_request(p), device_arch(device), &tier);
    EXPECT_EQ(tier, CacheTier::memory) << "the call did not run the plan for its device";
    Shape rs = s;
    rs.bias = true;
    if (c.precision == Conv2dPrecision::tf32 && expect != Conv2dTarget::sm75) continue;  // (TF32: not fp32 accuracy)
    ASSERT_NO_FATAL_FAILURE(expect_matches_reference(rs, x, wt, b, y, dy, 0, p.name()));
  }
}

// Epilogues that read per-output-channel operands (channel_operands: PyTorch's (Cout, 1, 1)
// parameters) on every kernel a call can run: fp32 Winograd and direct (a Cout that no block tile
// divides), TF32 tensor cores, the f16 / bf16 tensor-core forms (halo, wgmma, padded channel tiles)
// NCHW and channels-last with and without a residual, the general kernel (grouped; depthwise rows
// a thread, one channel or a channel pair) and the f32 channels-last transposed path. Two epilogues: KernelBench's conv * m ->
// LeakyReLU -> + b2 as a chain, and conv * m -> LeakyReLU(0.01) -> GELU (erf) as an expression;
// against float64 with the operands as stored, outputs poisoned first.
// x rounded to TF32 as the staging copy of the TF32 wgmma kernel rounds it (cvt.rna.tf32.f32: to
// nearest, ties away from zero, in the magnitude's low 13 bits).
double tf32_of(double v) {
  const float f = static_cast<float>(v);
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

// f32 in precision tf32 on the TF32 wgmma kernel (16+ input channels, filters of more than one tap,
// Cout x taps / strides >= 512 on sm90): random shapes — filters 2 to 7 a side, stride, padding,
// dilation, 16-72 input channels (some not a multiple of 8: zeros staged past them), output channels
// past a block's — in every layout of input, weight and output, with and without a residual, outputs
// 4 bytes off their allocation in some, poisoned first. Checked against float64 twice: on the exact
// operands (TF32's error, <= 2e-3 relative L2) and on operands rounded to TF32 as the staging copy
// rounds them (fp32 sums only, <= 2e-5: a copy that truncated instead, or skipped a value's
// rounding, is far outside).
TEST(Conv2dDtypesGpu, Tf32WgmmaShapesAgainstFloat64) {
  if (device_count() == 0) GTEST_SKIP() << "no GPU";
  const std::uint64_t seed = test::fresh_seed();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  const bool on_sm90 = device_target() == Conv2dTarget::sm90;
  Stream stream;
  int on_kernel = 0;
  for (int i = 0; i < 14; ++i) {
    Shape s;
    s.n = 1 + static_cast<int>(rng() % 2);
    s.cin = 16 + static_cast<int>(rng() % 57);
    s.kh = 2 + static_cast<int>(rng() % 6);
    s.kw = 2 + static_cast<int>(rng() % 6);
    s.p.stride_h = 1 + static_cast<int>(rng() % 2);
    s.p.stride_w = 1 + static_cast<int>(rng() % 2);
    s.p.pad_h = static_cast<int>(rng() % 3);
    s.p.pad_w = static_cast<int>(rng() % 3);
    s.p.dilation_h = 1 + static_cast<int>(rng() % 2);
    s.p.dilation_w = 1 + static_cast<int>(rng() % 2);
    // Enough products a staged value for the kernel: Cout x taps >= 512 x strides.
    const int taps = s.kh * s.kw, need = (512 * s.p.stride_h * s.p.stride_w + taps - 1) / taps;
    s.cout = std::max(need, 24) + static_cast<int>(rng() % 48);
    s.h = (s.kh - 1) * s.p.dilation_h + 1 + static_cast<int>(rng() % 14);
    s.w = (s.kw - 1) * s.p.dilation_w + 1 + static_cast<int>(rng() % 18);
    s.bias = rng() % 4 != 0;
    s.residual = rng() % 3 == 0;
    const bool in_nhwc = rng() % 2, w_nhwc = rng() % 2, out_nhwc = rng() % 2;
    const std::size_t out_shift = rng() % 3 == 0 ? 4 : 0;
    const int oh = static_cast<int>(conv2d_out_extent(s.h, s.kh, s.p.stride_h, s.p.pad_h, s.p.dilation_h));
    const int ow = static_cast<int>(conv2d_out_extent(s.w, s.kw, s.p.stride_w, s.p.pad_w, s.p.dilation_w));
    const DType dt = DType::f32;
    const HostTensor x = random_tensor(s.n, s.cin, s.h, s.w, dt, in_nhwc, rng);
    const HostTensor wt = random_tensor(s.cout, s.cin, s.kh, s.kw, dt, w_nhwc, rng);
    const HostTensor b = random_tensor(1, s.cout, 1, 1, dt, false, rng);
    const HostTensor r = random_tensor(s.n, s.cout, oh, ow, dt, out_nhwc, rng);
    HostTensor y{s.n, s.cout, oh, ow, dt, out_nhwc, std::vector<double>(r.size())};
    DeviceCopy dx = upload(x), dw = upload(wt), db = upload(b), dr = upload(r, out_shift), dy = upload(y, out_shift);
    dy.buffer.fill_u32(0xffffffffu);  // NaN
    const TensorView bias = s.bias ? TensorView::contiguous(db.view.data, dt, {s.cout}) : TensorView{};
    const TensorView res = s.residual ? dr.view : TensorView{};
    const Op epi = div_leaky_relu_epilogue(1.0, 0.125);
    const Conv2dVariant v = conv2d_variant_for(dx.view, dw.view, bias, dy.view, s.p, epi, Conv2dPrecision::tf32, res);
    SCOPED_TRACE(v.name());
    const Conv2dTiling t = planned(v);
    if (on_sm90 && std::getenv("CUINLINE_CONV2D_TF32_WGMMA") == nullptr && std::getenv("CUINLINE_CONV2D_WGMMA") == nullptr) {
      EXPECT_TRUE(t.tf32_wgmma()) << "planned off the TF32 wgmma kernel";
    }
    on_kernel += t.tf32_wgmma();
    conv2d(dx.view, dw.view, bias, dy.view, s.p, epi, stream, Conv2dPrecision::tf32, res);
    stream.synchronize();
    std::vector<unsigned char> raw;
    const double err = output_error(s, x, wt, b, r, y, dy, out_shift, &raw);
    std::size_t unwritten = 0;
    for (int n = 0; n < s.n; ++n)
      for (int co = 0; co < s.cout; ++co)
        for (int oy = 0; oy < oh; ++oy)
          for (int ox = 0; ox < ow; ++ox) unwritten += std::isnan(y.read(raw, n, co, oy, ox)) ? 1 : 0;
    EXPECT_EQ(unwritten, 0u);
    EXPECT_LE(err, 2e-3);
    double err_rounded = -1;
    if (t.tf32_wgmma()) {
      HostTensor xr = x, wr = wt;
      for (double& e : xr.values) e = tf32_of(e);
      for (double& e : wr.values) e = tf32_of(e);
      err_rounded = output_error(s, xr, wr, b, r, y, dy, out_shift);
      EXPECT_LE(err_rounded, 2e-5) << "not the sums of TF32-rounded operands";
    }
    std::printf("  %-110s rel L2 %.2e (against TF32-rounded operands %.2e)\n", v.name().c_str(), err, err_rounded);
  }
  if (on_sm90) std::printf("  %d of 14 on the TF32 wgmma kernel\n", on_kernel);
}

// The pointwise form (1 x 1, stride 1, no padding, an NCHW input of whole 16-byte runs: a GEMM whose
// tiles are copied from the tensors as they are) through the public conv2d call, in every dtype and
// f32 precision: random channels (up to 200 in, 300 out: partial channel blocks, several), planes
// (partial pixel tiles), weight and output layouts, residuals, outputs 4 bytes off; poisoned first.
// f16 / bf16 within tolerance(dt) of float64; f32 in tf32 (the form's f32 precision) within 2e-3, and
// within 2e-5 of float64 on TF32-rounded operands (the rounding itself); f32 in fp32 and tf32x3 (not
// the form: the FMA and 3xTF32 kernels) within 1e-5.
TEST(Conv2dDtypesGpu, PointwiseShapesAgainstFloat64) {
  if (device_count() == 0) GTEST_SKIP() << "no GPU";
  const std::uint64_t seed = test::fresh_seed();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  const char* off = std::getenv("CUINLINE_CONV2D_POINTWISE");
  const bool expect_pointwise = device_target() != Conv2dTarget::sm75 && !(off != nullptr && std::string(off) == "0");
  Stream stream;
  int on_kernel = 0;
  constexpr int kCases = 15;
  for (int i = 0; i < kCases; ++i) {
    const DType dt = i % 5 == 0 ? DType::f16 : i % 5 == 1 ? DType::bf16 : DType::f32;
    const Conv2dPrecision precision = i % 5 == 3 ? Conv2dPrecision::tf32
                                      : i % 5 == 4 ? Conv2dPrecision::tf32x3
                                                   : Conv2dPrecision::fp32;
    const int run = dt == DType::f32 ? 4 : 8;
    Shape s{};
    s.n = 1 + static_cast<int>(rng() % 2);
    s.cin = run * (static_cast<int>(rng() % (200 / run)) + (dt == DType::f32 ? 2 : 2));
    s.cout = 1 + static_cast<int>(rng() % 300);
    s.kh = s.kw = 1;
    s.p = Conv2dParams{};
    // A plane of whole runs: h x w with w even and h x w % run == 0.
    s.h = 1 + static_cast<int>(rng() % 24);
    s.w = run * (1 + static_cast<int>(rng() % 6));
    if (rng() % 2) std::swap(s.h, s.w);
    s.bias = rng() % 4 != 0;
    s.residual = rng() % 3 == 0;
    const bool w_nhwc = rng() % 2, out_nhwc = rng() % 2;
    const std::size_t out_shift = rng() % 3 == 0 ? 4 : 0;
    const HostTensor x = random_tensor(s.n, s.cin, s.h, s.w, dt, false, rng);
    const HostTensor wt = random_tensor(s.cout, s.cin, 1, 1, dt, w_nhwc, rng);
    const HostTensor b = random_tensor(1, s.cout, 1, 1, dt, false, rng);
    const HostTensor r = random_tensor(s.n, s.cout, s.h, s.w, dt, out_nhwc, rng);
    HostTensor y{s.n, s.cout, s.h, s.w, dt, out_nhwc, std::vector<double>(r.size())};
    DeviceCopy dx = upload(x), dw = upload(wt), db = upload(b), dr = upload(r, out_shift), dy = upload(y, out_shift);
    dy.buffer.fill_u32(0xffffffffu);  // NaN
    const TensorView bias = s.bias ? TensorView::contiguous(db.view.data, dt, {s.cout}) : TensorView{};
    const TensorView res = s.residual ? dr.view : TensorView{};
    const Op epi = div_leaky_relu_epilogue(1.0, 0.125);
    const Conv2dVariant v = conv2d_variant_for(dx.view, dw.view, bias, dy.view, s.p, epi, precision, res);
    SCOPED_TRACE(v.name());
    const Conv2dTiling t = planned(v);
    if (expect_pointwise && (dt == DType::f32 ? precision == Conv2dPrecision::tf32 : !hmma_disabled())) {
      EXPECT_TRUE(t.pointwise()) << "planned off the pointwise form";
    }
    if (dt == DType::f32 && precision != Conv2dPrecision::tf32) EXPECT_FALSE(t.pointwise());
    on_kernel += t.pointwise();
    conv2d(dx.view, dw.view, bias, dy.view, s.p, epi, stream, precision, res);
    stream.synchronize();
    std::vector<unsigned char> raw;
    const double err = output_error(s, x, wt, b, r, y, dy, out_shift, &raw);
    std::size_t unwritten = 0;
    for (int n = 0; n < s.n; ++n)
      for (int co = 0; co < s.cout; ++co)
        for (int oy = 0; oy < s.h; ++oy)
          for (int ox = 0; ox < s.w; ++ox) unwritten += std::isnan(y.read(raw, n, co, oy, ox)) ? 1 : 0;
    EXPECT_EQ(unwritten, 0u);
    const bool tf32 = dt == DType::f32 && precision == Conv2dPrecision::tf32;
    EXPECT_LE(err, tf32 ? 2e-3 : tolerance(dt));
    double err_rounded = -1;
    if (tf32 && t.pointwise()) {
      HostTensor xr = x, wr = wt;
      for (double& e : xr.values) e = tf32_of(e);
      for (double& e : wr.values) e = tf32_of(e);
      err_rounded = output_error(s, xr, wr, b, r, y, dy, out_shift);
      EXPECT_LE(err_rounded, 2e-5) << "not the sums of TF32-rounded operands";
    }
    std::printf("  %-110s rel L2 %.2e (TF32-rounded operands %.2e)\n", v.name().c_str(), err, err_rounded);
  }
  std::printf("  %d of %d on the pointwise form\n", on_kernel, kCases);
}

TEST(Conv2dDtypesGpu, ChannelOperandEpiloguesOnEveryKernel) {
  if (device_count() == 0) GTEST_SKIP() << "no GPU";
  const std::uint64_t seed = test::fresh_seed();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  struct Case {
    Shape s;
    DType dt;
    bool in_nhwc, out_nhwc;
    Conv2dPrecision precision;
  };
  Conv2dParams g4 = Conv2dParams::square(1, 1);
  g4.groups = 4;
  Conv2dParams depthwise = Conv2dParams::square(2, 1);
  depthwise.groups = 24;
  const auto fp32 = Conv2dPrecision::fp32;
  const std::vector<Case> cases = {
      {{2, 8, 34, 34, 64, 3, 3, Conv2dParams{}, true}, DType::f32, false, false, fp32},                     // Winograd
      {{2, 16, 21, 19, 20, 5, 5, Conv2dParams::square(1, 2), true}, DType::f32, false, false, fp32},        // direct
      {{2, 32, 20, 20, 48, 3, 3, Conv2dParams::square(1, 1), true, true}, DType::f32, false, false, Conv2dPrecision::tf32},
      {{2, 8, 66, 66, 64, 3, 3, Conv2dParams{}, true}, DType::f16, false, false, fp32},                     // halo NCHW
      {{2, 8, 66, 66, 64, 3, 3, Conv2dParams{}, false}, DType::bf16, true, true, fp32},                     // halo NHWC
      {{2, 64, 28, 28, 64, 3, 3, Conv2dParams::square(1, 1), true}, DType::f16, true, true, fp32},          // wgmma
      {{2, 32, 17, 23, 40, 3, 3, Conv2dParams::square(1, 1), true, true}, DType::bf16, false, false, fp32}, // padded tile
      {{2, 32, 17, 23, 40, 3, 3, Conv2dParams::square(1, 1), true, true}, DType::f16, true, true, fp32},
      {{2, 32, 15, 15, 32, 3, 3, g4, true, true}, DType::f16, true, false, fp32},                           // general
      {{2, 24, 30, 30, 24, 3, 3, depthwise, true}, DType::f32, true, true, fp32},                           // row-fast
      {{2, 24, 30, 30, 24, 3, 3, depthwise, true, true}, DType::f16, true, true, fp32},                     // channel pairs
      {{2, 8, 34, 34, 40, 3, 3, Conv2dParams{}, true, true}, DType::f32, true, true, fp32},                 // transposed
  };
  // in1 = m (0.5 .. 1.5), in2 = b2 (normal); the epilogues in float64.
  const Op chain = parse_op("mul(in1)|leaky_relu(0.2)|add(in2)");
  const Op gelu = parse_op(
      "expr([x, m, b] (x * m > 0.0f ? x * m : x * m * 0.01f) * 0.5f * (1.0f + erff((x * m > 0.0f ? x * m : x * m * "
      "0.01f) * 0.70710678118654752f)) + b)");
  const auto apply = [](bool is_gelu, double x, double m, double b2) {
    if (!is_gelu) {
      const double y = x * m;
      return (y > 0 ? y : y * 0.2) + b2;
    }
    double y = x * m;
    y = y > 0 ? y : y * 0.01;
    return y * 0.5 * (1.0 + std::erf(y * 0.70710678118654752)) + b2;
  };
  Stream stream;
  for (const Case& c : cases) {
    const Shape& s = c.s;
    const int oh = static_cast<int>(conv2d_out_extent(s.h, s.kh, s.p.stride_h, s.p.pad_h, s.p.dilation_h));
    const int ow = static_cast<int>(conv2d_out_extent(s.w, s.kw, s.p.stride_w, s.p.pad_w, s.p.dilation_w));
    const HostTensor x = random_tensor(s.n, s.cin, s.h, s.w, c.dt, c.in_nhwc, rng);
    const HostTensor wt = random_tensor(s.cout, s.cin / s.p.groups, s.kh, s.kw, c.dt, c.in_nhwc, rng);
    const HostTensor b = random_tensor(1, s.cout, 1, 1, c.dt, false, rng);
    const HostTensor r = random_tensor(s.n, s.cout, oh, ow, c.dt, c.out_nhwc, rng);
    HostTensor m = random_tensor(1, s.cout, 1, 1, c.dt, false, rng);
    std::uniform_real_distribution<double> scale(0.5, 1.5);
    for (double& v : m.values) v = test::to_op(c.dt, test::from_op(c.dt, static_cast<float>(scale(rng))));
    const HostTensor b2 = random_tensor(1, s.cout, 1, 1, c.dt, false, rng);
    HostTensor y{s.n, s.cout, oh, ow, c.dt, c.out_nhwc, std::vector<double>(r.size())};
    DeviceCopy dx = upload(x), dw = upload(wt), db = upload(b), dr = upload(r), dm = upload(m), db2 = upload(b2),
               dy = upload(y);
    const TensorView bias = s.bias ? TensorView::contiguous(db.view.data, c.dt, {s.cout}) : TensorView{};
    // PyTorch's parameter shapes: m as [Cout, 1, 1], b2 as [1, Cout, 1, 1].
    const std::vector<TensorView> operands = {TensorView::contiguous(dm.view.data, c.dt, {s.cout, 1, 1}),
                                              TensorView::contiguous(db2.view.data, c.dt, {1, s.cout, 1, 1})};
    for (bool is_gelu : {false, true}) {
      const Op& epi = is_gelu ? gelu : chain;
      const TensorView res = s.residual ? dr.view : TensorView{};
      const Conv2dVariant v = conv2d_variant_for(dx.view, dw.view, bias, dy.view, s.p, epi, c.precision, res, operands);
      SCOPED_TRACE(v.name() + " on " + kernel_name(conv2d_variant_for_device(v, current_device())));
      dy.buffer.fill_u32(0xffffffffu);  // NaN as f32, f16 and bf16
      conv2d(dx.view, dw.view, bias, dy.view, s.p, epi, stream, c.precision, res, operands);
      stream.synchronize();
      std::vector<unsigned char> raw(y.bytes());
      dy.buffer.copy_to_host(raw.data(), raw.size());
      double num = 0, den = 0;
      for (int n = 0; n < s.n; ++n)
        for (int co = 0; co < s.cout; ++co)
          for (int oy = 0; oy < oh; ++oy)
            for (int ox = 0; ox < ow; ++ox) {
              const double ref = apply(is_gelu, conv_value(s, x, wt, b, r, n, co, oy, ox), m.values[co], b2.values[co]);
              const double got = y.read(raw, n, co, oy, ox);
              ASSERT_FALSE(std::isnan(got)) << "unwritten: channel " << co << " (" << oy << ", " << ox << ")";
              num += (got - ref) * (got - ref);
              den += ref * ref;
            }
      const double err = std::sqrt(num / (den > 0 ? den : 1));
      EXPECT_LE(err, c.precision == Conv2dPrecision::tf32 ? 2e-3 : tolerance(c.dt));
      std::printf("  %-110s rel L2 %.2e\n", v.name().substr(0, 110).c_str(), err);
    }
  }
}

// Depthwise with a channels-last f16 / bf16 input: a row-fast thread computes two adjacent channels,
// read and stored as 32-bit words where the input, output and residual pointers are 4-byte aligned,
// else one element at a time. The same call with every tensor one element (2 bytes) past its
// allocation's alignment gives the aligned call's output bit for bit, and both match float64.
TEST(Conv2dDtypesGpu, DepthwiseChannelPairsWithMisalignedTensors) {
  if (device_count() == 0) GTEST_SKIP() << "no GPU";
  std::mt19937_64 rng(test::fresh_seed());
  Conv2dParams p = Conv2dParams::square(1, 1);
  p.groups = 48;
  const Shape s{2, 48, 23, 19, 48, 3, 3, p, true, true};
  for (DType dt : {DType::f16, DType::bf16}) {
    const HostTensor x = random_tensor(s.n, s.cin, s.h, s.w, dt, true, rng);
    const HostTensor wt = random_tensor(s.cout, 1, 3, 3, dt, false, rng);
    const HostTensor b = random_tensor(1, s.cout, 1, 1, dt, false, rng);
    const HostTensor r = random_tensor(s.n, s.cout, s.h, s.w, dt, true, rng);
    HostTensor y{s.n, s.cout, s.h, s.w, dt, true, std::vector<double>(r.size())};
    std::vector<std::vector<unsigned char>> outs;
    for (std::size_t shift : {0, 2}) {
      DeviceCopy dx = upload(x, shift), dw = upload(wt), db = upload(b), dr = upload(r, shift), dy = upload(y, shift);
      dy.buffer.fill_u32(0xffffffffu);
      const TensorView bias = TensorView::contiguous(db.view.data, dt, {s.cout});
      const Conv2dVariant v = conv2d_variant_for(dx.view, dw.view, bias, dy.view, s.p, div_leaky_relu_epilogue(1.0, 0.125),
                                                 Conv2dPrecision::fp32, dr.view);
      SCOPED_TRACE(v.name() + (shift ? " misaligned" : " aligned"));
      const Conv2dTiling t = planned(v);
      ASSERT_TRUE(t.row_fast());
      EXPECT_EQ(t.as_generic().channels_per_thread, 2);
      Stream stream;
      conv2d(dx.view, dw.view, bias, dy.view, s.p, div_leaky_relu_epilogue(1.0, 0.125), stream, Conv2dPrecision::fp32,
             dr.view);
      stream.synchronize();
      outs.emplace_back();
      // Against float64, the residual included (NaN, an unwritten output, fails).
      EXPECT_LE(output_error(s, x, wt, b, r, y, dy, shift, &outs.back()), tolerance(dt));
    }
    EXPECT_EQ(outs[0], outs[1]) << "the word and element paths differ";
  }
}

// f64 (PyTorch's float64 conv) runs on the general kernel in double, a fused multiply-add a product:
// for each tap inside the input (kh, then kw), its group's input channels in order, from +0; then
// + bias (+0 without one), + residual, the epilogue (/ 1, LeakyReLU(0.125)). The reference below
// sums in that order with std::fma, so every output must equal it bit for bit (any NaN for a NaN) —
// on every path of the kernel (a pixel's channels, channels-last 16-byte loads and their unaligned
// fallback, grouped, depthwise rows a thread in both layouts, depthwise channels fastest) — on
// random doubles of full precision with NaN, ±inf, -0.0, subnormals and products that overflow or
// underflow scattered through the input and the weight, outputs poisoned first.
double fma_reference(const Shape& s, const HostTensor& x, const HostTensor& wt, const HostTensor& b,
                     const HostTensor& r, int n, int co, int oy, int ox) {
  const int cin_g = s.cin / s.p.groups, group = co / (s.cout / s.p.groups);
  double acc = 0.0;
  for (int ky = 0; ky < s.kh; ++ky) {
    const int iy = oy * s.p.stride_h - s.p.pad_h + ky * s.p.dilation_h;
    if (iy < 0 || iy >= s.h) continue;
    for (int kx = 0; kx < s.kw; ++kx) {
      const int ix = ox * s.p.stride_w - s.p.pad_w + kx * s.p.dilation_w;
      if (ix < 0 || ix >= s.w) continue;
      for (int cl = 0; cl < cin_g; ++cl) {
        const int ci = group * cin_g + cl;
        acc = std::fma(x.values[((std::size_t(n) * s.cin + ci) * s.h + iy) * s.w + ix],
                       wt.values[((std::size_t(co) * cin_g + cl) * s.kh + ky) * s.kw + kx], acc);
      }
    }
  }
  double v = acc + (s.bias ? b.values[co] : 0.0);
  if (s.residual) v += r.values[((std::size_t(n) * s.cout + co) * r.h + oy) * r.w + ox];
  v = v / 1.0;
  return v > 0 ? v : v * 0.125;
}

TEST(Conv2dDtypesGpu, F64MatchesAFusedMultiplyAddReferenceBitForBit) {
  if (device_count() == 0) GTEST_SKIP() << "no GPU";
  const std::uint64_t seed = test::fresh_seed();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  auto params = [](int sh, int sw, int ph, int pw, int dh, int dw, int groups) {
    Conv2dParams p;
    p.stride_h = sh, p.stride_w = sw, p.pad_h = ph, p.pad_w = pw, p.dilation_h = dh, p.dilation_w = dw;
    p.groups = groups;
    return p;
  };
  struct Case {
    Shape s;
    bool in_nhwc, w_nhwc, out_nhwc;
    const char* path;  // what the plan must pick: "pixel", "row", "channel"
  };
  const Case cases[] = {
      {{2, 16, 19, 23, 12, 3, 3, params(1, 1, 1, 1, 1, 1, 1), true, true}, false, false, false, "pixel"},
      {{2, 16, 19, 23, 12, 3, 3, params(1, 1, 1, 1, 1, 1, 1), true, true}, true, true, true, "pixel"},
      {{1, 5, 30, 17, 7, 3, 5, params(2, 1, 1, 2, 2, 1, 1), false, true}, true, false, false, "pixel"},
      {{1, 16, 12, 12, 8, 3, 3, params(1, 1, 0, 1, 1, 1, 4), true, false}, false, true, true, "pixel"},
      {{2, 16, 21, 18, 16, 3, 3, params(1, 1, 1, 1, 1, 1, 16), true, true}, false, false, false, "row"},
      {{2, 16, 21, 18, 16, 3, 5, params(2, 1, 2, 1, 2, 1, 16), true, false}, true, false, true, "row"},
      {{1, 8, 15, 15, 16, 5, 5, params(2, 2, 2, 2, 1, 1, 8), false, true}, false, false, true, "row"},
      {{1, 8, 20, 19, 8, 9, 9, params(1, 1, 4, 4, 1, 1, 8), true, true}, true, false, true, "channel"},
      {{1, 8, 20, 19, 8, 9, 9, params(1, 1, 4, 4, 1, 1, 8), true, false}, false, false, false, "pixel"},
  };
  // Special values: NaN, ±inf, -0.0, subnormals (the smallest, and one whose products with the
  // weights' ~1 stay subnormal), 1e300 (its products overflow to inf with a weight of 1e10) and
  // 1e-200 (products with 1e-200 underflow to subnormals or zero).
  const double specials[] = {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity(), -0.0, 4.9406564584124654e-324,
                             -1.0e-310, 1.0e300, -1.0e-200};
  auto sprinkle = [&](HostTensor& t, double rate, bool non_finite) {
    std::uniform_real_distribution<double> u(0.0, 1.0);
    for (double& v : t.values) {
      if (u(rng) >= rate) continue;
      const std::size_t first = non_finite ? 0 : 3;
      v = specials[first + rng() % (std::size(specials) - first)];
    }
  };
  for (const Case& c : cases) {
    const Shape& s = c.s;
    const int oh = static_cast<int>(conv2d_out_extent(s.h, s.kh, s.p.stride_h, s.p.pad_h, s.p.dilation_h));
    const int ow = static_cast<int>(conv2d_out_extent(s.w, s.kw, s.p.stride_w, s.p.pad_w, s.p.dilation_w));
    HostTensor x = random_tensor(s.n, s.cin, s.h, s.w, DType::f64, c.in_nhwc, rng);
    HostTensor wt = random_tensor(s.cout, s.cin / s.p.groups, s.kh, s.kw, DType::f64, c.w_nhwc, rng);
    const HostTensor b = random_tensor(1, s.cout, 1, 1, DType::f64, false, rng);
    const HostTensor r = random_tensor(s.n, s.cout, oh, ow, DType::f64, c.out_nhwc, rng);
    sprinkle(x, 0.02, false);
    sprinkle(x, 0.0005, true);
    sprinkle(wt, 0.01, false);
    wt.values[rng() % wt.values.size()] = 1e10;
    // And for certain: a NaN and an infinity read by the middle output of the first and last image
    // (its centre tap, input channel 0).
    const int iy = oh / 2 * s.p.stride_h - s.p.pad_h + s.kh / 2 * s.p.dilation_h;
    const int ix = ow / 2 * s.p.stride_w - s.p.pad_w + s.kw / 2 * s.p.dilation_w;
    ASSERT_TRUE(iy >= 0 && iy < s.h && ix >= 0 && ix < s.w);
    x.values[(std::size_t(iy) * s.w + ix)] = std::numeric_limits<double>::quiet_NaN();
    x.values[((std::size_t(s.n - 1) * s.cin) * s.h + iy) * s.w + ix] = -std::numeric_limits<double>::infinity();
    HostTensor y{s.n, s.cout, oh, ow, DType::f64, c.out_nhwc, std::vector<double>(r.size())};
    std::vector<std::vector<unsigned char>> outs;
    // Aligned, then every tensor 8 bytes past its allocation's 16-byte alignment (the channels-last
    // input's 16-byte loads fall back to one element at a time: the same sums).
    for (std::size_t shift : {0, 8}) {
      DeviceCopy dx = upload(x, shift), dw = upload(wt, shift), db = upload(b), dr = upload(r, shift),
                 dy = upload(y, shift);
      dy.buffer.fill_u32(0x7ff4dead);  // a NaN in every 8 bytes
      const TensorView bias = s.bias ? TensorView::contiguous(db.view.data, DType::f64, {s.cout}) : TensorView{};
      const TensorView residual = s.residual ? dr.view : TensorView{};
      const Op epi = div_leaky_relu_epilogue(1.0, 0.125);
      const Conv2dVariant v = conv2d_variant_for(dx.view, dw.view, bias, dy.view, s.p, epi, Conv2dPrecision::fp32, residual);
      SCOPED_TRACE(v.name() + (shift ? " misaligned" : " aligned"));
      EXPECT_EQ(v.dtype, DType::f64);
      const Conv2dTiling t = planned(v);
      EXPECT_TRUE(t.generic());
      EXPECT_EQ(t.row_fast(), std::string(c.path) == "row");
      EXPECT_EQ(t.channel_fast(), std::string(c.path) == "channel");
      // The precision argument (TF32 is an f32 mode) changes nothing: the same kernel.
      EXPECT_EQ(kernel_name(conv2d_variant_for(dx.view, dw.view, bias, dy.view, s.p, epi, Conv2dPrecision::tf32, residual)),
                kernel_name(v));
      Stream stream;
      conv2d(dx.view, dw.view, bias, dy.view, s.p, epi, stream, Conv2dPrecision::fp32, residual);
      stream.synchronize();
      std::vector<unsigned char> raw(y.bytes() + shift);
      dy.buffer.copy_to_host(raw.data(), raw.size());
      raw.erase(raw.begin(), raw.begin() + static_cast<std::ptrdiff_t>(shift));
      int mismatches = 0, non_finite = 0, subnormal = 0;
      for (int n = 0; n < s.n; ++n)
        for (int co = 0; co < s.cout; ++co)
          for (int oy = 0; oy < oh; ++oy)
            for (int ox = 0; ox < ow; ++ox) {
              const double want = fma_reference(s, x, wt, b, r, n, co, oy, ox);
              const double got = y.read(raw, n, co, oy, ox);
              non_finite += std::isfinite(want) ? 0 : 1;
              subnormal += std::fpclassify(want) == FP_SUBNORMAL ? 1 : 0;
              const bool same = std::isnan(want) ? std::isnan(got)
                                                 : std::memcmp(&want, &got, sizeof want) == 0;
              if (!same && mismatches++ < 5) {
                ADD_FAILURE() << "n " << n << " channel " << co << " (" << oy << ", " << ox << "): got " << got
                              << ", want " << want;
              }
            }
      EXPECT_EQ(mismatches, 0);
      EXPECT_GT(non_finite, 0) << "the special values reach some outputs";
      std::printf("  %-90s %s: %d non-finite, %d subnormal outputs\n", v.name().c_str(), shift ? "misaligned" : "aligned",
                  non_finite, subnormal);
      outs.push_back(std::move(raw));
    }
    EXPECT_EQ(outs[0], outs[1]) << "the aligned and unaligned calls differ";
  }
}

}  // namespace
