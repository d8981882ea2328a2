// The generic row-reduction kernels: a call's variant as run-time arguments (the row's split and the
// lowered chains, from the lowering the rendered functors are printed from), and their launch. The
// kernels are a fatbin nvcc built with the library, loaded once for every device
// (src/ops/generic_fatbin.cpp).
#include "ops/reductions/generic.hpp"

#include <cuinline/error.hpp>
#include <mutex>
#include <string>
#include <vector>

#include "driver/workspace.hpp"
#include "ops/elementwise/render.hpp"
#include "ops/generic_fatbin.hpp"
#include "ops/reductions/knobs.hpp"
#include "ops/specialize.hpp"

namespace cuinline::ops::detail {
namespace {

GenericRowChain lower(const Op& chain, DType dtype) {
  GenericRowChain c;
  if (!has_chain(chain)) return c;
  const std::vector<cuinline::detail::LoweredStep> steps = cuinline::detail::lower_chain(chain, dtype);
  if (steps.size() > static_cast<std::size_t>(kGenericMaxSteps)) {
    throw InvalidArgument("generic row kernel: a chain of " + std::to_string(steps.size()) + " steps (at most " +
                          std::to_string(kGenericMaxSteps) + ")");
  }
  c.steps = static_cast<std::int32_t>(steps.size());
  for (std::size_t i = 0; i < steps.size(); ++i) c.step[i] = generic_step(steps[i], dtype);
  return c;
}

// "cuinline_rdg_bf16" (src/ops/reductions/rd_generic.cu).
std::string kernel_symbol(DType dtype) {
  return std::string("cuinline_rdg_") + to_string(dtype);
}

Kernel generic_kernel(DType dtype) {
  static std::mutex mutex;
  static Kernel kernels[4];
  std::lock_guard<std::mutex> lock(mutex);
  Kernel& k = kernels[static_cast<std::size_t>(dtype) & 3];
  if (!k) k = cuinline::detail::generic_module(cuinline::detail::GenericFatbin::reductions).kernel(kernel_symbol(dtype));
  return k;
}

}  // namespace

bool generic_rows_apply(const RowVariant& v) {
  if (!cuinline::detail::generic_fatbin_built()) return false;
  for (const Op* chain : {&v.prologue, &v.epilogue}) {
    if (!chain->expression.empty() || !chain->more_outputs.empty()) return false;
    if (lowered_step_count(*chain) > static_cast<std::size_t>(kGenericMaxSteps)) return false;
  }
  return v.epilogue_inputs >= 0 && v.epilogue_inputs <= kMaxEpilogueInputs;
}

GenericRowLaunch generic_rows_launch(const RowCall& planned, bool whole_rows) {
  // The cluster form's outputs are its split form's, bit for bit: the generic kernel runs that.
  const RowCall call = split_form(planned);
  const RowPlan& p = call.plan;
  const RowVariant& v = p.variant;
  GenericRowLaunch g;
  static_assert(static_cast<int>(RowOp::softmax) == 0 && static_cast<int>(RowOp::layer_norm) == 4,
                "RowOp's values are reductions.cuh's RD_* ops");
  g.shape.op = static_cast<std::int32_t>(v.op);
  g.shape.vector = v.vector_width;
  if (v.form == RowForm::warp || v.form == RowForm::block || (v.form == RowForm::split_stats && !whole_rows)) {
    // The specialized kernel's split: its lanes and accesses, its grid and block.
    g.shape.threads = v.threads;
    g.shape.iters = v.per_thread / v.vector_width;
    // (One row a group: a plan of several rows a group has fewer blocks.)
    g.grid =
        v.form == RowForm::warp && v.rows_per_group != 1
            ? static_cast<std::uint32_t>((p.rows + kWarpBlock / v.threads - 1) / (kWarpBlock / v.threads))
            : p.grid;
    g.block = p.block;
    g.shape.phase = v.form == RowForm::split_stats ? 1 : 0;
  } else {
    const std::int64_t per_pass = std::int64_t{kLoopedThreads} * v.vector_width;
    g.shape.threads = kLoopedThreads;
    g.shape.iters = static_cast<std::int32_t>((p.n + per_pass - 1) / per_pass);
    g.grid = static_cast<std::uint32_t>(p.rows);
    g.block = kLoopedThreads;
    g.shape.phase = 3;  // as rd_long: softmax's statistics by the online softmax
  }
  g.prologue = lower(v.prologue, v.dtype);
  g.epilogue = lower(v.epilogue, v.dtype);
  return g;
}

void launch_generic_rows(RowCall planned, int device, CUstream stream) {
  RowCall call = split_form(std::move(planned));
  const Kernel kernel = generic_kernel(call.plan.variant.dtype);
  GenericRowLaunch g = generic_rows_launch(call);
  LaunchConfig cfg;
  cfg.stream = stream;
  // The kernel takes rd_args_e<7>: every epilogue slot, the unused ones null.
  if (g.shape.phase == 1) {  // the split form
    const CUdeviceptr ws = row_knobs().workspace
                               ? cuinline::detail::workspace_alloc(device, call.plan.workspace_bytes, stream)
                               : 0;
    if (ws != 0) {
      cuinline::detail::WorkspaceGuard guard(ws, stream);  // freed after the launches (or a throw)
      call.args.ws = reinterpret_cast<void*>(ws);
      cfg.grid = Dim3(g.grid);
      cfg.block = Dim3(g.block);
      kernel.launch(cfg, call.args, g.shape, g.prologue, g.epilogue);
      g.shape.phase = 2;
      kernel.launch(cfg, call.args, g.shape, g.prologue, g.epilogue);
      count_generic_launch();
      return;
    }
    g = generic_rows_launch(call, true);
  }
  cfg.grid = Dim3(g.grid);
  cfg.block = Dim3(g.block);
  kernel.launch(cfg, call.args, g.shape, g.prologue, g.epilogue);
  count_generic_launch();
}

}  // namespace cuinline::ops::detail
