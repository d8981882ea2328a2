#pragma once
/// @file compiler.hpp
/// NVRTC: compile CUDA C++ source (plus named headers, options and name expressions) to CUBIN for
/// one exact architecture — or to PTX when the architecture is newer than this NVRTC knows.

#include <cstdint>
#include <cuinline/arch.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cuinline {

/// A header the program can #include by name, given as its content.
struct Header {
  std::string name;     ///< as written in #include "name"
  std::string content;  ///< the header's text
};

/// Everything that describes one program. Two requests with equal fields produce the same binary
/// (for the same arch and NVRTC), and so the same cache key.
struct CompileRequest {
  std::string name = "program.cu";            ///< program name, used in diagnostics ("k.cu(12): ...")
  std::string source;                         ///< CUDA C++ source; must not be empty
  std::vector<Header> headers;                ///< headers by name and content
  std::vector<std::string> options;           ///< NVRTC options, e.g. "-DN=4", "--use_fast_math"
  std::vector<std::string> name_expressions;  ///< e.g. "leaky<float, 4>", "&my_kernel"
  /// Compile for the arch-specific variant of the target where it has one (sm_90 → sm_90a, sm_100
  /// → sm_100a, ...): for source that uses features of exactly that arch (wgmma on sm_90a; the
  /// source tests __CUDA_ARCH_FEAT_SM90_ALL and the like, and keeps a portable path). Such a binary
  /// loads only on that exact compute capability, which a CUBIN needs anyway. compile_target() is
  /// the arch it is built for; the cache key holds that arch (not this flag).
  bool arch_specific = false;
};

enum class BinaryKind : std::uint8_t {
  cubin = 1,  ///< machine code for exactly one arch
  ptx = 2,    ///< used only when the target is newer than NVRTC supports; the driver JITs it
};

/// The output of one compile: the binary plus what is needed to find its kernels.
struct CompiledProgram {
  BinaryKind kind = BinaryKind::cubin;
  Arch arch;                 ///< the arch the binary was built for
  std::string program_name;  ///< CompileRequest::name
  std::vector<char> binary;  ///< CUBIN (ELF) or PTX text (NUL-terminated)
  /// (name expression, lowered/mangled name) for every requested name expression, in request order.
  std::vector<std::pair<std::string, std::string>> lowered_names;
  std::string log;  ///< NVRTC's log (warnings); empty when clean

  /// The lowered name of a name expression, or nullopt when it was not requested.
  std::optional<std::string> lowered_name(std::string_view expression) const;
};

/// NVRTC's version, e.g. {13, 0}.
struct NvrtcVersion {
  int major = 0;
  int minor = 0;
};
NvrtcVersion nvrtc_version();

/// The real architectures this NVRTC can emit CUBIN for, ascending.
const std::vector<Arch>& nvrtc_supported_archs();

/// The options as they go into the cache key and to NVRTC: each trimmed, common spellings unified
/// ("--define-macro X", "-D X" → "-DX"; "--std=c++17" → "-std=c++17"; ...), order kept (it matters
/// for -D and -I). Throws InvalidArgument for an empty option, or one that sets the architecture
/// (the target is passed separately) or asks for output cuinline does not produce.
std::vector<std::string> canonical_options(const std::vector<std::string>& options);

/// The options cuinline adds to every compile (standard, include path of the toolkit's headers,
/// ...), not counting the architecture. Part of the cache key, except the toolkit include path
/// (so a cache warmed on one machine serves another with the toolkit installed elsewhere). A -std
/// option of the request replaces the default one.
const std::vector<std::string>& default_options();

/// The arch `request` is compiled for when `target` is asked: target with the suffix 'a' where
/// request.arch_specific is set, the target has no suffix and is sm_90 or newer; else target.
Arch compile_target(const CompileRequest& request, const Arch& target);

/// Compiles `request` for `target` (for compile_target(request, target)). Produces CUBIN when NVRTC supports `target`, else PTX for the
/// newest arch it supports (which the driver JIT-compiles at load). Throws CompileError with the
/// log and numbered source on a compile failure, InvalidArgument on an empty source, unknown
/// option or bad arch.
CompiledProgram compile(const CompileRequest& request, const Arch& target);

/// The source with 1-based line numbers, as CompileError::numbered_source holds it.
std::string number_source_lines(std::string_view source);

}  // namespace cuinline
