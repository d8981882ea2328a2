// Ready-made ops on your own device pointers: divide → LeakyReLU fused into one pass (the seed
// model's epilogue), and a jiterator-style expression. Without a GPU it warms the cache for sm_90
// instead, as a build machine would before deployment.
#include <cmath>
#include <cstdio>
#include <cuinline/cuinline.hpp>
#include <cuinline/ops.hpp>
#include <vector>

namespace ops = cuinline::ops;

int main() {
  const ops::Op div_leaky = ops::Op::div_leaky_relu(2.0, 0.01);
  const ops::Op swishish = ops::Op::expr("x > 0 ? x : x * s", {{"s", 0.2}});
  if (cuinline::device_count() == 0) {
    const cuinline::Arch arch = cuinline::Arch::parse("sm_90");
    std::size_t n = 0;
    for (const ops::Op& op : {div_leaky, swishish}) {
      for (const ops::Variant& v : ops::enumerate_variants(op, cuinline::DType::f32)) {
        cuinline::default_cache().get(ops::make_request(v), arch);
        ++n;
      }
    }
    std::printf("no GPU: warmed %zu variants for %s into the disk cache\n", n, arch.name().c_str());
    return 0;
  }
  const std::int64_t rows = 1024, cols = 4099;  // odd on purpose: a vector body plus a scalar tail
  std::vector<float> x(static_cast<std::size_t>(rows * cols));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.001f * static_cast<float>(i)) * 8.0f;
  cuinline::DeviceBuffer din(x.size() * sizeof(float)), dout(x.size() * sizeof(float));
  din.copy_from_host(x.data(), din.bytes());
  const auto in = cuinline::TensorView::contiguous(din.as<void>(), cuinline::DType::f32, {rows, cols});
  const auto out = cuinline::TensorView::contiguous(dout.as<void>(), cuinline::DType::f32, {rows, cols});

  cuinline::Stream stream;
  ops::div_leaky_relu(in, out, 2.0, 0.01, stream);  // one pass; compiled on first use, then a map hit
  ops::apply(swishish, out, out, stream);           // in place
  stream.synchronize();

  std::vector<float> y(x.size());
  dout.copy_to_host(y.data(), dout.bytes());
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    float t = x[i] * (1.0f / 2.0f);  // PyTorch divides by a scalar as a multiply by its reciprocal
    t = t > 0 ? t : t * 0.01f;
    t = t > 0 ? t : t * 0.2f;
    wrong += (y[i] != t);
  }
  std::printf("%zu of %zu elements differ from the host reference\n", wrong, y.size());
  return wrong == 0 ? 0 : 1;
}
