// The elementwise ops at run time: relu / leaky_relu / div_leaky_relu / apply over one tensor and
// apply over tensor lists, all through one planner (plan.cpp) and one kernel (ew_nary.cuh) — a
// one-input call is the N-ary kernel with one whole-tensor input. Per call: the plan, then the
// family's launch sequence (ops/family.hpp): device, tensor checks, a lookup of (variant, device)
// in the in-process map, Kernel::launch. Only a miss renders the source and goes to
// KernelCache::get (SHA-256 key, memory / disk tier, NVRTC).
#include <cuinline/error.hpp>
#include <cuinline/jit.hpp>
#include <cuinline/module.hpp>
#include <cuinline/ops.hpp>

#include "common/log.hpp"
#include "ops/elementwise/generic.hpp"
#include "ops/elementwise/plan.hpp"
#include "ops/elementwise/table.hpp"
#include "ops/elementwise/variant.hpp"
#include "ops/family.hpp"
#include "ops/specialize.hpp"

namespace cuinline::ops {
namespace detail {

// What load_kernel (ops/family.hpp) asks of a variant.
CompileRequest make_request(const NaryVariant& v) {
  return make_request(v.op, v.key);
}
std::string kernel_name(const NaryVariant& v) {
  return kernel_name(v.key);
}

}  // namespace detail

namespace {

using ElementwiseMap = detail::VariantMap<detail::NaryVariant, Kernel>;

// Two maps of the same kernels, so that stats() counts the one-input ops and nary_stats() the calls
// over tensor lists, as before they shared a kernel. Never destroyed: ops may run during static
// teardown.
ElementwiseMap& one_input_map() {
  static auto* map = new ElementwiseMap;
  return *map;
}
ElementwiseMap& nary_map() {
  static auto* map = new ElementwiseMap;
  return *map;
}

const char* const kInputNames[kMaxInputs] = {"input 0", "input 1", "input 2", "input 3",
                                             "input 4", "input 5", "input 6", "input 7"};
const char* const kOutputNames[kMaxOutputs] = {"output 0", "output 1", "output 2", "output 3"};

// The specialized kernel's launch.
void launch_specialized(const Kernel& kernel, int device, const Op& op, const detail::NaryPlan& p, CUstream stream) {
  LaunchConfig cfg;
  if (p.key.table) {  // ew_table.cuh: 32-bit indices, its own grid
    cfg.grid = Dim3(detail::table_grid(p.numel, p.head, device));
    cfg.block = Dim3(detail::kTableBlock);
    cfg.stream = stream;
    kernel.launch(cfg, p.args, static_cast<unsigned>(p.numel), static_cast<unsigned>(p.head));
    return;
  }
  cfg.grid = Dim3(p.grid);
  cfg.block = Dim3(detail::kBlock);
  cfg.stream = stream;
  if (p.key.strided) {
    kernel.launch(cfg, p.args, static_cast<long long>(p.numel), p.strided);
    return;
  }
  // Two vectors a thread when one would need one to two waves: the kernel has that body for one
  // input and one output without activation steps only (ew_nary.cuh), and runs one tile otherwise.
  const int reps = p.key.inputs == 1 && p.key.outputs == 1 && !detail::has_function_steps(op)
                       ? detail::reps_for(p.grid, detail::multiprocessors(device))
                       : 1;
  cfg.grid = Dim3((p.grid + reps - 1) / reps);
  if (p.key.index64) {
    kernel.launch(cfg, p.args, static_cast<long long>(p.numel), static_cast<long long>(p.head), reps);
  } else {
    kernel.launch(cfg, p.args, static_cast<unsigned>(p.numel), static_cast<unsigned>(p.head), reps);
  }
}

// The family's launch sequence (ops/family.hpp) with the JIT policy (include/cuinline/jit.hpp): a
// variant whose specialized kernel is not in the map runs on the generic kernel where it applies —
// at once, while the specialized kernel compiles on the background pool (async), or for good
// (generic); otherwise, and under sync or a capture, the call loads or compiles it first.
void launch(ElementwiseMap& map, const Op& op, const detail::NaryPlan& p, detail::TensorUses tensors,
            CUstream stream) {
  const int device = detail::launch_device(stream, tensors);
  const std::uint64_t hash = detail::hash_of(op, p.key);
  auto equal = [&](const detail::NaryVariant& v) {
    return v.key == p.key && v.op == op;
  };  // no copy of the op
  Kernel kernel;
  const auto state = map.find(hash, device, equal, &kernel);
  if (state == ElementwiseMap::State::ready) {
    map.count_launch();
    launch_specialized(kernel, device, op, p, stream);
    return;
  }
  if (detail::generic_applies(op, p.key)) {
    const JitPolicy policy = detail::effective_policy(stream);
    if (policy == JitPolicy::async && !state) {
      detail::NaryVariant variant{op, p.key};
      if (map.begin_pending(hash, device, equal, variant)) {
        auto job = [&map, hash, device, v = std::move(variant)]() noexcept {
          auto same = [&](const detail::NaryVariant& e) { return e.key == v.key && e.op == v.op; };
          try {
            const Kernel specialized = detail::load_kernel(v, device);
            map.finish_pending(hash, device, same, &specialized);
            detail::count_swap();
          } catch (const std::exception& e) {
            map.finish_pending(hash, device, same, nullptr);
            detail::count_background_failure();
            logger()->warn(
                "background specialization of elementwise {} on device {} failed; its calls keep the "
                "generic kernel: {}",
                v.op.describe() + "<" + to_string(v.key.dtype) + ">", device, e.what());
          }
        };
        if (!detail::submit_specialization(std::move(job))) map.cancel_pending(hash, device, equal);
      }
    }
    if (policy != JitPolicy::sync) {
      map.count_launch();
      detail::launch_generic(op, detail::generic_program(op, p.key), p, device, stream);
      return;
    }
  }
  detail::count_sync_wait();
  const Kernel specialized = map.find_or_make(hash, device, equal, [&] {
    detail::check_expression_names(op, p.key.inputs);  // a miss only: a mapped variant passed it
    detail::NaryVariant v{op, p.key};
    Kernel k = detail::load_kernel(v, device);
    return std::make_pair(std::move(v), k);
  });
  map.count_launch();
  launch_specialized(specialized, device, op, p, stream);
}

// An expression with named inputs or several outputs, or a chain over several inputs, is not a
// one-input variant: the list path plans (and rejects) it.
bool one_input_variant(const Op& op) {
  return op.input_names.empty() && op.more_outputs.empty() && op.min_inputs() == 1;
}

}  // namespace

LaunchPlan plan(const Op& op, const TensorView& in, const TensorView& out) {
  const detail::NaryPlan p = detail::plan_nary(op, TensorList(&in, 1), TensorList(&out, 1), true);
  LaunchPlan plan;
  plan.variant = detail::variant_of(op, p.key);
  plan.numel = p.numel;
  plan.head = p.head;
  plan.grid = p.grid;
  plan.block = p.numel == 0 ? 0 : detail::kBlock;
  plan.table = p.key.table;
  plan.in = p.args.in[0];
  plan.out = p.args.out[0];
  if (p.numel == 0) return plan;
  if (p.key.strided) {
    plan.ndim = p.strided.ndim;
    for (int d = 0; d < p.strided.ndim; ++d) {
      plan.shape[d] = p.strided.shape[d];
      plan.in_strides[d] = p.strided.in_strides[0][d];
      plan.out_strides[d] = p.strided.out_strides[0][d];
    }
  } else {
    plan.ndim = 1;  // flat
    plan.shape[0] = p.numel;
    plan.in_strides[0] = plan.out_strides[0] = 1;
  }
  return plan;
}

void apply(const Op& op, const TensorView& in, const TensorView& out, CUstream stream) {
  if (!one_input_variant(op)) return apply(op, TensorList(&in, 1), TensorList(&out, 1), stream);
  const detail::NaryPlan p = detail::plan_nary(op, TensorList(&in, 1), TensorList(&out, 1), true);
  if (p.numel == 0) return;
  launch(one_input_map(), op, p, {{&in, "input"}, {&out, "output"}}, stream);
}

void relu(const TensorView& in, const TensorView& out, CUstream stream) {
  static const Op op = Op::relu();
  apply(op, in, out, stream);
}

void leaky_relu(const TensorView& in, const TensorView& out, double slope, CUstream stream) {
  apply(Op::leaky_relu(slope), in, out, stream);
}

void div_leaky_relu(const TensorView& in, const TensorView& out, double divisor, double slope,
                    CUstream stream) {
  apply(Op::div_leaky_relu(divisor, slope), in, out, stream);
}

void apply(const Op& op, TensorList inputs, TensorList outputs, CUstream stream) {
  const detail::NaryPlan p = detail::plan_nary(op, inputs, outputs);
  if (p.numel == 0) return;
  detail::TensorUses tensors;
  for (std::size_t k = 0; k < inputs.size(); ++k) tensors.add(inputs[k], kInputNames[k]);
  for (std::size_t k = 0; k < outputs.size(); ++k) tensors.add(outputs[k], kOutputNames[k]);
  launch(nary_map(), op, p, tensors, stream);
}

namespace detail {

void apply_into_workspace(const Op& op, const TensorView& in, const TensorView& out, CUstream stream) {
  const NaryPlan p = plan_nary(op, TensorList(&in, 1), TensorList(&out, 1));
  if (p.numel == 0) return;
  launch(nary_map(), op, p, {{&in, kInputNames[0]}}, stream);
}

void apply_from_workspace(const Op& op, const TensorView& in, const TensorView& out, CUstream stream) {
  const NaryPlan p = plan_nary(op, TensorList(&in, 1), TensorList(&out, 1));
  if (p.numel == 0) return;
  launch(nary_map(), op, p, {{&out, kOutputNames[0]}}, stream);
}

}  // namespace detail

CompileRequest make_request(const Op& op, TensorList inputs, TensorList outputs) {
  const detail::NaryPlan p = detail::plan_nary(op, inputs, outputs);
  detail::check_expression_names(op, static_cast<int>(inputs.size()));
  return detail::make_request(op, p.key);
}

OpsStats stats() {
  return one_input_map().counts();
}

OpsStats nary_stats() {
  return nary_map().counts();
}

void clear_kernel_map() {
  one_input_map().clear();
  nary_map().clear();
}

}  // namespace cuinline::ops
