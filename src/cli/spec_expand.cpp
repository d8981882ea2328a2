// SpecExpansion: spec entries → CompileRequests, one at a time, built by the same functions the
// library calls at run time (ops::make_request, make_inline_request, ...), so the keys match.

#include <algorithm>
#include <array>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <cuinline/conv2d.hpp>
#include <cuinline/error.hpp>
#include <cuinline/load_inline.hpp>
#include <cuinline/ops.hpp>
#include <cuinline/reductions.hpp>

#include "cli/spec.hpp"
#include "cli/spec_confine.hpp"

namespace cuinline::cli {
namespace {

constexpr std::size_t kSaturated = std::numeric_limits<std::size_t>::max();

std::size_t saturating_mul(std::size_t a, std::size_t b) noexcept {
  if (a != 0 && b > kSaturated / a) return kSaturated;
  return a * b;
}

std::size_t saturating_add(std::size_t a, std::size_t b) noexcept {
  return b > kSaturated - a ? kSaturated : a + b;
}

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

// The one-input variants of `op` on `dtype` the entry lists (enumerate_variants, filtered to the listed
// vector widths), in enumeration order.
std::vector<ops::Variant> listed_variants(const OpEntry& spec, const ops::Op& op, DType dtype) {
  ops::VariantSet which;
  which.index32 = spec.index32;
  which.index64 = spec.index64;
  which.strided = spec.strided;
  std::vector<ops::Variant> out;
  for (auto& variant : ops::enumerate_variants(op, dtype, which)) {
    const bool listed = spec.vector_widths.empty() || variant.layout == ops::Layout::strided ||
                        std::find(spec.vector_widths.begin(), spec.vector_widths.end(), variant.vector_width) !=
                            spec.vector_widths.end();
    if (listed) out.push_back(std::move(variant));
  }
  return out;
}

// How many variants listed_variants gives for `dtype`, from the lists alone.
std::size_t listed_count(const OpEntry& spec, DType dtype) {
  if (!spec.input_shapes.empty()) return spec.strided ? 2 : 1;
  std::size_t widths = 0;
  for (int w : ops::vector_widths(dtype)) {
    widths += spec.vector_widths.empty() ||
              std::find(spec.vector_widths.begin(), spec.vector_widths.end(), w) != spec.vector_widths.end();
  }
  return widths * ((spec.index32 ? 1 : 0) + (spec.index64 ? 1 : 0)) + (spec.strided ? 1 : 0);
}

// How ops::plan_rows plans one row of `n` elements whose tensors are aligned to `width` elements,
// 0: to 16 bytes (fake pointers, nothing is touched; the row count is a run-time value).
ops::RowPlan planned_rows(ops::RowOp op, DType dtype, std::int64_t n, int width) {
  const std::size_t bytes = width == 0 ? 16 : static_cast<std::size_t>(width) * dtype_size(dtype);
  const std::uintptr_t offset = bytes >= 16 ? 0 : bytes;  // aligned to `bytes`, not to twice that
  const auto at = [&](int k) { return reinterpret_cast<void*>((std::uintptr_t{1} << 44) * k + offset); };
  const TensorView x = TensorView::contiguous(at(1), dtype, {1, n});
  const TensorView out = TensorView::contiguous(at(2), dtype, {1, n});
  const TensorView residual =
      op == ops::RowOp::add_rms_norm ? TensorView::contiguous(at(3), dtype, {1, n}) : TensorView{};
  return ops::plan_rows(op, x, out, {}, {}, residual, 0.0);
}

// Variants a row length stands for: for the split form its two kernels and the looped form a call
// runs where no workspace can be had (RowPlan::fallback); for the cluster form itself, then those
// three (its split form: a GPU without clusters); one for the others.
std::size_t row_parts(DType dtype, std::int64_t n) {
  const ops::RowForm form = planned_rows(ops::RowOp::softmax, dtype, n, 0).variant.form;
  return form == ops::RowForm::cluster ? 4 : form == ops::RowForm::split_stats ? 3 : 1;
}

// The variants one op of a reductions entry stands for.
std::size_t variants_an_op(const ReductionEntry& entry) {
  const std::size_t widths = entry.vector_widths.empty() ? 1 : entry.vector_widths.size();
  std::size_t n = 0;
  for (DType dtype : entry.dtypes) {
    for (std::int64_t row : entry.row_lengths) {
      n = saturating_add(n, saturating_mul(widths, row_parts(dtype, row)));
    }
  }
  return n;
}

std::size_t entry_count(const SpecEntry& entry) {
  switch (entry.kind) {
    case EntryKind::conv2d:
      return entry.conv2d.count();
    case EntryKind::reductions:
      return entry.reductions.count();
    case EntryKind::cuda:
      return 1;
    case EntryKind::op:
      break;
  }
  std::size_t per_op = 0;
  for (DType dtype : entry.op.dtypes) per_op = saturating_add(per_op, listed_count(entry.op, dtype));
  return saturating_mul(entry.op.op_count(), per_op);
}

// N-ary ops: the variant ops::apply picks for tensors of these shapes (fake, 4 KiB-aligned
// pointers: the widest vectors), planned by the library's own make_request.
Variant nary_variant(const SpecEntry& entry, const ops::Op& op, DType dtype, bool strided) {
  const OpEntry& spec = entry.op;
  const std::vector<std::int64_t> shape = broadcast_shape(spec.input_shapes);
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
  for (int k = 0; k < op.outputs(); ++k) outs.push_back(make(shape, strided));
  std::string label = op.describe() + " " + to_string(dtype) + (strided ? " strided" : "") + " inputs";
  for (const auto& dims : spec.input_shapes) {
    label += " [";
    for (std::size_t d = 0; d < dims.size(); ++d) label += (d ? "," : "") + std::to_string(dims[d]);
    label += "]";
  }
  return {label, entry.path, ops::make_request(op, in, outs), nullptr, std::nullopt};
}

// Variant `index` of an op entry: op-major, then dtype, then the dtype's listed variants.
Variant op_variant(const SpecEntry& entry, std::size_t index) {
  const OpEntry& spec = entry.op;
  std::size_t per_op = 0;
  for (DType dtype : spec.dtypes) per_op += listed_count(spec, dtype);
  const ops::Op op = spec.op_at(index / per_op);
  std::size_t rest = index % per_op;
  for (DType dtype : spec.dtypes) {
    const std::size_t n = listed_count(spec, dtype);
    if (rest >= n) {
      rest -= n;
      continue;
    }
    if (!spec.input_shapes.empty()) return nary_variant(entry, op, dtype, rest == 1);
    const std::vector<ops::Variant> listed = listed_variants(spec, op, dtype);
    if (rest >= listed.size()) break;
    const ops::Variant& variant = listed[rest];
    variant.validate();
    return {variant.name(), entry.path, ops::make_request(variant), nullptr, std::nullopt};
  }
  throw Error(entry.path + ": variant " + std::to_string(index) + " does not exist (the count and the enumeration disagree)");
}

Variant conv2d_variant(const SpecEntry& entry, std::size_t index) {
  ops::Conv2dVariant variant = entry.conv2d.variant(index);
  Variant v{variant.name(), entry.path, {}, nullptr, variant};
  v.for_arch = [variant](const Arch& arch) -> std::optional<CompileRequest> {
    return ops::make_request(ops::conv2d_variant_for_arch(variant, arch));
  };
  return v;
}

// The layout the library reads from a tensor's strides: where channels-last and contiguous strides
// address the same elements (one channel, or a single pixel) it names NCHW, so a spec variant does too.
ops::Conv2dLayout seen_layout(ops::Conv2dLayout layout, std::int64_t channels, std::int64_t pixels) {
  return channels == 1 || pixels == 1 ? ops::Conv2dLayout::nchw : layout;
}

}  // namespace

std::size_t OpEntry::op_count() const noexcept {
  std::size_t n = ops.size();
  if (leaky_relu) n = saturating_add(n, slopes.size());
  if (div_leaky_relu) n = saturating_add(n, saturating_mul(divisors.size(), slopes.size()));
  return n;
}

ops::Op OpEntry::op_at(std::size_t index) const {
  if (index < ops.size()) return ops[index];
  index -= ops.size();
  if (leaky_relu) {
    if (index < slopes.size()) return ops::Op::leaky_relu(slopes[index]);
    index -= slopes.size();
  }
  if (div_leaky_relu && index / slopes.size() < divisors.size()) {
    return ops::Op::div_leaky_relu(divisors[index / slopes.size()], slopes[index % slopes.size()]);
  }
  throw Error("op " + std::to_string(index) + " of the entry does not exist");
}

std::size_t Conv2dEntry::count() const noexcept {
  std::size_t n = saturating_mul(epilogues.size(), biases.size());
  n = saturating_mul(n, precisions.size());
  n = saturating_mul(n, dtypes.size());
  n = saturating_mul(n, layouts.size());
  return saturating_mul(n, weight_layouts.empty() ? 1 : weight_layouts.size());
}

ops::Conv2dVariant Conv2dEntry::variant(std::size_t index) const {
  // Mixed radix, the last list varying fastest: epilogue, bias, precision, dtype, layout, weight layout.
  auto digit = [&index](std::size_t radix) {
    const std::size_t d = index % radix;
    index /= radix;
    return d;
  };
  const std::size_t weight = weight_layouts.empty() ? 0 : digit(weight_layouts.size());
  const ops::Conv2dLayout layout = layouts[digit(layouts.size())];
  const DType dtype = dtypes[digit(dtypes.size())];
  const ops::Conv2dPrecision precision = precisions[digit(precisions.size())];
  const bool bias = biases[digit(biases.size())];
  const ops::Op& epilogue = epilogues.at(index);
  const ops::Conv2dLayout weight_layout = weight_layouts.empty() ? layout : weight_layouts[weight];
  auto variant = ops::make_conv2d_variant(channels, height, width, filters, kernel_h, kernel_w, params, bias, epilogue);
  variant.precision = precision;
  variant.dtype = dtype;
  variant.input_layout = seen_layout(layout, channels, std::int64_t{height} * width);
  variant.weight_layout = seen_layout(weight_layout, channels / params.groups, std::int64_t{kernel_h} * kernel_w);
  variant.output_layout = seen_layout(layout, filters, variant.out_height() * variant.out_width());
  variant.validate();
  return variant;
}

std::size_t ReductionEntry::count() const {
  return saturating_mul(ops.size(), variants_an_op(*this));
}

ops::RowVariant ReductionEntry::variant(std::size_t index) const {
  const std::size_t widths = vector_widths.empty() ? 1 : vector_widths.size();
  const std::size_t per_op = variants_an_op(*this);
  const ops::RowOp op = ops.at(index / per_op);
  std::size_t rest = index % per_op;
  for (DType dtype : dtypes) {
    for (std::int64_t n : row_lengths) {
      const std::size_t parts = row_parts(dtype, n);
      if (rest >= widths * parts) {
        rest -= widths * parts;
        continue;
      }
      const int width = vector_widths.empty() ? 0 : vector_widths[rest / parts];
      const ops::RowPlan plan = planned_rows(op, dtype, n, width);
      ops::RowVariant v = plan.variant;
      // The cluster form's own kernel first, then its split form's parts (split_stats first).
      std::size_t part = rest % parts;
      if (parts == 4 && part != 0) {
        v = plan.split;
        part -= 1;
      }
      if (part == 1) v.form = ops::RowForm::split_write;  // the split launch's second kernel
      if (part == 2) v = plan.fallback;                   // the looped form, without a workspace
      v.prologue = prologue;
      v.epilogue = epilogue;
      v.epilogue_inputs = epilogue.steps.empty() && epilogue.expression.empty() ? 0 : epilogue.min_inputs() - 1;
      v.validate();
      return v;
    }
  }
  throw Error("reduction variant " + std::to_string(index) +
              " does not exist (the count and the enumeration disagree)");
}

std::size_t count_variants(const Spec& spec) {
  std::size_t total = 0;
  for (const auto& entry : spec.entries) total = saturating_add(total, entry_count(entry));
  return total;
}

SpecExpansion::SpecExpansion(const Spec& spec, const std::filesystem::path& spec_directory, bool allow_outside_paths)
    : spec_(spec) {
  // Made either way: compile logs are redacted with it even where the spec may read from anywhere.
  confinement_ = std::make_unique<SpecConfinement>(spec_directory);
  const bool confined = !allow_outside_paths;
  cuda_.resize(spec.entries.size());
  for (std::size_t e = 0; e < spec.entries.size(); ++e) {
    const SpecEntry& entry = spec.entries[e];
    first_.push_back(size_);
    size_ = saturating_add(size_, entry_count(entry));
    if (entry.kind != EntryKind::cuda) continue;
    const CudaFileEntry& cuda = entry.cuda;
    try {
      // Each file is read once, here: the request that is keyed is the one compiled (load_inline
      // would read the header paths again, after the checks).
      InlineOptions options;
      options.name = cuda.name;
      const std::filesystem::path file =
          confined ? confinement_->resolve_spec_file(cuda.file, entry.path + ".file") : spec_directory / cuda.file;
      options.cuda_sources = {read_text_file(file, entry.path + ".file", confined)};
      options.functions = cuda.functions;
      options.name_expressions = cuda.name_expressions;
      options.extra_options = cuda.options;
      options.defines = cuda.defines;
      std::vector<std::filesystem::path> header_paths;
      for (const auto& header : cuda.headers) {
        // Included by the file name the spec gives (a symlink inside the directory keeps its own name).
        const std::filesystem::path path =
            confined ? confinement_->resolve_spec_file(header, entry.path + ".headers") : spec_directory / header;
        options.headers.push_back({std::filesystem::path(header).filename().string(),
                                   read_text_file(path, entry.path + ".headers", confined)});
        header_paths.push_back(path);
      }
      CompileRequest request = make_inline_request(options);
      if (confined) confinement_->check_program(request, entry.path, cuda.file, file, header_paths);
      cuda_[e] = std::move(request);
    } catch (const InvalidArgument& e) {
      std::string what = e.what();
      if (what.rfind(entry.path, 0) == 0) throw;  // already names the entry
      throw InvalidArgument(entry.path + ": " + what);
    }
  }
}

SpecExpansion::~SpecExpansion() = default;

std::size_t SpecExpansion::entry_of(std::size_t index) const {
  // The last entry that starts at or before `index` (entries of no variants start where the next does).
  return static_cast<std::size_t>(std::upper_bound(first_.begin(), first_.end(), index) - first_.begin()) - 1;
}

Variant SpecExpansion::at(std::size_t index) const {
  if (index >= size_) throw Error("variant " + std::to_string(index) + " of " + std::to_string(size_) + " does not exist");
  const std::size_t e = entry_of(index);
  const SpecEntry& entry = spec_.entries.at(e);
  const std::size_t local = index - first_[e];
  try {
    switch (entry.kind) {
      case EntryKind::op:
        return op_variant(entry, local);
      case EntryKind::conv2d:
        return conv2d_variant(entry, local);
      case EntryKind::reductions: {
        const ops::RowVariant variant = entry.reductions.variant(local);
        Variant v{variant.name(), entry.path, ops::make_request(variant), nullptr, std::nullopt};
        if (variant.min_arch() != 0) {
          // The cluster form: launched on sm_90 and later only (a GPU before runs the split form,
          // the next parts).
          v.for_arch = [variant, request = v.request](const Arch& arch) -> std::optional<CompileRequest> {
            if (arch.number() < variant.min_arch()) return std::nullopt;
            return request;
          };
        }
        return v;
      }
      case EntryKind::cuda: {
        const CudaFileEntry& spec = entry.cuda;
        std::string kernels;
        for (const auto& f : spec.functions) kernels += (kernels.empty() ? "" : ", ") + f;
        for (const auto& n : spec.name_expressions) kernels += (kernels.empty() ? "" : ", ") + n;
        return {spec.file + " [" + kernels + "]", entry.path, *cuda_[e], nullptr, std::nullopt};
      }
    }
  } catch (const InvalidArgument& e) {
    std::string what = e.what();
    if (what.rfind(entry.path, 0) == 0) throw;  // already names the entry
    throw InvalidArgument(entry.path + ": " + what);
  }
  throw Error(entry.path + ": unknown entry kind");
}

void CopyModules::add(const Variant& variant) {
  if (!variant.conv2d) return;
  // The split-K form of a variant that has one (sm_90's wgmma tiling only: other archs get none):
  // a module of its own beside the variant's, which a launch of few tiles loads.
  ops::Conv2dVariant on_sm90 = *variant.conv2d;
  on_sm90.target = ops::Conv2dTarget::sm90;
  if (ops::make_split_request(on_sm90)) {
    Variant split{variant.label + " split-K", variant.entry_path, {}, nullptr, std::nullopt};
    split.for_arch = [v = *variant.conv2d](const Arch& arch) {
      return ops::make_split_request(ops::conv2d_variant_for_arch(v, arch));
    };
    modules_.push_back(std::move(split));
    targets_.push_back(nullptr);  // (one variant's: no targets shared with other variants)
  }
  constexpr ops::Conv2dTarget kTargets[] = {ops::Conv2dTarget::sm90, ops::Conv2dTarget::sm80, ops::Conv2dTarget::sm86,
                                            ops::Conv2dTarget::sm75};
  for (ops::Conv2dTarget target : kTargets) {
    ops::Conv2dVariant planned = *variant.conv2d;
    planned.target = target;
    std::optional<CompileRequest> copy = ops::make_stage_request(planned);
    if (!copy) continue;
    std::size_t m = 0;
    while (m < modules_.size() && modules_[m].request.name != copy->name) ++m;
    if (m == modules_.size()) {
      const bool stage = copy->name == "conv2d_stage.cu";
      auto targets = std::make_shared<std::array<bool, 4>>();
      Variant module{stage ? "conv2d staging copy (f16/bf16, f32 tf32)" : "conv2d transposing copy (f32 channels-last)",
                     variant.entry_path, *copy, nullptr, std::nullopt};
      module.for_arch = [targets, request = std::move(*copy)](const Arch& arch) -> std::optional<CompileRequest> {
        if (!(*targets)[static_cast<int>(ops::conv2d_target_for(arch))]) return std::nullopt;
        return request;
      };
      modules_.push_back(std::move(module));
      targets_.push_back(std::move(targets));
    }
    (*targets_[m])[static_cast<int>(target)] = true;
  }
}

}  // namespace cuinline::cli
