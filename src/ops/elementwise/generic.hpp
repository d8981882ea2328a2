#pragma once
// The generic elementwise kernels (kernel_templates/ew_generic.cuh): which planned calls they can
// run, the program a chain becomes, and the launch.
#include <cstdint>
#include <string>
#include <utility>
#include <cuinline/module.hpp>
#include <cuinline/ops.hpp>

#include "ops/elementwise/plan.hpp"
#include "ops/elementwise/render.hpp"

namespace cuinline::ops::detail {

inline constexpr int kGenericMaxSteps = 32;  // EWG_MAX_STEPS

/// ewg_step / ewg_program (ew_generic.cuh): same layouts.
struct GenericStep {
  std::int32_t fn = 0;
  std::int32_t operand = 0;
  std::int32_t cond = 0;
  std::int32_t pad = 0;
  double c[3] = {0, 0, 0};
  std::uint64_t storage = 0;
};
static_assert(sizeof(GenericStep) == 48, "must match ewg_step");
struct GenericProgram {
  std::int32_t steps = 0;
  std::int32_t inputs = 0;
  std::int32_t pattern[kMaxInputs] = {};
  /// Each input's period as a multiply-shift divisor (launch_generic sets them for the 32-bit
  /// kernels; 0: a plain division).
  std::uint32_t div_mul[kMaxInputs] = {};
  std::uint32_t div_shift[kMaxInputs] = {};
  GenericStep step[kGenericMaxSteps];
};
static_assert(sizeof(GenericProgram) == 8 + 12 * kMaxInputs + 48 * kGenericMaxSteps, "must match ewg_program");

/// 16-byte vectors a thread of the vector kernel for `dtype`: light (no activation or math step)
/// or not, 32- or 64-bit indices (src/ops/elementwise/ew_generic.cu).
int generic_vectors_per_thread(DType dtype, bool light, bool wide_index);

/// The generic bf16 table kernel (kernel_templates/ew_generic.cuh: ew_generic_body_table; table.hpp).
inline constexpr const char* kGenericTableSymbol = "cuinline_ewg_bf16_v8_table";

/// The generic kernel's symbol: "cuinline_ewg_f32_v4_r2", "cuinline_ewg_bf16_v8_r1_light",
/// "cuinline_ewg_f64_v1_i64" (vector: 16-byte vectors, else single elements).
std::string generic_kernel_symbol(DType dtype, bool vector, bool light, bool wide_index);

/// The steps a chain lowers to (div_leaky_relu is two), without lowering it: what every family's
/// generic kernel checks against kGenericMaxSteps.
std::size_t lowered_step_count(const Op& op);

/// One lowered step as the generic kernels take it: its constants as opmath values of `dtype` (as
/// the rendered functor's literals), its storage constant's bits.
GenericStep generic_step(const cuinline::detail::LoweredStep& step, DType dtype);

/// Whether a planned call can run on a generic kernel: a chain (no expression) with one output, at
/// most kGenericMaxSteps lowered steps, on the contiguous path; and the kernels are built in.
bool generic_applies(const Op& op, const NaryKey& key);

/// The chain as the generic kernel's program (the constants from lower_chain, as the rendered
/// functor has them). Call only where generic_applies.
GenericProgram generic_program(const Op& op, const NaryKey& key);

/// Runs the planned call of `op` on `device` (the stream's) on the generic kernel (loaded once per process):
/// its bf16 table form where the call takes one (table.hpp: table_applies).
void launch_generic(const Op& op, GenericProgram program, const NaryPlan& plan, int device, CUstream stream);

}  // namespace cuinline::ops::detail
