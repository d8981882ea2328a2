#pragma once
// The warm spec: a JSON file listing the kernel variants a deployment needs (docs/spec-format.md).
//
// Two steps, both before anything is compiled:
//   parse_spec(text)       structure and values, with the JSON path of every bad field. Pure: reads no
//                          files, so a fuzzer can call it on arbitrary bytes.
//   SpecExpansion         the CompileRequests, one at a time: reads the user .cu files and headers
//                          (relative to the spec's directory) and builds each variant with the same
//                          functions the library uses at run time, so warm writes exactly the
//                          entries that are looked up later.

#include <cstdint>
#include <cuinline/compiler.hpp>
#include <cuinline/conv2d.hpp>
#include <cuinline/ops.hpp>
#include <cuinline/reductions.hpp>
#include <cuinline/tensor.hpp>
#include <array>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cuinline::cli {

/// A user CUDA file, compiled as load_inline would compile it.
struct CudaFileEntry {
  std::string file;                            ///< relative to the spec's directory
  std::string name;                            ///< InlineOptions::name ("inline" if absent)
  std::vector<std::string> name_expressions;   ///< e.g. "scale<float, 4>"
  std::vector<std::string> functions;          ///< plain / extern "C" kernel names
  std::vector<std::string> options;            ///< extra NVRTC options
  std::map<std::string, std::string> defines;  ///< -DNAME=VALUE
  std::vector<std::string> headers;            ///< header files, included by file name
};

/// One value of an op entry's "op" list: a fixed op, or a bare name whose constants come from the
/// entry's "slope" / "divisor" lists.
struct OpChoice {
  enum class Kind { fixed, leaky_relu, div_leaky_relu };
  Kind kind = Kind::fixed;
  ops::Op op;  ///< Kind::fixed only
};

/// Built-in elementwise ops over every combination of their dtypes and vector widths. The lists are
/// kept as lists (each value once): the combinations are built one at a time (SpecExpansion), so a
/// small spec that names millions of them costs nothing until it is refused.
struct OpEntry {
  std::vector<ops::Op> ops;        ///< "op" values that are complete ops, each once
  bool leaky_relu = false;         ///< bare "leaky_relu": once per slope
  bool div_leaky_relu = false;     ///< bare "div_leaky_relu": once per divisor and slope
  std::vector<double> slopes;      ///< "slope" (default 0.01), each value once
  std::vector<double> divisors;    ///< "divisor", each value once
  std::vector<DType> dtypes;
  std::vector<int> vector_widths;  ///< empty: every width the run-time choice can pick
  bool index32 = true;             ///< contiguous tensors of < 2^31 elements
  bool index64 = false;            ///< larger contiguous tensors
  bool strided = false;            ///< the non-contiguous variant
  /// N-ary ops ("inputs": the shapes of the input tensors, [] for a scalar): empty for the one-input
  /// ops. Each op × dtype warms the contiguous variant of aligned tensors (the widest vectors) and,
  /// with "strided", the strided one.
  std::vector<std::vector<std::int64_t>> input_shapes;

  /// The number of ops the "op" list stands for (saturating), and the i-th of them: the complete
  /// ops, then leaky_relu of each slope, then div_leaky_relu of each divisor and slope.
  std::size_t op_count() const noexcept;
  ops::Op op_at(std::size_t index) const;
};

/// Fused conv2d variants: one shape (the batch size is a run-time value) with each listed epilogue,
/// bias setting, precision, dtype and layouts (each value once); variant(i) builds the i-th.
struct Conv2dEntry {
  int channels = 0, height = 0, width = 0, filters = 0, kernel_h = 0, kernel_w = 0;
  ops::Conv2dParams params;
  std::vector<ops::Op> epilogues;
  std::vector<bool> biases;
  std::vector<ops::Conv2dPrecision> precisions;
  std::vector<DType> dtypes;
  std::vector<ops::Conv2dLayout> layouts;
  std::vector<ops::Conv2dLayout> weight_layouts;  ///< empty: each variant's weight takes its layout

  std::size_t count() const noexcept;  ///< saturating
  /// The i-th combination, validated (InvalidArgument from Conv2dVariant::validate otherwise).
  ops::Conv2dVariant variant(std::size_t index) const;
};

/// Row reductions (softmax, log_softmax, rms_norm, add_rms_norm, layer_norm): for each op, dtype, row
/// length and alignment, the variant ops::plan_rows picks for rows of that length whose pointers and
/// row strides are aligned to that many elements (each value once; variant(i) builds the i-th). A
/// row length of the split form stands for its two kernels (split_stats, split_write) and the looped
/// form the call runs where no workspace can be had (ops::RowPlan::fallback). "prologue" /
/// "epilogue": the fused chains of ops::RowFusion (op text), the epilogue's tensors aligned as x.
struct ReductionEntry {
  std::vector<ops::RowOp> ops;
  std::vector<DType> dtypes;
  std::vector<std::int64_t> row_lengths;
  std::vector<int> vector_widths;  ///< empty: rows aligned to 16 bytes (the widest each dtype has)
  ops::Op prologue, epilogue;      ///< empty: none

  std::size_t count() const;  ///< saturating
  /// The i-th variant: op-major, then dtype, row length, vector width (and split part).
  ops::RowVariant variant(std::size_t index) const;
};

enum class EntryKind { op, conv2d, cuda, reductions };

struct SpecEntry {
  std::string path;  ///< "entries[3]", for messages
  EntryKind kind = EntryKind::op;
  OpEntry op;
  Conv2dEntry conv2d;
  CudaFileEntry cuda;
  ReductionEntry reductions;
};

struct Spec {
  std::vector<SpecEntry> entries;
};

/// Parses and validates a spec. Throws InvalidArgument naming the JSON path of the first bad field
/// ("entries[3].dtype: expected one of f32,f16,bf16,f64, got \"f8\""). Never crashes on any input.
Spec parse_spec(std::string_view json_text);

/// One program to compile, with a short human label ("leaky_relu f16 v8 slope=0.01").
struct Variant {
  std::string label;
  std::string entry_path;  ///< the spec entry it came from
  CompileRequest request;  ///< unused where for_arch is set
  /// Where the program depends on the arch (a conv2d variant is planned for the arch's
  /// ops::Conv2dTarget): its request for an arch, or nullopt where the arch needs no such module (a
  /// copy module that none of the spec's variants launches there). Unset: `request` for every arch.
  std::function<std::optional<CompileRequest>(const Arch&)> for_arch;
  std::optional<ops::Conv2dVariant> conv2d;  ///< a conv2d variant: what it is (for its copy modules)
};

/// The number of variants the spec's entries stand for, from the lengths of their lists alone
/// (saturating at SIZE_MAX): nothing is built. Each is compiled once per arch.
std::size_t count_variants(const Spec& spec);

/// The default bound on variants × archs of `cuinline warm` (--max-variants).
inline constexpr std::size_t kDefaultMaxVariants = 100000;

class SpecConfinement;

/// The variants of a spec, built one at a time and on demand: at(i) renders the i-th alone, the same
/// each time it is called (a warm worker rebuilds the variant it compiles), so memory does not grow
/// with the number of variants. The "cuda" entries' files are read once, by the constructor: each
/// must resolve inside `spec_directory`, and include nothing and name no file outside it
/// (spec_confine.hpp), unless `allow_outside_paths`. Throws InvalidArgument naming the entry.
class SpecExpansion {
 public:
  SpecExpansion(const Spec& spec, const std::filesystem::path& spec_directory, bool allow_outside_paths);
  ~SpecExpansion();
  SpecExpansion(const SpecExpansion&) = delete;
  SpecExpansion& operator=(const SpecExpansion&) = delete;

  std::size_t size() const noexcept { return size_; }
  /// Variant `index` (< size()). Throws InvalidArgument naming the entry for a combination the
  /// library rejects.
  Variant at(std::size_t index) const;
  /// The index in Spec::entries of the entry variant `index` comes from.
  std::size_t entry_of(std::size_t index) const;
  /// The spec's directory, for redacting compile logs (whether or not the spec may read outside it).
  const SpecConfinement& confinement() const noexcept { return *confinement_; }

 private:
  const Spec& spec_;
  std::vector<std::size_t> first_;  ///< index of each entry's first variant
  std::size_t size_ = 0;
  std::vector<std::optional<CompileRequest>> cuda_;  ///< each "cuda" entry's request, read once
  std::unique_ptr<SpecConfinement> confinement_;
};

/// The modules that conv2d variants launch beside their convs, for the archs whose targets launch
/// them, so a warmed cache needs no NVRTC at run time: the shape-generic copies (the f16 / bf16
/// staging copy, which also holds the TF32 wgmma variants' copy; the f32 channels-last transposing
/// copy), once a spec each, and the split-K form of each variant that has one (ops::make_split_request;
/// labelled "<variant> split-K"). add() every variant of the spec first; the modules are not counted
/// against --max-variants (a copy of each kind, a split form at most a variant).
class CopyModules {
 public:
  void add(const Variant& variant);
  const std::vector<Variant>& modules() const noexcept { return modules_; }

 private:
  std::vector<Variant> modules_;
  /// per module: the targets launching it (a copy module's; null for a split form's)
  std::vector<std::shared_ptr<std::array<bool, 4>>> targets_;
};

/// The largest spec, .cu file or header the CLI reads (bytes).
inline constexpr std::uint64_t kMaxInputFileBytes = 64ull << 20;

/// Reads a whole regular file, or throws InvalidArgument naming `what` and the path: a FIFO, a device
/// (/dev/zero), a directory, more than kMaxInputFileBytes, a read error, fewer bytes than its size
/// (it changed meanwhile) or a NUL byte. Never returns a shorter input. `no_follow`: a symlink as the
/// last component is refused (the path was resolved and checked before).
std::string read_text_file(const std::filesystem::path& path, const std::string& what, bool no_follow = false);

}  // namespace cuinline::cli
