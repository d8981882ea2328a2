// The reductions at run time: the planner (plan.cpp), then the family's launch sequence
// (ops/family.hpp): device, tensor access checks, the in-process map of (variant, device) — a
// variant not in it yet runs on the generic kernel under the async and generic policies (generic.cpp)
// —, Kernel::launch with one rd_args: the cluster form's kernel (on a GPU with clusters; else its
// split form), the split form's two kernels with a workspace, or the looped form where none can be
// had. Only a miss renders the source and goes to KernelCache::get.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cuinline/module.hpp>
#include <cuinline/reductions.hpp>
#include <map>
#include <mutex>

#include "common/log.hpp"
#include "driver/workspace.hpp"
#include "ops/family.hpp"
#include "ops/reductions/generic.hpp"
#include "ops/reductions/knobs.hpp"
#include "ops/reductions/plan.hpp"
#include "ops/specialize.hpp"

namespace cuinline::ops {
namespace {

using ReductionMap = detail::VariantMap<RowVariant, Kernel>;

// Never destroyed: ops may run during static teardown.
ReductionMap& reduction_map() {
  static auto* map = new ReductionMap;
  return *map;
}

// The cluster sizes a device refused (cuOccupancyMaxActiveClusters: 0, a GPU partition without a
// GPC free for the cluster; or the driver refused the non-portable size): the smallest refused, so
// its rows of that many blocks or more run the split form from then on. The flag spares every other
// call the lock.
std::atomic<bool> g_any_refused{false};
std::mutex g_refused_mutex;
std::map<int, int>& refused_blocks() {
  static auto* devices = new std::map<int, int>;  // never destroyed: ops may run during static teardown
  return *devices;
}
bool clusters_refused(int device, int blocks) {
  if (!g_any_refused.load(std::memory_order_acquire)) return false;
  std::lock_guard<std::mutex> lock(g_refused_mutex);
  const auto it = refused_blocks().find(device);
  return it != refused_blocks().end() && blocks >= it->second;
}

// A cluster kernel just loaded: whether `device` holds one of its clusters (asked once, as the
// kernel is loaded, off the launches' path); where not, the size is marked refused on the device,
// with a warning. A cluster past the portable size is allowed first. Where the driver cannot tell,
// the kernel is launched as planned.
void check_cluster_fits(const Kernel& kernel, const RowVariant& variant, int device) {
  LaunchConfig one;  // one cluster of the variant's blocks
  one.grid = Dim3(static_cast<unsigned>(variant.cluster));
  one.block = Dim3(static_cast<unsigned>(variant.threads));
  int clusters = -1;
  try {
    if (variant.cluster > detail::kClusterPortableBlocks) kernel.allow_non_portable_clusters(device);
    try {
      clusters = kernel.max_active_clusters(one, device);
    } catch (const std::exception&) {
      return;  // (unknown)
    }
  } catch (const std::exception&) {
    clusters = 0;  // the driver refused the size
  }
  if (clusters != 0) return;
  {
    std::lock_guard<std::mutex> lock(g_refused_mutex);
    auto [it, fresh] = refused_blocks().emplace(device, variant.cluster);
    if (!fresh) it->second = std::min(it->second, variant.cluster);
  }
  g_any_refused.store(true, std::memory_order_release);
  logger()->warn(
      "device {} holds no cluster of {} blocks of {} threads ({}): rows of as many blocks run the split form",
      device, variant.cluster, variant.threads, variant.name());
}

// The variant's kernel on `device` through the KernelCache, allowed the dynamic shared memory its
// launches take where that is past the default 48 KiB.
Kernel load_row_kernel(const RowVariant& variant, int device) {
  Kernel kernel = detail::load_kernel(variant, device);
  if (const std::uint32_t bytes = detail::row_shared_bytes(variant, device_arch(device)); bytes > 48u * 1024u) {
    kernel.set_max_dynamic_shared_bytes(bytes, device);
  }
  if (variant.form == RowForm::cluster) check_cluster_fits(kernel, variant, device);
  return kernel;
}

}  // namespace

namespace {

// The form a split or cluster call runs on `device`: the cluster form only on a GPU with thread
// block clusters (sm_90 and later) that has not refused one, as CUINLINE_ROWS_CLUSTER says (knobs.hpp).
detail::RowCall long_row_form(detail::RowCall call, int device) {
  const RowForm form = call.plan.variant.form;
  if (form != RowForm::cluster && form != RowForm::split_stats) return call;
  const detail::ClusterKnob knob = detail::row_knobs().cluster;
  if (knob == detail::ClusterKnob::off || device_arch(device).number() < detail::kClusterMinArch) {
    return detail::split_form(call);
  }
  if (knob == detail::ClusterKnob::all) call = detail::cluster_form(call);
  if (call.plan.variant.form == RowForm::cluster && clusters_refused(device, call.plan.variant.cluster)) {
    return detail::split_form(call);
  }
  return call;
}

// The kernel of `variant` on `device`, from the map or loaded (KernelCache::get).
Kernel kernel_for(const RowVariant& variant, int device) {
  return reduction_map().find_or_make(
      detail::hash_of(variant), device, [&](const RowVariant& v) { return v == variant; },
      [&] { return std::make_pair(variant, load_row_kernel(variant, device)); });
}

// One launch with the argument bytes the variant's kernel takes (rd_args, then its epilogue's tensors).
void launch_rows(const Kernel& kernel, const LaunchConfig& cfg, const detail::RowArgs& args, const RowVariant& v) {
  void* p = const_cast<detail::RowArgs*>(&args);
  const std::size_t size = detail::row_args_bytes(v.epilogue_inputs);
  kernel.launch_raw(cfg, &p, 1, &size);
}

// No chains (never destroyed: ops may run during static teardown).
const RowFusion& no_fusion() {
  static const auto* none = new RowFusion;
  return *none;
}

// Loads a variant's specialized kernels in the background (async): the split form's write kernel
// first, then the variant's own, whose entry the calls look up.
void submit_specialization(const RowVariant& variant, std::uint64_t hash, int device) {
  auto job = [hash, device, v = variant]() noexcept {
    auto same = [&](const RowVariant& e) { return e == v; };
    try {
      if (v.form == RowForm::split_stats) {
        RowVariant write = v;
        write.form = RowForm::split_write;
        kernel_for(write, device);
      }
      const Kernel specialized = load_row_kernel(v, device);
      reduction_map().finish_pending(hash, device, same, &specialized);
      detail::count_swap();
    } catch (const std::exception& e) {
      reduction_map().finish_pending(hash, device, same, nullptr);
      detail::count_background_failure();
      logger()->warn("background specialization of {} on device {} failed; its calls keep the generic kernel: {}",
                     v.name(), device, e.what());
    }
  };
  auto same = [&](const RowVariant& e) { return e == variant; };
  if (!detail::submit_specialization(std::move(job))) reduction_map().cancel_pending(hash, device, same);
}

// The family's launch sequence (ops/family.hpp) with the JIT policy (include/cuinline/jit.hpp): a
// variant whose specialized kernel is not in the map runs on the generic kernel where it applies —
// at once, while the specialized kernel compiles on the background pool (async), or for good
// (generic); otherwise, and under sync or a capture, the call loads or compiles it first.
void run(RowOp op, const TensorView& in, const TensorView& out, const TensorView& weight, const TensorView& bias,
         const TensorView& residual, double eps, const RowFusion& fusion, CUstream stream) {
  detail::RowCall call = detail::plan_row_call(op, in, out, weight, bias, residual, eps, fusion);
  if (call.plan.rows == 0) return;
  detail::TensorUses tensors{{&in, "input"}, {&out, "output"}};
  if (weight.data != nullptr) tensors.add(weight, "weight");
  if (bias.data != nullptr) tensors.add(bias, "bias");
  if (residual.data != nullptr) tensors.add(residual, "residual");
  static const char* const extra_names[detail::kMaxEpilogueInputs] = {
      "epilogue input in1", "epilogue input in2", "epilogue input in3", "epilogue input in4",
      "epilogue input in5", "epilogue input in6", "epilogue input in7"};
  for (std::size_t k = 0; k < fusion.epilogue_inputs.size(); ++k) {
    tensors.add(fusion.epilogue_inputs[k], extra_names[k]);
  }
  const int device = detail::launch_device(stream, tensors);
  call = long_row_form(std::move(call), device);
  {
    const RowVariant& variant = call.plan.variant;
    const std::uint64_t hash = detail::hash_of(variant);
    auto equal = [&](const RowVariant& v) { return v == variant; };
    Kernel ready;
    const auto state = reduction_map().find(hash, device, equal, &ready);
    if (state != ReductionMap::State::ready) {
      if (detail::generic_rows_apply(variant)) {
        const JitPolicy policy = detail::effective_policy(stream);
        if (policy == JitPolicy::async && !state && reduction_map().begin_pending(hash, device, equal, variant)) {
          submit_specialization(variant, hash, device);
        }
        if (policy != JitPolicy::sync) {
          reduction_map().count_launch();
          detail::launch_generic_rows(call, device, stream);
          return;
        }
      }
      detail::count_sync_wait();
    }
  }
  LaunchConfig cfg;
  cfg.grid = Dim3(call.plan.grid);
  cfg.block = Dim3(call.plan.block);
  cfg.shared_bytes =
      call.plan.shared_bytes != 0 ? detail::row_shared_bytes(call.plan.variant, device_arch(device)) : 0u;
  cfg.stream = stream;
  if (call.plan.variant.form == RowForm::cluster) {
    const Kernel kernel = kernel_for(call.plan.variant, device);  // (its load asks whether it fits)
    if (!clusters_refused(device, call.plan.variant.cluster)) {
      reduction_map().count_launch();
      launch_rows(kernel, cfg, call.args, call.plan.variant);
      return;
    }
    call = detail::split_form(call);  // (loaded or compiled below, as under sync)
    cfg.grid = Dim3(call.plan.grid);
    cfg.block = Dim3(call.plan.block);
  }
  if (call.plan.variant.form == RowForm::split_stats) {
    // Two kernels over a stream-ordered workspace (a graph's allocation node inside a capture).
    const CUdeviceptr ws = detail::row_knobs().workspace
                               ? cuinline::detail::workspace_alloc(device, call.plan.workspace_bytes, stream)
                               : 0;
    if (ws != 0) {
      cuinline::detail::WorkspaceGuard guard(ws, stream);  // freed after the launches (or a throw)
      RowVariant write = call.plan.variant;
      write.form = RowForm::split_write;
      const Kernel stats = kernel_for(call.plan.variant, device), writer = kernel_for(write, device);
      reduction_map().count_launch();
      call.args.ws = reinterpret_cast<void*>(ws);
      launch_rows(stats, cfg, call.args, call.plan.variant);
      launch_rows(writer, cfg, call.args, write);
      return;
    }
    call = detail::looped_fallback(call);
    cfg.grid = Dim3(call.plan.grid);
    cfg.block = Dim3(call.plan.block);
    cfg.shared_bytes = 0;  // (the looped form parks nothing)
  }
  const Kernel kernel = kernel_for(call.plan.variant, device);
  reduction_map().count_launch();
  launch_rows(kernel, cfg, call.args, call.plan.variant);
}

}  // namespace

void softmax(const TensorView& in, const TensorView& out, CUstream stream) {
  run(RowOp::softmax, in, out, {}, {}, {}, 0, no_fusion(), stream);
}

void log_softmax(const TensorView& in, const TensorView& out, CUstream stream) {
  run(RowOp::log_softmax, in, out, {}, {}, {}, 0, no_fusion(), stream);
}

void rms_norm(const TensorView& in, const TensorView& weight, const TensorView& out, double eps, CUstream stream) {
  run(RowOp::rms_norm, in, out, weight, {}, {}, eps, no_fusion(), stream);
}

void add_rms_norm(const TensorView& in, const TensorView& residual, const TensorView& weight, const TensorView& out,
                  double eps, CUstream stream) {
  run(RowOp::add_rms_norm, in, out, weight, {}, residual, eps, no_fusion(), stream);
}

void layer_norm(const TensorView& in, const TensorView& weight, const TensorView& bias, const TensorView& out,
                double eps, CUstream stream) {
  run(RowOp::layer_norm, in, out, weight, bias, {}, eps, no_fusion(), stream);
}

void softmax(const TensorView& in, const TensorView& out, const RowFusion& fusion, CUstream stream) {
  run(RowOp::softmax, in, out, {}, {}, {}, 0, fusion, stream);
}

void log_softmax(const TensorView& in, const TensorView& out, const RowFusion& fusion, CUstream stream) {
  run(RowOp::log_softmax, in, out, {}, {}, {}, 0, fusion, stream);
}

void rms_norm(const TensorView& in, const TensorView& weight, const TensorView& out, double eps,
              const RowFusion& fusion, CUstream stream) {
  run(RowOp::rms_norm, in, out, weight, {}, {}, eps, fusion, stream);
}

void add_rms_norm(const TensorView& in, const TensorView& residual, const TensorView& weight, const TensorView& out,
                  double eps, const RowFusion& fusion, CUstream stream) {
  run(RowOp::add_rms_norm, in, out, weight, {}, residual, eps, fusion, stream);
}

void layer_norm(const TensorView& in, const TensorView& weight, const TensorView& bias, const TensorView& out,
                double eps, const RowFusion& fusion, CUstream stream) {
  run(RowOp::layer_norm, in, out, weight, bias, {}, eps, fusion, stream);
}

RowPlan plan_rows(RowOp op, const TensorView& in, const TensorView& out, const TensorView& weight,
                  const TensorView& bias, const TensorView& residual, double eps) {
  return plan_rows(op, in, out, weight, bias, residual, eps, no_fusion());
}

RowPlan plan_rows(RowOp op, const TensorView& in, const TensorView& out, const TensorView& weight,
                  const TensorView& bias, const TensorView& residual, double eps, const RowFusion& fusion) {
  const detail::RowCall call = detail::plan_row_call(op, in, out, weight, bias, residual, eps, fusion);
  RowPlan plan = call.plan;
  const bool split = plan.variant.form == RowForm::split_stats || plan.variant.form == RowForm::cluster;
  plan.fallback = split ? detail::looped_fallback(call).plan.variant : plan.variant;
  plan.split = detail::split_form(call).plan.variant;
  return plan;
}

OpsStats reduction_stats() {
  return reduction_map().counts();
}

void clear_reduction_map() {
  reduction_map().clear();
}

}  // namespace cuinline::ops
