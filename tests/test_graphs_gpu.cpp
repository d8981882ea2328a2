// Every op inside CUDA graphs: each op (elementwise in every dtype and layout, chains, expressions,
// conv2d in every precision, a raw Kernel::launch) captured on a non-blocking stream in each capture
// mode, instantiated, replayed on new input data and compared bit for bit with the eager call; a
// variant first compiled inside a capture; 8 threads capturing at once; a rejected call inside a
// capture leaves the capture valid. Skips without a device.
#include <gtest/gtest.h>

#include <atomic>
#include <cuinline/cuinline.hpp>
#include <thread>

#include "driver/driver_api.hpp"
#include "gpu_case_support.hpp"
#include "ops/conv2d/tiling.hpp"
#include "test_support.hpp"

namespace cuinline {
namespace {

using test::OpCase;

constexpr CaptureMode kModes[] = {CaptureMode::global, CaptureMode::thread_local_mode, CaptureMode::relaxed};

const char* mode_name(CaptureMode m) {
  return m == CaptureMode::global ? "global" : m == CaptureMode::thread_local_mode ? "thread_local" : "relaxed";
}

class GraphsGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (device_count() == 0) GTEST_SKIP() << "no GPU: " << driver_unavailable_reason();
  }
};

bool capturing(CUstream s) {
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  check_driver(detail::driver().cuStreamIsCapturing(s, &st), "cuStreamIsCapturing");
  return st == CU_STREAM_CAPTURE_STATUS_ACTIVE;
}

// Eager result of `c` on its current inputs (into its output), read back.
std::vector<unsigned char> eager(OpCase& c, const Stream& s) {
  c.output.buffer.fill_u32(test::kPoisonWord);
  c.run(s);
  s.synchronize();
  return c.output.read();
}

// Captures `c` in `mode`, then for three rounds of fresh inputs: eager result, poison, replay,
// compare.
void check_captured(OpCase& c, CaptureMode mode, std::mt19937_64& rng) {
  SCOPED_TRACE(c.name + std::string(" in ") + mode_name(mode) + " mode");
  Stream s;
  c.refill(rng);
  eager(c, s);  // the variant is cached before the capture: "from the first call after it is cached"
  Graph g = Graph::capture(s, [&] { c.run(s); }, mode);
  ASSERT_FALSE(capturing(s));
  for (int round = 0; round < 3; ++round) {
    c.refill(rng);
    const std::vector<unsigned char> expected = eager(c, s);
    c.output.buffer.fill_u32(test::kPoisonWord);
    g.launch(s);
    s.synchronize();
    const std::vector<unsigned char> got = c.output.read();
    ASSERT_EQ(got.size(), expected.size());
    EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size()), 0) << "round " << round;
  }
}

TEST_F(GraphsGpu, EveryOpIsCapturedInEveryMode) {
  std::mt19937_64 rng(test::fresh_seed());
  std::vector<OpCase> cases = test::all_op_cases();
  for (CaptureMode mode : kModes) {
    for (OpCase& c : cases) check_captured(c, mode, rng);
  }
}

// A variant that is not cached yet is compiled (or read from disk) and loaded inside the capture:
// NVRTC makes no driver call, and cuLibraryLoadData / cuLibraryGetKernel / the first launch of a new
// library are allowed while a stream is captured, in every mode (bench/capture_probe.cpp).
TEST_F(GraphsGpu, AVariantFirstUsedInsideACaptureCompilesThere) {
  std::mt19937_64 rng(test::fresh_seed());
  for (CaptureMode mode : kModes) {
    SCOPED_TRACE(mode_name(mode));
    // Constants no earlier run used: a new variant, so the first call misses every cache tier.
    const double slope = std::uniform_real_distribution<double>(0.001, 0.5)(rng);
    const double divisor = std::uniform_real_distribution<double>(1.5, 9.0)(rng);
    std::vector<OpCase> cases;
    cases.push_back(test::elementwise_case("new leaky_relu", ops::Op::leaky_relu(slope), DType::f32, {100003}));
    cases.push_back(test::conv2d_case("new conv2d", 1, 4, 20, 20, 8, 3, ops::Conv2dParams::square(1, 1),
                                      ops::Conv2dPrecision::fp32, ops::div_leaky_relu_epilogue(divisor, slope)));
    for (OpCase& c : cases) {
      SCOPED_TRACE(c.name);
      Stream s;
      c.refill(rng);
      const std::uint64_t lookups = ops::stats().cache_lookups + ops::conv2d_stats().cache_lookups;
      Graph g = Graph::capture(s, [&] { c.run(s); }, mode);
      EXPECT_EQ(ops::stats().cache_lookups + ops::conv2d_stats().cache_lookups, lookups + 1);
      c.output.buffer.fill_u32(test::kPoisonWord);
      g.launch(s);
      s.synchronize();
      const std::vector<unsigned char> got = c.output.read();
      const std::vector<unsigned char> expected = eager(c, s);
      EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size()), 0);
    }
  }
}

// The process's first workspace inside a global-mode capture (what torch.cuda.graph does when a
// staged conv is an application's first one): the workspace pool is created during the capture.
// Creating it in the capture's mode failed with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and
// invalidated the caller's capture (bench/conv2d_fuzz.py found it). ctest runs each test in its own
// process, so no earlier test has made the pool; run alone (--gtest_filter) it checks the same.
TEST_F(GraphsGpu, TheFirstWorkspaceOfAProcessMayBeMadeInsideAGlobalCapture) {
  std::mt19937_64 rng(test::fresh_seed());
  // f16 NCHW input and weight, 256 -> 512 channels 5x5 stride 2: staged (the channels-last copy
  // into a stream-ordered workspace); its first call inside the capture.
  OpCase c = test::conv2d_case("conv2d f16 NCHW staged", 1, 256, 14, 14, 512, 5, ops::Conv2dParams::square(2, 2),
                               ops::Conv2dPrecision::fp32, ops::Op::relu(), -1, DType::f16);
  const ops::Conv2dVariant v = ops::conv2d_variant_for_device(
      ops::conv2d_variant_for(c.inputs[0].view, c.inputs[1].view, c.inputs[2].view, c.output.view,
                              ops::Conv2dParams::square(2, 2), ops::Op::relu(), ops::Conv2dPrecision::fp32),
      0);
  if (!ops::conv2d_tiling(v).staged()) GTEST_SKIP() << v.name() << " is not staged on this GPU";
  Stream s;
  c.refill(rng);
  Graph g = Graph::capture(s, [&] { c.run(s); }, CaptureMode::global);
  ASSERT_FALSE(capturing(s));
  for (int round = 0; round < 2; ++round) {
    c.refill(rng);
    const std::vector<unsigned char> expected = eager(c, s);
    c.output.buffer.fill_u32(test::kPoisonWord);
    g.launch(s);
    s.synchronize();
    const std::vector<unsigned char> got = c.output.read();
    EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size()), 0) << "round " << round;
  }
}

TEST_F(GraphsGpu, EightThreadsCaptureAtOnceInThreadLocalMode) {
  const std::uint64_t seed = test::fresh_seed();
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      try {
        set_device(0);
        std::mt19937_64 rng(seed + t);
        std::vector<OpCase> cases;
        cases.push_back(test::elementwise_case("relu", ops::Op::relu(), DType::f32, {200000 + t}));
        cases.push_back(test::elementwise_case("expr", ops::Op::expr("x * x + s", {{"s", 1.5}}), DType::bf16,
                                               {70001 + 16 * t}));
        cases.push_back(test::conv2d_case("conv2d", 2, 8, 24, 24, 16, 3, ops::Conv2dParams::square(1, 1),
                                          ops::Conv2dPrecision::fp32, ops::Op::relu()));
        Stream s;
        for (OpCase& c : cases) c.refill(rng), eager(c, s);
        // One graph holding all three ops, captured while the other threads capture theirs.
        Graph g = Graph::capture(
            s, [&] { for (OpCase& c : cases) c.run(s); }, CaptureMode::thread_local_mode);
        for (int round = 0; round < 5; ++round) {
          std::vector<std::vector<unsigned char>> expected;
          for (OpCase& c : cases) c.refill(rng), expected.push_back(eager(c, s));
          for (OpCase& c : cases) c.output.buffer.fill_u32(test::kPoisonWord);
          g.launch(s);
          s.synchronize();
          for (std::size_t i = 0; i < cases.size(); ++i) {
            const auto got = cases[i].output.read();
            if (std::memcmp(got.data(), expected[i].data(), got.size()) != 0) failures.fetch_add(1);
          }
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << "thread " << t << ": " << e.what();
        failures.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(GraphsGpu, ARejectedCallInsideACaptureLeavesItValid) {
  std::mt19937_64 rng(test::fresh_seed());
  OpCase c = test::elementwise_case("relu", ops::Op::relu(), DType::f32, {4099});
  test::DeviceTensor wrong = test::make_tensor(DType::f32, {4098});
  Stream s;
  c.refill(rng);
  eager(c, s);
  const std::uint64_t launches = ops::stats().launches;
  for (CaptureMode mode : kModes) {
    SCOPED_TRACE(mode_name(mode));
    Graph g = Graph::capture(
        s,
        [&] {
          EXPECT_THROW(ops::relu(c.inputs[0].view, wrong.view, s), InvalidArgument);  // shape mismatch
          int host = 0;
          const TensorView on_host = TensorView::contiguous(&host, DType::f32, {1});
          EXPECT_THROW(ops::relu(on_host, on_host, s), InvalidArgument);  // pageable host memory
          EXPECT_TRUE(capturing(s));
          c.run(s);
        },
        mode);
    c.output.buffer.fill_u32(test::kPoisonWord);
    g.launch(s);
    s.synchronize();
    const auto got = c.output.read();
    const auto expected = eager(c, s);
    EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size()), 0);
  }
  // Each mode: one captured launch and one eager one; the two rejected calls launched nothing.
  EXPECT_EQ(ops::stats().launches, launches + 6);
}

constexpr const char* kScaleSource = R"(
extern "C" __global__ void scale(float* out, const float* in, float a, unsigned n) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    out[i] = a * in[i];
})";

// Kernel::launch with its occupancy queried inside the capture (the launch configuration is part
// of what a captured decode step computes).
TEST_F(GraphsGpu, LoadInlineKernelWithOccupancyQueriedInsideTheCapture) {
  InlineOptions o;
  o.name = "graph_scale";
  o.cuda_sources = {kScaleSource};
  o.functions = {"scale"};
  const Kernel k = load_inline(o).kernel("scale");
  std::mt19937_64 rng(test::fresh_seed());
  const unsigned n = 1 << 18;
  test::DeviceTensor in = test::make_tensor(DType::f32, {n}), out = test::make_tensor(DType::f32, {n});
  for (CaptureMode mode : kModes) {
    SCOPED_TRACE(mode_name(mode));
    Stream s;
    Graph g = Graph::capture(
        s, [&] { k.launch(k.occupancy_config(n, s), out.buffer.ptr(), in.buffer.ptr(), 3.0f, n); }, mode);
    test::fill_random(in, rng, true);
    out.buffer.fill_u32(test::kPoisonWord);
    g.launch(s);
    s.synchronize();
    std::vector<float> x(n), y(n);
    in.buffer.copy_to_host(x.data(), n * 4);
    out.buffer.copy_to_host(y.data(), n * 4);
    for (unsigned i = 0; i < n; ++i) ASSERT_EQ(y[i], 3.0f * x[i]) << i;
  }
}

}  // namespace
}  // namespace cuinline
