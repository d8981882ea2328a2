#pragma once
// What `cuinline run` and `cuinline bench` share (run_cmd.cpp: one-input ops and conv2d;
// run_nary.cpp: N-ary ops; run_rows.cpp: row reductions): the measurement record, fresh random
// numbers, timing with CUDA events.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cuinline/cache.hpp>
#include <cuinline/driver.hpp>
#include <cuinline/error.hpp>
#include <cuinline/kernel_cache.hpp>
#include <cuinline/module.hpp>
#include <cuinline/reductions.hpp>
#include <cuinline/tensor.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/util.hpp"

namespace cuinline::cli {

inline constexpr std::uint32_t kPoison = 0xFFFFFFFFu;  // a NaN in f32, f16 and bf16 and f64 alike

struct Measurement {
  std::string what;
  std::string tensor;
  double median_ms = 0, min_ms = 0;
  double bytes_moved = 0;  // read + write
  double flops = 0;        // conv2d only
  double first_call_ms = 0;
  std::string first_call_source;
  bool ok = true;
  std::string check;
  std::string compare;  // bench of an N-ary op: the copy of the same byte count
};

inline TensorView make_view(void* data, DType dtype, const std::vector<std::int64_t>& shape) {
  TensorView view;
  view.data = data;
  view.dtype = dtype;
  view.ndim = static_cast<int>(shape.size());
  std::int64_t stride = 1;
  for (int d = view.ndim - 1; d >= 0; --d) {
    view.shape[d] = shape[d];
    view.strides[d] = stride;
    stride *= shape[d];
  }
  return view;
}

inline std::uint64_t splitmix(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
inline double uniform(std::uint64_t& state, double lo, double hi) {
  return lo + (hi - lo) * static_cast<double>(splitmix(state) >> 11) * 0x1.0p-53;
}
inline std::uint64_t fresh_seed() {
  return (std::uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
}

// Runs `launch` once (host-timed, reporting where the kernel came from), then `repeat` times
// between CUDA events; fills median/min.
template <class Launch>
void time_first_call(Measurement& m, const Stream& stream, Launch launch) {
  KernelCache& cache = default_cache();
  CacheStats before = cache.stats();
  auto start = std::chrono::steady_clock::now();
  launch();
  stream.synchronize();
  m.first_call_ms = seconds_since(start) * 1e3;
  CacheStats after = cache.stats();
  m.first_call_source = after.compiles > before.compiles     ? "compiled"
                        : after.disk_hits > before.disk_hits ? "disk cache hit"
                                                             : "already loaded in this process";
}

// `before(i)` runs on the stream before the i-th timed launch, outside the timed span (an L2 flush).
template <class Launch, class Before>
void time_steady(Measurement& m, const Stream& stream, int repeat, Launch launch, Before before) {
  for (int i = 0; i < 3; ++i) launch();  // warm-up
  std::vector<float> ms;
  Event begin, end;
  for (int i = 0; i < repeat; ++i) {
    before(i);
    begin.record(stream);
    launch();
    end.record(stream);
    end.synchronize();
    ms.push_back(end.elapsed_ms_since(begin));
  }
  std::sort(ms.begin(), ms.end());
  m.median_ms = ms[ms.size() / 2];
  m.min_ms = ms.front();
}

template <class Launch>
void time_steady(Measurement& m, const Stream& stream, int repeat, Launch launch) {
  time_steady(m, stream, repeat, launch, [](int) {});
}

inline void check_memory(std::size_t bytes, int device) {
  DeviceInfo info = device_info(device);
  if (static_cast<double>(bytes) > 0.9 * static_cast<double>(info.total_memory)) {
    throw InvalidArgument("the tensors need " + format_bytes(bytes) + ", more than GPU " +
                          std::to_string(device) + " has (" + format_bytes(info.total_memory) + ")");
  }
}

inline void require_gpu(int device) {
  if (device_count() == 0) {
    throw Error(
        "this command needs a GPU (" +
        (driver_available() ? std::string("the driver reports no device") : driver_unavailable_reason()) +
        ")");
  }
  if (device >= device_count()) throw InvalidArgument("--device: there is no GPU " + std::to_string(device));
  set_device(device);
}

inline double gbps(const Measurement& m) {
  return m.bytes_moved / (m.median_ms * 1e6);
}

/// A row reduction as `cuinline run softmax|log_softmax|rms_norm|add_rms_norm|layer_norm` names it
/// (run_rows.cpp): rows x row length, the dtype and eps.
struct RowRun {
  ops::RowOp op = ops::RowOp::softmax;
  DType dtype = DType::f32;
  std::int64_t rows = 0, cols = 0;
  double eps = 0;
  ops::Op prologue, epilogue;  ///< fused chains (empty: none); the epilogue's in1.. are random tensors
};
/// The row reduction of that name, if it is one.
std::optional<ops::RowOp> row_op_named(const std::string& name);
/// The options checked (dtype, ROWSxCOLS, eps, flags of other ops) and planned by ops::plan_rows on
/// fake tensors, before any GPU is touched: InvalidArgument (exit 2) otherwise. options.op must be a
/// row reduction.
RowRun plan_row_run(const RunOptions& options);
/// Fresh random rows (and weight, bias, residual), the op once, every row against the float64
/// reference, then `repeat` timed launches.
Measurement measure_rows(const RowRun& run, int repeat);

}  // namespace cuinline::cli
