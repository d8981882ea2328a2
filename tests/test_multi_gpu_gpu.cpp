// Several GPUs in one process: each variant compiled once per arch and loaded once (one
// context-independent library), launched on a stream of either device from any thread; a stream of
// device 1 while device 0 is current; one thread per device launching the same variants at once,
// every result checked. Skips with fewer than two devices.
#include <gtest/gtest.h>

#include <atomic>
#include <cuinline/cuinline.hpp>
#include <thread>

#include "driver/driver_api.hpp"
#include "gpu_case_support.hpp"
#include "test_support.hpp"

namespace cuinline {
namespace {

using test::OpCase;

class MultiGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (device_count() < 2) GTEST_SKIP() << "needs two GPUs (" << device_count() << " here)";
  }
};

std::vector<unsigned char> run_eager(OpCase& c, const Stream& s) {
  c.output.buffer.fill_u32(test::kPoisonWord);
  c.run(s);
  s.synchronize();
  return c.output.read();
}

// Every op on device 1's stream while device 0 is current gives the result the same op gives on
// device 0 for the same data, and leaves device 0 current.
TEST_F(MultiGpu, AStreamOfDevice1WhileDevice0IsCurrent) {
  std::mt19937_64 rng(test::fresh_seed());
  set_device(0);
  std::vector<OpCase> on0 = test::all_op_cases(0), on1 = test::all_op_cases(1);
  Stream s0(0), s1(1);
  for (std::size_t i = 0; i < on0.size(); ++i) {
    SCOPED_TRACE(on0[i].name);
    on0[i].refill(rng);
    for (std::size_t t = 0; t < on0[i].inputs.size(); ++t) {
      const auto bytes = on0[i].inputs[t].read();
      on1[i].inputs[t].buffer.copy_from_host(bytes.data(), bytes.size());
    }
    const auto expected = run_eager(on0[i], s0);
    const auto got = run_eager(on1[i], s1);
    EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size()), 0);
    EXPECT_EQ(current_device(), 0);
  }
}

// One thread per device, the same variants at once: one compile per variant (both devices are one
// arch here), every result right, and graphs captured on device 1 replay there.
TEST_F(MultiGpu, OneThreadPerDeviceSameVariants) {
  if (device_arch(0) != device_arch(1)) GTEST_SKIP() << "the two devices differ in arch";
  const std::uint64_t seed = test::fresh_seed();
  std::mt19937_64 slope_rng(seed);
  const double slope = std::uniform_real_distribution<double>(0.01, 0.4)(slope_rng);
  const CacheStats before = default_cache().stats();
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int dev = 0; dev < 2; ++dev) {
    threads.emplace_back([&, dev] {
      // Every call here runs the specialized kernels (the compile under test): under the async
      // policy a device's first calls of the conv2d variant would run the generic conv2d kernel,
      // whose results are within rounding of the specialized kernel's, not equal bit for bit, and
      // the other device's reference might already run the specialized one.
      ScopedJitPolicy sync(JitPolicy::sync);
      try {
        std::mt19937_64 rng(seed + dev);
        std::vector<OpCase> cases;
        // New variants (a slope no earlier run used): both threads miss at once; one compiles.
        cases.push_back(test::elementwise_case("leaky", ops::Op::leaky_relu(slope), DType::f32, {300007}, {}, dev));
        cases.push_back(test::conv2d_case("conv2d", 2, 8, 24, 24, 16, 3, ops::Conv2dParams::square(1, 1),
                                          ops::Conv2dPrecision::fp32, ops::div_leaky_relu_epilogue(2.0, slope), dev));
        Stream s(dev);
        for (int round = 0; round < 20; ++round) {
          for (OpCase& c : cases) {
            c.refill(rng);
            const auto got = run_eager(c, s);
            // Reference: the same op on device 0 from this thread (device 0 for both threads).
            std::vector<unsigned char> expected;
            {
              OpCase ref = c.name == "leaky" ? test::elementwise_case("leaky", ops::Op::leaky_relu(slope),
                                                                         DType::f32, {300007}, {}, 0)
                                             : test::conv2d_case("conv2d", 2, 8, 24, 24, 16, 3,
                                                                 ops::Conv2dParams::square(1, 1),
                                                                 ops::Conv2dPrecision::fp32,
                                                                 ops::div_leaky_relu_epilogue(2.0, slope), 0);
              for (std::size_t t = 0; t < c.inputs.size(); ++t) {
                const auto bytes = c.inputs[t].read();
                ref.inputs[t].buffer.copy_from_host(bytes.data(), bytes.size());
              }
              Stream s0(0);
              expected = run_eager(ref, s0);
            }
            if (std::memcmp(got.data(), expected.data(), got.size()) != 0) failures.fetch_add(1);
          }
        }
        // Thread-local mode: the other thread frees buffers meanwhile, which a global-mode capture
        // forbids to every thread of the process (cuMemFree invalidates it).
        Graph g = Graph::capture(
            s, [&] { for (OpCase& c : cases) c.run(s); }, CaptureMode::thread_local_mode);
        std::vector<std::vector<unsigned char>> expected;
        for (OpCase& c : cases) c.refill(rng), expected.push_back(run_eager(c, s));
        for (OpCase& c : cases) c.output.buffer.fill_u32(test::kPoisonWord);
        g.launch(s);
        s.synchronize();
        for (std::size_t i = 0; i < cases.size(); ++i) {
          const auto got = cases[i].output.read();
          if (std::memcmp(got.data(), expected[i].data(), got.size()) != 0) failures.fetch_add(1);
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << "device " << dev << ": " << e.what();
        failures.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  // Two new variants, compiled once each for both devices (disk hits would also be fine, but the
  // slope is new, so these are compiles).
  EXPECT_EQ(default_cache().stats().compiles - before.compiles, 2u);
}

// A load_inline kernel loaded once, launched on either device.
TEST_F(MultiGpu, OneLoadedKernelLaunchesOnEitherDevice) {
  InlineOptions o;
  o.name = "multi_gpu_add";
  o.cuda_sources = {R"(extern "C" __global__ void add1(float* p, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] += 1.0f; })"};
  o.functions = {"add1"};
  const Kernel k = load_inline(o).kernel("add1");
  for (int dev : {1, 0, 1}) {
    const unsigned n = 5000;
    std::vector<float> host(n);
    for (unsigned i = 0; i < n; ++i) host[i] = static_cast<float>(i) * 0.5f;
    DeviceBuffer b(n * 4, dev);
    b.copy_from_host(host.data(), n * 4);
    Stream s(dev);
    k.launch({Dim3((n + 127) / 128), Dim3(128), 0, s}, b.ptr(), n);
    s.synchronize();
    std::vector<float> got(n);
    b.copy_to_host(got.data(), n * 4);
    for (unsigned i = 0; i < n; ++i) ASSERT_EQ(got[i], host[i] + 1.0f) << "device " << dev << " element " << i;
  }
}

}  // namespace
}  // namespace cuinline
