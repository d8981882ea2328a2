// The launch path of the elementwise ops. Per call: checks and planning (elementwise_plan.cpp), a
// lookup of (variant, device) in a small in-process map, Kernel::launch. Only a miss renders the
// source and goes to KernelCache::get (SHA-256 key, memory / disk tier, NVRTC).
#include <cstring>
#include <cuinline/driver.hpp>
#include <cuinline/error.hpp>
#include <cuinline/module.hpp>
#include <cuinline/ops.hpp>

#include "driver/tensor_access.hpp"
#include "ops/elementwise_plan.hpp"
#include "ops/variant_map.hpp"

namespace cuinline::ops {

namespace {

detail::VariantMap<Variant, Kernel>& kernel_map() {
  // Never destroyed: ops may run during static teardown.
  static auto* map = new detail::VariantMap<Variant, Kernel>;
  return *map;
}

Kernel find_kernel(const Op& op, const detail::PlanCore& p, int device) {
  detail::Fnv f;
  f.value(p.dtype);
  f.value(p.vector_width);
  f.value(p.index);
  f.value(p.layout);
  f.op(op);
  return kernel_map().find_or_make(
      f.h, device,
      [&](const Variant& v) {  // compared field by field: building a Variant would copy the op
        return v.dtype == p.dtype && v.vector_width == p.vector_width && v.index == p.index &&
               v.layout == p.layout && v.op == op;
      },
      [&] {
        Variant variant{op, p.dtype, p.vector_width, p.index, p.layout};
        Module module = default_cache().get(make_request(variant), device_arch(device));
        Kernel kernel = module.kernel(kernel_name(variant));
        return std::make_pair(std::move(variant), kernel);
      });
}

}  // namespace

LaunchPlan plan(const Op& op, const TensorView& in, const TensorView& out) {
  const detail::PlanCore p = detail::plan_core(op, in, out);
  LaunchPlan plan;
  plan.variant = Variant{op, p.dtype, p.vector_width, p.index, p.layout};
  plan.numel = p.numel;
  plan.head = p.head;
  plan.grid = p.grid;
  plan.block = p.numel == 0 ? 0 : detail::kBlock;
  plan.in = p.in;
  plan.out = p.out;
  plan.ndim = p.strided.ndim;
  for (int d = 0; d < p.strided.ndim; ++d) {
    plan.shape[d] = p.strided.shape[d];
    plan.in_strides[d] = p.strided.in_strides[d];
    plan.out_strides[d] = p.strided.out_strides[d];
  }
  return plan;
}

void apply(const Op& op, const TensorView& in, const TensorView& out, CUstream stream) {
  // An expression with named inputs or several outputs is an N-ary op of one input.
  if (!op.input_names.empty() || !op.more_outputs.empty() || op.min_inputs() > 1)
    return apply(op, TensorList{in}, TensorList{out}, stream);
  const detail::PlanCore p = detail::plan_core(op, in, out);
  if (p.numel == 0) return;
  const int device = stream_device(stream);
  cuinline::detail::check_tensor_access(in, "input", device);
  cuinline::detail::check_tensor_access(out, "output", device);
  const Kernel kernel = find_kernel(op, p, device);
  LaunchConfig cfg;
  cfg.grid = Dim3(p.grid);
  cfg.block = Dim3(detail::kBlock);
  cfg.stream = stream;
  kernel_map().count_launch();
  if (p.layout == Layout::strided) {
    kernel.launch(cfg, p.in, p.out, static_cast<long long>(p.numel), p.strided);
    return;
  }
  const int reps = detail::reps_for(p.grid, detail::multiprocessors(device));
  cfg.grid = Dim3((p.grid + reps - 1) / reps);
  if (p.index == IndexWidth::i64) {
    kernel.launch(cfg, p.in, p.out, static_cast<long long>(p.numel), static_cast<long long>(p.head), reps);
  } else {
    kernel.launch(cfg, p.in, p.out, static_cast<unsigned>(p.numel), static_cast<unsigned>(p.head), reps);
  }
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

OpsStats stats() {
  return kernel_map().counts();
}

void clear_kernel_map() {
  kernel_map().clear();
}

}  // namespace cuinline::ops
