#pragma once
// The warm spec: a JSON file listing the kernel variants a deployment needs (docs/spec-format.md).
//
// Two steps, both before anything is compiled:
//   parse_spec(text)       structure and values, with the JSON path of every bad field. Pure: reads no
//                          files, so a fuzzer can call it on arbitrary bytes.
//   expand_spec(spec, dir) the CompileRequests: reads the user .cu files and headers (relative to the
//                          spec's directory) and builds each variant with the same functions the
//                          library uses at run time, so warm writes exactly the entries that are
//                          looked up later.

#include <cstdint>
#include <cuinline/compiler.hpp>
#include <cuinline/conv2d.hpp>
#include <cuinline/ops.hpp>
#include <cuinline/tensor.hpp>
#include <filesystem>
#include <functional>
#include <optional>
#include <map>
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

/// Built-in elementwise ops over every combination of their dtypes and vector widths.
struct OpEntry {
  std::vector<ops::Op> ops;  ///< "op" (with "slope"/"divisor" applied)
  std::vector<DType> dtypes;
  std::vector<int> vector_widths;  ///< empty: every width the run-time choice can pick
  bool index32 = true;             ///< contiguous tensors of < 2^31 elements
  bool index64 = false;            ///< larger contiguous tensors
  bool strided = false;            ///< the non-contiguous variant
  /// N-ary ops ("inputs": the shapes of the input tensors, [] for a scalar): empty for the one-input
  /// ops. Each op × dtype warms the contiguous variant of aligned tensors (the widest vectors) and,
  /// with "strided", the strided one.
  std::vector<std::vector<std::int64_t>> input_shapes;
};

/// Fused conv2d variants: one shape (the batch size is a run-time value) with each listed epilogue,
/// bias setting and precision mode.
struct Conv2dEntry {
  std::vector<ops::Conv2dVariant> variants;
};

enum class EntryKind { op, conv2d, cuda };

struct SpecEntry {
  std::string path;  ///< "entries[3]", for messages
  EntryKind kind = EntryKind::op;
  OpEntry op;
  Conv2dEntry conv2d;
  CudaFileEntry cuda;
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
  CompileRequest request;
  /// Where the program depends on the arch (a conv2d variant is planned for the arch's
  /// ops::Conv2dTarget): its request for an arch, or nullopt where the arch needs no such module (a
  /// copy module that none of the spec's variants launches there). Unset: `request` for every arch.
  std::function<std::optional<CompileRequest>(const Arch&)> for_arch;
};

/// The variants of every entry, in spec order (duplicates kept; the caller dedups by key). Throws
/// InvalidArgument naming the entry for an unreadable file or a combination the library rejects.
/// At most `max_variants` are expanded: the count is computed from the entries' lists before anything
/// is rendered (a small spec can name millions of combinations), and identical variants are merged
/// before they are rendered; too many → InvalidArgument naming the count and the limit. A "cuda"
/// entry's file and headers must resolve inside `spec_directory` unless `allow_outside_paths`.
/// Where a conv2d variant is staged (f16 / bf16 copied channels-last first), the staging copy's
/// module follows it, once a spec (not counted against `max_variants`).
inline constexpr std::size_t kDefaultMaxVariants = 100000;
std::vector<Variant> expand_spec(const Spec& spec, const std::filesystem::path& spec_directory,
                                 std::size_t max_variants = kDefaultMaxVariants, bool allow_outside_paths = false);

/// The number of variants an entry expands to (before merging duplicates), computed without
/// building them.
std::size_t count_variants(const SpecEntry& entry);

/// The largest spec, .cu file or header the CLI reads (bytes).
inline constexpr std::uint64_t kMaxInputFileBytes = 64ull << 20;

/// Reads a whole regular file, or throws InvalidArgument naming `what` and the path: a FIFO, a device
/// (/dev/zero), a directory, more than kMaxInputFileBytes, a read error, fewer bytes than its size
/// (it changed meanwhile) or a NUL byte. Never returns a shorter input. `no_follow`: a symlink as the
/// last component is refused (the path was resolved and checked before).
std::string read_text_file(const std::filesystem::path& path, const std::string& what, bool no_follow = false);

}  // namespace cuinline::cli
