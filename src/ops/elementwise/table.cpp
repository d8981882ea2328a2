// The bf16 table form's rule (table.hpp).
#include "ops/elementwise/table.hpp"

#include <algorithm>
#include <atomic>
#include <cuinline/driver.hpp>

namespace cuinline::ops::detail {
namespace {

bool has_tensor(const Step& s) noexcept {
  switch (s.kind) {
    case StepKind::add_tensor:
    case StepKind::sub_tensor:
    case StepKind::mul_tensor:
    case StepKind::div_tensor:
    case StepKind::where_tensor:
    case StepKind::where_scalar:
      return true;
    default:
      return false;
  }
}

// The activations whose plain bf16 kernel is compute-bound: the table form ran them 1.17-1.70x
// faster (H200, [8192, 28672]: gelu, mish, softplus, elu, selu, logsigmoid, log).
bool heavy(StepKind k) noexcept {
  switch (k) {
    case StepKind::gelu:
    case StepKind::mish:
    case StepKind::softplus:
    case StepKind::elu:
    case StepKind::selu:
    case StepKind::celu:
    case StepKind::logsigmoid:
    case StepKind::log:
      return true;
    default:
      return false;
  }
}

// The other transcendental activations: alone their plain kernel is near a copy's bandwidth (the
// table form ran sigmoid, silu, tanh, exp, softsign, tanhshrink and gelu_tanh 0.84-1.08x), two of
// them in a run are not (silu|tanh 1.37x).
bool transcendental(StepKind k) noexcept {
  switch (k) {
    case StepKind::sigmoid:
    case StepKind::tanh:
    case StepKind::silu:
    case StepKind::gelu_tanh:
    case StepKind::exp:
    case StepKind::softsign:
    case StepKind::tanhshrink:
      return true;
    default:
      return heavy(k);
  }
}

}  // namespace

int table_run_start(const Op& op, const NaryKey& key) noexcept {
  if (key.dtype != DType::bf16 || key.strided || key.index64 || key.outputs != 1 || key.vector_width != 8)
    return -1;
  if (!op.expression.empty() || op.steps.empty()) return -1;
  std::size_t start = op.steps.size();
  while (start > 0 && !has_tensor(op.steps[start - 1])) --start;
  const auto first = op.steps.begin() + static_cast<std::ptrdiff_t>(start);
  const bool worth =
      std::any_of(first, op.steps.end(), [](const Step& s) { return heavy(s.kind); }) ||
      std::count_if(first, op.steps.end(), [](const Step& s) { return transcendental(s.kind); }) >= 2;
  if (!worth) return -1;
  if (std::any_of(op.steps.begin(), first, [](const Step& s) { return is_function_step(s.kind); })) return -1;
  return static_cast<int>(start);
}

int table_run_start_lowered(const Op& op, const NaryKey& key) noexcept {
  const int start = table_run_start(op, key);
  if (start < 0) return -1;
  int lowered = 0;
  for (int i = 0; i < start; ++i)
    lowered += op.steps[static_cast<std::size_t>(i)].kind == StepKind::div_leaky_relu ? 2 : 1;
  return lowered;
}

bool table_applies(const Op& op, const NaryKey& key, std::int64_t numel) noexcept {
  return numel >= kTableMinElements && table_run_start(op, key) >= 0;
}

bool generic_table_applies(const NaryKey& key) noexcept {
  return key.table && key.inputs == 1;
}

std::uint32_t table_grid(std::int64_t numel, std::int64_t head, int device) {
  // Per device: multiprocessors and threads a multiprocessor, packed (queried once).
  static std::atomic<std::int64_t> figures[64] = {};
  auto query = [](int d) {
    const DeviceInfo info = device_info(d);
    return (static_cast<std::int64_t>(std::max(1, info.multiprocessors)) << 32) |
           static_cast<std::int64_t>(std::max(1, info.max_threads_per_multiprocessor));
  };
  std::int64_t f = 0;
  if (device >= 0 && device < 64) {
    f = figures[device].load(std::memory_order_relaxed);
    if (f == 0) {
      f = query(device);
      figures[device].store(f, std::memory_order_relaxed);
    }
  } else {
    f = query(device);
  }
  const std::int64_t multiprocessors = f >> 32, threads = f & 0xffffffff;
  const std::int64_t per_sm =
      std::max<std::int64_t>(1, std::min<std::int64_t>(kTableBlocksPerSm, threads / kTableBlock));
  const std::int64_t per_block = kTableBlock;
  const std::int64_t needed = std::max<std::int64_t>(1, ((numel - head) / 8 + per_block - 1) / per_block);
  return static_cast<std::uint32_t>(std::min(needed, multiprocessors * per_sm));
}

}  // namespace cuinline::ops::detail
