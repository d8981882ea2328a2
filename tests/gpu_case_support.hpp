#pragma once
// Shared by the graph, misuse and multi-GPU tests: device tensors with random contents, and a set of
// op calls (elementwise in every dtype and layout, conv2d in every precision, f16 NCHW through the
// staging copy and bf16 channels-last, row reductions in their block, parked and split forms) that
// each test runs in its own way (eagerly, captured into a graph, on another device, from many
// threads).
#include <cstdint>
#include <cstring>
#include <cuinline/conv2d.hpp>
#include <cuinline/driver.hpp>
#include <cuinline/ops.hpp>
#include <cuinline/reductions.hpp>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "elementwise_reference.hpp"

namespace cuinline::test {

constexpr std::uint32_t kPoisonWord = 0x7fbadbadu;

// A device tensor (contiguous storage of `elements`) and a view of it (possibly strided).
struct DeviceTensor {
  DeviceBuffer buffer;
  TensorView view;
  std::size_t bytes() const { return buffer.bytes(); }
  std::vector<unsigned char> read() const {
    std::vector<unsigned char> host(buffer.bytes());
    buffer.copy_to_host(host.data(), host.size());
    return host;
  }
};

// Random 32-bit words (every bit pattern: NaN, Inf, subnormals and -0.0 included) or, for
// `finite`, floats in [-1, 1) in the dtype.
inline void fill_random(DeviceTensor& t, std::mt19937_64& rng, bool finite) {
  const std::size_t words = (t.bytes() + 3) / 4;
  std::vector<std::uint32_t> host(words);
  if (!finite) {
    for (auto& w : host) w = static_cast<std::uint32_t>(rng());
  } else {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const DType dt = t.view.dtype;
    if (dt == DType::f16 || dt == DType::bf16) {  // two 16-bit values a word
      for (auto& w : host) {
        w = static_cast<std::uint32_t>(from_op(dt, u(rng)) | from_op(dt, u(rng)) << 16);
      }
    } else {  // f32 (conv2d)
      for (auto& w : host) {
        const float f = u(rng);
        std::memcpy(&w, &f, 4);
      }
    }
  }
  t.buffer.copy_from_host(host.data(), t.bytes());
}

inline DeviceTensor make_tensor(DType dtype, std::vector<std::int64_t> shape, int device = -1,
                                std::vector<std::int64_t> strides = {}) {
  DeviceTensor t;
  std::int64_t storage = 1;
  if (strides.empty()) {
    for (std::int64_t d : shape) storage *= d;
  } else {
    storage = 0;
    for (std::size_t d = 0; d < shape.size(); ++d) storage += (shape[d] - 1) * strides[d];
    storage += 1;
  }
  const std::size_t bytes = (static_cast<std::size_t>(storage) * dtype_size(dtype) + 3) / 4 * 4;
  t.buffer = DeviceBuffer(bytes, device);
  t.view.data = reinterpret_cast<void*>(t.buffer.ptr());
  t.view.dtype = dtype;
  t.view.ndim = static_cast<int>(shape.size());
  std::int64_t stride = 1;
  for (int d = t.view.ndim - 1; d >= 0; --d) {
    t.view.shape[d] = shape[d];
    t.view.strides[d] = strides.empty() ? stride : strides[d];
    stride *= shape[d];
  }
  return t;
}

// One op call over fresh device tensors: `run(stream)` enqueues it; `inputs` get new random data
// between runs, `output` is compared.
struct OpCase {
  std::string name;
  std::vector<DeviceTensor> inputs;
  DeviceTensor output;
  bool finite_inputs = false;
  std::function<void(CUstream)> run;

  void refill(std::mt19937_64& rng) {
    for (auto& in : inputs) fill_random(in, rng, finite_inputs);
  }
};

inline OpCase elementwise_case(const std::string& name, const ops::Op& op, DType dtype,
                               std::vector<std::int64_t> shape, std::vector<std::int64_t> in_strides = {},
                               int device = -1) {
  OpCase c;
  c.name = name;
  c.inputs.push_back(make_tensor(dtype, shape, device, std::move(in_strides)));
  c.output = make_tensor(dtype, shape, device);
  const TensorView in = c.inputs[0].view, out = c.output.view;
  c.run = [op, in, out](CUstream s) { ops::apply(op, in, out, s); };
  return c;
}

// Channels-last strides of a [n, c, h, w] tensor (PyTorch's torch.channels_last).
inline std::vector<std::int64_t> nhwc_strides(std::int64_t c, std::int64_t h, std::int64_t w) {
  return {h * w * c, 1, w * c, c};
}

inline OpCase conv2d_case(const std::string& name, int n, int cin, int h, int w, int cout, int k,
                          ops::Conv2dParams p, ops::Conv2dPrecision precision, const ops::Op& epilogue,
                          int device = -1, DType dtype = DType::f32, bool channels_last = false) {
  OpCase c;
  c.name = name;
  c.finite_inputs = true;
  const auto cl = [&](std::int64_t ch, std::int64_t y, std::int64_t x) {
    return channels_last ? nhwc_strides(ch, y, x) : std::vector<std::int64_t>{};
  };
  c.inputs.push_back(make_tensor(dtype, {n, cin, h, w}, device, cl(cin, h, w)));
  c.inputs.push_back(make_tensor(dtype, {cout, cin, k, k}, device, cl(cin, k, k)));
  c.inputs.push_back(make_tensor(dtype, {cout}, device));
  const std::int64_t oh = ops::conv2d_out_extent(h, k, p.stride_h, p.pad_h, p.dilation_h);
  const std::int64_t ow = ops::conv2d_out_extent(w, k, p.stride_w, p.pad_w, p.dilation_w);
  c.output = make_tensor(dtype, {n, cout, oh, ow}, device, cl(cout, oh, ow));
  const TensorView x = c.inputs[0].view, wt = c.inputs[1].view, b = c.inputs[2].view, out = c.output.view;
  c.run = [=](CUstream s) { ops::conv2d(x, wt, b, out, p, epilogue, s, precision); };
  return c;
}

// A row reduction over [rows, n] (softmax, or a norm with a weight of n and, for layer_norm, a bias).
enum class RowsKind { softmax, rms_norm, layer_norm };
inline OpCase rows_case(const std::string& name, RowsKind kind, DType dtype, std::int64_t rows, std::int64_t n,
                        int device = -1) {
  OpCase c;
  c.name = name;
  c.finite_inputs = true;
  c.inputs.push_back(make_tensor(dtype, {rows, n}, device));
  if (kind != RowsKind::softmax) c.inputs.push_back(make_tensor(dtype, {n}, device));
  if (kind == RowsKind::layer_norm) c.inputs.push_back(make_tensor(dtype, {n}, device));
  c.output = make_tensor(dtype, {rows, n}, device);
  const TensorView x = c.inputs[0].view, out = c.output.view;
  const TensorView w = kind != RowsKind::softmax ? c.inputs[1].view : TensorView{};
  const TensorView b = kind == RowsKind::layer_norm ? c.inputs[2].view : TensorView{};
  c.run = [=](CUstream s) {
    if (kind == RowsKind::softmax) ops::softmax(x, out, s);
    if (kind == RowsKind::rms_norm) ops::rms_norm(x, w, out, 1e-6, s);
    if (kind == RowsKind::layer_norm) ops::layer_norm(x, w, b, out, 1e-5, s);
  };
  return c;
}

// Every kind of op call the library makes: elementwise in each dtype (contiguous, odd sizes,
// strided; chains and expressions) and conv2d in each precision and kernel family.
inline std::vector<OpCase> all_op_cases(int device = -1) {
  using ops::Op;
  using ops::Step;
  std::vector<OpCase> cases;
  cases.push_back(elementwise_case("relu f32", Op::relu(), DType::f32, {(1 << 20) + 3}, {}, device));
  cases.push_back(elementwise_case("leaky_relu bf16", Op::leaky_relu(0.01), DType::bf16, {4097, 33}, {}, device));
  cases.push_back(
      elementwise_case("div_leaky_relu f16", Op::div_leaky_relu(2.0, 0.01), DType::f16, {65537}, {}, device));
  cases.push_back(elementwise_case("chain f64", Op::chain({Step::add(1), Step::mul(0.5), Step::clamp(-1, 1)}),
                                   DType::f64, {12345}, {}, device));
  cases.push_back(
      elementwise_case("expr f32", Op::expr("x > 0 ? x : x * s", {{"s", 0.125}}), DType::f32, {300001}, {}, device));
  cases.push_back(elementwise_case("relu f32 strided", Op::relu(), DType::f32, {512, 300}, {600, 2}, device));
  const auto epi = ops::div_leaky_relu_epilogue(2.0, 0.01);
  cases.push_back(conv2d_case("conv2d fp32 3x3 (Winograd)", 2, 8, 32, 32, 16, 3, ops::Conv2dParams::square(1, 1),
                              ops::Conv2dPrecision::fp32, epi, device));
  cases.push_back(conv2d_case("conv2d fp32 5x5 s2 (direct)", 2, 4, 33, 31, 8, 5, ops::Conv2dParams::square(2, 2),
                              ops::Conv2dPrecision::fp32, epi, device));
  cases.push_back(conv2d_case("conv2d tf32", 2, 8, 40, 40, 32, 3, ops::Conv2dParams::square(1, 0),
                              ops::Conv2dPrecision::tf32, epi, device));
  cases.push_back(conv2d_case("conv2d tf32x3", 2, 8, 40, 40, 32, 3, ops::Conv2dParams::square(1, 0),
                              ops::Conv2dPrecision::tf32x3, Op::relu(), device));
  // f16 NCHW of 8 x 96 x 96 an image: the staging copy into a stream-ordered workspace, then the
  // tensor-core kernel (conv2d_impl::hmma_stages); bf16 channels-last: that kernel directly.
  cases.push_back(conv2d_case("conv2d f16 NCHW (staged)", 2, 8, 96, 96, 32, 3, ops::Conv2dParams::square(1, 1),
                              ops::Conv2dPrecision::fp32, epi, device, DType::f16));
  cases.push_back(conv2d_case("conv2d bf16 channels-last", 2, 16, 24, 24, 24, 3, ops::Conv2dParams::square(1, 1),
                              ops::Conv2dPrecision::fp32, Op::relu(), device, DType::bf16, true));
  // f32 channels-last past 2^22 multiply-adds an image: transposing copies into a stream-ordered
  // workspace around the f32 NCHW Winograd kernel, and the output copied back channels-last.
  cases.push_back(conv2d_case("conv2d f32 channels-last (transposed)", 2, 8, 48, 48, 32, 3,
                              ops::Conv2dParams::square(1, 1), ops::Conv2dPrecision::fp32, epi, device, DType::f32,
                              true));
  // Row reductions: f32 rows of 32768 (the block form, half of each thread's values parked in 64 KiB
  // of dynamic shared memory on sm_80 / sm_90), bf16 rows past 32768 (the split form's two kernels
  // over a stream-ordered workspace), f16 rows of 1000 (the block form).
  cases.push_back(rows_case("softmax f32 rows of 32768 (parked)", RowsKind::softmax, DType::f32, 48, 32768, device));
  cases.push_back(rows_case("rms_norm bf16 rows of 100000 (split)", RowsKind::rms_norm, DType::bf16, 6, 100000, device));
  cases.push_back(rows_case("layer_norm f16 rows of 1000", RowsKind::layer_norm, DType::f16, 300, 1000, device));
  return cases;
}

}  // namespace cuinline::test
