// The reductions family's variant (docs/ops-families.md: the "variant" piece): names, checks, and
// the program of each kernel — kernel_templates/reductions.cuh with one name expression. Equal
// variants give equal requests, hence one cache entry.
#include <cuinline/error.hpp>
#include <cuinline/reductions.hpp>
#include <limits>

#include "ops/elementwise/render.hpp"
#include "ops/reductions/plan.hpp"
#include "ops/variant_map.hpp"
#include "templates/template_source.hpp"

namespace cuinline::ops {
namespace {

bool pow2(int v) {
  return v > 0 && (v & (v - 1)) == 0;
}

const char* form_text(RowForm form) {
  switch (form) {
    case RowForm::warp:
      return "warp";
    case RowForm::block:
      return "block";
    case RowForm::looped:
      return "looped";
    case RowForm::split_stats:
      return "split_stats";
    case RowForm::split_write:
      return "split_write";
    case RowForm::cluster:
      return "cluster";
  }
  return "?";
}

}  // namespace

const char* to_string(RowOp op) noexcept {
  switch (op) {
    case RowOp::softmax:
      return "softmax";
    case RowOp::log_softmax:
      return "log_softmax";
    case RowOp::rms_norm:
      return "rms_norm";
    case RowOp::add_rms_norm:
      return "add_rms_norm";
    case RowOp::layer_norm:
      return "layer_norm";
  }
  return "?";
}

std::string RowVariant::name() const {
  std::string s = std::string(to_string(op)) + "<" + to_string(dtype) + "," + form_text(form) + ",v" +
                  std::to_string(vector_width);
  if (form != RowForm::looped) s += ",e" + std::to_string(per_thread);
  // The warp form's lanes a row only where fewer than a warp's: its whole-warp names are unchanged.
  if (form != RowForm::looped && (form != RowForm::warp || threads != 32)) {
    s += ",t" + std::to_string(threads);
  }
  if (form == RowForm::cluster) s += ",c" + std::to_string(cluster);
  if (rows_per_group != 1) s += ",r" + std::to_string(rows_per_group);
  if (!prologue.steps.empty() || !prologue.expression.empty()) s += ",pro=" + prologue.describe();
  if (!epilogue.steps.empty() || !epilogue.expression.empty()) s += ",epi=" + epilogue.describe();
  return s + ">";
}

std::int64_t RowVariant::max_row() const noexcept {
  if (form != RowForm::warp && form != RowForm::block) return std::numeric_limits<std::int64_t>::max();
  return std::int64_t{threads} * per_thread;
}

int RowVariant::min_arch() const noexcept {
  return form == RowForm::cluster ? detail::kClusterMinArch : 0;
}

void RowVariant::validate() const {
  const std::size_t es = dtype_size(dtype);
  if (es == 0) throw InvalidArgument("reduction variant: unsupported dtype " + std::to_string(static_cast<int>(dtype)));
  if (static_cast<int>(op) > static_cast<int>(RowOp::layer_norm)) throw InvalidArgument("reduction variant: unknown op");
  if (!pow2(vector_width) || static_cast<std::size_t>(vector_width) * es > 16) {
    throw InvalidArgument("reduction variant " + name() + ": vector width must be a power of two of at most 16 bytes");
  }
  detail::check_chains(*this);
  if (form != RowForm::cluster && cluster != 0) {
    throw InvalidArgument("reduction variant " + name() + ": only the cluster form has blocks a cluster");
  }
  if (rows_per_group != 1 && (form != RowForm::warp || !pow2(rows_per_group) || rows_per_group > 8 ||
                              std::int64_t{rows_per_group} * per_thread > 64)) {
    throw InvalidArgument("reduction variant " + name() +
                          ": rows a group (1, 2, 4 or 8) are the warp form's, " +
                          "with at most 64 elements a lane over them");
  }
  switch (form) {
    case RowForm::warp:
      if (!pow2(threads) || threads < detail::kWarpMinLanes || threads > 32 || !pow2(per_thread) ||
          per_thread < vector_width || per_thread > detail::kWarpMaxPerThread ||
          (threads < 32 && per_thread > 8 * vector_width)) {
        throw InvalidArgument("reduction variant " + name() + ": the warp form has " +
                              std::to_string(detail::kWarpMinLanes) + "-32 lanes a row (a power of two) " +
                              "and a power of two of elements a lane, from the vector width to " +
                              std::to_string(detail::kWarpMaxPerThread) +
                              "; fewer than 32 lanes hold at most 8 accesses (of the vector width) each");
      }
      return;
    case RowForm::block: {
      const int most = detail::block_max_per_thread(*this);
      if (threads < 128 || threads > 1024 || !pow2(threads) || !pow2(per_thread) || per_thread < vector_width ||
          per_thread > most) {
        throw InvalidArgument("reduction variant " + name() + ": the block form has 128-1024 threads (a power of two) and " +
                              "a power of two of elements a thread, from the vector width to " + std::to_string(most) +
                              (most < detail::block_max_per_thread(dtype) ? " for these chains" : ""));
      }
      return;
    }
    case RowForm::looped:
      if (threads != detail::kLoopedThreads || per_thread != vector_width) {
        throw InvalidArgument("reduction variant " + name() + ": the looped form has " +
                              std::to_string(detail::kLoopedThreads) + " threads and per_thread = vector width");
      }
      return;
    case RowForm::split_stats:
    case RowForm::split_write:
      if (threads != detail::kSplitThreads ||
          per_thread != detail::split_per_thread(dtype, !detail::light(*this))) {
        throw InvalidArgument("reduction variant " + name() + ": the split forms have " +
                              std::to_string(detail::kSplitThreads) + " threads and " +
                              std::to_string(detail::split_per_thread(dtype, !detail::light(*this))) +
                              " elements a thread");
      }
      return;
    case RowForm::cluster: {
      const int groups = threads / detail::kSplitThreads;
      if (per_thread != detail::split_per_thread(dtype, !detail::light(*this)) ||
          threads % detail::kSplitThreads != 0 || groups < 1 || groups > detail::cluster_max_groups(dtype) ||
          cluster < 2 || cluster > detail::kClusterMaxBlocks) {
        throw InvalidArgument("reduction variant " + name() + ": the cluster form has " +
                              std::to_string(detail::split_per_thread(dtype, !detail::light(*this))) +
                              " elements a thread, blocks of 1 to " +
                              std::to_string(detail::cluster_max_groups(dtype)) + " groups of " +
                              std::to_string(detail::kSplitThreads) + " threads and 2 to " +
                              std::to_string(detail::kClusterMaxBlocks) + " blocks a cluster");
      }
      return;
    }
  }
  throw InvalidArgument("reduction variant: unknown form");
}

namespace {

// The chains' template arguments (none without chains: the kernel of an unfused variant is the one
// it always was).
std::string chain_arguments(const RowVariant& v) {
  if (!detail::fused(v)) return "";
  return std::string(detail::has_chain(v.prologue) ? ", rd_prologue" : ", rd_no_prologue") +
         (detail::has_chain(v.epilogue) ? ", rd_epilogue, " : ", rd_no_epilogue, ") + std::to_string(v.epilogue_inputs);
}

}  // namespace

std::string kernel_name(const RowVariant& v) {
  const std::string s = cuinline::detail::storage_type(v.dtype);
  const std::string chains = chain_arguments(v);
  const std::string op = std::to_string(static_cast<int>(v.op));
  if (v.form == RowForm::split_stats || v.form == RowForm::split_write) {
    return std::string(v.form == RowForm::split_stats ? "rd_split_stats<" : "rd_split_write<") + op + ", " + s + ", " +
           std::to_string(v.vector_width) + ", " + std::to_string(v.per_thread) + ", " + std::to_string(v.threads) +
           chains + ">";
  }
  if (v.form == RowForm::cluster) {
    return "rd_cluster<" + op + ", " + s + ", " + std::to_string(v.vector_width) + ", " +
           std::to_string(v.per_thread) + ", " + std::to_string(detail::kSplitThreads) + ", " +
           std::to_string(v.threads / detail::kSplitThreads) + ", " + std::to_string(v.cluster) + chains +
           ">";
  }
  if (v.form == RowForm::looped) {
    return "rd_long<" + op + ", " + s + ", " + std::to_string(v.vector_width) + ", " + std::to_string(v.threads) +
           chains + ">";
  }
  // Rows a group past one: the chains' defaults spelled out before it (rd_regs's last parameter).
  const std::string rows =
      v.rows_per_group == 1
          ? std::string()
          : (chains.empty() ? std::string(", rd_no_prologue, rd_no_epilogue, 0") : std::string()) + ", " +
                std::to_string(v.rows_per_group);
  return "rd_regs<" + op + ", " + s + ", " + std::to_string(v.vector_width) + ", " +
         std::to_string(v.per_thread) + ", " + std::to_string(v.threads) + chains + rows + ">";
}

CompileRequest make_request(const RowVariant& v) {
  v.validate();
  CompileRequest request;
  request.name = "reductions.cu";
  request.source = "// cuinline row reduction: " + v.name() + "\n";
  if (detail::fused(v)) {
    // The chains' steps as the elementwise family's kernels compiled with contraction on spell
    // them: each rounding explicit, none contracted into an FMA (ew_ops.cuh).
    request.source += "#define CUINLINE_EW_FMAD\n#include \"reductions.cuh\"\n#include \"ew_ops.cuh\"\n";
    if (detail::has_chain(v.prologue)) {
      request.source += cuinline::detail::render_op_functor(v.prologue, v.dtype, "rd_prologue");
      if (detail::light(v)) {
        request.source += "template <>\nstruct rd_light<rd_prologue> {\n  enum { value = 1 };\n};\n";
      }
    }
    if (detail::has_chain(v.epilogue)) {
      request.source += cuinline::detail::render_nary_functor(v.epilogue, v.dtype, 1 + v.epilogue_inputs, "rd_epilogue");
    }
  } else {
    request.source += "#include \"reductions.cuh\"\n";
  }
  for (const char* header : {"ew_common.cuh", "reductions.cuh"}) {
    request.headers.push_back({header, cuinline::detail::template_text(header)});
  }
  if (detail::fused(v)) request.headers.push_back({"ew_ops.cuh", cuinline::detail::template_text("ew_ops.cuh")});
  // Contraction on, as nvcc compiles PyTorch's kernels (its softmax and norm kernels included).
  request.options = {"--fmad=true", "-minimal"};
  request.name_expressions = {kernel_name(v)};
  return request;
}

namespace detail {

bool has_chain(const Op& op) noexcept {
  return !op.steps.empty() || !op.expression.empty();
}

bool fused(const RowVariant& v) noexcept {
  return has_chain(v.prologue) || has_chain(v.epilogue) || v.epilogue_inputs != 0;
}

bool light(const RowVariant& v) noexcept {
  if (!fused(v)) return true;
  // (At the 32 registers of two 1024-thread blocks an SM, 32 elements a thread, a prologue's product
  // spilled f32's parked rows 72 bytes, f16 add_rms_norm's packs 8 and f16 rms_norm's 108; the f16 and
  // bf16 softmax, log_softmax and layer_norm and bf16 rms_norm none: ptxas, sm_90.)
  if (v.dtype != DType::f16 && v.dtype != DType::bf16) return false;
  if (v.op == RowOp::add_rms_norm || (v.op == RowOp::rms_norm && v.dtype == DType::f16)) return false;
  if (has_chain(v.epilogue) || v.epilogue_inputs != 0) return false;
  return cuinline::detail::chain_is_scalar_arithmetic(v.prologue);
}

void check_chains(const RowVariant& v) {
  const std::string what = std::string(to_string(v.op)) + ": the ";
  for (const Op* chain : {&v.prologue, &v.epilogue}) {
    if (!has_chain(*chain)) continue;
    const char* which = chain == &v.prologue ? "prologue" : "epilogue";
    if (!chain->expression.empty()) {
      throw InvalidArgument(what + which + " " + chain->describe() +
                            " is an expression; a reduction takes a chain of elementwise steps");
    }
    chain->validate();
  }
  if (has_chain(v.prologue) && v.prologue.min_inputs() > 1) {
    throw InvalidArgument(what + "prologue " + v.prologue.describe() +
                          " uses tensor operands; a prologue takes scalar steps and functions only");
  }
  const int needs = has_chain(v.epilogue) ? v.epilogue.min_inputs() - 1 : 0;
  if (v.epilogue_inputs != needs) {
    const std::string uses = needs == 0 ? std::string("no extra tensor")
                                        : std::to_string(needs) + " extra tensor(s) (in1..in" + std::to_string(needs) + ")";
    throw InvalidArgument(what + "epilogue " + (has_chain(v.epilogue) ? v.epilogue.describe() : std::string("(none)")) +
                          " takes " + uses + ", got " + std::to_string(v.epilogue_inputs));
  }
}

std::uint64_t hash_of(const RowVariant& v) {
  Fnv f;
  f.value(v.op);
  f.value(v.dtype);
  f.value(v.form);
  f.value(v.vector_width);
  f.value(v.per_thread);
  f.value(v.threads);
  if (v.form == RowForm::cluster) f.value(v.cluster);
  if (v.rows_per_group != 1) f.value(v.rows_per_group);
  if (fused(v)) {
    f.op(v.prologue);
    f.value(std::uint8_t{0xff});  // between the two chains
    f.op(v.epilogue);
    f.value(v.epilogue_inputs);
  }
  return f.h;
}

}  // namespace detail
}  // namespace cuinline::ops
