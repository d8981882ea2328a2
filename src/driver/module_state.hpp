#pragma once
// Internals behind cuinline::Module and cuinline::Kernel.
#include <cuda.h>

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cuinline/cache.hpp"
#include "cuinline/compiler.hpp"
#include "driver/driver_api.hpp"

namespace cuinline::detail {

struct KernelState {
  std::shared_ptr<const struct ModuleState> module;  // keeps the library loaded
  const DriverApi* api = nullptr;
  CUkernel kernel = nullptr;
  std::string name;          // as asked for
  std::string lowered_name;  // in the binary
  int param_count = -1;      // -1: the driver cannot tell
  std::vector<std::size_t> param_sizes;
};

struct ModuleState : std::enable_shared_from_this<ModuleState> {
  ModuleState(CompiledProgram program_, CacheKey key_, CacheTier tier_)
      : program(std::move(program_)), key(key_), tier(tier_) {}
  ~ModuleState();
  ModuleState(const ModuleState&) = delete;
  ModuleState& operator=(const ModuleState&) = delete;

  // Loads the library once (cuLibraryLoadData); a failure is thrown and retried on the next call.
  CUlibrary library() const;

  const CompiledProgram program;
  const CacheKey key;
  const CacheTier tier;

  mutable std::mutex mutex;
  mutable CUlibrary library_ = nullptr;
  mutable std::unordered_map<std::string, std::shared_ptr<const KernelState>> kernels;
};

}  // namespace cuinline::detail
