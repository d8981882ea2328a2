// The elementwise variants: the public one-input ops::Variant (names, checks, enumeration for
// `cuinline warm`) and the kernel every variant compiles to — ew_nary / ew_nary_strided with the
// op's functor. A one-input variant is the N-ary kernel with one whole-tensor input, so what warm
// writes for it is exactly what ops::apply(op, in, out) looks up.
#include "ops/elementwise/variant.hpp"

#include <algorithm>
#include <cuinline/error.hpp>

#include "ops/elementwise/plan.hpp"
#include "ops/elementwise/render.hpp"
#include "ops/elementwise/table.hpp"
#include "templates/template_source.hpp"

namespace cuinline::ops {

std::vector<int> vector_widths(DType dtype) {
  const std::size_t size = dtype_size(dtype);
  if (size == 0) throw InvalidArgument("unsupported dtype " + std::to_string(static_cast<int>(dtype)));
  std::vector<int> widths;
  for (int w = 1; w <= 8 && w * size <= 16; w *= 2) widths.push_back(w);
  return widths;
}

std::string Variant::name() const {
  std::string s = op.describe() + "<" + to_string(dtype);
  if (layout == Layout::strided) return s + ",strided>";
  return s + ",v" + std::to_string(vector_width) + (index == IndexWidth::i64 ? ",i64>" : ",i32>");
}

void Variant::validate() const {
  op.validate();
  if (op.min_inputs() > 1 || op.outputs() > 1) {
    throw InvalidArgument("elementwise variant " + op.describe() + ": an op over " + std::to_string(op.min_inputs()) +
                          " inputs and " + std::to_string(op.outputs()) +
                          " outputs is not a one-input variant (use make_request(op, inputs, outputs))");
  }
  const std::vector<int> widths = vector_widths(dtype);
  if (layout == Layout::strided) {
    if (vector_width != 1 || index != IndexWidth::i64) {
      throw InvalidArgument("elementwise variant " + name() + ": strided variants have vector width 1, index i64");
    }
    return;
  }
  bool ok = false;
  for (int w : widths) ok = ok || w == vector_width;
  if (!ok) {
    throw InvalidArgument("elementwise variant: vector width " + std::to_string(vector_width) + " is not valid for " +
                          to_string(dtype) + " (at most 16 bytes, a power of two)");
  }
}

bool operator==(const Variant& p, const Variant& q) noexcept {
  return p.dtype == q.dtype && p.vector_width == q.vector_width && p.index == q.index && p.layout == q.layout &&
         p.op == q.op;
}

std::string kernel_name(const Variant& variant) {
  return detail::kernel_name(detail::key_of(variant));
}

CompileRequest make_request(const Variant& variant) {
  variant.validate();
  detail::check_expression_names(variant.op, 1);
  return detail::make_request(variant.op, detail::key_of(variant));
}

std::vector<Variant> enumerate_variants(const Op& op, DType dtype, VariantSet which) {
  op.validate();
  // The scalar head and reps are run-time arguments: one variant per vector width and index width
  // serves every alignment and size.
  std::vector<Variant> variants;
  for (IndexWidth index : {IndexWidth::i32, IndexWidth::i64}) {
    if ((index == IndexWidth::i32 && !which.index32) || (index == IndexWidth::i64 && !which.index64)) continue;
    for (int w : vector_widths(dtype)) variants.push_back(Variant{op, dtype, w, index, Layout::contiguous});
  }
  if (which.strided) variants.push_back(Variant{op, dtype, 1, IndexWidth::i64, Layout::strided});
  return variants;
}

namespace detail {

NaryKey key_of(const Variant& v) {
  NaryKey k;
  k.dtype = v.dtype;
  k.inputs = 1;
  k.outputs = static_cast<std::uint8_t>(v.op.outputs());
  k.strided = v.layout == Layout::strided;
  k.vector_width = static_cast<std::uint8_t>(k.strided ? 1 : v.vector_width);
  k.index64 = k.strided || v.index == IndexWidth::i64;
  return k;  // patterns: all kFull
}

Variant variant_of(const Op& op, const NaryKey& key) {
  return Variant{op, key.dtype, key.vector_width, key.index64 ? IndexWidth::i64 : IndexWidth::i32,
                 key.strided ? Layout::strided : Layout::contiguous};
}

std::string kernel_name(const NaryKey& k) {
  if (k.table) return "ew_nary_table<cuinline_ewn_shape, cuinline_ewn_pre, cuinline_ewn_run, unsigned int>";
  const std::string s = cuinline::detail::storage_type(k.dtype);
  if (k.strided) return "ew_nary_strided<cuinline_ewn_shape, cuinline_ewn_op, " + s + ">";
  return "ew_nary<cuinline_ewn_shape, cuinline_ewn_op, " + s + ", " + std::to_string(k.vector_width) + ", " +
         (k.index64 ? "long long" : "unsigned int") + ">";
}

namespace {

// The table form's two functors (ew_table.cuh): the chain's steps before its table run, as an N-ary
// functor of one output (a copy of input 0 where there are none), and the run, as a one-input functor.
// Each renders its steps exactly as the whole chain's functor does, so the two compose to its bits.
std::string render_table_functors(const Op& op, const NaryKey& k, int start) {
  Op pre, run;
  pre.steps.assign(op.steps.begin(), op.steps.begin() + start);
  run.steps.assign(op.steps.begin() + start, op.steps.end());
  std::string out;
  if (pre.steps.empty()) {
    const std::string s = cuinline::detail::storage_type(k.dtype);
    out += "struct cuinline_ewn_pre {\n  __device__ __forceinline__ void operator()(const " + s + " (&xs)[" +
           std::to_string(k.inputs) + "], " + s + " (&ys)[1]) const { ys[0] = xs[0]; }\n};\n";
  } else {
    out += cuinline::detail::render_nary_functor(pre, k.dtype, k.inputs, "cuinline_ewn_pre");
  }
  out += cuinline::detail::render_op_functor(run, k.dtype, "cuinline_ewn_run");
  return out;
}

}  // namespace

CompileRequest make_request(const Op& op, const NaryKey& k) {
  CompileRequest request;
  request.name = "elementwise_nary.cu";
  const int table_start = k.table ? table_run_start(op, k) : -1;
  if (k.table && table_start < 0) {
    throw InvalidArgument("elementwise " + op.describe() + ": no table form for this chain and key");
  }
  std::string src = std::string("// cuinline elementwise kernel\n#include \"") +
                    (table_start >= 0 ? "ew_table.cuh" : "ew_nary.cuh") +
                    "\"\n\nstruct cuinline_ewn_shape {\n";
  src += "  enum { kInputs = " + std::to_string(k.inputs) + ", kOutputs = " + std::to_string(k.outputs);
  for (int i = 0; i < kMaxInputs; ++i) src += ", kPattern" + std::to_string(i) + " = " + std::to_string(k.patterns[i]);
  src += std::string(", kWide = ") + (k.wide ? "1" : "0");
  src += " };\n};\n";
  // The source holds the constants only as rendered (opmath literals), so two ops whose constants
  // convert to the same opmath value are one program and one cache entry.
  // The table form (table.hpp): the steps before the run and the run; else the chain's functor.
  src += table_start >= 0 ? render_table_functors(op, k, table_start)
                          : cuinline::detail::render_nary_functor(op, k.dtype, k.inputs, "cuinline_ewn_op");
  request.source = std::move(src);
  for (const char* header : {"ew_common.cuh", "ew_ops.cuh", "elementwise.cuh", "ew_nary.cuh"}) {
    request.headers.push_back({header, cuinline::detail::template_text(header)});
  }
  if (table_start >= 0)
    request.headers.push_back({"ew_table.cuh", cuinline::detail::template_text("ew_table.cuh")});
  // A chain rounds after every step, like a sequence of PyTorch ops, and an expression is compiled
  // without contraction. A chain with activation steps (sigmoid, gelu, ...) is compiled with
  // contraction on, as nvcc compiles PyTorch's kernels, so their formulas round as PyTorch's do;
  // CUINLINE_EW_FMAD then writes the arithmetic steps with explicit roundings (ew_ops.cuh). The
  // options are part of the request, hence of the cache key. -minimal: the templates use no CUDA
  // runtime types or device-side runtime calls; NVRTC then skips declaring them (front end 19 -> 10
  // ms for a small kernel on the build machine; identical cubins).
  request.options = {"--fmad=false", "-minimal"};
  if (has_function_steps(op)) request.options = {"--fmad=true", "-DCUINLINE_EW_FMAD", "-minimal"};
  request.name_expressions = {kernel_name(k)};
  return request;
}

std::uint64_t hash_of(const Op& op, const NaryKey& key) {
  Fnv f;
  f.value(key.dtype);
  f.value(key.inputs);
  f.value(key.outputs);
  f.value(key.vector_width);
  f.value(key.strided);
  f.value(key.index64);
  f.value(key.wide);
  f.value(key.table);
  f.value(key.patterns);
  f.op(op);  // steps with their operands
  for (const std::string& n : op.input_names) f.bytes(n.data(), n.size() + 1);
  for (const std::string& o : op.more_outputs) f.bytes(o.data(), o.size() + 1);
  return f.h;
}


bool has_function_steps(const Op& op) noexcept {
  return std::any_of(op.steps.begin(), op.steps.end(), [](const Step& s) { return is_function_step(s.kind); });
}

}  // namespace detail
}  // namespace cuinline::ops
