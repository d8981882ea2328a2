// ResNet's basic-block tail fused into one conv2d: relu(conv(x) + b + residual), f32, 3x3 pad 1, on
// ResNet-like shapes, in each precision; the L2 is flushed (a 256 MiB write) before every timed
// launch, as KernelBench does; CUDA events, median of 40 after warm-up. bench/resnet_block_peers.py
// times PyTorch eager and torch.compile on the same shapes (run both in one GPU call).
#include <algorithm>
#include <cstdio>
#include <cuinline/conv2d.hpp>
#include <cuinline/driver.hpp>
#include <random>
#include <vector>

using namespace cuinline;
using namespace cuinline::ops;

int main() {
  if (device_count() == 0) {
    std::printf("no GPU\n");
    return 0;
  }
  set_device(0);
  Stream s;
  DeviceBuffer flush(256u << 20);
  struct Shape {
    int n, c, hw;
  };
  std::printf("| shape (N x C x HW^2 -> C, 3x3 pad 1, + b + residual, relu) | precision | cuinline ms |\n|---|---|---|\n");
  for (const Shape sh : {Shape{32, 64, 56}, Shape{32, 128, 28}, Shape{32, 256, 14}, Shape{8, 64, 112}}) {
    const std::size_t in_n = std::size_t(sh.n) * sh.c * sh.hw * sh.hw, w_n = std::size_t(sh.c) * sh.c * 9;
    DeviceBuffer x(in_n * 4), w(w_n * 4), b(sh.c * 4), r(in_n * 4), y(in_n * 4);
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.f, 1.f);
    for (DeviceBuffer* d : {&x, &w, &b, &r}) {
      std::vector<float> h(d->bytes() / 4);
      for (float& f : h) f = nd(rng) * (d == &w ? 0.05f : 1.0f);
      d->copy_from_host(h.data(), d->bytes());
    }
    auto v4 = [&](const DeviceBuffer& d, std::int64_t a, std::int64_t bb, std::int64_t c, std::int64_t e) {
      return TensorView::contiguous(reinterpret_cast<void*>(d.ptr()), DType::f32, {a, bb, c, e});
    };
    const TensorView vx = v4(x, sh.n, sh.c, sh.hw, sh.hw), vw = v4(w, sh.c, sh.c, 3, 3), vr = v4(r, sh.n, sh.c, sh.hw, sh.hw),
                     vy = v4(y, sh.n, sh.c, sh.hw, sh.hw);
    const TensorView vb = TensorView::contiguous(reinterpret_cast<void*>(b.ptr()), DType::f32, {sh.c});
    for (Conv2dPrecision prec : {Conv2dPrecision::fp32, Conv2dPrecision::tf32}) {
      auto run = [&] { conv2d(vx, vw, vb, vy, Conv2dParams::square(1, 1), Op::relu(), s, prec, vr); };
      for (int i = 0; i < 5; ++i) run();
      Event e0, e1;
      std::vector<float> ms;
      for (int i = 0; i < 40; ++i) {
        flush.fill_u32_async(static_cast<std::uint32_t>(i), s);
        e0.record(s);
        run();
        e1.record(s);
        e1.synchronize();
        ms.push_back(e1.elapsed_ms_since(e0));
      }
      std::sort(ms.begin(), ms.end());
      std::printf("| %dx%dx%d^2 | %s | %.4f |\n", sh.n, sh.c, sh.hw, to_string(prec), ms[ms.size() / 2]);
    }
  }
  return 0;
}
