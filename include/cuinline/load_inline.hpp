#pragma once
/// @file load_inline.hpp
/// The C++ counterpart of torch.utils.cpp_extension.load_inline: CUDA source in a string,
/// compiled with NVRTC for the device's exact architecture, cached in memory and on disk, and
/// returned as a Module whose kernels can be launched.

#include <cuinline/kernel_cache.hpp>
#include <cuinline/module.hpp>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cuinline {

struct InlineOptions {
  std::string name = "inline";                      ///< program name (diagnostics: "<name>.cu(12): ...")
  std::vector<std::string> cuda_sources;            ///< concatenated in order; must not be all empty
  std::vector<std::string> functions;               ///< kernels that must exist (plain or extern "C" names)
  std::vector<std::string> name_expressions;        ///< template instantiations, e.g. "scale<float, 4>"
  std::vector<std::string> extra_options;           ///< extra NVRTC options
  std::map<std::string, std::string> defines;       ///< -DNAME=VALUE (empty value: -DNAME)
  std::vector<Header> headers;                      ///< headers given as content
  std::vector<std::filesystem::path> header_files;  ///< headers read from disk, included by file name
  std::optional<int> device;                        ///< default: the current device
  std::optional<Arch> arch;                         ///< default: the device's arch (no GPU needed if set)
  bool verbose = false;                             ///< log options, compile time and cache tier at info
  KernelCache* cache = nullptr;                     ///< default: default_cache()
};

/// Compiles (or fetches from the cache) and returns the module. Throws InvalidArgument for bad
/// input (empty source, unreadable header file, bad option or define), CompileError when NVRTC
/// rejects the program (an unknown function name included), DriverError when the device's arch
/// is needed and there is no driver. Nothing is written to the cache on any error.
Module load_inline(const InlineOptions& options);

/// The CompileRequest load_inline builds from its options (exposed for the CLI and tests).
CompileRequest make_inline_request(const InlineOptions& options);

}  // namespace cuinline
