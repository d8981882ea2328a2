// N-ary elementwise ops at the memory-bandwidth limit (issue 17): SwiGLU silu(a) * b, bias + GELU
// gelu(x + bias_row), x + 0.5 * r on [8192, 28672] in f32 and bf16, a bias row broadcast over
// [8192, 8192] f32, each beside a device-to-device copy (cuMemcpyDtoDAsync) whose bandwidth is the
// bar (bytes read + written). The L2 is flushed (a 256 MiB write) before every timed launch; CUDA
// events, median of 30 after warm-up. Also the host cost of a 3-input op call on small tensors.
// bench/nary_peers.py times PyTorch eager and torch.compile on the same shapes (same GPU call).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cuinline/cuinline.hpp>
#include <cuinline/ops.hpp>
#include <functional>
#include <vector>

#include "driver/driver_api.hpp"

using namespace cuinline;
using ops::Op;

namespace {

DeviceBuffer* flush;

float median_ms(const Stream& s, const std::function<void()>& f) {
  for (int i = 0; i < 3; ++i) f();
  Event e0, e1;
  std::vector<float> ms;
  for (int i = 0; i < 30; ++i) {
    flush->fill_u32_async(static_cast<std::uint32_t>(i), s);
    e0.record(s);
    f();
    e1.record(s);
    e1.synchronize();
    ms.push_back(e1.elapsed_ms_since(e0));
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

DeviceBuffer filled(std::size_t bytes) {
  DeviceBuffer b(bytes);
  b.fill_u32(0x3f19999au);  // 0.6f (bf16 pairs read it as two finite values)
  return b;
}

TensorView view(const DeviceBuffer& b, DType dt, std::initializer_list<std::int64_t> shape) {
  return TensorView::contiguous(reinterpret_cast<void*>(b.ptr()), dt, shape);
}

}  // namespace

int main() {
  if (device_count() == 0) {
    std::printf("no GPU\n");
    return 0;
  }
  set_device(0);
  Stream s;
  DeviceBuffer flush_buf(256u << 20);
  flush = &flush_buf;
  const DeviceInfo info = device_info(0);
  std::printf("GPU: %s, L2 flushed before each timed call, median of 30\n\n", info.name.c_str());
  std::printf("| op | dtype | shape | cuinline ms | GB/s | copy GB/s (same run) | %% of copy |\n|---|---|---|---|---|---|---|\n");
  const std::int64_t M = 8192, N = 28672;
  const Op swiglu = Op::exprs({"a", "b"}, {"a / (1.0f + expf(-a)) * b"});
  const Op bias_gelu = Op::exprs({"x", "bias"}, {"0.5f * (x + bias) * (1.0f + erff((x + bias) * 0.70710678118654752f))"});
  const Op axpy = Op::exprs({"x", "r"}, {"x + s * r"}, {{"s", 0.5}});
  const Op bias_add = Op::exprs({"x", "bias"}, {"x + bias"});
  for (DType dt : {DType::f32, DType::bf16}) {
    const std::size_t es = dtype_size(dt), bytes = static_cast<std::size_t>(M) * N * es;
    DeviceBuffer a = filled(bytes), b = filled(bytes), y(bytes), row = filled(N * es);
    // The copy: one tensor read, one written.
    const float copy_ms = median_ms(s, [&] { y.copy_from_async(a, bytes, s); });
    const double copy_gbs = 2.0 * bytes / copy_ms / 1e6;
    struct Row {
      const char* name;
      Op op;
      std::vector<TensorView> in;
      double moved;
    };
    const std::vector<Row> rows = {
        {"SwiGLU silu(a) * b", swiglu, {view(a, dt, {M, N}), view(b, dt, {M, N})}, 3.0 * bytes},
        {"bias + GELU gelu(x + bias_row)", bias_gelu, {view(a, dt, {M, N}), view(row, dt, {N})}, 2.0 * bytes + N * es},
        {"x + 0.5 * r", axpy, {view(a, dt, {M, N}), view(b, dt, {M, N})}, 3.0 * bytes},
    };
    for (const Row& r : rows) {
      const TensorView out = view(y, dt, {M, N});
      const float ms = median_ms(s, [&] { ops::apply(r.op, r.in, {out}, s); });
      const double gbs = r.moved / ms / 1e6;
      std::printf("| %s | %s | %lldx%lld | %.4f | %.0f | %.0f | %.1f %% |\n", r.name, to_string(dt), (long long)M,
                  (long long)N, ms, gbs, copy_gbs, 100.0 * gbs / copy_gbs);
    }
  }
  {
    const std::int64_t K = 8192;
    const std::size_t bytes = static_cast<std::size_t>(K) * K * 4;
    DeviceBuffer x = filled(bytes), y(bytes), row = filled(K * 4);
    const float copy_ms = median_ms(s, [&] { y.copy_from_async(x, bytes, s); });
    const double copy_gbs = 2.0 * bytes / copy_ms / 1e6;
    const float ms = median_ms(s, [&] { ops::apply(bias_add, {view(x, DType::f32, {K, K}), view(row, DType::f32, {K})},
                                                   {view(y, DType::f32, {K, K})}, s); });
    const double gbs = (2.0 * bytes + K * 4) / ms / 1e6;
    std::printf("| bias row x + b | f32 | %lldx%lld | %.4f | %.0f | %.0f | %.1f %% |\n", (long long)K, (long long)K, ms, gbs,
                copy_gbs, 100.0 * gbs / copy_gbs);
  }
  // One input at 4096 x 393216 f32 (the seed ops' size): the one-input kernel (ops::relu) and the
  // N-ary kernel with one input (the same function through a named expression), beside the copy.
  {
    const std::int64_t R = 4096, C = 393216;
    const std::size_t bytes = static_cast<std::size_t>(R) * C * 4;
    DeviceBuffer x = filled(bytes), y(bytes);
    const TensorView vx = view(x, DType::f32, {R, C}), vy = view(y, DType::f32, {R, C});
    const float copy_ms = median_ms(s, [&] { y.copy_from_async(x, bytes, s); });
    const float relu_ms = median_ms(s, [&] { ops::relu(vx, vy, s); });
    const Op relu1 = Op::exprs({"x"}, {"x > 0.0f ? x : 0.0f"});
    const float nary_ms = median_ms(s, [&] { ops::apply(relu1, {vx}, {vy}, s); });
    std::printf("\none input, 4096x393216 f32: copy %.4f ms; ops::relu (one-input kernel) %.4f ms = %.1f %% of copy; "
                "N-ary kernel, one input %.4f ms = %.1f %% of copy\n",
                copy_ms, relu_ms, 100.0 * copy_ms / relu_ms, nary_ms, 100.0 * copy_ms / nary_ms);
  }
  // Host cost of a 3-input op call (1024 elements: launch-bound), host clock over 2000 calls.
  {
    DeviceBuffer a = filled(4096), b = filled(4096), c = filled(4096), y(4096);
    const Op fma3 = Op::exprs({"a", "b", "c"}, {"a * b + c"});
    const std::vector<TensorView> in = {view(a, DType::f32, {1024}), view(b, DType::f32, {1024}), view(c, DType::f32, {1024})};
    const TensorView out = view(y, DType::f32, {1024});
    ops::apply(fma3, in, {out}, s);
    s.synchronize();
    // Bursts of 200 calls after a synchronize: the launch queue never fills, so this is the host's
    // cost, not the GPU's rate of small kernels.
    std::vector<double> per;
    for (int r = 0; r < 50; ++r) {
      s.synchronize();
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < 200; ++i) ops::apply(fma3, in, {out}, s);
      per.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / 200);
    }
    s.synchronize();
    std::sort(per.begin(), per.end());
    // The raw launch of the same kernel, the same way.
    std::vector<double> raw;
    const Kernel k = default_cache().get(ops::make_request(fma3, in, {out}), device_arch(0))
                         .kernel(ops::make_request(fma3, in, {out}).name_expressions[0]);
    struct {
      const void* in[8];
      void* out[4];
      long long period[8];
    } args = {{in[0].data, in[1].data, in[2].data}, {out.data}, {}};
    unsigned n = 1024, head = 0;  // ew_nary(args, n, head, reps)
    int reps = 1;
    void* params[] = {&args, &n, &head, &reps};
    const CUfunction f = k.function(0);
    const auto& api = detail::driver();  // the raw launch: the library's dlopen'd libcuda
    if (api.cuLaunchKernel(f, 1, 1, 1, 256, 1, 1, 0, s, params, nullptr) != CUDA_SUCCESS) {
      std::fprintf(stderr, "nary_bench: the raw launch failed\n");
      return 1;
    }
    for (int r = 0; r < 50; ++r) {
      s.synchronize();
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < 200; ++i) api.cuLaunchKernel(f, 1, 1, 1, 256, 1, 1, 0, s, params, nullptr);
      raw.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / 200);
    }
    s.synchronize();
    std::sort(raw.begin(), raw.end());
    std::printf("\nhost cost, bursts of 200 calls: 3-input op call (a * b + c, 1024 f32) %.3f us; raw cuLaunchKernel of "
                "its kernel %.3f us\n",
                per[per.size() / 2], raw[raw.size() / 2]);
  }
  return 0;
}
