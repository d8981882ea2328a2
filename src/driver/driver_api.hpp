#pragma once
// The CUDA driver entry points cuinline uses, resolved at run time from libcuda.so.1 (dlopen +
// cuGetProcAddress). Nothing links libcuda, so cuinline starts on machines without a driver.
#include <cuda.h>
#include <cudaTypedefs.h>

#include <string>

namespace cuinline::detail {

// X(name, version): `name` is the cuda.h spelling (cuda.h may #define it to a versioned symbol such as
// cuMemAlloc_v2, which decltype follows); `version` is the ABI version of that prototype, the NNNN of
// cudaTypedefs.h's PFN_name_vNNNN. cuGetProcAddress is asked for exactly that version: asking for
// CUDA_VERSION would return the newest ABI (cuCtxGetDevice → the two-argument cuCtxGetDevice_v2 of
// CUDA 13), whose signature differs. driver_api.cpp static_asserts that each pair matches.
#define CUINLINE_DRIVER_FUNCTIONS(X)                   \
  X(cuInit, 2000)                                      \
  X(cuDriverGetVersion, 2020)                          \
  X(cuGetErrorName, 6000)                              \
  X(cuGetErrorString, 6000)                            \
  X(cuDeviceGet, 2000)                                 \
  X(cuDeviceGetCount, 2000)                            \
  X(cuDeviceGetName, 2000)                             \
  X(cuDeviceGetAttribute, 2000)                        \
  X(cuDeviceTotalMem, 3020)                            \
  X(cuDevicePrimaryCtxRetain, 7000)                    \
  X(cuCtxSetCurrent, 4000)                             \
  X(cuCtxGetCurrent, 4000)                             \
  X(cuCtxGetDevice, 2000)                              \
  X(cuCtxPushCurrent, 4000)                            \
  X(cuCtxPopCurrent, 4000)                             \
  X(cuCtxSynchronize, 2000)                            \
  X(cuLibraryLoadData, 12000)                          \
  X(cuLibraryUnload, 12000)                            \
  X(cuLibraryGetKernel, 12000)                         \
  X(cuLibraryGetKernelCount, 12040)                    \
  X(cuLibraryEnumerateKernels, 12040)                  \
  X(cuKernelGetFunction, 12000)                        \
  X(cuKernelGetName, 12030)                            \
  X(cuKernelGetParamInfo, 12040)                       \
  X(cuKernelGetAttribute, 12000)                       \
  X(cuKernelSetAttribute, 12000)                       \
  X(cuLaunchKernel, 4000)                              \
  X(cuOccupancyMaxPotentialBlockSize, 6050)            \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor, 6050) \
  X(cuOccupancyMaxActiveClusters, 11070)               \
  X(cuStreamGetCtx, 9020)                              \
  X(cuStreamGetDevice, 12080)                          \
  X(cuStreamCreate, 2000)                              \
  X(cuStreamDestroy, 4000)                             \
  X(cuStreamSynchronize, 2000)                         \
  X(cuStreamBeginCapture, 10010)                       \
  X(cuStreamEndCapture, 10000)                         \
  X(cuGraphInstantiateWithFlags, 11040)                \
  X(cuGraphLaunch, 10000)                              \
  X(cuGraphDestroy, 10000)                             \
  X(cuGraphExecDestroy, 10000)                         \
  X(cuEventCreate, 2000)                               \
  X(cuEventDestroy, 4000)                              \
  X(cuEventRecord, 2000)                               \
  X(cuEventSynchronize, 2000)                          \
  X(cuEventElapsedTime, 12080)                         \
  X(cuMemAlloc, 3020)                                  \
  X(cuMemFree, 3020)                                   \
  X(cuMemcpyHtoD, 3020)                                \
  X(cuMemcpyDtoH, 3020)                                \
  X(cuMemsetD32, 3020)                                 \
  X(cuMemcpyDtoDAsync, 3020)                           \
  X(cuPointerGetAttribute, 4000)                       \
  X(cuPointerGetAttributes, 7000)                      \
  X(cuStreamIsCapturing, 10000)                        \
  X(cuThreadExchangeStreamCaptureMode, 10010)          \
  X(cuMemHostRegister, 6050)                           \
  X(cuMemHostUnregister, 4000)                         \
  X(cuMemAllocManaged, 6000)                           \
  X(cuDeviceCanAccessPeer, 4000)                       \
  X(cuCtxEnablePeerAccess, 4000)                       \
  X(cuCtxDisablePeerAccess, 4000)                      \
  X(cuMemsetD32Async, 3020)                            \
  X(cuMemGetAccess, 10020)                             \
  X(cuMemPoolCreate, 11020)                            \
  X(cuMemPoolDestroy, 11020)                           \
  X(cuMemPoolSetAttribute, 11020)                      \
  X(cuMemAllocFromPoolAsync, 11020)                    \
  X(cuMemFreeAsync, 11020)                             \
  X(cuTensorMapEncodeTiled, 12000)                     \
  X(cuTensorMapEncodeIm2col, 12000)

struct DriverApi {
#define CUINLINE_DECLARE_DRIVER_FN(name, version) decltype(&::name) name = nullptr;
  CUINLINE_DRIVER_FUNCTIONS(CUINLINE_DECLARE_DRIVER_FN)
#undef CUINLINE_DECLARE_DRIVER_FN
  // cuCtxGetDevice's CUDA 13 ABI (the device of a given context, not of the current one): resolved
  // by hand because its cuda.h name, cuCtxGetDevice_v2, is not a name cuGetProcAddress takes. Null
  // on older drivers.
  PFN_cuCtxGetDevice_v13000 cuCtxGetDeviceOf = nullptr;
};

// The loaded driver (libcuda loaded, entry points resolved, cuInit done), or nullptr. Loads on the
// first call; never throws.
const DriverApi* driver_or_null() noexcept;

// The loaded driver; throws DriverError("no CUDA driver found (libcuda.so.1): ...") otherwise.
const DriverApi& driver();

// Whether the process has the CUDA driver loaded already (libcuda.so.1 is in it: this library or
// the application, e.g. PyTorch's first CUDA call, loaded it). Loads and initializes nothing.
bool driver_in_use() noexcept;

// Why driver_or_null() is null ("" when it is not).
const std::string& driver_load_error();

// The primary context of `ordinal`, retained once for the life of the process.
CUcontext primary_context(int ordinal);

// Makes sure the calling thread has a current context (device 0's primary context if none).
void ensure_current_context();

// The device of a context (capture-safe: no call the driver forbids while a stream is captured).
int context_device(CUcontext ctx);

// Makes `ctx` current on the calling thread for the scope, then restores the previous one
// (cuCtxPushCurrent / cuCtxPopCurrent: allowed while a stream is being captured).
class ScopedContext {
 public:
  explicit ScopedContext(CUcontext ctx);
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;

 private:
  bool pushed_ = false;
};

// Relaxes the calling thread's stream-capture interaction mode for the scope
// (cuThreadExchangeStreamCaptureMode), then restores it. A call the driver counts as "potentially
// unsafe" during a capture (creating a memory pool, setting its attributes) made while any thread
// captures in global mode — PyTorch's torch.cuda.graph default — fails with
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED *and invalidates that capture*; in relaxed mode it is
// allowed. Only for calls that neither touch nor wait on a stream. Never throws.
class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode() noexcept;
  ~RelaxedCaptureMode();
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  CUstreamCaptureMode previous_ = CU_STREAM_CAPTURE_MODE_GLOBAL;
  bool exchanged_ = false;
};

}  // namespace cuinline::detail
