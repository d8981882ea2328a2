#include "driver/driver_api.hpp"

#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <array>
#include <memory>
#include <mutex>
#include <type_traits>

#include "common/log.hpp"
#include "cuinline/driver.hpp"
#include "cuinline/error.hpp"

namespace cuinline::detail {
namespace {

#define CUINLINE_CHECK_DRIVER_ABI(name, version)                            \
  static_assert(std::is_same_v<decltype(&::name), PFN_##name##_v##version>, \
                #name ": the version in CUINLINE_DRIVER_FUNCTIONS does not match cuda.h");
CUINLINE_DRIVER_FUNCTIONS(CUINLINE_CHECK_DRIVER_ABI)
#undef CUINLINE_CHECK_DRIVER_ABI

struct LoadedDriver {
  DriverApi api;
  bool ok = false;
  std::string error;
};

using GetProcAddress = CUresult(CUDAAPI*)(const char*, void**, int, cuuint64_t,
                                          CUdriverProcAddressQueryResult*);

// Functions cuinline can do without (it falls back or reports "unknown") when an older driver
// lacks them.
bool optional_symbol(const char* name) {
  static constexpr std::array<const char*, 6> kOptional = {
      "cuKernelGetParamInfo",      "cuStreamGetDevice", "cuLibraryGetKernelCount",
      "cuLibraryEnumerateKernels", "cuKernelGetName",   "cuOccupancyMaxActiveClusters"};
  for (const char* n : kOptional) {
    if (std::string_view(n) == name) return true;
  }
  return false;
}

LoadedDriver load_driver() {
  LoadedDriver d;
  // The handle is deliberately never closed: entry points stay valid for the life of the process.
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    d.error = std::string("no CUDA driver found (libcuda.so.1): ") + (why ? why : "dlopen failed");
    return d;
  }
  auto get_proc = reinterpret_cast<GetProcAddress>(dlsym(handle, "cuGetProcAddress_v2"));
  if (get_proc == nullptr) {
    d.error =
        "no CUDA driver found (libcuda.so.1): the driver is too old (no cuGetProcAddress_v2; "
        "CUDA 12.5 or newer is needed)";
    return d;
  }
  std::string missing;
  auto resolve = [&](const char* name, int version, void** slot) {
    CUdriverProcAddressQueryResult status{};
    const CUresult r = get_proc(name, slot, version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &status);
    if (r != CUDA_SUCCESS || *slot == nullptr) {
      *slot = nullptr;
      if (!optional_symbol(name)) missing += std::string(missing.empty() ? "" : ", ") + name;
    }
  };
#define CUINLINE_RESOLVE_DRIVER_FN(name, version) \
  resolve(#name, version, reinterpret_cast<void**>(&d.api.name));
  CUINLINE_DRIVER_FUNCTIONS(CUINLINE_RESOLVE_DRIVER_FN)
#undef CUINLINE_RESOLVE_DRIVER_FN
  {
    CUdriverProcAddressQueryResult status{};
    void* slot = nullptr;
    if (get_proc("cuCtxGetDevice", &slot, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &status) == CUDA_SUCCESS &&
        status == CU_GET_PROC_ADDRESS_SUCCESS) {
      d.api.cuCtxGetDeviceOf = reinterpret_cast<PFN_cuCtxGetDevice_v13000>(slot);
    }
  }
  if (!missing.empty()) {
    d.error = "CUDA driver (libcuda.so.1) lacks entry points cuinline needs: " + missing;
    return d;
  }
  const CUresult init = d.api.cuInit(0);
  if (init != CUDA_SUCCESS) {
    const char* name = nullptr;
    d.api.cuGetErrorName(init, &name);
    d.error = std::string("CUDA driver (libcuda.so.1) failed to initialize: cuInit returned ") +
              (name ? name : std::to_string(static_cast<int>(init)));
    return d;
  }
  d.ok = true;
  return d;
}

const LoadedDriver& loaded() {
  static const LoadedDriver d = [] {
    LoadedDriver r = load_driver();
    if (!r.ok) logger()->debug("{}", r.error);
    return r;
  }();
  return d;
}

}  // namespace

const DriverApi* driver_or_null() noexcept {
  try {
    const LoadedDriver& d = loaded();
    return d.ok ? &d.api : nullptr;
  } catch (...) {
    return nullptr;
  }
}

const DriverApi& driver() {
  const LoadedDriver& d = loaded();
  if (!d.ok) {
    throw DriverError(d.error.rfind("no CUDA driver", 0) == 0 ? CUDA_ERROR_SHARED_OBJECT_INIT_FAILED
                                                              : CUDA_ERROR_NOT_INITIALIZED,
                      d.error);
  }
  return d.api;
}

bool driver_in_use() noexcept {
  void* handle = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
  if (handle == nullptr) return false;
  dlclose(handle);  // (RTLD_NOLOAD took a reference)
  return true;
}

const std::string& driver_load_error() {
  return loaded().error;
}

CUcontext primary_context(int ordinal) {
  const DriverApi& api = driver();
  static std::mutex mutex;
  static std::array<CUcontext, 64> contexts{};
  if (ordinal < 0 || ordinal >= static_cast<int>(contexts.size())) {
    throw InvalidArgument("device ordinal " + std::to_string(ordinal) + " is out of range");
  }
  std::lock_guard<std::mutex> lock(mutex);
  if (contexts[ordinal] == nullptr) {
    int count = 0;
    check_driver(api.cuDeviceGetCount(&count), "counting devices");
    if (ordinal >= count) {
      throw InvalidArgument("device " + std::to_string(ordinal) + " does not exist (" +
                            std::to_string(count) + " device(s))");
    }
    CUdevice dev = 0;
    check_driver(api.cuDeviceGet(&dev, ordinal), "getting device");
    CUcontext ctx = nullptr;
    // Retained for the life of the process: releasing at exit races the driver's own teardown.
    check_driver(api.cuDevicePrimaryCtxRetain(&ctx, dev), "retaining the primary context");
    contexts[ordinal] = ctx;
  }
  return contexts[ordinal];
}

ScopedContext::ScopedContext(CUcontext ctx) {
  const DriverApi& api = driver();
  CUcontext current = nullptr;
  if (api.cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == ctx) return;
  check_driver(api.cuCtxPushCurrent(ctx), "making a device's context current");
  pushed_ = true;
}

ScopedContext::~ScopedContext() {
  if (!pushed_) return;
  CUcontext popped = nullptr;
  driver().cuCtxPopCurrent(&popped);
}

RelaxedCaptureMode::RelaxedCaptureMode() noexcept {
  const DriverApi* api = driver_or_null();
  if (api == nullptr || api->cuThreadExchangeStreamCaptureMode == nullptr) return;
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  if (api->cuThreadExchangeStreamCaptureMode(&mode) != CUDA_SUCCESS) return;
  previous_ = mode;
  exchanged_ = true;
}

RelaxedCaptureMode::~RelaxedCaptureMode() {
  if (!exchanged_) return;
  CUstreamCaptureMode mode = previous_;
  driver().cuThreadExchangeStreamCaptureMode(&mode);
}

void ensure_current_context() {
  const DriverApi& api = driver();
  CUcontext ctx = nullptr;
  check_driver(api.cuCtxGetCurrent(&ctx), "getting the current context");
  if (ctx == nullptr) check_driver(api.cuCtxSetCurrent(primary_context(0)), "setting the current context");
}

}  // namespace cuinline::detail
