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
  if (form != RowForm::warp && form != RowForm::looped) s += ",t" + std::to_string(threads);
  return s + ">";
}

std::int64_t RowVariant::max_row() const noexcept {
  if (form != RowForm::warp && form != RowForm::block) return std::numeric_limits<std::int64_t>::max();
  return std::int64_t{threads} * per_thread;
}

void RowVariant::validate() const {
  const std::size_t es = dtype_size(dtype);
  if (es == 0) throw InvalidArgument("reduction variant: unsupported dtype " + std::to_string(static_cast<int>(dtype)));
  if (static_cast<int>(op) > static_cast<int>(RowOp::layer_norm)) throw InvalidArgument("reduction variant: unknown op");
  if (!pow2(vector_width) || static_cast<std::size_t>(vector_width) * es > 16) {
    throw InvalidArgument("reduction variant " + name() + ": vector width must be a power of two of at most 16 bytes");
  }
  switch (form) {
    case RowForm::warp:
      if (threads != 32 || !pow2(per_thread) || per_thread < vector_width || per_thread > detail::kWarpMaxPerThread) {
        throw InvalidArgument("reduction variant " + name() + ": the warp form has 32 threads and " +
                              "a power of two of elements a thread, from the vector width to 32");
      }
      return;
    case RowForm::block:
      if (threads < 128 || threads > 1024 || !pow2(threads) || !pow2(per_thread) || per_thread < vector_width ||
          per_thread > detail::block_max_per_thread(dtype)) {
        throw InvalidArgument("reduction variant " + name() + ": the block form has 128-1024 threads (a power of two) and " +
                              "a power of two of elements a thread, from the vector width to " +
                              std::to_string(detail::block_max_per_thread(dtype)));
      }
      return;
    case RowForm::looped:
      if (threads != detail::kLoopedThreads || per_thread != vector_width) {
        throw InvalidArgument("reduction variant " + name() + ": the looped form has " +
                              std::to_string(detail::kLoopedThreads) + " threads and per_thread = vector width");
      }
      return;
    case RowForm::split_stats:
    case RowForm::split_write:
      if (threads != detail::kSplitThreads || per_thread != detail::kSplitPerThread) {
        throw InvalidArgument("reduction variant " + name() + ": the split forms have " +
                              std::to_string(detail::kSplitThreads) + " threads and " +
                              std::to_string(detail::kSplitPerThread) + " elements a thread");
      }
      return;
  }
  throw InvalidArgument("reduction variant: unknown form");
}

std::string kernel_name(const RowVariant& v) {
  const std::string s = cuinline::detail::storage_type(v.dtype);
  const std::string op = std::to_string(static_cast<int>(v.op));
  if (v.form == RowForm::split_stats || v.form == RowForm::split_write) {
    return std::string(v.form == RowForm::split_stats ? "rd_split_stats<" : "rd_split_write<") + op + ", " + s + ", " +
           std::to_string(v.vector_width) + ", " + std::to_string(v.per_thread) + ", " + std::to_string(v.threads) + ">";
  }
  if (v.form == RowForm::looped) {
    return "rd_long<" + op + ", " + s + ", " + std::to_string(v.vector_width) + ", " + std::to_string(v.threads) + ">";
  }
  return "rd_regs<" + op + ", " + s + ", " + std::to_string(v.vector_width) + ", " + std::to_string(v.per_thread) +
         ", " + std::to_string(v.threads) + ">";
}

CompileRequest make_request(const RowVariant& v) {
  v.validate();
  CompileRequest request;
  request.name = "reductions.cu";
  request.source = "// cuinline row reduction: " + v.name() + "\n#include \"reductions.cuh\"\n";
  for (const char* header : {"ew_common.cuh", "reductions.cuh"}) {
    request.headers.push_back({header, cuinline::detail::template_text(header)});
  }
  // Contraction on, as nvcc compiles PyTorch's kernels (its softmax and norm kernels included).
  request.options = {"--fmad=true", "-minimal"};
  request.name_expressions = {kernel_name(v)};
  return request;
}

namespace detail {

std::uint64_t hash_of(const RowVariant& v) {
  Fnv f;
  f.value(v.op);
  f.value(v.dtype);
  f.value(v.form);
  f.value(v.vector_width);
  f.value(v.per_thread);
  f.value(v.threads);
  return f.h;
}

}  // namespace detail
}  // namespace cuinline::ops
