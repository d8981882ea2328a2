// The generic elementwise kernels: a chain lowered to a program (the lowering the rendered functor
// is printed from, so both compute the same function), and their launch. The kernels are a fatbin
// nvcc built with the library, loaded once for every device (src/ops/generic_fatbin.cpp).
#include "ops/elementwise/generic.hpp"

#include <algorithm>
#include <cuinline/error.hpp>
#include <mutex>
#include <string>

#include "ops/elementwise/render.hpp"
#include "ops/elementwise/table.hpp"
#include "ops/generic_fatbin.hpp"
#include "ops/specialize.hpp"

namespace cuinline::ops::detail {
namespace {

int widest_vector(DType dtype) {
  return static_cast<int>(16 / dtype_size(dtype));
}

}  // namespace

int generic_vectors_per_thread(DType dtype, bool light, bool wide_index) {
  if (wide_index) return 2;
  if (light || dtype == DType::f64) return 1;
  return dtype == DType::f32 ? 2 : 3;
}

std::string generic_kernel_symbol(DType dtype, bool vector, bool light, bool wide_index) {
  std::string s = std::string("cuinline_ewg_") + to_string(dtype) + "_v" + std::to_string(vector ? widest_vector(dtype) : 1);
  if (vector) s += "_r" + std::to_string(generic_vectors_per_thread(dtype, light, wide_index));
  return s + (light ? "_light" : "") + (wide_index ? "_i64" : "");
}

namespace {

// Whether a chain runs on the light kernels: no activation or math step.
bool light_chain(const GenericProgram& p) {
  for (int i = 0; i < p.steps; ++i) {
    if (p.step[i].fn >= static_cast<int>(cuinline::detail::LoweredFn::sigmoid)) return false;
  }
  return true;
}

Kernel generic_kernel(DType dtype, bool vector, bool light, bool wide_index) {
  static std::mutex mutex;
  static Kernel kernels[4][2][2][2];  // [dtype][vector][light][wide_index]
  const auto d = static_cast<std::size_t>(dtype) & 3;
  std::lock_guard<std::mutex> lock(mutex);
  Kernel& k = kernels[d][vector ? 1 : 0][light ? 1 : 0][wide_index ? 1 : 0];
  if (!k) {
    using cuinline::detail::GenericFatbin;
    k = cuinline::detail::generic_module(GenericFatbin::elementwise)
            .kernel(generic_kernel_symbol(dtype, vector, light, wide_index));
  }
  return k;
}

}  // namespace

std::size_t lowered_step_count(const Op& op) {
  std::size_t n = 0;
  for (const Step& s : op.steps) n += s.kind == StepKind::div_leaky_relu ? 2 : 1;
  return n;
}

GenericStep generic_step(const cuinline::detail::LoweredStep& step, DType dtype) {
  GenericStep g;
  g.fn = static_cast<std::int32_t>(step.fn);
  g.operand = step.operand;
  g.cond = step.cond;
  for (int c = 0; c < 3; ++c) g.c[c] = cuinline::detail::opmath_value(step.c[c], dtype);
  if (step.has_storage) g.storage = cuinline::detail::scalar_storage_bits(step.storage, dtype);
  return g;
}

bool generic_applies(const Op& op, const NaryKey& key) {
  if (!cuinline::detail::generic_fatbin_built()) return false;
  if (!op.expression.empty() || !op.more_outputs.empty() || key.outputs != 1 || key.strided) return false;
  if (op.steps.empty() || lowered_step_count(op) > static_cast<std::size_t>(kGenericMaxSteps)) return false;
  return key.inputs >= 1 && key.inputs <= kMaxInputs;
}

GenericProgram generic_program(const Op& op, const NaryKey& key) {
  GenericProgram p;
  const std::vector<cuinline::detail::LoweredStep> steps = cuinline::detail::lower_chain(op, key.dtype);
  if (steps.size() > static_cast<std::size_t>(kGenericMaxSteps)) {
    throw InvalidArgument("generic elementwise kernel: " + std::to_string(steps.size()) + " steps (at most " +
                          std::to_string(kGenericMaxSteps) + ")");
  }
  p.steps = static_cast<std::int32_t>(steps.size());
  p.inputs = key.inputs;
  for (int k = 0; k < kMaxInputs; ++k) p.pattern[k] = key.patterns[static_cast<std::size_t>(k)];
  for (std::size_t i = 0; i < steps.size(); ++i) p.step[i] = generic_step(steps[i], key.dtype);
  return p;
}

namespace {

Kernel generic_table_kernel() {
  static std::mutex mutex;
  static Kernel kernel;
  std::lock_guard<std::mutex> lock(mutex);
  if (!kernel) {
    kernel = cuinline::detail::generic_module(cuinline::detail::GenericFatbin::elementwise)
                 .kernel(kGenericTableSymbol);
  }
  return kernel;
}

}  // namespace

void launch_generic(const Op& op, GenericProgram program, const NaryPlan& plan, int device, CUstream stream) {
  const NaryKey& key = plan.key;
  // 16-byte vectors where the plan aligned every operand for them, else single elements (head 0).
  const bool vector = key.vector_width == widest_vector(key.dtype);
  const int w = vector ? key.vector_width : 1;
  const long long head = vector ? plan.head : 0;
  const long long n = plan.numel;
  const bool light = light_chain(program);
  // 32-bit indices below 2^31 elements (every index the kernel forms is at most n).
  const bool wide_index = n >= (1LL << 31);
  // Vectors a thread: the kernel's (its name says it), or 16 bytes of single elements.
  const long long per_thread = vector ? generic_vectors_per_thread(key.dtype, light, wide_index)
                                      : static_cast<long long>(16 / dtype_size(key.dtype));
  const long long vectors = (n - head) / w;
  const long long per_block = static_cast<long long>(kBlock) * per_thread;
  const long long blocks = std::max<long long>(1, (vectors + per_block - 1) / per_block);
  if (blocks > 0x7fffffffLL) throw InvalidArgument("generic elementwise kernel: too many elements");
  // The 32-bit kernels divide by a row's or a column's period with a multiply and a shift.
  if (!wide_index) {
    for (int k = 0; k < program.inputs && k < kMaxInputs; ++k) {
      if (program.pattern[k] == kRow || program.pattern[k] == kCol) {
        program.div_mul[k] = plan.args.div_mul[k];  // plan_nary's, for its 32-bit plans
        program.div_shift[k] = plan.args.div_shift[k];
      }
    }
  }
  LaunchConfig cfg;
  cfg.stream = stream;
  if (generic_table_applies(key)) {  // the planner's table form (bf16, 32-bit indices), one input
    cfg.grid = Dim3(table_grid(n, head, device));
    cfg.block = Dim3(kTableBlock);
    const int from = table_run_start_lowered(op, key);
    generic_table_kernel().launch(cfg, plan.args, n, head, program, from);
    count_generic_launch();
    return;
  }
  cfg.grid = Dim3(static_cast<unsigned>(blocks));
  cfg.block = Dim3(kBlock);
  generic_kernel(key.dtype, vector, light, wide_index).launch(cfg, plan.args, n, head, program);
  count_generic_launch();
}

}  // namespace cuinline::ops::detail
