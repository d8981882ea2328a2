// conv2d calls that need a stream-ordered workspace (an f16 NCHW call staged into channels-last
// copies; an f32 channels-last call run on the NCHW kernels between transposing copies) on a device
// whose memory is used up: the workspace cannot be had, so each call runs its direct kernel on the
// tensors as they are (docs/conv2d.md, "NCHW: the staging copy"). The test holds all but ~32 MiB of
// the device with cuMemAlloc, calls conv2d through the public API on its own stream, and checks:
// no error, the one warning that says why, every output written (poisoned with NaN first) and equal
// to a float64 reference; then, with the memory given back, the same calls take their workspace
// path again on the same context and are still right. One process holds the device's memory: the
// test runs alone (RUN_SERIAL in tests/CMakeLists.txt). Skips without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cuinline/conv2d.hpp>
#include <cuinline/driver.hpp>
#include <random>
#include <string>
#include <vector>

#include "driver/driver_api.hpp"
#include "elementwise_reference.hpp"
#include "log_capture.hpp"
#include "ops/conv2d/tiling.hpp"
#include "test_support.hpp"

namespace {

using namespace cuinline;
using namespace cuinline::ops;

// A 1 x 1 conv of [n, cin, h, w] to cout channels, bias, div(1) | leaky_relu(0.125): small enough a
// float64 reference on the host, with an input large enough that its workspace (66-133 MB) exceeds
// what is left free. (127 x 127: a plane of whole 16-byte runs would take the pointwise form, which
// needs no workspace.)
constexpr int kN = 32, kCin = 64, kH = 127, kW = 127, kCout = 8;

struct Tensors {
  DType dtype;
  bool nhwc;  // input and output channels-last (the weight too)
  std::vector<double> x, w, b;  // logical NCHW / [cout][cin] values, rounded to the dtype
  DeviceBuffer dx, dw, db, dy;
  TensorView vx, vw, vb, vy;
};

std::vector<unsigned char> encode(const std::vector<double>& values, DType dt) {
  const std::size_t es = dtype_size(dt);
  std::vector<unsigned char> raw(values.size() * es);
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::uint64_t bits = test::from_op(dt, static_cast<float>(values[i]));
    std::memcpy(raw.data() + i * es, &bits, es);
  }
  return raw;
}

// Logical NCHW values stored channels-last: [n][h][w][c].
std::vector<double> to_nhwc(const std::vector<double>& v, int n, int c, int hw) {
  std::vector<double> out(v.size());
  for (int i = 0; i < n; ++i)
    for (int ch = 0; ch < c; ++ch)
      for (int p = 0; p < hw; ++p) out[(std::size_t(i) * hw + p) * c + ch] = v[(std::size_t(i) * c + ch) * hw + p];
  return out;
}

Tensors make_tensors(DType dt, bool nhwc, std::mt19937_64& rng) {
  Tensors t{dt, nhwc, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}};
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const auto fill = [&](std::vector<double>& v, std::size_t size) {
    v.resize(size);
    for (double& e : v) e = test::to_op(dt, test::from_op(dt, normal(rng)));
  };
  fill(t.x, std::size_t(kN) * kCin * kH * kW);
  fill(t.w, std::size_t(kCout) * kCin);
  fill(t.b, kCout);
  const std::size_t es = dtype_size(dt);
  const auto upload = [&](const std::vector<double>& v, DeviceBuffer& buf) {
    const std::vector<unsigned char> raw = encode(v, dt);
    buf = DeviceBuffer(raw.size());
    buf.copy_from_host(raw.data(), raw.size());
  };
  upload(nhwc ? to_nhwc(t.x, kN, kCin, kH * kW) : t.x, t.dx);
  upload(t.w, t.dw);  // 1 x 1: [cout][cin] is both layouts
  upload(t.b, t.db);
  t.dy = DeviceBuffer(std::size_t(kN) * kCout * kH * kW * es);
  const std::int64_t hw = std::int64_t{kH} * kW;
  const auto strides = [&](std::int64_t c) {
    return nhwc ? std::vector<std::int64_t>{hw * c, 1, kW * c, c} : std::vector<std::int64_t>{c * hw, hw, kW, 1};
  };
  const auto sx = strides(kCin), sy = strides(kCout);
  t.vx = TensorView::strided(t.dx.as<void>(), dt, {kN, kCin, kH, kW}, {sx[0], sx[1], sx[2], sx[3]});
  t.vw = nhwc ? TensorView::strided(t.dw.as<void>(), dt, {kCout, kCin, 1, 1}, {kCin, 1, kCin, kCin})
              : TensorView::contiguous(t.dw.as<void>(), dt, {kCout, kCin, 1, 1});
  t.vb = TensorView::contiguous(t.db.as<void>(), dt, {kCout});
  t.vy = TensorView::strided(t.dy.as<void>(), dt, {kN, kCout, kH, kW}, {sy[0], sy[1], sy[2], sy[3]});
  return t;
}

double tolerance(DType dt) {
  return dt == DType::f16 ? 2e-3 : dt == DType::bf16 ? 1.6e-2 : 1e-5;  // as test_conv2d_dtypes_gpu
}

// Poisons the output, runs the call on `stream`, and compares every output with the reference.
void run_and_check(Tensors& t, Stream& stream, const std::string& what) {
  SCOPED_TRACE(what);
  t.dy.fill_u32(0xffffffffu);  // NaN in f32, f16 and bf16
  conv2d(t.vx, t.vw, t.vb, t.vy, Conv2dParams{}, div_leaky_relu_epilogue(1.0, 0.125), stream);
  stream.synchronize();
  const std::size_t es = dtype_size(t.dtype);
  std::vector<unsigned char> raw(t.dy.bytes());
  t.dy.copy_to_host(raw.data(), raw.size());
  const int hw = kH * kW;
  double num = 0, den = 0;
  std::vector<double> acc(static_cast<std::size_t>(hw));
  for (int n = 0; n < kN; ++n)
    for (int co = 0; co < kCout; ++co) {
      std::fill(acc.begin(), acc.end(), t.b[co]);
      for (int ci = 0; ci < kCin; ++ci) {
        const double* x = &t.x[(std::size_t(n) * kCin + ci) * hw];
        const double w = t.w[std::size_t(co) * kCin + ci];
        for (int p = 0; p < hw; ++p) acc[p] += x[p] * w;
      }
      for (int p = 0; p < hw; ++p) {
        const double ref = acc[p] > 0 ? acc[p] : acc[p] * 0.125;
        const std::size_t at = t.nhwc ? (std::size_t(n) * hw + p) * kCout + co : (std::size_t(n) * kCout + co) * hw + p;
        std::uint64_t bits = 0;
        std::memcpy(&bits, raw.data() + at * es, es);
        const double got = test::to_op(t.dtype, bits);
        ASSERT_FALSE(std::isnan(got)) << "output not written: image " << n << " channel " << co << " pixel " << p;
        num += (got - ref) * (got - ref);
        den += ref * ref;
      }
    }
  const double err = std::sqrt(num / den);
  EXPECT_LE(err, tolerance(t.dtype));
  std::printf("  %-60s rel L2 %.2e\n", what.c_str(), err);
}

// Holds the device's memory with cuMemAlloc until ~`left` bytes remain (to within 2 MiB), given back
// on destruction.
class MemoryHog {
 public:
  explicit MemoryHog(std::size_t left) {
    const auto& api = detail::driver();
    for (std::size_t chunk : {std::size_t{1} << 30, std::size_t{256} << 20, std::size_t{2} << 20}) {
      CUdeviceptr p = 0;
      while (api.cuMemAlloc(&p, chunk) == CUDA_SUCCESS) held_.push_back(p);
    }
    // Everything is held now: give back `left` bytes in 2 MiB pieces (the last ones taken).
    for (std::size_t freed = 0; freed < left && !held_.empty(); freed += std::size_t{2} << 20) {
      api.cuMemFree(held_.back());
      held_.pop_back();
    }
  }
  ~MemoryHog() {
    for (CUdeviceptr p : held_) detail::driver().cuMemFree(p);
  }
  MemoryHog(const MemoryHog&) = delete;
  MemoryHog& operator=(const MemoryHog&) = delete;
  std::size_t pieces() const { return held_.size(); }

 private:
  std::vector<CUdeviceptr> held_;
};

TEST(Conv2dWorkspaceGpu, CallsWithoutAWorkspaceRunTheDirectKernel) {
  if (device_count() == 0) GTEST_SKIP() << "no GPU";
  const std::uint64_t seed = test::fresh_seed();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  Tensors half = make_tensors(DType::f16, /*nhwc=*/false, rng);   // staged: NCHW f16
  Tensors single = make_tensors(DType::f32, /*nhwc=*/true, rng);  // transposed: channels-last f32
  // The plans this test is about: a workspace each (CUINLINE_CONV2D_STAGE / _TRANSPOSE unset).
  const Op epi = div_leaky_relu_epilogue(1.0, 0.125);
  const Conv2dTiling th = conv2d_tiling(conv2d_variant_for(half.vx, half.vw, half.vb, half.vy, {}, epi));
  const Conv2dTiling ts = conv2d_tiling(conv2d_variant_for(single.vx, single.vw, single.vb, single.vy, {}, epi));
  ASSERT_TRUE(th.staged()) << "the f16 NCHW call is expected to stage its input";
  ASSERT_TRUE(ts.transpose.input && ts.transpose.output)
      << "the f32 channels-last call is expected to transpose";

  std::string log;
  Stream stream;
  {
    test::LogCapture captured(LogLevel::warn);
    MemoryHog hog(std::size_t{32} << 20);
    ASSERT_GT(hog.pieces(), 0u);
    run_and_check(half, stream, "f16 NCHW, no workspace");
    run_and_check(single, stream, "f32 channels-last, no workspace");
    log = captured.text();
  }
  std::printf("%s", log.c_str());
  EXPECT_NE(log.find("use their direct kernels instead"), std::string::npos) << log;
  // The memory back: the same calls take their workspace path again, on the same context.
  run_and_check(half, stream, "f16 NCHW, staged");
  run_and_check(single, stream, "f32 channels-last, transposed");
}

}  // namespace
