// Host cost of an op call, eager and as a node of a replayed CUDA graph, beside a raw cuLaunchKernel
// of the same kernel (issue 16's goal: an op call costs at most a raw launch + 0.5 µs). All on one
// non-blocking stream, 1024-element float32 tensors (launch-bound: the kernel itself is ~2 µs).
//   host cost per call    : a host clock around 2000 back-to-back calls, median of 15 rounds
//   graph                  : 100 relu nodes captured once; host cost of one cuGraphLaunch / 100, and
//                            the device time of a replay / 100 (CUDA events) beside 100 eager calls
//   pieces of the op call  : stream → device (cuStreamGetCtx + the context's device) and the tensor
//                            check (one cuPointerGetAttributes per tensor)
// Prints a markdown table; --out FILE writes it too.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cuinline/conv2d.hpp>
#include <cuinline/cuinline.hpp>
#include <cuinline/ops.hpp>
#include <fstream>
#include <string>
#include <vector>

#include "driver/driver_api.hpp"
#include "driver/tensor_access.hpp"
#include "ops/elementwise/plan.hpp"

namespace {

using namespace cuinline;
using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Bursts of `calls` after a synchronize (200: the launch queue never fills, so this is the host's
// cost, not the GPU's rate of small kernels), median of `rounds`.
template <class F>
double host_us(F&& f, int calls = 200, int rounds = 50, CUstream sync = nullptr) {
  std::vector<double> per;
  for (int r = 0; r < rounds; ++r) {
    if (sync) check_driver(detail::driver().cuStreamSynchronize(sync), "sync");
    const auto t = Clock::now();
    for (int i = 0; i < calls; ++i) f();
    per.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t).count() / calls);
  }
  if (sync) check_driver(detail::driver().cuStreamSynchronize(sync), "sync");
  return median(per);
}

}  // namespace

int main(int argc, char** argv) {
  std::string out_path;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--out") == 0) out_path = argv[i + 1];
  }
  if (device_count() == 0) {
    std::printf("no GPU: %s\n", driver_unavailable_reason().c_str());
    return 0;
  }
  set_device(0);
  const auto& api = detail::driver();
  Stream stream;
  const std::int64_t n = 1024;
  DeviceBuffer x(n * 4), y(n * 4);
  std::vector<float> host(n);
  for (std::int64_t i = 0; i < n; ++i) host[i] = static_cast<float>(i % 7) - 3.0f;
  x.copy_from_host(host.data(), n * 4);
  const TensorView in = TensorView::contiguous(reinterpret_cast<void*>(x.ptr()), DType::f32, {n});
  const TensorView out = TensorView::contiguous(reinterpret_cast<void*>(y.ptr()), DType::f32, {n});

  // The kernel the op launches, for the raw launch: the same variant, through the public API.
  ops::relu(in, out, stream);
  stream.synchronize();
  const ops::LaunchPlan plan = ops::plan(ops::Op::relu(), in, out);
  const Kernel k = default_cache()
                       .get(ops::make_request(plan.variant), device_arch(0))
                       .kernel(ops::kernel_name(plan.variant));
  const CUfunction f = k.function(0);
  struct {  // ew_nary's first parameter (ew_nary_args in kernel_templates/ew_nary.cuh)
    const void* in[8];
    void* out[4];
    long long period[8];
  } operands{};
  operands.in[0] = plan.in;
  operands.out[0] = plan.out;
  unsigned count = static_cast<unsigned>(plan.numel), head = static_cast<unsigned>(plan.head);
  int reps = 1;
  void* args[] = {&operands, &count, &head, &reps};

  std::string table = "| what | µs |\n|---|---|\n";
  char buf[160];
  auto row = [&](const char* what, double us) {
    std::snprintf(buf, sizeof buf, "| %s | %.3f |\n", what, us);
    table += buf;
    std::fprintf(stderr, "%s", buf);
  };

  const double raw = host_us([&] { api.cuLaunchKernel(f, plan.grid, 1, 1, plan.block, 1, 1, 0, stream, args, nullptr); },
                             200, 50, stream);
  const double op = host_us([&] { ops::relu(in, out, stream); }, 200, 50, stream);
  const ops::Op leaky = ops::Op::leaky_relu(0.01);
  const double op_leaky = host_us([&] { ops::apply(leaky, in, out, stream); }, 200, 50, stream);
  row("raw cuLaunchKernel (the relu kernel)", raw);
  row("ops::relu eager (checks, stream → device, tensor checks, map hit, launch)", op);
  row("ops::apply(leaky_relu(0.01)) eager", op_leaky);
  std::snprintf(buf, sizeof buf, "| ops::relu − raw launch | %+.3f |\n", op - raw);
  table += buf;

  // Small conv2d (launch-bound): eager host cost.
  {
    DeviceBuffer cx(1 * 4 * 8 * 8 * 4), cw(8 * 4 * 9 * 4), cy(1 * 8 * 6 * 6 * 4);
    cx.fill_u32(0x3f800000u);
    cw.fill_u32(0x3e000000u);
    const TensorView vx = TensorView::contiguous(reinterpret_cast<void*>(cx.ptr()), DType::f32, {1, 4, 8, 8});
    const TensorView vw = TensorView::contiguous(reinterpret_cast<void*>(cw.ptr()), DType::f32, {8, 4, 3, 3});
    const TensorView vy = TensorView::contiguous(reinterpret_cast<void*>(cy.ptr()), DType::f32, {1, 8, 6, 6});
    const ops::Op epi = ops::div_leaky_relu_epilogue(2.0, 0.01);
    ops::conv2d(vx, vw, TensorView{}, vy, {}, epi, stream);
    row("ops::conv2d eager (1x4x8x8, 3x3, /2, leaky)",
        host_us([&] { ops::conv2d(vx, vw, TensorView{}, vy, {}, epi, stream); }, 200, 50, stream));
  }

  row("stream_device(non-blocking stream)", host_us([&] { (void)stream_device(stream); }, 20000));
  row("check_tensor_access(one device tensor)",
      host_us([&] { detail::check_tensor_access(in, "input", 0); }, 20000));

  // A graph of 100 relu nodes.
  constexpr int kNodes = 100;
  Graph g = Graph::capture(stream, [&] {
    for (int i = 0; i < kNodes; ++i) ops::relu(in, out, stream);
  });
  g.launch(stream);
  stream.synchronize();
  row("graph of 100 ops::relu: host cost of cuGraphLaunch / 100", host_us([&] { g.launch(stream); }, 200, 15, stream) / kNodes);
  Event e0, e1;
  std::vector<double> replay, eager;
  for (int r = 0; r < 15; ++r) {
    e0.record(stream);
    g.launch(stream);
    e1.record(stream);
    e1.synchronize();
    replay.push_back(1000.0 * e1.elapsed_ms_since(e0) / kNodes);
    e0.record(stream);
    for (int i = 0; i < kNodes; ++i) ops::relu(in, out, stream);
    e1.record(stream);
    e1.synchronize();
    eager.push_back(1000.0 * e1.elapsed_ms_since(e0) / kNodes);
  }
  row("device time per op: graph replay (100 nodes, events) / 100", median(replay));
  row("device time per op: 100 eager ops::relu (events) / 100", median(eager));

  const DeviceInfo info = device_info(0);
  table = "GPU: " + info.name + " (" + info.arch.name() + "), driver " + std::to_string(driver_version()) + "\n\n" +
          table;
  std::printf("%s", table.c_str());
  if (!out_path.empty()) std::ofstream(out_path) << table;
  return 0;
}
