// Stream-ordered scratch memory from one cuinline-owned memory pool per device (workspace.hpp).
#include "driver/workspace.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cuinline/driver.hpp>
#include <mutex>
#include <string>
#include <vector>

#include "common/log.hpp"
#include "driver/driver_api.hpp"

namespace cuinline::detail {
namespace {

// A failure worth telling once a process (a pool that cannot be made, memory that cannot be had):
// later calls take the fallback path quietly.
void warn_once(const std::string& what) noexcept {
  static std::atomic<bool> told{false};
  if (told.exchange(true)) return;
  try {
    logger()->warn("{} (ops that stage a copy of their inputs use their direct kernels instead)", what);
  } catch (...) {
  }
}

// One device's pool and how much freed memory it keeps (its release threshold).
struct Pool {
  CUmemoryPool pool = nullptr;
  bool tried = false;
  std::uint64_t keep = 0;      // the release threshold set
  std::uint64_t keep_max = 0;  // the most it may be raised to: an eighth of the device's memory
};

std::mutex& pools_mutex() {
  static auto* m = new std::mutex;
  return *m;
}
std::vector<Pool>& pools() {
  static auto* p = new std::vector<Pool>;
  return *p;
}

// The pool of each device, made on first use and never destroyed (launches may run during static
// teardown; the driver frees it with the process). nullptr where it cannot be made. Where `bytes`
// is more than the pool keeps, its release threshold is raised to it (up to an eighth of the
// device's memory): a steady stream of calls that each need that much then reuses one mapping
// instead of mapping and unmapping it every call (587 MB: ~0.5 ms a call on an H200).
//
// The pool is often first asked for inside a CUDA-graph capture (an op's first call captured, as
// torch.cuda.graph does): pool creation and its attributes are calls the driver refuses during a
// global-mode capture, and a refused one would invalidate the caller's capture, so they run with the
// thread's capture mode relaxed (they touch no stream).
CUmemoryPool device_pool(const DriverApi& api, int device, std::size_t bytes) {
  std::lock_guard<std::mutex> lock(pools_mutex());
  const RelaxedCaptureMode relaxed;
  std::vector<Pool>& all = pools();
  if (device >= static_cast<int>(all.size())) all.resize(static_cast<std::size_t>(device) + 1);
  Pool& p = all[static_cast<std::size_t>(device)];
  if (p.tried) {
    if (p.pool != nullptr && bytes > p.keep && p.keep < p.keep_max) {
      cuuint64_t keep = std::min<std::uint64_t>(bytes, p.keep_max);
      if (api.cuMemPoolSetAttribute(p.pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep) == CUDA_SUCCESS) p.keep = keep;
    }
    return p.pool;
  }
  p.tried = true;
  CUdevice handle = 0;
  int supported = 0;
  if (api.cuDeviceGet(&handle, device) != CUDA_SUCCESS ||
      api.cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, handle) != CUDA_SUCCESS ||
      supported == 0) {
    warn_once("device " + std::to_string(device) + " has no stream-ordered memory pools");
    return nullptr;
  }
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = device;
  CUmemoryPool pool = nullptr;
  const CUresult r = api.cuMemPoolCreate(&pool, &props);
  if (r != CUDA_SUCCESS) {
    warn_once("creating a workspace memory pool on device " + std::to_string(device) + ": " +
              driver_error_string(r));
    return nullptr;
  }
  std::size_t total = 0;
  p.keep_max = api.cuDeviceTotalMem(&total, handle) == CUDA_SUCCESS ? total / 8 : kWorkspaceKeepBytes;
  cuuint64_t keep = std::max<std::uint64_t>(kWorkspaceKeepBytes, std::min<std::uint64_t>(bytes, p.keep_max));
  if (api.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep) == CUDA_SUCCESS) p.keep = keep;
  p.pool = pool;
  return pool;
}

}  // namespace

CUdeviceptr workspace_alloc(int device, std::size_t bytes, CUstream stream) noexcept {
  try {
    const DriverApi& api = driver();
    if (stream == nullptr) ensure_current_context();  // the legacy stream of the current context
    CUmemoryPool pool = device_pool(api, device, bytes);
    if (pool == nullptr) return 0;
    CUdeviceptr ptr = 0;
    const CUresult r = api.cuMemAllocFromPoolAsync(&ptr, bytes, pool, stream);
    if (r != CUDA_SUCCESS) {
      warn_once("a " + std::to_string(bytes) + "-byte workspace on device " + std::to_string(device) +
                " could not be allocated: " + driver_error_string(r));
      return 0;
    }
    return ptr;
  } catch (...) {
    return 0;
  }
}

void workspace_free(CUdeviceptr ptr, CUstream stream) noexcept {
  try {
    const CUresult r = driver().cuMemFreeAsync(ptr, stream);
    if (r != CUDA_SUCCESS) logger()->warn("freeing a workspace: {}", driver_error_string(r));
  } catch (...) {
  }
}

}  // namespace cuinline::detail
