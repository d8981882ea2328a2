// f16 / bf16 conv2d -> /2 -> LeakyReLU(0.01) on the three reference shapes (the seed 128x8x128^2 -> 64
// 3x3; ResNet-like 32x64x56^2 -> 64 3x3 pad 1; UNet-like 8x128x128^2 -> 128 3x3 pad 1), NCHW and
// channels-last (every tensor), with bias; the L2 flushed (a 256 MiB write) before every timed
// launch, CUDA events around the launch alone, median of 40 after warm-up; the kernel the plan
// picked is printed beside. bench/conv2d_half_peers.py times PyTorch eager and torch.compile on the
// same shapes (`HALF=1 PEERS=seed,resnet,unet bench/run_gpu_all.sh custom` runs both in one GPU call).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuinline/conv2d.hpp>
#include <cuinline/driver.hpp>
#include <random>
#include <vector>

#include "../tests/elementwise_reference.hpp"  // float -> f16 / bf16 bits (round to nearest even)
#include "ops/conv2d/tiling.hpp"

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
    const char* name;
    int n, cin, hw, cout, k, stride, pad;
  };
  std::printf("| shape | dtype | layout | kernel | cuinline ms |\n|---|---|---|---|---|\n");
  for (const Shape sh : {Shape{"seed", 128, 8, 128, 64, 3, 1, 0}, Shape{"resnet", 32, 64, 56, 64, 3, 1, 1},
                         Shape{"unet", 8, 128, 128, 128, 3, 1, 1}}) {
    // CONV_BENCH_SHAPE / CONV_BENCH_DTYPE (f16 or bf16): only that shape / dtype (tuning sweeps).
    const char* only = std::getenv("CONV_BENCH_SHAPE");
    if (only != nullptr && std::strcmp(only, sh.name) != 0) continue;
    const int o = (sh.hw + 2 * sh.pad - sh.k) / sh.stride + 1;
    for (DType dt : {DType::f16, DType::bf16, DType::f32}) {
      // (f32 only where asked: CONV_BENCH_DTYPE=f32, precision fp32.)
      const char* only_dt = std::getenv("CONV_BENCH_DTYPE");
      if (only_dt != nullptr ? std::strcmp(only_dt, to_string(dt)) != 0 : dt == DType::f32) continue;
      const std::size_t es = dt == DType::f32 ? 4 : 2;
      for (bool nhwc : {false, true}) {
        // CONV_BENCH_LAYOUT (nchw or nhwc): only that layout (profiling one kernel).
        const char* only_layout = std::getenv("CONV_BENCH_LAYOUT");
        if (only_layout != nullptr && std::strcmp(only_layout, nhwc ? "nhwc" : "nchw") != 0) continue;
        const std::size_t x_n = std::size_t(sh.n) * sh.cin * sh.hw * sh.hw;
        const std::size_t w_n = std::size_t(sh.cout) * sh.cin * sh.k * sh.k;
        const std::size_t y_n = std::size_t(sh.n) * sh.cout * o * o;
        DeviceBuffer x(x_n * es), w(w_n * es), b(sh.cout * es), y(y_n * es);
        std::mt19937 rng(1);
        std::normal_distribution<float> nd(0.f, 1.f);
        for (DeviceBuffer* d : {&x, &w, &b}) {
          std::vector<unsigned char> h(d->bytes());
          for (std::size_t i = 0; i < h.size(); i += es) {
            const std::uint64_t bits = test::from_op(dt, nd(rng) * (d == &x ? 1.0f : 0.1f));
            std::memcpy(h.data() + i, &bits, es);  // little-endian
          }
          d->copy_from_host(h.data(), d->bytes());
        }
        // CONV_BENCH_LAYOUTS="in,weight,out" (each nchw or nhwc; the NCHW row of the table): mixed
        // layouts, to tell the input's, weight's and output's costs apart.
        bool lx = nhwc, lw = nhwc, ly = nhwc;
        if (const char* mix = std::getenv("CONV_BENCH_LAYOUTS"); mix != nullptr) {
          if (nhwc) continue;
          lx = std::strncmp(mix, "nhwc", 4) == 0;
          lw = std::strlen(mix) >= 9 && std::strncmp(mix + 5, "nhwc", 4) == 0;
          ly = std::strlen(mix) >= 14 && std::strncmp(mix + 10, "nhwc", 4) == 0;
        }
        auto v4 = [&](const DeviceBuffer& d, bool cl, std::int64_t a, std::int64_t c, std::int64_t hh,
                      std::int64_t ww) {
          void* p = reinterpret_cast<void*>(d.ptr());
          return cl ? TensorView::strided(p, dt, {a, c, hh, ww}, {hh * ww * c, 1, ww * c, c})
                    : TensorView::contiguous(p, dt, {a, c, hh, ww});
        };
        const TensorView vx = v4(x, lx, sh.n, sh.cin, sh.hw, sh.hw);
        const TensorView vw = v4(w, lw, sh.cout, sh.cin, sh.k, sh.k), vy = v4(y, ly, sh.n, sh.cout, o, o);
        const TensorView vb = TensorView::contiguous(reinterpret_cast<void*>(b.ptr()), dt, {sh.cout});
        const Conv2dParams p = Conv2dParams::square(sh.stride, sh.pad);
        const Op epi = div_leaky_relu_epilogue(2.0, 0.01);
        const Conv2dTiling t =
            conv2d_tiling(conv2d_variant_for_device(conv2d_variant_for(vx, vw, vb, vy, p, epi), stream_device(s)));
        auto run = [&] { conv2d(vx, vw, vb, vy, p, epi, s); };
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
        char kernel[96];
        if (t.half_mma()) {
          const char* form = !t.wgmma() ? "mma.sync" : t.halo() ? "wgmma halo" : t.window() ? "wgmma window" : t.batch_tiles() ? "wgmma batch tiles" : "wgmma";
          const HmmaTiling& h = t.as_hmma();
          std::snprintf(kernel, sizeof kernel, "%s%s %dx%d k%d %d buf%s", form,
                        h.stage_channels > 0 ? " staged" : "", h.tile_cols, h.block_channels(), h.ci_chunk,
                        h.wgmma() ? h.stages : 0, h.wgmma() ? "" : "(plan)");
        } else {
          std::snprintf(kernel, sizeof kernel, "%s%s",
                        t.generic()        ? "general direct"
                        : t.winograd()     ? "winograd"
                        : t.tensor_cores() ? "tf32 mma"
                                           : "fp32 direct",
                        !t.transposes()      ? ""
                        : t.transpose.output ? " + transposes (output too)"
                                             : " + transposes");
        }
        const char* mix = std::getenv("CONV_BENCH_LAYOUTS");
        std::printf("| %s %dx%dx%d^2 -> %d k%d p%d | %s | %s | %s | %.4f |\n", sh.name, sh.n, sh.cin, sh.hw,
                    sh.cout, sh.k, sh.pad, to_string(dt), mix != nullptr ? mix : nhwc ? "NHWC" : "NCHW",
                    kernel, ms[ms.size() / 2]);
      }
    }
  }
  return 0;
}
