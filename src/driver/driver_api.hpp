#pragma once
// The CUDA driver entry points cuinline uses, resolved at run time from libcuda.so.1 (dlopen +
// cuGetProcAddress). Nothing links libcuda, so cuinline starts on machines without a driver.
#include <cuda.h>

#include <string>

namespace cuinline::detail {

// X(name): `name` is the cuda.h spelling; cuda.h may #define it to a versioned symbol (cuMemAlloc →
// cuMemAlloc_v2), which decltype follows, and cuGetProcAddress resolves the un-suffixed name for
// CUDA_VERSION to that same version.
#define CUINLINE_DRIVER_FUNCTIONS(X)                                                                   \
  X(cuInit)                                                                                            \
  X(cuDriverGetVersion)                                                                                \
  X(cuGetErrorName)                                                                                    \
  X(cuGetErrorString)                                                                                  \
  X(cuDeviceGet)                                                                                       \
  X(cuDeviceGetCount)                                                                                  \
  X(cuDeviceGetName)                                                                                   \
  X(cuDeviceGetAttribute)                                                                              \
  X(cuDeviceTotalMem)                                                                                  \
  X(cuDevicePrimaryCtxRetain)                                                                          \
  X(cuCtxSetCurrent)                                                                                   \
  X(cuCtxGetCurrent)                                                                                   \
  X(cuCtxGetDevice)                                                                                    \
  X(cuCtxPushCurrent)                                                                                  \
  X(cuCtxPopCurrent)                                                                                   \
  X(cuCtxSynchronize)                                                                                  \
  X(cuLibraryLoadData)                                                                                 \
  X(cuLibraryUnload)                                                                                   \
  X(cuLibraryGetKernel)                                                                                \
  X(cuLibraryGetKernelCount)                                                                           \
  X(cuLibraryEnumerateKernels)                                                                         \
  X(cuKernelGetFunction)                                                                               \
  X(cuKernelGetName)                                                                                   \
  X(cuKernelGetParamInfo)                                                                              \
  X(cuKernelGetAttribute)                                                                              \
  X(cuKernelSetAttribute)                                                                              \
  X(cuLaunchKernel)                                                                                    \
  X(cuOccupancyMaxPotentialBlockSize)                                                                  \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor)                                                       \
  X(cuStreamGetCtx)                                                                                    \
  X(cuStreamGetDevice)                                                                                 \
  X(cuStreamCreate)                                                                                    \
  X(cuStreamDestroy)                                                                                   \
  X(cuStreamSynchronize)                                                                               \
  X(cuStreamBeginCapture)                                                                              \
  X(cuStreamEndCapture)                                                                                \
  X(cuGraphInstantiateWithFlags)                                                                       \
  X(cuGraphLaunch)                                                                                     \
  X(cuGraphDestroy)                                                                                    \
  X(cuGraphExecDestroy)                                                                                \
  X(cuEventCreate)                                                                                     \
  X(cuEventDestroy)                                                                                    \
  X(cuEventRecord)                                                                                     \
  X(cuEventSynchronize)                                                                                \
  X(cuEventElapsedTime)                                                                                \
  X(cuMemAlloc)                                                                                        \
  X(cuMemFree)                                                                                         \
  X(cuMemcpyHtoD)                                                                                      \
  X(cuMemcpyDtoH)                                                                                      \
  X(cuMemsetD32)                                                                                       \
  X(cuMemcpyDtoDAsync)                                                                                 \
  X(cuPointerGetAttribute)

struct DriverApi {
#define CUINLINE_DECLARE_DRIVER_FN(name) decltype(&::name) name = nullptr;
  CUINLINE_DRIVER_FUNCTIONS(CUINLINE_DECLARE_DRIVER_FN)
#undef CUINLINE_DECLARE_DRIVER_FN
};

// The loaded driver (libcuda loaded, entry points resolved, cuInit done), or nullptr. Loads on the
// first call; never throws.
const DriverApi* driver_or_null() noexcept;

// The loaded driver; throws DriverError("no CUDA driver found (libcuda.so.1): ...") otherwise.
const DriverApi& driver();

// Why driver_or_null() is null ("" when it is not).
const std::string& driver_load_error();

// The primary context of `ordinal`, retained once for the life of the process.
CUcontext primary_context(int ordinal);

// Makes sure the calling thread has a current context (device 0's primary context if none).
void ensure_current_context();

}  // namespace cuinline::detail
