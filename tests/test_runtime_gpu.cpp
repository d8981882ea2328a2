// Runtime core on a GPU: compile → launch → check, through every cache tier, streams, threads,
// graph capture, several devices, and launch-time argument checking. Skips without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <thread>

#include "cuinline/cuinline.hpp"
#include "driver/driver_api.hpp"
#include "test_support.hpp"

namespace cuinline {
namespace {

using test::TempDir;

constexpr const char* kSource = R"(
extern "C" __global__ void fma_kernel(float* out, const float* x, const float* y, float a, unsigned long long n) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x)
    out[i] = fmaf(a, x[i], y[i]);
}
template <typename T, int Add>
__global__ void add_const(T* out, const T* in, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] + T(Add);
}
)";

class RuntimeGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (device_count() == 0) GTEST_SKIP() << "no GPU: " << driver_unavailable_reason();
  }
  static CacheConfig config_in(const TempDir& dir) {
    CacheConfig c;
    c.directory = dir.path();
    return c;
  }
  static InlineOptions options(KernelCache& cache) {
    InlineOptions o;
    o.name = "runtime_gpu";
    o.cuda_sources = {kSource};
    o.functions = {"fma_kernel"};
    o.name_expressions = {"add_const<float, 3>", "add_const<int, 7>"};
    o.cache = &cache;
    return o;
  }
};

struct FmaCase {
  std::vector<float> x, y, expected;
  float a;
};

FmaCase make_case(std::size_t n) {
  std::mt19937_64 rng(test::fresh_seed());
  std::normal_distribution<float> dist(0.0f, 10.0f);
  FmaCase c;
  c.a = dist(rng);
  c.x.resize(n);
  c.y.resize(n);
  c.expected.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    c.x[i] = dist(rng);
    c.y[i] = dist(rng);
    c.expected[i] = std::fmaf(c.a, c.x[i], c.y[i]);
  }
  return c;
}

// Launches fma_kernel through `kernel` on `stream` and checks every element bit for bit.
void run_and_check(const Kernel& kernel, CUstream stream, std::size_t n = 100003) {
  const FmaCase c = make_case(n);
  DeviceBuffer x(n * 4), y(n * 4), out(n * 4);
  x.copy_from_host(c.x.data(), n * 4);
  y.copy_from_host(c.y.data(), n * 4);
  out.fill_u32(0x7fc0dead);  // poison: a NaN no correct result can be
  const unsigned long long count = n;
  LaunchConfig cfg = kernel.occupancy_config(n, stream);
  kernel.launch(cfg, out.ptr(), x.ptr(), y.ptr(), c.a, count);
  check_driver(detail::driver().cuStreamSynchronize(stream), "sync");
  std::vector<float> got(n);
  out.copy_to_host(got.data(), n * 4);
  ASSERT_EQ(std::memcmp(got.data(), c.expected.data(), n * 4), 0) << "result differs from fmaf on the host";
}

TEST_F(RuntimeGpu, CompileLaunchCheckAcrossTiers) {
  TempDir dir;
  {
    KernelCache cache(config_in(dir));
    Module compiled = load_inline(options(cache));
    EXPECT_EQ(compiled.tier(), CacheTier::compiled);
    EXPECT_EQ(compiled.program().arch, device_arch(current_device()));
    run_and_check(compiled.kernel("fma_kernel"), nullptr);

    CacheTier tier{};
    Module hit = cache.get(make_inline_request(options(cache)), device_arch(current_device()), &tier);
    EXPECT_EQ(tier, CacheTier::memory);
    run_and_check(hit.kernel("fma_kernel"), nullptr);
  }
  KernelCache fresh(config_in(dir));
  Module from_disk = load_inline(options(fresh));
  EXPECT_EQ(from_disk.tier(), CacheTier::disk);
  EXPECT_EQ(fresh.stats().compiles, 0u);
  Stream stream;
  run_and_check(from_disk.kernel("fma_kernel"), stream);
}

TEST_F(RuntimeGpu, TemplateKernelsByNameExpression) {
  TempDir dir;
  KernelCache cache(config_in(dir));
  Module m = load_inline(options(cache));
  Kernel k = m.kernel("add_const<int, 7>");
  EXPECT_EQ(k.param_count(), 3);
  const unsigned n = 1000;
  std::vector<int> in(n);
  std::mt19937 rng(static_cast<unsigned>(test::fresh_seed()));
  for (auto& v : in) v = static_cast<int>(rng() % 100000) - 50000;
  DeviceBuffer din(n * 4), dout(n * 4);
  din.copy_from_host(in.data(), n * 4);
  dout.fill_u32(0xdeadbeef);
  k.launch({Dim3((n + 255) / 256), Dim3(256)}, dout.ptr(), din.ptr(), n);
  std::vector<int> got(n);
  dout.copy_to_host(got.data(), n * 4);
  for (unsigned i = 0; i < n; ++i) ASSERT_EQ(got[i], in[i] + 7) << i;
  EXPECT_THROW(m.kernel("add_const<double, 1>"), InvalidArgument);
  EXPECT_THROW(m.kernel("nope"), InvalidArgument);
}

TEST_F(RuntimeGpu, WrongArgumentsAreRejectedBeforeLaunch) {
  TempDir dir;
  KernelCache cache(config_in(dir));
  Kernel k = load_inline(options(cache)).kernel("fma_kernel");
  ASSERT_EQ(k.param_count(), 5);
  DeviceBuffer out(16);
  out.fill_u32(0x7fc0dead);
  const LaunchConfig cfg{Dim3(1), Dim3(4)};
  try {
    k.launch(cfg, out.ptr(), out.ptr(), out.ptr(), 1.0f);  // 4 of 5
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("4 argument(s) given, the kernel takes 5"), std::string::npos)
        << e.what();
  }
  const unsigned narrow = 4;  // the kernel wants 8 bytes
  try {
    k.launch(cfg, out.ptr(), out.ptr(), out.ptr(), 1.0f, narrow);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("argument 4 is 4 bytes"), std::string::npos) << e.what();
  }
  std::uint32_t got[4];
  out.copy_to_host(got, 16);
  for (auto v : got) EXPECT_EQ(v, 0x7fc0deadu) << "nothing was launched";
  // A launch the driver refuses is a DriverError with the configuration in the message.
  const unsigned long long zero = 0;
  EXPECT_THROW(k.launch({Dim3(1), Dim3(4096)}, out.ptr(), out.ptr(), out.ptr(), 1.0f, zero), DriverError);
}

TEST_F(RuntimeGpu, ManyThreadsManyStreams) {
  TempDir dir;
  KernelCache cache(config_in(dir));
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      try {
        set_device(0);
        Stream stream;
        Kernel k = load_inline(options(cache)).kernel("fma_kernel");
        for (int rep = 0; rep < 3; ++rep) run_and_check(k, stream, 4099);
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
        failures.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(cache.stats().compiles, 1u);
}

TEST_F(RuntimeGpu, LaunchIsCapturedIntoAGraph) {
  TempDir dir;
  KernelCache cache(config_in(dir));
  Kernel k = load_inline(options(cache)).kernel("fma_kernel");
  const auto& api = detail::driver();
  Stream stream;
  const std::size_t n = 65536;
  const FmaCase c = make_case(n);
  DeviceBuffer x(n * 4), y(n * 4), out(n * 4);
  x.copy_from_host(c.x.data(), n * 4);
  y.copy_from_host(c.y.data(), n * 4);
  out.fill_u32(0x7fc0dead);
  const LaunchConfig cfg = k.occupancy_config(n, stream);  // queried before capture
  check_driver(api.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), "begin capture");
  const unsigned long long count = n;
  k.launch(cfg, out.ptr(), x.ptr(), y.ptr(), c.a, count);
  CUgraph graph = nullptr;
  check_driver(api.cuStreamEndCapture(stream, &graph), "end capture");
  CUgraphExec exec = nullptr;
  check_driver(api.cuGraphInstantiateWithFlags(&exec, graph, 0), "instantiate");
  check_driver(api.cuGraphLaunch(exec, stream), "graph launch");
  stream.synchronize();
  std::vector<float> got(n);
  out.copy_to_host(got.data(), n * 4);
  EXPECT_EQ(std::memcmp(got.data(), c.expected.data(), n * 4), 0);
  api.cuGraphExecDestroy(exec);
  api.cuGraphDestroy(graph);
}

TEST_F(RuntimeGpu, EveryDeviceOfTheArchUsesTheSameBinary) {
  TempDir dir;
  KernelCache cache(config_in(dir));
  const int count = device_count();
  for (int dev = 0; dev < count; ++dev) {
    set_device(dev);
    InlineOptions o = options(cache);
    o.device = dev;
    Module m = load_inline(o);
    Stream stream(dev);
    EXPECT_EQ(stream_device(stream), dev);
    run_and_check(m.kernel("fma_kernel"), stream, 10007);
  }
  set_device(0);
  std::set<std::string> archs;
  for (int dev = 0; dev < count; ++dev) archs.insert(device_arch(dev).name());
  EXPECT_EQ(cache.stats().compiles, archs.size());
}

TEST_F(RuntimeGpu, DeviceInfoIsSane) {
  const DeviceInfo info = device_info(0);
  EXPECT_FALSE(info.name.empty());
  EXPECT_GE(info.arch.major, 7);
  EXPECT_GT(info.multiprocessors, 0);
  EXPECT_GT(info.total_memory, 0u);
  EXPECT_GE(driver_version(), 12000);
}

}  // namespace
}  // namespace cuinline
