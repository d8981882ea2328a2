#pragma once
// The generic row-reduction kernels (kernel_templates/reductions_generic.cuh): which planned calls
// they run, the arguments a call becomes, and the launch.
#include <cstdint>
#include <cuinline/module.hpp>
#include <cuinline/reductions.hpp>

#include "ops/elementwise/generic.hpp"
#include "ops/reductions/plan.hpp"

namespace cuinline::ops::detail {

/// rdg_chain: a chain's lowered steps (the elementwise generic kernels' step layout).
struct GenericRowChain {
  std::int32_t steps = 0;
  std::int32_t pad = 0;
  GenericStep step[kGenericMaxSteps];
};
static_assert(sizeof(GenericRowChain) == 8 + 48 * kGenericMaxSteps, "must match rdg_chain");

/// rdg_shape: lanes a row, elements an access, accesses a lane; the phase (0: whole rows; 1, 2: the
/// split form's chunk statistics, then the chunks merged and written; 3: whole rows as the looped
/// form takes them, softmax by the online softmax); the op (RowOp's value: RD_*).
struct GenericRowShape {
  std::int32_t threads = 0, vector = 0, iters = 0, phase = 0, op = 0;
};

/// The arguments of a generic launch: the planned variant's split (its lanes, access width and
/// accesses a lane, its grid and block), the split form's in two phases over its workspace
/// (shape.phase 1, then 2); the looped form's rows whole on 1024 lanes with as many accesses a lane
/// as the row needs.
struct GenericRowLaunch {
  GenericRowShape shape;
  GenericRowChain prologue, epilogue;
  std::uint32_t grid = 0, block = 0;
};

/// Whether a planned variant can run on a generic kernel: its chains are chains (no expression) of
/// at most kGenericMaxSteps lowered steps, and the kernels are built in.
bool generic_rows_apply(const RowVariant& variant);

/// The generic launch of a planned call (of its looped fallback where `whole_rows`: the split form's
/// rows without a workspace). Call only where generic_rows_apply(call.plan.variant).
GenericRowLaunch generic_rows_launch(const RowCall& call, bool whole_rows = false);

/// Runs a planned call on `device` (the stream's) on the generic kernel of its dtype (loaded once per
/// process); the split form's over a stream-ordered workspace, or whole rows where none can
/// be had.
void launch_generic_rows(RowCall call, int device, CUstream stream);

}  // namespace cuinline::ops::detail
