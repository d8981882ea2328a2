// Misuse is an error before any launch: pointers a kernel on the stream's device cannot use (pageable
// host memory, freed memory, null with elements, an extent past the allocation, another GPU without
// peer access) → InvalidArgument naming the tensor and the devices, nothing launched, and the
// context still works (a correct launch right after gives the right result). Registered host memory
// and managed memory are accepted. Skips without a device; the other-GPU cases need two.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cuinline/cuinline.hpp>

#include "driver/driver_api.hpp"
#include "gpu_case_support.hpp"
#include "test_support.hpp"

namespace cuinline {
namespace {

using test::OpCase;

class MisuseGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (device_count() == 0) GTEST_SKIP() << "no GPU: " << driver_unavailable_reason();
    rng_.seed(test::fresh_seed());
  }

  // `call` must throw InvalidArgument whose message contains every one of `words`, launch nothing,
  // and leave the context usable: a correct relu right after gives the right result.
  void expect_refused(const std::function<void()>& call, std::initializer_list<const char*> words) {
    const std::uint64_t launches = ops::stats().launches + ops::conv2d_stats().launches;
    try {
      call();
      ADD_FAILURE() << "no InvalidArgument";
    } catch (const InvalidArgument& e) {
      for (const char* w : words) EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << e.what();
    }
    EXPECT_EQ(ops::stats().launches + ops::conv2d_stats().launches, launches);
    check_context_still_works();
  }

  void check_context_still_works() {
    const std::int64_t n = 10007;
    test::DeviceTensor in = test::make_tensor(DType::f32, {n}), out = test::make_tensor(DType::f32, {n});
    test::fill_random(in, rng_, true);
    out.buffer.fill_u32(test::kPoisonWord);
    Stream s;
    ops::relu(in.view, out.view, s);
    s.synchronize();
    check_driver(detail::driver().cuCtxSynchronize(), "synchronizing the context after a refused call");
    std::vector<float> x(n), y(n);
    in.buffer.copy_to_host(x.data(), n * 4);
    out.buffer.copy_to_host(y.data(), n * 4);
    for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], x[i] > 0 ? x[i] : 0.0f) << i;
  }

  std::mt19937_64 rng_;
};

TEST_F(MisuseGpu, PageableHostMemoryIsRefused) {
  std::vector<float> host(4096, 1.0f);
  const TensorView h = TensorView::contiguous(host.data(), DType::f32, {4096});
  test::DeviceTensor d = test::make_tensor(DType::f32, {4096});
  Stream s;
  expect_refused([&] { ops::relu(h, d.view, s); }, {"input", "not memory the CUDA driver knows", "device 0"});
  expect_refused([&] { ops::relu(d.view, h, s); }, {"output", "not memory the CUDA driver knows"});
}

TEST_F(MisuseGpu, FreedMemoryIsRefused) {
  CUdeviceptr freed = 0;
  {
    DeviceBuffer b(64 << 20);
    freed = b.ptr();
  }
  const TensorView f = TensorView::contiguous(reinterpret_cast<void*>(freed), DType::f32, {1 << 20});
  test::DeviceTensor d = test::make_tensor(DType::f32, {1 << 20});
  Stream s;
  expect_refused([&] { ops::relu(f, d.view, s); }, {"input", "freed"});
}

TEST_F(MisuseGpu, NullWithElementsIsRefused) {
  const TensorView null_view = TensorView::contiguous(nullptr, DType::f32, {16});
  test::DeviceTensor d = test::make_tensor(DType::f32, {16});
  Stream s;
  expect_refused([&] { ops::relu(null_view, d.view, s); }, {"input", "null"});
  // No elements: nothing to check, nothing launched, no error.
  const TensorView empty = TensorView::contiguous(nullptr, DType::f32, {0});
  EXPECT_NO_THROW(ops::relu(empty, empty, s));
}

TEST_F(MisuseGpu, AnExtentPastItsAllocationIsRefused) {
  test::DeviceTensor small = test::make_tensor(DType::f32, {1024});
  // A view of 1 GiB over a 4 KiB allocation, in place.
  TensorView past = small.view;
  past.shape[0] = std::int64_t{1} << 28;
  Stream s;
  expect_refused([&] { ops::relu(past, past, s); }, {"input", "past the end"});
}

TEST_F(MisuseGpu, Conv2dChecksEveryTensor) {
  OpCase c = test::conv2d_case("conv2d", 1, 4, 16, 16, 8, 3, ops::Conv2dParams::square(1, 1),
                               ops::Conv2dPrecision::fp32, ops::Op::relu());
  std::vector<float> host_weight(8 * 4 * 9, 0.5f);
  TensorView w = c.inputs[1].view;
  w.data = host_weight.data();
  Stream s;
  expect_refused([&] { ops::conv2d(c.inputs[0].view, w, c.inputs[2].view, c.output.view, ops::Conv2dParams::square(1, 1),
                                   ops::Op::relu(), s); },
                 {"conv2d: weight", "not memory the CUDA driver knows"});
}

TEST_F(MisuseGpu, RegisteredHostAndManagedMemoryAreAccepted) {
  const auto& api = detail::driver();
  set_device(0);  // cuMemHostRegister and cuMemAllocManaged need a current context
  const std::int64_t n = 4096;
  // Registered (pinned, mapped) host memory: read and written by the kernel directly.
  void* host = std::aligned_alloc(4096, n * 4);
  ASSERT_NE(host, nullptr);
  auto* x = static_cast<float*>(host);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (std::int64_t i = 0; i < n; ++i) x[i] = u(rng_);
  const std::vector<float> before(x, x + n);
  check_driver(api.cuMemHostRegister(host, n * 4, CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE),
               "registering host memory");
  Stream s;
  const TensorView hv = TensorView::contiguous(host, DType::f32, {n});
  ops::relu(hv, hv, s);
  s.synchronize();
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(x[i], before[i] > 0 ? before[i] : 0.0f) << i;
  api.cuMemHostUnregister(host);
  std::free(host);
  // Managed memory.
  CUdeviceptr managed = 0;
  check_driver(api.cuMemAllocManaged(&managed, n * 4, CU_MEM_ATTACH_GLOBAL), "allocating managed memory");
  auto* m = reinterpret_cast<float*>(managed);
  for (std::int64_t i = 0; i < n; ++i) m[i] = before[i];
  const TensorView mv = TensorView::contiguous(m, DType::f32, {n});
  ops::relu(mv, mv, s);
  s.synchronize();
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(m[i], before[i] > 0 ? before[i] : 0.0f) << i;
  api.cuMemFree(managed);
}

TEST_F(MisuseGpu, AnotherGpusMemoryNeedsPeerAccess) {
  if (device_count() < 2) GTEST_SKIP() << "needs two GPUs";
  const auto& api = detail::driver();
  set_device(0);
  test::DeviceTensor in1 = test::make_tensor(DType::f32, {100000}, 1);
  test::DeviceTensor out1 = test::make_tensor(DType::f32, {100000}, 1);
  test::fill_random(in1, rng_, true);
  Stream s0(0);
  ASSERT_FALSE(peer_access_enabled(0, 1));
  expect_refused([&] { ops::relu(in1.view, out1.view, s0); }, {"input", "device 1", "device 0", "peer"});
  int can = 0;
  check_driver(api.cuDeviceCanAccessPeer(&can, 0, 1), "cuDeviceCanAccessPeer");
  if (!can) GTEST_SKIP() << "device 0 cannot access device 1 (no peer access possible)";
  // With peer access enabled (device 0's context maps device 1's memory), the call runs on device 0
  // over device 1's memory and is right.
  enable_peer_access(0, 1);
  EXPECT_TRUE(peer_access_enabled(0, 1));
  out1.buffer.fill_u32(test::kPoisonWord);
  ops::relu(in1.view, out1.view, s0);
  s0.synchronize();
  std::vector<float> x(100000), y(100000);
  in1.buffer.copy_to_host(x.data(), x.size() * 4);
  out1.buffer.copy_to_host(y.data(), y.size() * 4);
  for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i] > 0 ? x[i] : 0.0f) << i;
}

}  // namespace
}  // namespace cuinline
