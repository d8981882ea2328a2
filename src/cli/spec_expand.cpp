// expand_spec: spec entries → CompileRequests, built by the same functions the library calls at
// run time (ops::make_request, make_inline_request, ...), so the keys match.

#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <cuinline/conv2d.hpp>
#include <cuinline/error.hpp>
#include <cuinline/load_inline.hpp>
#include <cuinline/ops.hpp>

#include "cli/spec.hpp"

namespace cuinline::cli {
namespace {

// The broadcast shape of the inputs (PyTorch's rule); throws naming both shapes.
std::vector<std::int64_t> broadcast_shape(const std::vector<std::vector<std::int64_t>>& shapes) {
  std::size_t nd = 0;
  for (const auto& s : shapes) nd = std::max(nd, s.size());
  std::vector<std::int64_t> out(nd, 1);
  for (const auto& s : shapes) {
    for (std::size_t d = 0; d < s.size(); ++d) {
      std::int64_t& e = out[nd - s.size() + d];
      if (s[d] == e || s[d] == 1) continue;
      if (e != 1) throw InvalidArgument("inputs: shapes do not broadcast");
      e = s[d];
    }
  }
  return out;
}

// N-ary ops: the variants ops::apply picks for tensors of these shapes (fake, 4 KiB-aligned
// pointers: the widest vectors), planned by the library's own make_request.
void expand_nary(const SpecEntry& entry, std::vector<Variant>& out) {
  const OpEntry& spec = entry.op;
  const std::vector<std::int64_t> shape = broadcast_shape(spec.input_shapes);
  for (const auto& op : spec.ops) {
    for (DType dtype : spec.dtypes) {
      for (int layout = 0; layout < (spec.strided ? 2 : 1); ++layout) {
        std::vector<TensorView> in, outs;
        std::uintptr_t at = 1ull << 40;
        auto make = [&](const std::vector<std::int64_t>& dims, bool strided_out) {
          TensorView v;
          v.data = reinterpret_cast<void*>(at);
          at += 1ull << 36;
          v.dtype = dtype;
          v.ndim = static_cast<int>(dims.size());
          std::int64_t stride = strided_out ? 2 : 1;
          for (int d = v.ndim - 1; d >= 0; --d) {
            v.shape[d] = dims[d];
            v.strides[d] = stride;
            stride *= dims[d];
          }
          return v;
        };
        for (const auto& dims : spec.input_shapes) in.push_back(make(dims, false));
        for (int k = 0; k < op.outputs(); ++k) outs.push_back(make(shape, layout == 1));
        std::string label = op.describe() + " " + to_string(dtype) + (layout == 1 ? " strided" : "") + " inputs";
        for (const auto& dims : spec.input_shapes) {
          label += " [";
          for (std::size_t d = 0; d < dims.size(); ++d) label += (d ? "," : "") + std::to_string(dims[d]);
          label += "]";
        }
        out.push_back({label, entry.path, ops::make_request(op, in, outs), nullptr});
      }
    }
  }
}

void expand_op(const SpecEntry& entry, std::vector<Variant>& out) {
  const OpEntry& spec = entry.op;
  if (!spec.input_shapes.empty()) return expand_nary(entry, out);
  std::unordered_set<std::string> seen;  // identical variants (repeated list values) rendered once
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
        if (!seen.insert(variant.name()).second) continue;
        out.push_back({variant.name(), entry.path, ops::make_request(variant), nullptr});
      }
    }
  }
}

// `name` (a spec's "file" or header) relative to the spec's directory `dir`. Unless `allow_outside`,
// it must stay inside that directory once resolved: no absolute path, no "..", no symlink that leads
// out (a spec from elsewhere must not make warm read and compile /etc/shadow into the cache).
std::filesystem::path spec_path(const std::filesystem::path& dir, const std::string& name,
                                const std::string& field, bool allow_outside) {
  const std::filesystem::path joined = dir / name;
  if (allow_outside) return joined;
  std::error_code ec;
  const std::filesystem::path base = std::filesystem::weakly_canonical(dir.empty() ? "." : dir, ec);
  const std::filesystem::path target = ec ? joined : std::filesystem::weakly_canonical(base / name, ec);
  const std::filesystem::path relative = target.lexically_relative(base);
  if (ec || std::filesystem::path(name).is_absolute() || relative.empty() || *relative.begin() == "..") {
    throw InvalidArgument(field + ": '" + name + "' is outside the spec's directory '" +
                          (dir.empty() ? std::string(".") : dir.string()) +
                          "' (pass --allow-outside-paths to read files from anywhere)");
  }
  return target;
}

// A shape-generic copy module of conv2d listed in a spec's variants: its request's name and the
// targets (ops::Conv2dTarget, by value) whose calls launch it.
struct CopyModule {
  std::string name;
  std::shared_ptr<std::array<bool, 4>> targets;
};

void expand_cuda(const SpecEntry& entry, const std::filesystem::path& dir, bool allow_outside,
                 std::vector<Variant>& out) {
  const CudaFileEntry& spec = entry.cuda;
  InlineOptions options;
  options.name = spec.name;
  options.cuda_sources = {read_text_file(spec_path(dir, spec.file, entry.path + ".file", allow_outside),
                                         entry.path + ".file", !allow_outside)};
  options.functions = spec.functions;
  options.name_expressions = spec.name_expressions;
  options.extra_options = spec.options;
  options.defines = spec.defines;
  for (const auto& header : spec.headers) {
    // Read once, here (load_inline would read the path again, after the checks); included by the file
    // name the spec gives (a symlink inside the directory keeps its own name).
    const std::filesystem::path path = spec_path(dir, header, entry.path + ".headers", allow_outside);
    options.headers.push_back({std::filesystem::path(header).filename().string(),
                               read_text_file(path, entry.path + ".headers", !allow_outside)});
  }
  std::string kernels;
  for (const auto& f : spec.functions) kernels += (kernels.empty() ? "" : ", ") + f;
  for (const auto& e : spec.name_expressions) kernels += (kernels.empty() ? "" : ", ") + e;
  out.push_back({spec.file + " [" + kernels + "]", entry.path, make_inline_request(options), nullptr});
}

// Each variant's module, planned for each arch's target as a call on that arch plans it
// (ops::conv2d_variant_for_arch), and once a spec each shape-generic copy a variant launches beside
// its conv there (ops::make_stage_request: the f16 / bf16 staging copy, which also holds the TF32
// wgmma variants' copy, the f32 channels-last transposing copy), for the archs whose targets launch it, so a warmed cache needs no NVRTC at run
// time. `copies` holds the copies listed so far: the request's name and the targets that launch it.
void expand_conv2d(const SpecEntry& entry, std::vector<Variant>& out, std::vector<CopyModule>& copies) {
  constexpr ops::Conv2dTarget kTargets[] = {ops::Conv2dTarget::sm90, ops::Conv2dTarget::sm80, ops::Conv2dTarget::sm86,
                                            ops::Conv2dTarget::sm75};
  for (const auto& variant : entry.conv2d.variants) {
    Variant v{variant.name(), entry.path, ops::make_request(variant), nullptr};
    v.for_arch = [variant](const Arch& arch) -> std::optional<CompileRequest> {
      return ops::make_request(ops::conv2d_variant_for_arch(variant, arch));
    };
    out.push_back(std::move(v));
    for (ops::Conv2dTarget target : kTargets) {
      ops::Conv2dVariant planned = variant;
      planned.target = target;
      std::optional<CompileRequest> copy = ops::make_stage_request(planned);
      if (!copy) continue;
      auto listed = std::find_if(copies.begin(), copies.end(), [&](const CopyModule& c) { return c.name == copy->name; });
      if (listed == copies.end()) {
        copies.push_back({copy->name, std::make_shared<std::array<bool, 4>>()});
        listed = copies.end() - 1;
        const bool stage = copy->name == "conv2d_stage.cu";
        std::shared_ptr<std::array<bool, 4>> targets = listed->targets;
        Variant c{stage ? "conv2d staging copy (f16/bf16, f32 tf32)" : "conv2d transposing copy (f32 channels-last)", entry.path,
                  *copy, nullptr};
        c.for_arch = [targets, request = std::move(*copy)](const Arch& arch) -> std::optional<CompileRequest> {
          if (!(*targets)[static_cast<int>(ops::conv2d_target_for(arch))]) return std::nullopt;
          return request;
        };
        out.push_back(std::move(c));
      }
      (*listed->targets)[static_cast<int>(target)] = true;
    }
  }
}

}  // namespace

std::size_t count_variants(const SpecEntry& entry) {
  switch (entry.kind) {
    case EntryKind::conv2d:
      return entry.conv2d.variants.size();
    case EntryKind::cuda:
      return 1;
    case EntryKind::op:
      break;
  }
  const OpEntry& spec = entry.op;
  std::size_t per_op = 0;
  for (DType dtype : spec.dtypes) {
    if (!spec.input_shapes.empty()) {
      per_op += spec.strided ? 2 : 1;
      continue;
    }
    std::size_t widths = 0;
    for (int w : ops::vector_widths(dtype)) {
      widths += spec.vector_widths.empty() ||
                std::find(spec.vector_widths.begin(), spec.vector_widths.end(), w) != spec.vector_widths.end();
    }
    per_op += widths * ((spec.index32 ? 1 : 0) + (spec.index64 ? 1 : 0)) + (spec.strided ? 1 : 0);
  }
  return spec.ops.size() * per_op;
}

std::vector<Variant> expand_spec(const Spec& spec, const std::filesystem::path& spec_directory,
                                 std::size_t max_variants, bool allow_outside_paths) {
  std::size_t total = 0;
  for (const auto& entry : spec.entries) {
    total += count_variants(entry);
    if (total > max_variants) {
      throw InvalidArgument("spec: " + entry.path + " brings the spec to more than " + std::to_string(max_variants) +
                            " variants (the limit; raise it with --max-variants if that many are meant)");
    }
  }
  std::vector<Variant> out;
  std::vector<CopyModule> copies_listed;
  for (const auto& entry : spec.entries) {
    try {
      switch (entry.kind) {
        case EntryKind::op:
          expand_op(entry, out);
          break;
        case EntryKind::conv2d:
          expand_conv2d(entry, out, copies_listed);
          break;
        case EntryKind::cuda:
          expand_cuda(entry, spec_directory, allow_outside_paths, out);
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
