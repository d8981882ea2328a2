// cuinline run softmax|log_softmax|rms_norm|add_rms_norm|layer_norm (and bench's rows of them): rows
// x row length of fresh random values (weight, bias, residual too), a poisoned output, the op once
// through the public C++ API (host-timed: that call compiles or loads its kernels), every row checked
// against the float64 reference (src/reference/row_reference.hpp) within its dtype's tolerance and
// add_rms_norm's residual bit for bit, then CUDA-event timings. --prologue / --epilogue fuse chains
// (the epilogue's tensors random in [-2, 2]), applied to the reference as the elementwise ops'.

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cuinline/driver.hpp>
#include <cuinline/error.hpp>
#include <cuinline/reductions.hpp>
#include <limits>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/run_common.hpp"
#include "reference/host_reference.hpp"
#include "reference/row_reference.hpp"

namespace cuinline::cli {
namespace {

using ops::RowOp;

constexpr RowOp kRowOps[] = {RowOp::softmax, RowOp::log_softmax, RowOp::rms_norm, RowOp::add_rms_norm,
                             RowOp::layer_norm};

bool takes_eps(RowOp op) {
  return op != RowOp::softmax && op != RowOp::log_softmax;
}

// The extra tensors an epilogue reads (its in1, in2, ...): the planner refuses any other count.
int epilogue_inputs(const ops::Op& epilogue) {
  return epilogue.steps.empty() && epilogue.expression.empty() ? 0 : epilogue.min_inputs() - 1;
}

// Host data in the dtype's storage S, drawn in [lo, hi) and rounded once (the reference reads what
// the GPU reads).
template <class S, class T, class FromT>
std::vector<S> random_values(std::size_t count, double lo, double hi, std::uint64_t seed, FromT from_t) {
  std::vector<S> out(count);
  parallel_for(count, [&](std::size_t b, std::size_t e) {
    std::uint64_t state = seed ^ (b * 0x632BE59BD9B4E019ull);
    for (std::size_t i = b; i < e; ++i) out[i] = from_t(static_cast<T>(uniform(state, lo, hi)));
  });
  return out;
}

template <class S, class T, class ToT, class FromT>
Measurement measure(const RowRun& run, int repeat, ToT to_t, FromT from_t) {
  const RowOp op = run.op;
  const DType dtype = run.dtype;
  const std::int64_t rows = run.rows, n = run.cols;
  const std::size_t numel = static_cast<std::size_t>(rows * n), es = sizeof(S);
  const bool add = op == RowOp::add_rms_norm, weighted = takes_eps(op), biased = op == RowOp::layer_norm;
  Measurement m;
  m.tensor = make_view(nullptr, dtype, {rows, n}).describe();
  // Each tensor read once, each written once (add_rms_norm's residual both).
  m.bytes_moved = static_cast<double>(es) * static_cast<double>((add ? 4 : 2) * numel +
                                                                 static_cast<std::size_t>(weighted + biased) * n);
  check_memory(static_cast<std::size_t>(m.bytes_moved), current_device());

  const std::uint64_t seed = fresh_seed();
  const std::vector<S> x = random_values<S, T>(numel, -8, 8, seed, from_t);
  const std::vector<S> w = random_values<S, T>(weighted ? n : 0, -2, 2, seed + 1, from_t);
  const std::vector<S> b = random_values<S, T>(biased ? n : 0, -1, 1, seed + 2, from_t);
  const std::vector<S> r = random_values<S, T>(add ? numel : 0, -4, 4, seed + 3, from_t);
  // The epilogue's tensors (in1, in2, ...), in [-2, 2].
  const int k_extra = epilogue_inputs(run.epilogue);
  std::vector<std::vector<S>> e;
  for (int k = 0; k < k_extra; ++k) e.push_back(random_values<S, T>(numel, -2, 2, seed + 4 + k, from_t));
  m.bytes_moved += static_cast<double>(es) * static_cast<double>(numel) * k_extra;
  const auto upload = [](const std::vector<S>& host) {
    DeviceBuffer buffer((host.size() * sizeof(S) + 3) / 4 * 4);  // fill_u32 writes whole 32-bit words
    if (!host.empty()) buffer.copy_from_host(host.data(), host.size() * sizeof(S));
    return buffer;
  };
  DeviceBuffer dx = upload(x), dw = upload(w), db = upload(b), dr = upload(r), dy((numel * es + 3) / 4 * 4);
  dy.fill_u32(kPoison);
  const TensorView vx = make_view(dx.as<void>(), dtype, {rows, n}), vy = make_view(dy.as<void>(), dtype, {rows, n});
  const TensorView vr = add ? make_view(dr.as<void>(), dtype, {rows, n}) : TensorView{};
  const TensorView vw = weighted ? make_view(dw.as<void>(), dtype, {n}) : TensorView{};
  const TensorView vb = biased ? make_view(db.as<void>(), dtype, {n}) : TensorView{};
  std::vector<DeviceBuffer> de;
  ops::RowFusion fusion{run.prologue, run.epilogue, {}};
  for (const auto& host : e) {
    de.push_back(upload(host));
    fusion.epilogue_inputs.push_back(make_view(de.back().template as<void>(), dtype, {rows, n}));
  }
  const ops::RowPlan plan = ops::plan_rows(op, vx, vy, vw, vb, vr, run.eps, fusion);
  char what[160];
  if (takes_eps(op)) {
    std::snprintf(what, sizeof what, "%s eps %g: %s", ops::to_string(op), run.eps, plan.variant.name().c_str());
  } else {
    std::snprintf(what, sizeof what, "%s: %s", ops::to_string(op), plan.variant.name().c_str());
  }
  m.what = what;

  Stream stream;
  const auto launch = [&] {
    switch (op) {
      case RowOp::softmax:
        return ops::softmax(vx, vy, fusion, stream);
      case RowOp::log_softmax:
        return ops::log_softmax(vx, vy, fusion, stream);
      case RowOp::rms_norm:
        return ops::rms_norm(vx, vw, vy, run.eps, fusion, stream);
      case RowOp::add_rms_norm:
        return ops::add_rms_norm(vx, vr, vw, vy, run.eps, fusion, stream);
      case RowOp::layer_norm:
        return ops::layer_norm(vx, vw, vb, vy, run.eps, fusion, stream);
    }
  };
  time_first_call(m, stream, launch);
  std::vector<S> y(numel), z(add ? numel : 0);
  dy.copy_to_host(y.data(), numel * es);
  if (add) dr.copy_to_host(z.data(), numel * es);  // x + residual, rounded to the dtype

  // An epilogue's tensors (|in_k| <= 2, multiplied in, one more rounding each) scale the output's
  // absolute error.
  const double rel = reference::row_rtol(dtype), abs = reference::row_atol(op, dtype) * (1 << (2 * k_extra));
  const bool pro = !run.prologue.steps.empty(), epi = !run.epilogue.steps.empty();
  std::vector<double> wd(w.size()), bd(b.size());
  for (std::size_t i = 0; i < w.size(); ++i) wd[i] = static_cast<double>(to_t(w[i]));
  for (std::size_t i = 0; i < b.size(); ++i) bd[i] = static_cast<double>(to_t(b[i]));
  S poison;
  std::memset(&poison, 0xFF, sizeof(S));
  std::atomic<std::size_t> unwritten{0}, beyond{0}, residual_wrong{0};
  std::atomic<std::size_t> first{std::numeric_limits<std::size_t>::max()};
  std::atomic<std::uint64_t> max_err_bits{0};  // the largest |got - want| (a non-negative double's bits order as it)
  // Rows are split among the threads by their first element: parallel_for splits by elements.
  parallel_for(numel, [&](std::size_t begin, std::size_t end) {
    const std::size_t un = static_cast<std::size_t>(n);
    std::vector<double> v(un), want(un);
    double in[8] = {};
    std::size_t l_unwritten = 0, l_beyond = 0, l_residual = 0, l_first = SIZE_MAX;
    double l_max = 0;
    for (std::size_t row = (begin + un - 1) / un; row * un < end; ++row) {
      const std::size_t at = row * un;
      for (std::size_t i = 0; i < un; ++i) {
        const double xv = static_cast<double>(to_t(x[at + i]));
        const double px = pro ? reference::apply_chain(run.prologue, dtype, xv) : xv;
        if (!add) {
          v[i] = px;
          continue;
        }
        const S sum = from_t(static_cast<T>(px) + to_t(r[at + i]));  // the kernel adds in the accumulation type
        if (std::memcmp(&sum, &z[at + i], sizeof(S)) != 0) ++l_residual;
        v[i] = static_cast<double>(to_t(sum));
      }
      reference::reduce_row(op, v.data(), n, weighted ? wd.data() : nullptr, biased ? bd.data() : nullptr, run.eps,
                            want.data());
      for (std::size_t i = 0; epi && i < un; ++i) {
        for (int k = 0; k < k_extra; ++k) in[k + 1] = static_cast<double>(to_t(e[static_cast<std::size_t>(k)][at + i]));
        want[i] = reference::apply_chain(run.epilogue, dtype, reference::round_to(dtype, want[i]), in, k_extra);
      }
      for (std::size_t i = 0; i < un; ++i) {
        if (std::memcmp(&y[at + i], &poison, sizeof(S)) == 0) ++l_unwritten;
        const double got = static_cast<double>(to_t(y[at + i]));
        if (std::isfinite(want[i]) && std::isfinite(got)) l_max = std::max(l_max, std::fabs(got - want[i]));
        if (!reference::within(got, want[i], rel, abs)) {
          ++l_beyond;
          l_first = std::min(l_first, at + i);
        }
      }
    }
    unwritten += l_unwritten;
    beyond += l_beyond;
    residual_wrong += l_residual;
    std::size_t cur = first.load();
    while (l_first < cur && !first.compare_exchange_weak(cur, l_first)) {
    }
    std::uint64_t bits;
    std::memcpy(&bits, &l_max, 8);
    std::uint64_t seen = max_err_bits.load();
    while (bits > seen && !max_err_bits.compare_exchange_weak(seen, bits)) {
    }
  });
  double max_err;
  const std::uint64_t max_bits = max_err_bits.load();
  std::memcpy(&max_err, &max_bits, 8);
  m.ok = unwritten == 0 && beyond == 0 && residual_wrong == 0;
  char buf[512];
  if (unwritten > 0) {
    std::snprintf(buf, sizeof buf, "FAILED: %zu of %zu outputs never written (still poisoned)", unwritten.load(), numel);
  } else if (beyond > 0 || residual_wrong > 0) {
    const std::size_t f = first.load();
    std::snprintf(buf, sizeof buf,
                  "FAILED: %zu of %zu outputs beyond %g relative + %g absolute of the float64 reference (first: row "
                  "%zu, element %zu), %zu residual elements not x + residual",
                  beyond.load(), numel, rel, abs, f == SIZE_MAX ? 0 : f / static_cast<std::size_t>(n),
                  f == SIZE_MAX ? 0 : f % static_cast<std::size_t>(n), residual_wrong.load());
  } else {
    std::snprintf(buf, sizeof buf,
                  "passed: %lld rows of %lld, every output within %g relative + %g absolute of the float64 reference "
                  "(max abs error %.3g)%s",
                  static_cast<long long>(rows), static_cast<long long>(n), rel, abs, max_err,
                  add ? "; the residual is x + residual bit for bit" : "");
  }
  m.check = buf;
  time_steady(m, stream, repeat, launch);
  return m;
}

}  // namespace

std::optional<RowOp> row_op_named(const std::string& name) {
  for (RowOp op : kRowOps) {
    if (name == ops::to_string(op)) return op;
  }
  return std::nullopt;
}

RowRun plan_row_run(const RunOptions& o) {
  RowRun run;
  run.op = *row_op_named(o.op);
  const char* name = ops::to_string(run.op);
  const auto dtype = parse_dtype(o.dtype);
  if (!dtype) throw InvalidArgument("--dtype: expected one of f32,f16,bf16,f64, got '" + o.dtype + "'");
  run.dtype = *dtype;
  if (o.inputs || o.outputs != 0) {
    throw InvalidArgument(std::string("--inputs / --outputs: ") + name + " takes --shape ROWSxCOLS, not --inputs");
  }
  if (o.precision || o.layout || o.filters || o.stride || o.padding || o.dilation || o.groups) {
    throw InvalidArgument(std::string("--precision, --layout, --filters, --stride, --padding, --dilation, --groups: ") +
                          "only conv2d takes them, not '" + name + "'");
  }
  if (!o.shape.empty() && o.shape.size() != 2) {
    throw InvalidArgument(std::string("--shape: ") + name +
                          " takes ROWSxCOLS (rows x row length, reduced over the row), e.g. 4096x4096");
  }
  run.rows = o.shape.empty() ? 4096 : o.shape[0];
  run.cols = o.shape.empty() ? 4096 : o.shape[1];
  if (o.eps && !takes_eps(run.op)) {
    throw InvalidArgument(std::string("--eps: ") + name + " takes no eps (rms_norm, add_rms_norm, layer_norm do)");
  }
  // PyTorch's F.layer_norm default; vLLM's for the RMS norms.
  run.eps = o.eps.value_or(run.op == RowOp::layer_norm ? 1e-5 : takes_eps(run.op) ? 1e-6 : 0.0);
  if (!(std::isfinite(run.eps) && run.eps >= 0)) {
    char text[64];
    std::snprintf(text, sizeof text, "%g", run.eps);
    throw InvalidArgument(std::string("--eps: must be finite and >= 0, got ") + text);
  }
  // The library's own checks on fake, 4 KiB-aligned tensors of this shape, 2^52 bytes apart: what the
  // op would reject (a row count beyond one launch) is rejected here, before the GPU.
  const double bytes = static_cast<double>(run.rows) * static_cast<double>(run.cols) * dtype_size(run.dtype);
  if (bytes > 0x1p50) throw InvalidArgument("--shape: " + o.dtype + " tensors of " + std::to_string(run.rows) + "x" +
                                            std::to_string(run.cols) + " are more than 1 PiB each");
  const auto at = [](int k) { return reinterpret_cast<void*>((std::uintptr_t{1} << 52) * k); };
  const TensorView x = make_view(at(1), run.dtype, {run.rows, run.cols});
  const bool add = run.op == RowOp::add_rms_norm;
  const auto chain = [](const std::optional<std::string>& text, const char* flag) {
    if (!text || text->empty()) return ops::Op{};
    try {
      return ops::parse_op(*text);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(std::string(flag) + ": " + e.what());
    }
  };
  run.prologue = chain(o.prologue, "--prologue");
  run.epilogue = chain(o.epilogue, "--epilogue");
  ops::RowFusion fusion{run.prologue, run.epilogue, {}};
  for (int k = 0; k < epilogue_inputs(run.epilogue); ++k) {
    fusion.epilogue_inputs.push_back(make_view(at(6 + k), run.dtype, {run.rows, run.cols}));
  }
  ops::plan_rows(run.op, x, make_view(at(2), run.dtype, {run.rows, run.cols}),
                 takes_eps(run.op) ? make_view(at(3), run.dtype, {run.cols}) : TensorView{},
                 run.op == RowOp::layer_norm ? make_view(at(4), run.dtype, {run.cols}) : TensorView{},
                 add ? make_view(at(5), run.dtype, {run.rows, run.cols}) : TensorView{}, run.eps, fusion);
  return run;
}

Measurement measure_rows(const RowRun& run, int repeat) {
  switch (run.dtype) {
    case DType::f32:
      return measure<float, float>(run, repeat, [](float v) { return v; }, [](float v) { return v; });
    case DType::f64:
      return measure<double, double>(run, repeat, [](double v) { return v; }, [](double v) { return v; });
    case DType::f16:
      return measure<std::uint16_t, float>(run, repeat, half_to_float, float_to_half);
    case DType::bf16:
      return measure<std::uint16_t, float>(run, repeat, bf16_to_float, float_to_bf16);
  }
  throw InvalidArgument("unknown dtype");
}

}  // namespace cuinline::cli
