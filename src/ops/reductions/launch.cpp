// The reductions at run time: the planner (plan.cpp), then the family's launch sequence
// (ops/family.hpp): device, tensor access checks, the in-process map of (variant, device),
// Kernel::launch with one rd_args — the split form's two kernels with a workspace, or the looped
// form where none can be had. Only a miss renders the source and goes to KernelCache::get.
#include <cuinline/module.hpp>
#include <cuinline/reductions.hpp>

#include "driver/workspace.hpp"
#include "ops/family.hpp"
#include "ops/reductions/plan.hpp"

namespace cuinline::ops {
namespace {

using ReductionMap = detail::VariantMap<RowVariant, Kernel>;

// Never destroyed: ops may run during static teardown.
ReductionMap& reduction_map() {
  static auto* map = new ReductionMap;
  return *map;
}

// The kernel of `variant` on `device`, from the map or loaded (KernelCache::get).
Kernel kernel_for(const RowVariant& variant, int device) {
  return reduction_map().find_or_make(
      detail::hash_of(variant), device, [&](const RowVariant& v) { return v == variant; },
      [&] { return std::make_pair(variant, detail::load_kernel(variant, device)); });
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
  if (call.plan.variant.form == RowForm::split_stats) {
    // Two kernels over a stream-ordered workspace (a graph's allocation node inside a capture).
    const int device = detail::launch_device(stream, tensors);
    const CUdeviceptr ws = cuinline::detail::workspace_alloc(device, call.plan.workspace_bytes, stream);
    if (ws != 0) {
      cuinline::detail::WorkspaceGuard guard(ws, stream);  // freed after the launches (or a throw)
      RowVariant write = call.plan.variant;
      write.form = RowForm::split_write;
      const Kernel stats = kernel_for(call.plan.variant, device), writer = kernel_for(write, device);
      reduction_map().count_launch();
      LaunchConfig cfg;
      cfg.grid = Dim3(call.plan.grid);
      cfg.block = Dim3(call.plan.block);
      cfg.stream = stream;
      call.args.ws = reinterpret_cast<void*>(ws);
      launch_rows(stats, cfg, call.args, call.plan.variant);
      launch_rows(writer, cfg, call.args, write);
      return;
    }
    call = detail::looped_fallback(call);
  }
  const RowVariant& variant = call.plan.variant;
  detail::launch_variant(
      reduction_map(), stream, tensors, detail::hash_of(variant),
      [&](const RowVariant& v) { return v == variant; },
      [&](int device) { return std::make_pair(variant, detail::load_kernel(variant, device)); },
      [&](const Kernel& kernel, int) {
        LaunchConfig cfg;
        cfg.grid = Dim3(call.plan.grid);
        cfg.block = Dim3(call.plan.block);
        cfg.stream = stream;
        launch_rows(kernel, cfg, call.args, variant);
      });
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
  plan.fallback = plan.variant.form == RowForm::split_stats ? detail::looped_fallback(call).plan.variant : plan.variant;
  return plan;
}

OpsStats reduction_stats() {
  return reduction_map().counts();
}

void clear_reduction_map() {
  reduction_map().clear();
}

}  // namespace cuinline::ops
