// expand_spec: spec entries → CompileRequests, built by the same functions the library calls at
// run time (ops::make_request, make_inline_request, ...), so the keys match.

#include <algorithm>
#include <cuinline/conv2d.hpp>
#include <cuinline/error.hpp>
#include <cuinline/load_inline.hpp>
#include <cuinline/ops.hpp>

#include "cli/spec.hpp"

namespace cuinline::cli {
namespace {

void expand_op(const SpecEntry& entry, std::vector<Variant>& out) {
  const OpEntry& spec = entry.op;
  ops::VariantSet which;
  which.index32 = spec.index32;
  which.index64 = spec.index64;
  which.strided = spec.strided;
  for (const auto& op : spec.ops) {
    for (DType dtype : spec.dtypes) {
      for (const auto& variant : ops::enumerate_variants(op, dtype, which)) {
        bool listed = spec.vector_widths.empty() || variant.layout == ops::Layout::strided ||
                      std::find(spec.vector_widths.begin(), spec.vector_widths.end(), variant.vector_width) !=
                          spec.vector_widths.end();
        if (!listed) continue;
        variant.validate();
        out.push_back({variant.name(), entry.path, ops::make_request(variant)});
      }
    }
  }
}

void expand_cuda(const SpecEntry& entry, const std::filesystem::path& dir, std::vector<Variant>& out) {
  const CudaFileEntry& spec = entry.cuda;
  InlineOptions options;
  options.name = spec.name;
  options.cuda_sources = {read_text_file(dir / spec.file, entry.path + ".file")};
  options.functions = spec.functions;
  options.name_expressions = spec.name_expressions;
  options.extra_options = spec.options;
  options.defines = spec.defines;
  for (const auto& header : spec.headers) {
    std::filesystem::path path = dir / header;
    read_text_file(path, entry.path + ".headers");  // a clear message before load_inline's
    options.header_files.push_back(path);
  }
  std::string kernels;
  for (const auto& f : spec.functions) kernels += (kernels.empty() ? "" : ", ") + f;
  for (const auto& e : spec.name_expressions) kernels += (kernels.empty() ? "" : ", ") + e;
  out.push_back({spec.file + " [" + kernels + "]", entry.path, make_inline_request(options)});
}

void expand_conv2d(const SpecEntry& entry, std::vector<Variant>& out) {
  for (const auto& variant : entry.conv2d.variants) {
    out.push_back({variant.name(), entry.path, ops::make_request(variant)});
  }
}

}  // namespace

std::vector<Variant> expand_spec(const Spec& spec, const std::filesystem::path& spec_directory) {
  std::vector<Variant> out;
  for (const auto& entry : spec.entries) {
    try {
      switch (entry.kind) {
        case EntryKind::op:
          expand_op(entry, out);
          break;
        case EntryKind::conv2d:
          expand_conv2d(entry, out);
          break;
        case EntryKind::cuda:
          expand_cuda(entry, spec_directory, out);
          break;
      }
    } catch (const InvalidArgument& e) {
      std::string what = e.what();
      if (what.rfind(entry.path, 0) == 0) throw;  // already names the entry
      throw InvalidArgument(entry.path + ": " + what);
    }
  }
  return out;
}

}  // namespace cuinline::cli
