// cuinline run / bench OP --inputs SHAPES: an N-ary op (ops::apply over tensor lists) on fresh random
// inputs with special values mixed in, poisoned outputs, a CPU reference with PyTorch's broadcasting
// and rounding for chains (none exists for expressions: their outputs are checked for having been
// written), CUDA-event timings; `bench` flushes the L2 before each timed call and times a
// device-to-device copy of the same byte count beside the op.

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cuinline/driver.hpp>
#include <cuinline/error.hpp>
#include <cuinline/ops.hpp>
#include <limits>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/run_common.hpp"
#include "reference/host_reference.hpp"

namespace cuinline::cli {

std::vector<std::vector<std::int64_t>> parse_input_shapes(const std::string& text) {
  std::vector<std::vector<std::int64_t>> shapes;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    std::string part = text.substr(pos, end - pos);
    while (!part.empty() && part.front() == ' ') part.erase(part.begin());
    while (!part.empty() && part.back() == ' ') part.pop_back();
    if (part == "scalar" || part == "[]") {
      shapes.emplace_back();  // a 0-dim tensor
    } else {
      try {
        shapes.push_back(parse_shape(part));
      } catch (const InvalidArgument&) {
        throw InvalidArgument("--inputs: '" + part + "' is not a shape (one per input, comma-separated: " +
                              "e.g. 8192x28672,28672; 'scalar' for a 0-dim tensor), in '" + text + "'");
      }
    }
    pos = end + 1;
  }
  if (shapes.size() > static_cast<std::size_t>(ops::kMaxInputs)) {
    throw InvalidArgument("--inputs: " + std::to_string(shapes.size()) + " shapes given; an op takes at most " +
                          std::to_string(ops::kMaxInputs) + " inputs");
  }
  return shapes;
}

namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t d = 0; d < shape.size(); ++d) s += (d ? ", " : "") + std::to_string(shape[d]);
  return s + "]";
}

// The call, checked and planned as ops::apply plans it, before anything touches a GPU.
struct Planned {
  ops::Op op;
  DType dtype = DType::f32;
  std::vector<std::vector<std::int64_t>> shapes;  // inputs
  std::vector<std::int64_t> out_shape;            // the broadcast shape
  int outputs = 1;
};

Planned plan(const NaryRun& r) {
  Planned p;
  const auto dtype = parse_dtype(r.dtype);
  if (!dtype) throw InvalidArgument("--dtype: expected one of f32,f16,bf16,f64, got '" + r.dtype + "'");
  p.dtype = *dtype;
  p.op = ops::parse_op(r.op_text);
  p.shapes = parse_input_shapes(r.inputs);
  p.outputs = r.outputs > 0 ? r.outputs : p.op.outputs();
  if (p.outputs > ops::kMaxOutputs) {
    throw InvalidArgument("--outputs: " + std::to_string(p.outputs) + "; an op has at most " +
                          std::to_string(ops::kMaxOutputs) + " outputs");
  }
  // The broadcast shape (PyTorch's rule), naming the two shapes that disagree.
  std::size_t nd = 0;
  for (const auto& s : p.shapes) nd = std::max(nd, s.size());
  p.out_shape.assign(nd, 1);
  std::vector<std::int64_t> first_with(nd, -1);  // the input that set each dimension
  for (std::size_t k = 0; k < p.shapes.size(); ++k) {
    const auto& s = p.shapes[k];
    for (std::size_t d = 0; d < s.size(); ++d) {
      const std::size_t od = nd - s.size() + d;
      std::int64_t& e = p.out_shape[od];
      if (s[d] == e || s[d] == 1) continue;
      if (e != 1) {
        throw InvalidArgument("--inputs: input " + std::to_string(k) + " " + shape_text(s) + " does not broadcast with input " +
                              std::to_string(first_with[od]) + " " + shape_text(p.shapes[first_with[od]]) +
                              " (aligned at the last dimension, each size must be equal or 1)");
      }
      e = s[d];
      first_with[od] = static_cast<std::int64_t>(k);
    }
  }
  // The library's own checks (the op's inputs and outputs, names in expressions) on fake, 4 KiB-aligned
  // tensors: what ops::apply would reject is rejected here, before the GPU.
  std::vector<TensorView> in, out;
  std::uintptr_t at = 1ull << 40;
  for (const auto& s : p.shapes) in.push_back(make_view(reinterpret_cast<void*>(at += 1ull << 36), p.dtype, s));
  for (int k = 0; k < p.outputs; ++k) out.push_back(make_view(reinterpret_cast<void*>(at += 1ull << 36), p.dtype, p.out_shape));
  ops::make_request(p.op, in, out);
  return p;
}

std::size_t count(const std::vector<std::int64_t>& shape) {
  std::size_t n = 1;
  for (auto d : shape) n *= static_cast<std::size_t>(d);
  return n;
}

// The inputs used as a where condition: half their elements are zeros (±0), so both sides are taken.
std::vector<bool> condition_inputs(const ops::Op& op) {
  std::vector<bool> cond(ops::kMaxInputs, false);
  for (const auto& s : op.steps) {
    if (s.kind == ops::StepKind::where_tensor || s.kind == ops::StepKind::where_scalar) cond[s.cond] = true;
  }
  return cond;
}

// Fresh random values in [-8, 8) with special values mixed in (1 in 64: ±0, NaN, ±inf, ±1, 2^-20,
// a subnormal in f16).
template <class S, class T, class FromT>
void fill_random(std::vector<S>& host, std::uint64_t seed, bool condition, FromT from_t) {
  static const double kSpecial[] = {0.0, -0.0, std::numeric_limits<double>::quiet_NaN(), INFINITY, -INFINITY, 1.0, -1.0,
                                    0x1p-20};
  parallel_for(host.size(), [&](std::size_t b, std::size_t e) {
    std::uint64_t state = seed ^ (b * 0x632BE59BD9B4E019ull);
    for (std::size_t i = b; i < e; ++i) {
      const std::uint64_t r = splitmix(state);
      double v = uniform(state, -8, 8);
      if (condition && (r & 1)) v = (r & 2) ? 0.0 : -0.0;
      if ((r >> 8) % 64 == 0) v = kSpecial[(r >> 16) % 8];
      host[i] = from_t(static_cast<T>(v));
    }
  });
}

template <class S, class T, class ToT, class FromT>
Measurement measure(const Planned& p, const NaryRun& r, ToT to_t, FromT from_t) {
  const int ni = static_cast<int>(p.shapes.size()), no = p.outputs;
  const std::size_t out_n = count(p.out_shape);
  double bytes = 0;
  for (const auto& s : p.shapes) bytes += static_cast<double>(count(s) * sizeof(S));
  bytes += static_cast<double>(no) * static_cast<double>(out_n * sizeof(S));
  Measurement m;
  m.what = p.op.describe();
  m.tensor = std::string(to_string(p.dtype));
  for (const auto& s : p.shapes) m.tensor += " " + shape_text(s);
  m.tensor += " -> " + std::to_string(no) + " x " + shape_text(p.out_shape);
  m.bytes_moved = bytes;  // each input read once, each output written once
  const std::size_t flush_bytes = std::max<std::size_t>(256u << 20, 4 * device_info(r.device).l2_bytes);
  check_memory(static_cast<std::size_t>(r.bench ? 2 * bytes + static_cast<double>(flush_bytes) : bytes), r.device);

  const std::uint64_t seed = fresh_seed();
  std::printf("%-10s %016llx (fresh each run)\n", "seed", static_cast<unsigned long long>(seed));
  const std::vector<bool> is_cond = condition_inputs(p.op);
  std::vector<std::vector<S>> host_in(ni);
  std::vector<DeviceBuffer> din, dout;
  std::vector<TensorView> vin, vout;
  for (int k = 0; k < ni; ++k) {
    host_in[k].resize(count(p.shapes[k]));
    fill_random<S, T>(host_in[k], seed + static_cast<std::uint64_t>(k) * 0x9E3779B97F4A7C15ull, is_cond[k], from_t);
    din.emplace_back((host_in[k].size() * sizeof(S) + 3) / 4 * 4);
    din.back().copy_from_host(host_in[k].data(), host_in[k].size() * sizeof(S));
    vin.push_back(make_view(din.back().as<void>(), p.dtype, p.shapes[k]));
  }
  for (int k = 0; k < no; ++k) {
    dout.emplace_back((out_n * sizeof(S) + 3) / 4 * 4);  // fill_u32 writes whole 32-bit words
    dout.back().fill_u32(kPoison);
    vout.push_back(make_view(dout.back().as<void>(), p.dtype, p.out_shape));
  }
  Stream stream;
  auto launch = [&] { ops::apply(p.op, vin, vout, stream); };
  time_first_call(m, stream, launch);

  std::vector<std::vector<S>> got(no, std::vector<S>(out_n));
  for (int k = 0; k < no; ++k) dout[k].copy_to_host(got[k].data(), out_n * sizeof(S));
  // Each input's element strides over the output's dimensions (0 where broadcast).
  const int nd = static_cast<int>(p.out_shape.size());
  std::vector<std::vector<std::int64_t>> strides(ni, std::vector<std::int64_t>(nd, 0));
  for (int k = 0; k < ni; ++k) {
    std::int64_t s = 1;
    const int off = nd - static_cast<int>(p.shapes[k].size());
    for (int d = static_cast<int>(p.shapes[k].size()) - 1; d >= 0; --d) {
      strides[k][d + off] = p.shapes[k][d] == 1 ? 0 : s;
      s *= p.shapes[k][d];
    }
  }
  const bool chain = p.op.expression.empty();
  const bool functions = has_function_steps(p.op);  // then the host's libm is a few ulp off CUDA's
  const bool meet_zero = has_operand_after_function_step(p.op);
  std::atomic<std::size_t> close{0};
  auto round = [&](T v) { return to_t(from_t(v)); };
  std::atomic<std::size_t> unwritten{0}, exact{0}, nan_payload{0}, zero_sign{0}, nans{0}, wrong{0};
  std::atomic<std::size_t> first_wrong{std::numeric_limits<std::size_t>::max()};
  parallel_for(out_n, [&](std::size_t b, std::size_t e) {
    std::size_t l_unwritten = 0, l_exact = 0, l_payload = 0, l_zero = 0, l_nans = 0, l_wrong = 0, l_close = 0;
    std::size_t l_first = SIZE_MAX;
    std::vector<std::int64_t> idx(nd), off(ni, 0);
    for (int d = nd - 1; d >= 0; --d) {  // multi-index of element b
      std::size_t below = 1;
      for (int q = d + 1; q < nd; ++q) below *= static_cast<std::size_t>(p.out_shape[q]);
      idx[d] = static_cast<std::int64_t>((b / below) % static_cast<std::size_t>(p.out_shape[d]));
      for (int k = 0; k < ni; ++k) off[k] += idx[d] * strides[k][d];
    }
    S poison;
    std::memset(&poison, 0xFF, sizeof(S));
    for (std::size_t i = b; i < e; ++i) {
      for (int k = 0; k < no; ++k) {
        if (std::memcmp(&got[k][i], &poison, sizeof(S)) == 0) ++l_unwritten;
        if (std::isnan(static_cast<double>(to_t(got[k][i])))) ++l_nans;
      }
      if (chain) {
        T xs[ops::kMaxInputs];
        for (int k = 0; k < ni; ++k) xs[k] = to_t(host_in[k][static_cast<std::size_t>(off[k])]);
        const S ref = from_t(reference_chain(p.op.steps, xs[0], round, xs));
        const T want = to_t(ref), have = to_t(got[0][i]);
        if (std::memcmp(&ref, &got[0][i], sizeof(S)) == 0) {
          ++l_exact;
        } else if (std::isnan(static_cast<double>(want)) && std::isnan(static_cast<double>(have))) {
          ++l_payload;  // x / 0 with x = 0 and the like: NaN bits differ by platform
        } else if (want == T(0) && have == T(0)) {
          ++l_zero;  // max(-0, +0) may give either sign, on the GPU as in libm
        } else if (functions &&
                   close_to_reference(static_cast<double>(want), static_cast<double>(have), p.dtype, meet_zero)) {
          ++l_close;
        } else {
          ++l_wrong;
          l_first = std::min(l_first, i);
        }
      }
      for (int d = nd - 1; d >= 0; --d) {  // next element: carry through the dimensions
        for (int k = 0; k < ni; ++k) off[k] += strides[k][d];
        if (++idx[d] < p.out_shape[d]) break;
        for (int k = 0; k < ni; ++k) off[k] -= idx[d] * strides[k][d];
        idx[d] = 0;
      }
    }
    unwritten += l_unwritten;
    exact += l_exact;
    nan_payload += l_payload;
    zero_sign += l_zero;
    nans += l_nans;
    wrong += l_wrong;
    close += l_close;
    std::size_t cur = first_wrong.load();
    while (l_first < cur && !first_wrong.compare_exchange_weak(cur, l_first)) {
    }
  });
  m.ok = unwritten == 0 && wrong == 0;
  const std::size_t total = out_n * static_cast<std::size_t>(no);
  char buf[512];
  if (unwritten > 0) {
    std::snprintf(buf, sizeof buf, "FAILED: %zu of %zu outputs never written (still poisoned)", unwritten.load(), total);
  } else if (!chain) {
    std::snprintf(buf, sizeof buf,
                  "all %zu outputs written, %zu of them NaN; no CPU reference exists for expressions (the CPU cannot "
                  "evaluate CUDA source), so the values are not checked",
                  total, nans.load());
  } else if (wrong > 0) {
    std::snprintf(buf, sizeof buf, "FAILED: %zu of %zu differ from the CPU reference (first: element %zu)", wrong.load(),
                  out_n, first_wrong.load());
  } else if (functions) {
    std::snprintf(buf, sizeof buf,
                  "ok against the CPU reference: %zu of %zu identical, %zu within the host-libm tolerance (activation "
                  "steps: the host's exp / tanh / erf are not CUDA's), %zu NaN with other NaN bits, %zu zeros of the "
                  "other sign",
                  exact.load(), out_n, close.load(), nan_payload.load(), zero_sign.load());
  } else {
    std::snprintf(buf, sizeof buf,
                  "ok, bit-exact against the CPU reference: %zu of %zu identical, %zu NaN with other NaN bits, %zu "
                  "zeros of the other sign",
                  exact.load(), out_n, nan_payload.load(), zero_sign.load());
  }
  m.check = buf;
  if (!r.bench) {
    time_steady(m, stream, r.repeat, launch);
    return m;
  }
  // bench: the L2 flushed (a write larger than it) before each timed call; the copy the same way.
  DeviceBuffer flush(flush_bytes);
  auto before = [&](int i) {
    flush.fill_u32_async(static_cast<std::uint32_t>(i), stream.get());
  };
  time_steady(m, stream, r.repeat, launch, before);
  const std::size_t copy_bytes = static_cast<std::size_t>(bytes / 2);  // read + written = the op's bytes
  DeviceBuffer src((copy_bytes + 3) / 4 * 4), dst((copy_bytes + 3) / 4 * 4);  // fill_u32 fills whole words
  src.fill_u32(0x3f19999au);
  Measurement copy;
  time_steady(
      copy, stream, r.repeat,
      [&] { dst.copy_from_async(src, copy_bytes, stream.get()); }, before);
  copy.bytes_moved = 2.0 * static_cast<double>(copy_bytes);
  char line[256];
  std::snprintf(line, sizeof line, "%.4f ms median of the same %s copied (cuMemcpyDtoDAsync): %.0f GB/s; the op is %.1f %% of it",
                copy.median_ms, format_bytes(static_cast<std::uint64_t>(copy.bytes_moved)).c_str(), gbps(copy),
                100.0 * gbps(m) / gbps(copy));
  m.compare = line;
  return m;
}

Measurement measure_typed(const Planned& p, const NaryRun& r) {
  switch (p.dtype) {
    case DType::f32:
      return measure<float, float>(p, r, [](float v) { return v; }, [](float v) { return v; });
    case DType::f64:
      return measure<double, double>(p, r, [](double v) { return v; }, [](double v) { return v; });
    case DType::f16:
      return measure<std::uint16_t, float>(p, r, half_to_float, float_to_half);
    case DType::bf16:
      return measure<std::uint16_t, float>(p, r, bf16_to_float, float_to_bf16);
  }
  throw InvalidArgument("unknown dtype");
}

}  // namespace

int run_nary(const NaryRun& r) {
  const Planned p = plan(r);  // bad input: exit 2 before the GPU
  require_gpu(r.device);
  std::printf("%-10s %s on GPU %d (%s)\n", "op", p.op.describe().c_str(), r.device, device_info(r.device).name.c_str());
  const Measurement m = measure_typed(p, r);
  std::printf("%-10s %s\n", "tensors", m.tensor.c_str());
  std::printf("%-10s %.2f ms (%s)\n", "first call", m.first_call_ms, m.first_call_source.c_str());
  std::printf("%-10s %s\n", "check", m.check.c_str());
  std::printf("%-10s %.4f ms median, %.4f ms min over %d launches (CUDA events%s)\n", "time", m.median_ms, m.min_ms,
              r.repeat, r.bench ? ", the L2 flushed before each" : "");
  std::printf("%-10s %.0f GB/s (%s: each input read once, each output written once / median time)\n", "bandwidth",
              gbps(m), format_bytes(static_cast<std::uint64_t>(m.bytes_moved)).c_str());
  if (!m.compare.empty()) std::printf("%-10s %s\n", "copy", m.compare.c_str());
  return m.ok ? kExitOk : kExitFailure;
}

}  // namespace cuinline::cli
