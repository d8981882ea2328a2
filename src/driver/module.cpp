#include "cuinline/module.hpp"

#include <algorithm>
#include <string>

#include "common/log.hpp"
#include "cuinline/driver.hpp"
#include "cuinline/error.hpp"
#include "driver/module_state.hpp"

namespace cuinline {
namespace detail {

ModuleState::~ModuleState() {
  if (library_ == nullptr) return;
  const DriverApi* api = driver_or_null();
  if (api == nullptr) return;
  const CUresult r = api->cuLibraryUnload(library_);
  // At process exit the driver may already be torn down; that is not worth a message.
  if (r != CUDA_SUCCESS && r != CUDA_ERROR_DEINITIALIZED) {
    logger()->warn("unloading module '{}': {}", program.program_name, driver_error_string(r));
  }
}

CUlibrary ModuleState::library() const {
  std::lock_guard<std::mutex> lock(mutex);
  if (library_ != nullptr) return library_;
  const DriverApi& api = driver();
  CUlibrary lib = nullptr;
  const CUresult r =
      api.cuLibraryLoadData(&lib, program.binary.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
  if (r != CUDA_SUCCESS) {
    throw DriverError(r, "loading module '" + program.program_name + "' (" + program.arch.name() +
                             (program.kind == BinaryKind::ptx ? ", PTX" : "") + ", key " +
                             key.hex().substr(0, 16) + "): " + driver_error_string(r));
  }
  library_ = lib;
  return library_;
}

namespace {

std::string available_names(const ModuleState& m, const DriverApi& api, CUlibrary lib) {
  std::string out;
  for (const auto& [expr, lowered] : m.program.lowered_names) {
    out += (out.empty() ? "" : ", ") + ("'" + expr + "'");
  }
  unsigned count = 0;
  if (api.cuLibraryGetKernelCount && api.cuLibraryEnumerateKernels && api.cuKernelGetName &&
      api.cuLibraryGetKernelCount(&count, lib) == CUDA_SUCCESS && count > 0 && count < 4096) {
    std::vector<CUkernel> kernels(count);
    if (api.cuLibraryEnumerateKernels(kernels.data(), count, lib) == CUDA_SUCCESS) {
      for (CUkernel k : kernels) {
        const char* name = nullptr;
        if (api.cuKernelGetName(&name, k) == CUDA_SUCCESS && name)
          out += (out.empty() ? "" : ", ") + std::string("'") + name + "'";
      }
    }
  }
  return out.empty() ? "none" : out;
}

}  // namespace
}  // namespace detail

// ---- Module ------------------------------------------------------------------------------------

Module::Module(std::shared_ptr<detail::ModuleState> state) : state_(std::move(state)) {}

namespace {
const detail::ModuleState& checked(const std::shared_ptr<detail::ModuleState>& s) {
  if (!s) throw InvalidArgument("use of an empty cuinline::Module");
  return *s;
}
}  // namespace

const CompiledProgram& Module::program() const {
  return checked(state_).program;
}
const CacheKey& Module::key() const {
  return checked(state_).key;
}
CacheTier Module::tier() const {
  return checked(state_).tier;
}
void Module::load() const {
  checked(state_).library();
}
bool Module::loaded() const noexcept {
  if (state_ == nullptr) return false;
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->library_ != nullptr;
}

Kernel Module::kernel(std::string_view name_or_expression) const {
  const detail::ModuleState& m = checked(state_);
  const std::string asked(name_or_expression);
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    if (auto it = m.kernels.find(asked); it != m.kernels.end()) {
      Kernel k;
      k.state_ = it->second;
      return k;
    }
  }
  if (asked.empty()) throw InvalidArgument("kernel name is empty");
  std::string lowered = asked;
  if (auto from_expr = m.program.lowered_name(asked)) lowered = *from_expr;

  const detail::DriverApi& api = detail::driver();
  const CUlibrary lib = m.library();
  CUkernel handle = nullptr;
  const CUresult r = api.cuLibraryGetKernel(&handle, lib, lowered.c_str());
  if (r == CUDA_ERROR_NOT_FOUND || r == CUDA_ERROR_INVALID_VALUE) {
    throw InvalidArgument("module '" + m.program.program_name + "' has no kernel '" + asked +
                          "'; available: " + detail::available_names(m, api, lib));
  }
  check_driver(r, ("getting kernel '" + asked + "' of module '" + m.program.program_name + "'").c_str());

  auto state = std::make_shared<detail::KernelState>();
  state->module = state_;
  state->api = &api;
  state->kernel = handle;
  state->name = asked;
  state->lowered_name = lowered;
  if (api.cuKernelGetParamInfo != nullptr) {
    // The query needs a current context. CUDA_ERROR_INVALID_VALUE marks the end of the list; any
    // other error leaves the count unknown (-1) rather than wrongly zero.
    detail::ensure_current_context();
    for (std::size_t i = 0;; ++i) {
      std::size_t offset = 0, size = 0;
      const CUresult pr = api.cuKernelGetParamInfo(handle, i, &offset, &size);
      if (pr == CUDA_SUCCESS) {
        state->param_sizes.push_back(size);
        continue;
      }
      if (pr == CUDA_ERROR_INVALID_VALUE) state->param_count = static_cast<int>(state->param_sizes.size());
      break;
    }
    if (state->param_count < 0) state->param_sizes.clear();
  }

  std::lock_guard<std::mutex> lock(m.mutex);
  auto [it, inserted] = m.kernels.emplace(asked, std::move(state));
  Kernel k;
  k.state_ = it->second;
  return k;
}

// ---- Kernel ------------------------------------------------------------------------------------

namespace {
const detail::KernelState& checked(const std::shared_ptr<const detail::KernelState>& s) {
  if (!s) throw InvalidArgument("use of an empty cuinline::Kernel");
  return *s;
}
}  // namespace

void Kernel::launch_raw(const LaunchConfig& cfg, void** args, std::size_t count,
                        const std::size_t* sizes) const {
  const detail::KernelState& k = checked(state_);
  if (k.param_count >= 0) {
    if (count != static_cast<std::size_t>(k.param_count)) {
      throw InvalidArgument("launching '" + k.name + "': " + std::to_string(count) +
                            " argument(s) given, the kernel takes " + std::to_string(k.param_count));
    }
    if (sizes != nullptr) {
      for (std::size_t i = 0; i < count; ++i) {
        if (sizes[i] != k.param_sizes[i]) {
          throw InvalidArgument("launching '" + k.name + "': argument " + std::to_string(i) + " is " +
                                std::to_string(sizes[i]) + " bytes, the kernel's parameter is " +
                                std::to_string(k.param_sizes[i]) + " bytes");
        }
      }
    }
  }
  // With a stream the driver takes the context from it; the null stream needs a current context.
  if (cfg.stream == nullptr) {
    CUcontext ctx = nullptr;
    if (k.api->cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || ctx == nullptr) detail::ensure_current_context();
  }
  const CUresult r = k.api->cuLaunchKernel(reinterpret_cast<CUfunction>(k.kernel), cfg.grid.x, cfg.grid.y,
                                           cfg.grid.z, cfg.block.x, cfg.block.y, cfg.block.z,
                                           cfg.shared_bytes, cfg.stream, args, nullptr);
  if (r != CUDA_SUCCESS) {
    throw DriverError(r, "launching '" + k.name + "' (grid " + std::to_string(cfg.grid.x) + "x" +
                             std::to_string(cfg.grid.y) + "x" + std::to_string(cfg.grid.z) + ", block " +
                             std::to_string(cfg.block.x) + "x" + std::to_string(cfg.block.y) + "x" +
                             std::to_string(cfg.block.z) + ", " + std::to_string(cfg.shared_bytes) +
                             " B shared): " + driver_error_string(r));
  }
}

CUfunction Kernel::function(int device) const {
  const detail::KernelState& k = checked(state_);
  CUfunction f = nullptr;
  // The device's primary context for the call only: the caller's current context stays as it was.
  if (device >= 0) {
    detail::ScopedContext scope(detail::primary_context(device));
    check_driver(k.api->cuKernelGetFunction(&f, k.kernel),
                 ("getting the function of kernel '" + k.name + "'").c_str());
    return f;
  }
  detail::ensure_current_context();
  check_driver(k.api->cuKernelGetFunction(&f, k.kernel),
               ("getting the function of kernel '" + k.name + "'").c_str());
  return f;
}

void Kernel::set_max_dynamic_shared_bytes(unsigned bytes, int device) const {
  const detail::KernelState& k = checked(state_);
  const int dev = device >= 0 ? device : current_device();
  CUdevice handle = 0;
  check_driver(k.api->cuDeviceGet(&handle, dev), "getting device");
  check_driver(k.api->cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                           static_cast<int>(bytes), k.kernel, handle),
               ("setting the dynamic shared memory limit of '" + k.name + "'").c_str());
}

void Kernel::allow_non_portable_clusters(int device) const {
  const detail::KernelState& k = checked(state_);
  const int dev = device >= 0 ? device : current_device();
  CUdevice handle = 0;
  check_driver(k.api->cuDeviceGet(&handle, dev), "getting device");
  check_driver(
      k.api->cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1, k.kernel, handle),
      ("allowing clusters past the portable size for '" + k.name + "'").c_str());
}

LaunchConfig Kernel::occupancy_config(std::size_t work_items, CUstream stream, unsigned shared_bytes,
                                      bool grid_stride) const {
  const detail::KernelState& k = checked(state_);
  const int dev = stream_device(stream);
  const CUfunction f = function(dev);
  int min_grid = 0, block = 0;
  check_driver(k.api->cuOccupancyMaxPotentialBlockSize(&min_grid, &block, f, nullptr, shared_bytes, 0),
               ("computing the occupancy of '" + k.name + "'").c_str());
  if (block <= 0) block = 128;
  LaunchConfig cfg;
  cfg.block = Dim3(static_cast<unsigned>(block));
  cfg.shared_bytes = shared_bytes;
  cfg.stream = stream;
  std::size_t blocks = std::max<std::size_t>(1, (work_items + block - 1) / block);
  if (grid_stride && min_grid > 0) blocks = std::min<std::size_t>(blocks, static_cast<std::size_t>(min_grid));
  blocks = std::min<std::size_t>(blocks, 0x7fffffffu);
  cfg.grid = Dim3(static_cast<unsigned>(blocks));
  return cfg;
}

int Kernel::max_active_blocks(unsigned block_threads, unsigned shared_bytes, int device) const {
  const detail::KernelState& k = checked(state_);
  int blocks = 0;
  check_driver(k.api->cuOccupancyMaxActiveBlocksPerMultiprocessor(
                   &blocks, function(device), static_cast<int>(block_threads), shared_bytes),
               ("computing the occupancy of '" + k.name + "'").c_str());
  return blocks;
}

int Kernel::max_active_clusters(const LaunchConfig& cfg, int device) const {
  const detail::KernelState& k = checked(state_);
  if (k.api->cuOccupancyMaxActiveClusters == nullptr) return -1;
  CUlaunchConfig config{};
  config.gridDimX = cfg.grid.x;
  config.gridDimY = cfg.grid.y;
  config.gridDimZ = cfg.grid.z;
  config.blockDimX = cfg.block.x;
  config.blockDimY = cfg.block.y;
  config.blockDimZ = cfg.block.z;
  config.sharedMemBytes = cfg.shared_bytes;
  int clusters = 0;  // the cluster's size is the kernel's own (__cluster_dims__): no attribute
  const CUresult r = k.api->cuOccupancyMaxActiveClusters(&clusters, function(device), &config);
  return r == CUDA_SUCCESS ? clusters : -1;
}

const std::string& Kernel::name() const {
  return checked(state_).name;
}
const std::string& Kernel::lowered_name() const {
  return checked(state_).lowered_name;
}
int Kernel::param_count() const {
  return checked(state_).param_count;
}
CUkernel Kernel::handle() const {
  return checked(state_).kernel;
}

}  // namespace cuinline
