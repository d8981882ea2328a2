// Ready-made ops on your own device pointers: divide → LeakyReLU fused into one pass (the seed
// model's epilogue), a jiterator-style expression, and a fused op over several tensors (a bias row
// broadcast over the rows plus a residual, then ReLU: one kernel, three inputs). Without a GPU it warms
// the cache for sm_90 instead, as a build machine would before deployment.
#include <cmath>
#include <cstdio>
#include <cuinline/cuinline.hpp>
#include <cuinline/ops.hpp>
#include <vector>

namespace ops = cuinline::ops;

int main() {
  const ops::Op div_leaky = ops::Op::div_leaky_relu(2.0, 0.01);
  const ops::Op swishish = ops::Op::expr("x > 0 ? x : x * s", {{"s", 0.2}});
  // relu(x + bias + residual), rounded after each add like the eager PyTorch ops.
  const ops::Op bias_residual_relu = ops::Op::chain({ops::Step::add_input(1), ops::Step::add_input(2), ops::Step::relu()});
  if (cuinline::device_count() == 0) {
    const cuinline::Arch arch = cuinline::Arch::parse("sm_90");
    std::size_t n = 0;
    for (const ops::Op& op : {div_leaky, swishish}) {
      for (const ops::Variant& v : ops::enumerate_variants(op, cuinline::DType::f32)) {
        cuinline::default_cache().get(ops::make_request(v), arch);
        ++n;
      }
    }
    // The N-ary op for aligned [1024, 4096] tensors with a [4096] bias (fake pointers: only their
    // alignment and the shapes pick the variant).
    const auto at = [](std::uintptr_t a, std::initializer_list<std::int64_t> shape) {
      return cuinline::TensorView::contiguous(reinterpret_cast<void*>(a), cuinline::DType::f32, shape);
    };
    cuinline::default_cache().get(
        ops::make_request(bias_residual_relu, {at(1ull << 32, {1024, 4096}), at(2ull << 32, {4096}), at(3ull << 32, {1024, 4096})},
                          {at(4ull << 32, {1024, 4096})}),
        arch);
    ++n;
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

  // Several tensors: out2 = relu(x + bias + residual), bias a row broadcast over the rows.
  std::vector<float> bias(static_cast<std::size_t>(cols)), residual(x.size());
  for (std::size_t i = 0; i < bias.size(); ++i) bias[i] = std::cos(0.01f * static_cast<float>(i));
  for (std::size_t i = 0; i < residual.size(); ++i) residual[i] = std::sin(0.003f * static_cast<float>(i));
  cuinline::DeviceBuffer dbias(bias.size() * sizeof(float)), dres(x.size() * sizeof(float)), dout2(x.size() * sizeof(float));
  dbias.copy_from_host(bias.data(), dbias.bytes());
  dres.copy_from_host(residual.data(), dres.bytes());
  const auto vbias = cuinline::TensorView::contiguous(dbias.as<void>(), cuinline::DType::f32, {cols});
  const auto vres = cuinline::TensorView::contiguous(dres.as<void>(), cuinline::DType::f32, {rows, cols});
  const auto out2 = cuinline::TensorView::contiguous(dout2.as<void>(), cuinline::DType::f32, {rows, cols});
  ops::apply(bias_residual_relu, {in, vbias, vres}, {out2}, stream);
  stream.synchronize();
  dout2.copy_to_host(y.data(), dout2.bytes());
  std::size_t wrong2 = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float t = (x[i] + bias[i % static_cast<std::size_t>(cols)]) + residual[i];
    wrong2 += (y[i] != (t > 0 ? t : 0.0f));
  }
  std::printf("relu(x + bias + residual): %zu of %zu elements differ from the host reference\n", wrong2, y.size());
  return wrong == 0 && wrong2 == 0 ? 0 : 1;
}
