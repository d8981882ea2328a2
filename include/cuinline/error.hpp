#pragma once
/// @file error.hpp
/// The cuinline exception family. Every exception cuinline throws derives from cuinline::Error;
/// the subclasses keep the raw facts (driver status, NVRTC log, options, numbered source) as fields.

#include <cuda.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace cuinline {

/// Base of every exception thrown by cuinline.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A caller passed something cuinline cannot use (bad arch string, null pointer, wrong argument
/// count, ...). Thrown before any launch or cache write.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

/// The on-disk cache could not do what was asked (only thrown by explicit cache-management calls;
/// lookups degrade to memory-only instead of throwing).
class CacheError : public Error {
 public:
  using Error::Error;
};

/// A CUDA driver call failed, or no driver could be loaded. Keeps the raw CUresult.
class DriverError : public Error {
 public:
  /// @param code   the CUresult (CUDA_ERROR_NOT_INITIALIZED etc.); CUDA_ERROR_SHARED_OBJECT_INIT_FAILED
  ///               style codes are used when libcuda itself could not be loaded.
  /// @param message full message, saying what was being done.
  DriverError(CUresult code, const std::string& message) : Error(message), code_(code) {}
  CUresult code() const noexcept { return code_; }

 private:
  CUresult code_;
};

/// NVRTC rejected a program (or an NVRTC call failed). Keeps the log, the options, the program
/// name and the source with line numbers, so `k.cu(12): error: ...` can be read next to line 12.
class CompileError : public Error {
 public:
  CompileError(const std::string& message, int nvrtc_result, std::string program_name, std::string log,
               std::vector<std::string> options, std::string numbered_source)
      : Error(message),
        nvrtc_result_(nvrtc_result),
        program_name_(std::move(program_name)),
        log_(std::move(log)),
        options_(std::move(options)),
        numbered_source_(std::move(numbered_source)) {}

  /// The raw nvrtcResult (as int, so this header does not need nvrtc.h).
  int nvrtc_result() const noexcept { return nvrtc_result_; }
  const std::string& program_name() const noexcept { return program_name_; }
  const std::string& log() const noexcept { return log_; }
  const std::vector<std::string>& options() const noexcept { return options_; }
  /// The program source, each line prefixed with its 1-based number ("   12 | ...").
  const std::string& numbered_source() const noexcept { return numbered_source_; }

 private:
  int nvrtc_result_;
  std::string program_name_;
  std::string log_;
  std::vector<std::string> options_;
  std::string numbered_source_;
};

}  // namespace cuinline
