// cuinline run / bench (need a GPU): fresh random input, a poisoned output, the op once (timed with
// the host clock: that call compiles or loads the kernel), a check against a CPU reference, then
// CUDA-event timings of `repeat` launches.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cuinline/conv2d.hpp>
#include <cuinline/driver.hpp>
#include <cuinline/error.hpp>
#include <cuinline/module.hpp>
#include <cuinline/ops.hpp>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cli/commands.hpp"
#include "cli/run_common.hpp"
#include "cli/util.hpp"
#include "reference/host_reference.hpp"

namespace cuinline::cli {
namespace {

template <class S, class T, class ToT, class FromT>
Measurement measure_elementwise_typed(const ops::Op& op, DType dtype, const std::vector<std::int64_t>& shape,
                                      int repeat, ToT to_t, FromT from_t, double tolerance) {
  std::size_t numel = 1;
  for (auto d : shape) numel *= static_cast<std::size_t>(d);
  std::size_t bytes = numel * sizeof(S);
  Measurement m;
  m.what = op.describe();
  m.tensor = make_view(nullptr, dtype, shape).describe();
  m.bytes_moved = 2.0 * static_cast<double>(bytes);
  check_memory(2 * bytes, current_device());

  std::vector<S> host_in(numel), host_out(numel);
  std::uint64_t seed = fresh_seed();
  parallel_for(numel, [&](std::size_t b, std::size_t e) {
    std::uint64_t state = seed ^ (b * 0x632BE59BD9B4E019ull);
    for (std::size_t i = b; i < e; ++i) host_in[i] = from_t(static_cast<T>(uniform(state, -8, 8)));
  });
  std::size_t padded = (bytes + 3) / 4 * 4;  // fill_u32 writes whole 32-bit words
  DeviceBuffer in(padded), out(padded);
  in.copy_from_host(host_in.data(), bytes);
  out.fill_u32(kPoison);
  Stream stream;
  TensorView vin = make_view(in.as<void>(), dtype, shape), vout = make_view(out.as<void>(), dtype, shape);
  auto launch = [&] { ops::apply(op, vin, vout, stream); };
  time_first_call(m, stream, launch);
  out.copy_to_host(host_out.data(), bytes);

  std::atomic<std::size_t> unwritten{0}, differ{0}, beyond{0};
  bool has_reference = op.expression.empty();
  const bool functions = has_function_steps(op);
  auto round = [&](T v) { return to_t(from_t(v)); };
  parallel_for(numel, [&](std::size_t b, std::size_t e) {
    std::size_t local_unwritten = 0, local_differ = 0, local_beyond = 0;
    for (std::size_t i = b; i < e; ++i) {
      S poison;
      std::memset(&poison, 0xFF, sizeof(S));
      if (std::memcmp(&host_out[i], &poison, sizeof(S)) == 0) ++local_unwritten;
      if (!has_reference) continue;
      S ref = from_t(reference_chain(op.steps, to_t(host_in[i]), round));
      if (std::memcmp(&ref, &host_out[i], sizeof(S)) == 0) continue;
      ++local_differ;
      double r = static_cast<double>(to_t(ref)), g = static_cast<double>(to_t(host_out[i]));
      if (std::isnan(r) && std::isnan(g)) continue;  // x / 0 with x = 0: NaN bits differ by platform
      if (functions) {  // the host's libm against CUDA's: a few ulp (host_reference.hpp)
        if (!close_to_reference(r, g, dtype)) ++local_beyond;
        continue;
      }
      if (!(std::fabs(r - g) <= tolerance * std::max(1.0, std::fabs(r)))) ++local_beyond;
    }
    unwritten += local_unwritten;
    differ += local_differ;
    beyond += local_beyond;
  });
  m.ok = unwritten == 0 && beyond == 0;
  char buf[256];
  if (unwritten > 0) {
    std::snprintf(buf, sizeof buf, "FAILED: %zu of %zu outputs never written", unwritten.load(), numel);
  } else if (!has_reference) {
    std::snprintf(buf, sizeof buf, "all %zu outputs written (no CPU reference for expressions)", numel);
  } else if (differ == 0) {
    std::snprintf(buf, sizeof buf, "ok, bit-exact against the CPU reference (%zu elements)", numel);
  } else {
    if (functions) {
      std::snprintf(buf, sizeof buf,
                    "%s: %zu of %zu differ from the CPU reference (the host's libm, not CUDA's), %zu beyond its "
                    "tolerance",
                    beyond ? "FAILED" : "ok", differ.load(), numel, beyond.load());
    } else {
      std::snprintf(buf, sizeof buf, "%s: %zu of %zu differ from the CPU reference, %zu beyond %g relative",
                    beyond ? "FAILED" : "ok", differ.load(), numel, beyond.load(), tolerance);
    }
  }
  m.check = buf;
  time_steady(m, stream, repeat, launch);
  return m;
}

Measurement measure_elementwise(const ops::Op& op, DType dtype, const std::vector<std::int64_t>& shape,
                                int repeat) {
  switch (dtype) {
    case DType::f32:
      return measure_elementwise_typed<float, float>(
          op, dtype, shape, repeat, [](float v) { return v; }, [](float v) { return v; }, 1e-6);
    case DType::f64:
      return measure_elementwise_typed<double, double>(
          op, dtype, shape, repeat, [](double v) { return v; }, [](double v) { return v; }, 1e-12);
    case DType::f16:
      return measure_elementwise_typed<std::uint16_t, float>(op, dtype, shape, repeat, half_to_float,
                                                             float_to_half, 1e-3);
    case DType::bf16:
      return measure_elementwise_typed<std::uint16_t, float>(op, dtype, shape, repeat, bf16_to_float,
                                                             float_to_bf16, 8e-3);
  }
  throw InvalidArgument("unknown dtype");
}

// The filters and F.conv2d's arguments of `cuinline run conv2d` (--filters KxKHxKW, --stride,
// --padding, --dilation as "2" or "2x1", --groups), checked against the input before any GPU is
// touched: a bad value or an empty output is a usage error (exit 2).
struct ConvLayer {
  int k = 64, r = 3, s = 3;
  ops::Conv2dParams params;
};

// "A" or "AxB" (h x w) of non-negative (zero_ok) or positive integers up to 7 digits (the variant
// checks its own bounds).
std::pair<int, int> parse_pair(const std::optional<std::string>& text, const char* flag, int fallback, bool zero_ok) {
  if (!text) return {fallback, fallback};
  std::vector<int> v;
  std::size_t pos = 0;
  while (pos <= text->size()) {
    std::size_t end = text->find('x', pos);
    if (end == std::string::npos) end = text->size();
    const std::string part = text->substr(pos, end - pos);
    const bool digits = !part.empty() && part.size() <= 7 &&
                        std::all_of(part.begin(), part.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
    if (!digits || (!zero_ok && std::stoi(part) == 0) || v.size() == 2) {
      throw InvalidArgument(std::string(flag) + ": expected " + (zero_ok ? "P or PHxPW (0 or more)" : "S or SHxSW (1 or more)") +
                            ", got '" + *text + "'");
    }
    v.push_back(std::stoi(part));
    pos = end + 1;
  }
  return v.size() == 1 ? std::pair<int, int>{v[0], v[0]} : std::pair<int, int>{v[0], v[1]};
}

ConvLayer conv_layer_of(const RunOptions& o, const std::vector<std::int64_t>& shape) {
  ConvLayer l;
  if (o.filters) {
    std::vector<std::int64_t> f;
    try {
      f = parse_shape(*o.filters);
    } catch (const InvalidArgument&) {
      f.clear();
    }
    if (f.size() != 3 || f[0] > ops::kMaxConv2dChannels || f[1] > ops::kMaxConv2dExtent || f[2] > ops::kMaxConv2dExtent) {
      throw InvalidArgument("--filters: expected KxKHxKW (output channels x filter height x width, e.g. 128x3x3), got '" +
                            *o.filters + "'");
    }
    l.k = static_cast<int>(f[0]), l.r = static_cast<int>(f[1]), l.s = static_cast<int>(f[2]);
  }
  std::tie(l.params.stride_h, l.params.stride_w) = parse_pair(o.stride, "--stride", 1, false);
  std::tie(l.params.pad_h, l.params.pad_w) = parse_pair(o.padding, "--padding", 0, true);
  std::tie(l.params.dilation_h, l.params.dilation_w) = parse_pair(o.dilation, "--dilation", 1, false);
  l.params.groups = o.groups.value_or(1);
  // The variant checks the rest (groups dividing the channels, an empty output), naming it.
  ops::make_conv2d_variant(static_cast<int>(shape[1]), static_cast<int>(shape[2]), static_cast<int>(shape[3]), l.k,
                           l.r, l.s, l.params, true, ops::Op::relu());
  return l;
}

// conv2d (by default 3×3, 64 filters, no padding: the seed model's layer) → / divisor →
// LeakyReLU(slope), in f32, f16, bf16 or f64, NCHW or channels-last (input, weight and output laid out
// as PyTorch's memory_format=torch.channels_last lays them out).
Measurement measure_conv2d(const std::vector<std::int64_t>& shape, const ConvLayer& layer, DType dtype,
                           bool channels_last, double divisor, double slope, ops::Conv2dPrecision precision,
                           int repeat) {
  if (shape.size() != 4) throw InvalidArgument("--shape: conv2d takes NxCxHxW, e.g. 128x8x128x128");
  const int n = static_cast<int>(shape[0]), c = static_cast<int>(shape[1]);
  const int h = static_cast<int>(shape[2]), w = static_cast<int>(shape[3]);
  const int k = layer.k, r = layer.r, s = layer.s;
  const ops::Conv2dParams& cp = layer.params;
  const int g = cp.groups, cg = c / g, kg = k / g;  // channels a group (input, output)
  const int oh = static_cast<int>(ops::conv2d_out_extent(h, r, cp.stride_h, cp.pad_h, cp.dilation_h));
  const int ow = static_cast<int>(ops::conv2d_out_extent(w, s, cp.stride_w, cp.pad_w, cp.dilation_w));
  const std::size_t es = dtype_size(dtype);
  std::size_t in_count = std::size_t(n) * c * h * w, w_count = std::size_t(k) * cg * r * s;
  std::size_t out_count = std::size_t(n) * k * oh * ow;
  Measurement m;
  char what[256];
  std::snprintf(what, sizeof what, "conv2d %dx%dx%d s%dx%d p%dx%d d%dx%d%s %s %s%s | div(%g)|leaky_relu(%g)", k, r, s,
                cp.stride_h, cp.stride_w, cp.pad_h, cp.pad_w, cp.dilation_h, cp.dilation_w,
                g != 1 ? (" g" + std::to_string(g)).c_str() : "", to_string(dtype), ops::to_string(precision),
                channels_last ? " channels-last" : "", divisor, slope);
  m.what = what;
  m.tensor = make_view(nullptr, dtype, shape).describe() + (channels_last ? " (channels-last)" : "");
  m.bytes_moved = static_cast<double>(es * (in_count + w_count + k + out_count));
  m.flops = 2.0 * static_cast<double>(out_count) * cg * r * s;
  check_memory(es * (in_count + w_count + k + out_count), current_device());

  // Values drawn in float, rounded to the dtype: the reference uses exactly what the GPU reads.
  auto to_bits = [dtype](float v) -> std::uint16_t {
    return dtype == DType::f16 ? float_to_half(v) : float_to_bf16(v);
  };
  auto from_bits = [dtype](std::uint16_t b) { return dtype == DType::f16 ? half_to_float(b) : bf16_to_float(b); };
  auto round_to_dtype = [&](float v) { return dtype == DType::f32 || dtype == DType::f64 ? v : from_bits(to_bits(v)); };
  std::vector<float> x(in_count), wt(w_count), bias(k);  // logical NCHW / KCRS order
  std::uint64_t seed = fresh_seed();
  parallel_for(in_count, [&](std::size_t b, std::size_t e) {
    std::uint64_t state = seed ^ (b * 0x632BE59BD9B4E019ull);
    for (std::size_t i = b; i < e; ++i) x[i] = round_to_dtype(static_cast<float>(uniform(state, -1, 1)));
  });
  std::uint64_t state = seed + 1;
  double scale = 1.0 / std::sqrt(double(cg * r * s));
  for (auto& v : wt) v = round_to_dtype(static_cast<float>(uniform(state, -scale, scale)));
  for (auto& v : bias) v = round_to_dtype(static_cast<float>(uniform(state, -scale, scale)));

  // Memory order: NCHW, or NHWC (element (n, c, h, w) at ((n * H + h) * W + w) * C + c).
  auto in_pos = [&](std::size_t ni, std::size_t ci, std::size_t yi, std::size_t xi) {
    return channels_last ? ((ni * h + yi) * w + xi) * c + ci : ((ni * c + ci) * h + yi) * w + xi;
  };
  auto w_pos = [&](std::size_t ko, std::size_t ci, std::size_t yi, std::size_t xi) {
    return channels_last ? ((ko * r + yi) * s + xi) * cg + ci : ((ko * cg + ci) * r + yi) * s + xi;
  };
  auto out_pos = [&](std::size_t ni, std::size_t ko, std::size_t yi, std::size_t xi) {
    return channels_last ? ((ni * oh + yi) * ow + xi) * k + ko : ((ni * k + ko) * oh + yi) * ow + xi;
  };
  auto upload = [&](DeviceBuffer& buffer, const std::vector<float>& logical, auto position) {
    std::vector<unsigned char> bytes(logical.size() * es);
    position([&](std::size_t logical_index, std::size_t memory_index) {
      const float v = logical[logical_index];
      if (dtype == DType::f32) {
        std::memcpy(bytes.data() + memory_index * 4, &v, 4);
      } else if (dtype == DType::f64) {
        const double d = v;
        std::memcpy(bytes.data() + memory_index * 8, &d, 8);
      } else {
        const std::uint16_t b = to_bits(v);
        std::memcpy(bytes.data() + memory_index * 2, &b, 2);
      }
    });
    buffer.copy_from_host(bytes.data(), bytes.size());
  };
  DeviceBuffer dx(in_count * es), dw(w_count * es), db(std::size_t(k) * es), dy(out_count * es);
  upload(dx, x, [&](auto put) {
    std::size_t i = 0;
    for (std::size_t ni = 0; ni < std::size_t(n); ++ni)
      for (std::size_t ci = 0; ci < std::size_t(c); ++ci)
        for (std::size_t yi = 0; yi < std::size_t(h); ++yi)
          for (std::size_t xi = 0; xi < std::size_t(w); ++xi) put(i++, in_pos(ni, ci, yi, xi));
  });
  upload(dw, wt, [&](auto put) {
    std::size_t i = 0;
    for (std::size_t ko = 0; ko < std::size_t(k); ++ko)
      for (std::size_t ci = 0; ci < std::size_t(cg); ++ci)
        for (std::size_t yi = 0; yi < std::size_t(r); ++yi)
          for (std::size_t xi = 0; xi < std::size_t(s); ++xi) put(i++, w_pos(ko, ci, yi, xi));
  });
  upload(db, bias, [&](auto put) {
    for (std::size_t i = 0; i < std::size_t(k); ++i) put(i, i);
  });
  dy.fill_u32(kPoison);  // a NaN in every dtype, whatever the element size
  Stream stream;
  auto view = [&](void* data, std::vector<std::int64_t> dims) {
    TensorView v = make_view(data, dtype, dims);
    if (channels_last) {  // [N, C, H, W] with strides [H*W*C, 1, W*C, C]
      v.strides[0] = dims[1] * dims[2] * dims[3];
      v.strides[1] = 1;
      v.strides[2] = dims[3] * dims[1];
      v.strides[3] = dims[1];
    }
    return v;
  };
  TensorView vx = view(dx.as<void>(), shape);
  TensorView vw = view(dw.as<void>(), {k, cg, r, s});
  TensorView vb = make_view(db.as<void>(), dtype, {k});
  TensorView vy = view(dy.as<void>(), {n, k, oh, ow});
  auto launch = [&] {
    ops::conv2d_div_leaky_relu(vx, vw, vb, vy, cp, divisor, slope, stream, precision);
  };
  time_first_call(m, stream, launch);
  std::vector<unsigned char> raw(out_count * es);
  dy.copy_to_host(raw.data(), raw.size());
  auto output = [&](std::size_t memory_index) -> double {
    if (dtype == DType::f32) {
      float v;
      std::memcpy(&v, raw.data() + memory_index * 4, 4);
      return v;
    }
    if (dtype == DType::f64) {
      double v;
      std::memcpy(&v, raw.data() + memory_index * 8, 8);
      return v;
    }
    std::uint16_t b;
    std::memcpy(&b, raw.data() + memory_index * 2, 2);
    return from_bits(b);
  };
  auto poisoned = [&](std::size_t memory_index) {
    for (std::size_t b = 0; b < es; ++b) {
      if (raw[memory_index * es + b] != 0xFF) return false;
    }
    return true;
  };
  std::atomic<std::size_t> unwritten{0};
  parallel_for(out_count, [&](std::size_t b, std::size_t e) {
    std::size_t local = 0;
    for (std::size_t i = b; i < e; ++i) local += poisoned(i) ? 1 : 0;
    unwritten += local;
  });
  // A sample of outputs against a double-precision reference. Half outputs are rounded once more:
  // half an ulp of the result (2^-11 relative in f16, 2^-8 in bf16) on top of the fp32 bound.
  constexpr int kSamples = 1 << 16;
  // (f64 sums in double whatever the precision argument: ~1e-16 a term.)
  const double tolerance = dtype == DType::f64 ? 1e-12 : conv2d_relative_tolerance(precision);
  const double rounding = dtype == DType::f16 ? std::ldexp(1.0, -11) : dtype == DType::bf16 ? std::ldexp(1.0, -8) : 0;
  std::size_t beyond = 0;
  double max_err = 0;
  for (int t = 0; t < kSamples; ++t) {
    std::size_t idx = splitmix(state) % out_count;  // logical NCHW index
    int ox = int(idx % ow), oy = int(idx / ow % oh), ko = int(idx / (std::size_t(ow) * oh) % k);
    int ni = int(idx / (std::size_t(ow) * oh * k));
    double acc = bias[ko], mag = std::fabs(bias[ko]);
    const int group = ko / kg;
    for (int cl = 0; cl < cg; ++cl) {
      const int ci = group * cg + cl;
      for (int dy_ = 0; dy_ < r; ++dy_) {
        const int iy = oy * cp.stride_h - cp.pad_h + dy_ * cp.dilation_h;
        if (iy < 0 || iy >= h) continue;  // zero padding
        for (int dx_ = 0; dx_ < s; ++dx_) {
          const int ix = ox * cp.stride_w - cp.pad_w + dx_ * cp.dilation_w;
          if (ix < 0 || ix >= w) continue;
          double p = double(x[((std::size_t(ni) * c + ci) * h + iy) * w + ix]) *
                     wt[((std::size_t(ko) * cg + cl) * r + dy_) * s + dx_];
          acc += p;
          mag += std::fabs(p);
        }
      }
    }
    const double got = output(out_pos(ni, ko, oy, ox));
    double t_ = acc / divisor, ref = t_ > 0 ? t_ : t_ * slope;
    if (std::isfinite(ref)) max_err = std::max(max_err, std::fabs(ref - got));
    if (!conv2d_output_ok(acc, tolerance * mag + rounding * std::fabs(acc), divisor, slope, got,
                          dtype == DType::f64 ? 1e-12 : 1e-6)) {
      ++beyond;
    }
  }
  m.ok = unwritten == 0 && beyond == 0;
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "%s: %zu outputs never written; %d sampled outputs against a float64 reference, %zu "
                "beyond %g of their magnitude%s (max abs error %.3g)",
                m.ok ? "ok" : "FAILED", unwritten.load(), kSamples, beyond, tolerance,
                rounding > 0 ? " plus the output's rounding" : "", max_err);
  m.check = buf;
  time_steady(m, stream, repeat, launch);
  return m;
}

ops::Op op_from_name(const RunOptions& o) {
  if (o.op == "relu") return ops::Op::relu();
  if (o.op == "leaky_relu") return ops::Op::leaky_relu(o.slope);
  if (o.op == "div_leaky_relu") return ops::Op::div_leaky_relu(o.divisor, o.slope);
  try {
    return ops::parse_op(o.op);  // "clamp(0,6)", "div(2)|relu", "expr(...)"
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(std::string(e.what()) +
                          "; or conv2d, or a row reduction: softmax, log_softmax, rms_norm, add_rms_norm, layer_norm");
  }
}

int report(const Measurement& m, const RunOptions& options) {
  std::printf("%-10s %s on GPU %d (%s)\n", "op", m.what.c_str(), options.device,
              device_info(options.device).name.c_str());
  std::printf("%-10s %s\n", "tensor", m.tensor.c_str());
  std::printf("%-10s %.2f ms (%s)\n", "first call", m.first_call_ms, m.first_call_source.c_str());
  std::printf("%-10s %s\n", "check", m.check.c_str());
  std::printf("%-10s %.4f ms median, %.4f ms min over %d launches (CUDA events)\n", "time", m.median_ms,
              m.min_ms, options.repeat);
  std::printf("%-10s %.0f GB/s (bytes read + written / median time)\n", "bandwidth", gbps(m));
  if (m.flops > 0) std::printf("%-10s %.0f GFLOP/s\n", "compute", m.flops / (m.median_ms * 1e6));
  return m.ok ? kExitOk : kExitFailure;
}

}  // namespace

int run_op(const RunOptions& options) {
  if (row_op_named(options.op)) {  // softmax and the norms (run_rows.cpp)
    const RowRun run = plan_row_run(options);  // bad input: exit 2 before the GPU
    require_gpu(options.device);
    return report(measure_rows(run, options.repeat), options);
  }
  if (options.eps) throw InvalidArgument("--eps: only rms_norm, add_rms_norm and layer_norm take eps, not '" + options.op + "'");
  if (options.prologue || options.epilogue) {
    throw InvalidArgument("--prologue / --epilogue: only the row reductions (softmax, log_softmax, rms_norm, "
                          "add_rms_norm, layer_norm) take them, not '" + options.op + "'");
  }
  if (options.inputs) {  // an N-ary op (run_nary.cpp)
    const bool conv = options.op == "conv2d" || options.op == "conv2d_div_leaky_relu";
    if (conv) throw InvalidArgument("--inputs: conv2d takes --shape, not --inputs (which is for elementwise ops)");
    if (!options.shape.empty()) throw InvalidArgument("--inputs: give the shapes there, not --shape as well");
    if (options.precision) throw InvalidArgument("--precision: only the conv2d op takes a precision");
    NaryRun run;
    run.op_text = op_from_name(options).describe();  // bare names take --slope / --divisor
    run.dtype = options.dtype;
    run.inputs = *options.inputs;
    run.outputs = options.outputs;
    run.repeat = options.repeat;
    run.device = options.device;
    return run_nary(run);
  }
  if (options.outputs != 0) throw InvalidArgument("--outputs: only with --inputs (an N-ary op)");
  auto dtype = parse_dtype(options.dtype);
  if (!dtype) throw InvalidArgument("--dtype: expected one of f32,f16,bf16,f64, got '" + options.dtype + "'");
  bool conv = options.op == "conv2d" || options.op == "conv2d_div_leaky_relu";
  bool channels_last = false;
  if (options.layout) {
    if (!conv) throw InvalidArgument("--layout: only the conv2d op takes a layout, not '" + options.op + "'");
    if (*options.layout != "nchw" && *options.layout != "nhwc") {
      throw InvalidArgument("--layout: expected nchw or nhwc (channels-last), got '" + *options.layout + "'");
    }
    channels_last = *options.layout == "nhwc";
  }
  if (conv && !options.shape.empty() && options.shape.size() != 4) {
    throw InvalidArgument("--shape: conv2d takes NxCxHxW, e.g. 128x8x128x128");
  }
  if (!conv && options.precision) {
    throw InvalidArgument("--precision: only the conv2d op takes a precision, not '" + options.op + "'");
  }
  auto precision = ops::Conv2dPrecision::fp32;
  if (options.precision) {  // given, even as "": an empty name is an error, not the default
    try {
      precision = ops::parse_conv2d_precision(*options.precision);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(std::string("--precision: ") + e.what());
    }
  }
  if (!conv && (options.filters || options.stride || options.padding || options.dilation || options.groups)) {
    throw InvalidArgument("--filters, --stride, --padding, --dilation, --groups: only conv2d takes them, not '" +
                          options.op + "'");
  }
  const std::vector<std::int64_t> conv_shape =
      options.shape.empty() ? std::vector<std::int64_t>{128, 8, 128, 128} : options.shape;
  const ConvLayer layer = conv ? conv_layer_of(options, conv_shape) : ConvLayer{};
  ops::Op op = conv ? ops::Op::relu() : op_from_name(options);  // bad input: exit 2 before the GPU
  if (!conv) op.validate();
  if (!conv && (op.min_inputs() > 1 || op.outputs() > 1)) {
    throw InvalidArgument("op " + op.describe() + " uses " + std::to_string(op.min_inputs()) + " input(s) and " +
                          std::to_string(op.outputs()) + " output(s): give the inputs' shapes with --inputs, e.g. " +
                          "--inputs 4096x4096,4096");
  }
  require_gpu(options.device);
  Measurement m;
  if (conv) {
    m = measure_conv2d(conv_shape, layer, *dtype, channels_last, options.divisor, options.slope, precision,
                       options.repeat);
  } else {
    auto shape = options.shape.empty() ? std::vector<std::int64_t>{4096, 393216} : options.shape;
    m = measure_elementwise(op, *dtype, shape, options.repeat);
  }
  return report(m, options);
}

int run_bench(const BenchOptions& options) {
  if (!options.op.empty() || options.inputs) {  // one N-ary op beside a copy (run_nary.cpp)
    if (options.op.empty()) throw InvalidArgument("--inputs: name the op as well, e.g. cuinline bench 'add(in1)|relu' --inputs 8192x8192,8192");
    if (!options.inputs) throw InvalidArgument("bench " + options.op + ": give the input shapes, e.g. --inputs 8192x8192,8192");
    if (options.quick) throw InvalidArgument("--quick: only for the standard table (bench without an op)");
    NaryRun run;
    run.op_text = options.op;
    run.dtype = options.dtype;
    run.inputs = *options.inputs;
    run.outputs = options.outputs;
    run.repeat = options.repeat;
    run.device = options.device;
    run.bench = true;
    return run_nary(run);
  }
  if (options.outputs != 0 || options.dtype != "f32") {
    throw InvalidArgument("--dtype / --outputs: only with an op and --inputs (the standard table has its own)");
  }
  require_gpu(options.device);
  std::vector<std::int64_t> big =
      options.quick ? std::vector<std::int64_t>{4096, 16384} : std::vector<std::int64_t>{4096, 393216};
  std::vector<std::int64_t> conv = options.quick ? std::vector<std::int64_t>{16, 8, 128, 128}
                                                 : std::vector<std::int64_t>{128, 8, 128, 128};
  std::vector<Measurement> rows;
  for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    rows.push_back(measure_elementwise(ops::Op::relu(), dtype, big, options.repeat));
    rows.push_back(measure_elementwise(ops::Op::leaky_relu(0.01), dtype, big, options.repeat));
  }
  rows.push_back(measure_elementwise(ops::Op::div_leaky_relu(2, 0.01), DType::f32, big, options.repeat));
  const ConvLayer seed;  // 64 filters 3x3, no padding
  rows.push_back(measure_conv2d(conv, seed, DType::f32, false, 2, 0.01, ops::Conv2dPrecision::fp32, options.repeat));
  rows.push_back(measure_conv2d(conv, seed, DType::f16, false, 2, 0.01, ops::Conv2dPrecision::fp32, options.repeat));
  rows.push_back(measure_conv2d(conv, seed, DType::bf16, true, 2, 0.01, ops::Conv2dPrecision::fp32, options.repeat));
  for (ops::RowOp op : {ops::RowOp::rms_norm, ops::RowOp::softmax}) {
    for (DType dtype : {DType::f32, DType::bf16}) {
      const double eps = op == ops::RowOp::softmax ? 0.0 : 1e-6;
      rows.push_back(measure_rows(RowRun{op, dtype, options.quick ? 1024 : 16384, 4096, eps, {}, {}}, options.repeat));
    }
  }

  std::printf("GPU %d: %s; medians of %d launches (CUDA events)\n\n", options.device,
              device_info(options.device).name.c_str(), options.repeat);
  std::printf("| %-32s | %-20s | %9s | %8s | %9s | %-26s | %s |\n", "op", "tensor", "median ms", "GB/s",
              "GFLOP/s", "first call", "check");
  std::printf("|%s|%s|%s|%s|%s|%s|%s|\n", std::string(34, '-').c_str(), std::string(22, '-').c_str(),
              std::string(11, '-').c_str(), std::string(10, '-').c_str(), std::string(11, '-').c_str(),
              std::string(28, '-').c_str(), "---");
  bool ok = true;
  for (const auto& m : rows) {
    ok = ok && m.ok;
    char first[64];
    std::snprintf(first, sizeof first, "%.1f ms (%s)", m.first_call_ms, m.first_call_source.c_str());
    std::string flops =
        m.flops > 0 ? std::to_string(static_cast<long long>(m.flops / (m.median_ms * 1e6))) : "-";
    std::printf("| %-32s | %-20s | %9.3f | %8.0f | %9s | %-26s | %s |\n", m.what.c_str(), m.tensor.c_str(),
                m.median_ms, gbps(m), flops.c_str(), first, m.ok ? "ok" : m.check.c_str());
  }
  return ok ? kExitOk : kExitFailure;
}

}  // namespace cuinline::cli
