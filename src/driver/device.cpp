#include <atomic>
#include <mutex>
#include <string>
#include <utility>

#include "common/log.hpp"
#include "cuinline/driver.hpp"
#include "cuinline/error.hpp"
#include "driver/driver_api.hpp"

namespace cuinline {

using detail::driver;
using detail::driver_or_null;

std::string driver_error_string(CUresult code) {
  const detail::DriverApi* api = driver_or_null();
  const char* name = nullptr;
  const char* text = nullptr;
  if (api != nullptr) {
    if (api->cuGetErrorName(code, &name) != CUDA_SUCCESS) name = nullptr;
    if (api->cuGetErrorString(code, &text) != CUDA_SUCCESS) text = nullptr;
  }
  // Never build a string from a null pointer: fall back to the number.
  std::string out = name ? name : "CUDA error " + std::to_string(static_cast<int>(code));
  if (text) out += std::string(" (") + text + ")";
  return out;
}

void check_driver(CUresult code, const char* what) {
  if (code != CUDA_SUCCESS) throw DriverError(code, std::string(what) + ": " + driver_error_string(code));
}

bool driver_available() noexcept {
  return driver_or_null() != nullptr;
}

std::string driver_unavailable_reason() {
  return detail::driver_load_error();
}

int device_count() noexcept {
  const detail::DriverApi* api = driver_or_null();
  int count = 0;
  if (api == nullptr || api->cuDeviceGetCount(&count) != CUDA_SUCCESS) return 0;
  return count;
}

int driver_version() {
  int version = 0;
  check_driver(driver().cuDriverGetVersion(&version), "getting the driver version");
  return version;
}

namespace {

int attribute(CUdevice dev, CUdevice_attribute attr, const char* what) {
  int value = 0;
  check_driver(driver().cuDeviceGetAttribute(&value, attr, dev), what);
  return value;
}

CUdevice device_handle(int ordinal) {
  const int count = device_count();
  if (ordinal < 0 || ordinal >= count) {
    if (!driver_available()) driver();  // throws the "no CUDA driver" error
    throw InvalidArgument("device " + std::to_string(ordinal) + " does not exist (" + std::to_string(count) +
                          " device(s))");
  }
  CUdevice dev = 0;
  check_driver(driver().cuDeviceGet(&dev, ordinal), "getting device");
  return dev;
}

}  // namespace

Arch device_arch(int ordinal) {
  // Asked on every op call (the arch picks the binary), so cached per device.
  static std::mutex mutex;
  static Arch cached[64];
  if (ordinal >= 0 && ordinal < 64) {
    std::lock_guard<std::mutex> lock(mutex);
    if (cached[ordinal].major != 0) return cached[ordinal];
  }
  const CUdevice dev = device_handle(ordinal);
  Arch arch;
  arch.major = attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "reading the compute capability");
  arch.minor = attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "reading the compute capability");
  if (ordinal >= 0 && ordinal < 64) {
    std::lock_guard<std::mutex> lock(mutex);
    cached[ordinal] = arch;
  }
  return arch;
}

DeviceInfo device_info(int ordinal) {
  const CUdevice dev = device_handle(ordinal);
  DeviceInfo info;
  info.ordinal = ordinal;
  char name[256] = {};
  check_driver(driver().cuDeviceGetName(name, sizeof(name) - 1, dev), "reading the device name");
  info.name = name;
  info.arch = device_arch(ordinal);
  info.multiprocessors = attribute(dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "reading the SM count");
  info.l2_bytes =
      static_cast<std::size_t>(attribute(dev, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "reading L2 size"));
  info.max_threads_per_multiprocessor =
      attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, "reading threads per SM");
  info.max_shared_per_block_optin = static_cast<std::size_t>(attribute(
      dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "reading shared memory per block"));
  int clock_khz = 0, bus_bits = 0;  // (optional: 0 where a driver does not report them)
  if (driver().cuDeviceGetAttribute(&clock_khz, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, dev) == CUDA_SUCCESS &&
      driver().cuDeviceGetAttribute(&bus_bits, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, dev) == CUDA_SUCCESS) {
    info.memory_bandwidth = 2.0 * clock_khz * 1000.0 * bus_bits / 8.0;
  }
  std::size_t total = 0;
  check_driver(driver().cuDeviceTotalMem(&total, dev), "reading total memory");
  info.total_memory = total;
  return info;
}

void set_device(int ordinal) {
  check_driver(driver().cuCtxSetCurrent(detail::primary_context(ordinal)), "making the device current");
}

int current_device() {
  detail::ensure_current_context();
  CUdevice dev = 0;
  check_driver(driver().cuCtxGetDevice(&dev), "getting the current device");
  return static_cast<int>(dev);
}

int stream_device(CUstream stream) {
  if (stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD)
    return current_device();
  // Capture-safe: the driver refuses cuStreamGetDevice (and cuStreamGetId / GetFlags / Query) on a
  // stream that is being captured and invalidates the capture, in every capture mode; cuStreamGetCtx
  // and the context's device are allowed (bench/capture_probe.cpp, docs/graphs.md).
  const detail::DriverApi& api = driver();
  CUcontext ctx = nullptr;
  check_driver(api.cuStreamGetCtx(stream, &ctx), "getting the stream's context");
  return detail::context_device(ctx);
}

namespace detail {

int context_device(CUcontext ctx) {
  const DriverApi& api = driver();
  CUdevice dev = 0;
  if (api.cuCtxGetDeviceOf != nullptr) {
    check_driver(api.cuCtxGetDeviceOf(&dev, ctx), "getting the device of the stream's context");
    return static_cast<int>(dev);
  }
  check_driver(api.cuCtxPushCurrent(ctx), "pushing the stream's context");
  const CUresult r = api.cuCtxGetDevice(&dev);
  CUcontext popped = nullptr;
  api.cuCtxPopCurrent(&popped);
  check_driver(r, "getting the stream's device");
  return static_cast<int>(dev);
}

}  // namespace detail

namespace {
constexpr int kMaxPeerDevices = 64;
std::atomic<bool> g_peer_enabled[kMaxPeerDevices][kMaxPeerDevices];
}  // namespace

void enable_peer_access(int device, int peer) {
  if (device < 0 || peer < 0 || device >= kMaxPeerDevices || peer >= kMaxPeerDevices || device == peer) {
    throw InvalidArgument("enable_peer_access(" + std::to_string(device) + ", " + std::to_string(peer) +
                          "): two different device ordinals are needed");
  }
  const detail::DriverApi& api = driver();
  int can = 0;
  check_driver(api.cuDeviceCanAccessPeer(&can, device, peer), "asking whether peer access is possible");
  if (!can) {
    throw DriverError(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "device " + std::to_string(device) +
                                                              " cannot access the memory of device " +
                                                              std::to_string(peer));
  }
  detail::ScopedContext scope(detail::primary_context(device));
  const CUresult r = api.cuCtxEnablePeerAccess(detail::primary_context(peer), 0);
  if (r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) check_driver(r, "enabling peer access");
  g_peer_enabled[device][peer].store(true, std::memory_order_release);
}

bool peer_access_enabled(int device, int peer) noexcept {
  if (device < 0 || peer < 0 || device >= kMaxPeerDevices || peer >= kMaxPeerDevices) return false;
  return g_peer_enabled[device][peer].load(std::memory_order_acquire);
}

// ---- DeviceBuffer ------------------------------------------------------------------------------

DeviceBuffer::DeviceBuffer(std::size_t bytes, int device) : bytes_(bytes) {
  device_ = device >= 0 ? device : current_device();
  detail::ScopedContext scope(detail::primary_context(device_));
  if (bytes > 0) {
    const CUresult r = driver().cuMemAlloc(&ptr_, bytes);
    if (r != CUDA_SUCCESS) {
      throw DriverError(r, "allocating " + std::to_string(bytes) + " bytes on device " +
                               std::to_string(device_) + ": " + driver_error_string(r));
    }
  }
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_ != 0) {
    const CUresult r = driver().cuMemFree(ptr_);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_DEINITIALIZED) {
      logger()->error("freeing a device buffer: {}", driver_error_string(r));
    }
  }
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, 0)), bytes_(std::exchange(other.bytes_, 0)), device_(other.device_) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    DeviceBuffer old(std::move(*this));
    ptr_ = std::exchange(other.ptr_, 0);
    bytes_ = std::exchange(other.bytes_, 0);
    device_ = other.device_;
  }
  return *this;
}

namespace {
void check_range(std::size_t offset, std::size_t bytes, std::size_t size, const char* what) {
  if (offset > size || bytes > size - offset) {
    throw InvalidArgument(std::string(what) + ": " + std::to_string(bytes) + " bytes at offset " +
                          std::to_string(offset) + " exceed the buffer's " + std::to_string(size) + " bytes");
  }
}
}  // namespace

void DeviceBuffer::copy_from_host(const void* src, std::size_t bytes, std::size_t offset) {
  check_range(offset, bytes, bytes_, "copy to device");
  if (bytes == 0) return;
  detail::ScopedContext scope(detail::primary_context(device_));
  check_driver(driver().cuMemcpyHtoD(ptr_ + offset, src, bytes), "copying host to device");
  // From pageable memory the call may return before the DMA lands; a kernel on a non-blocking
  // stream must not see the old bytes.
  check_driver(driver().cuStreamSynchronize(CU_STREAM_LEGACY), "finishing a copy to the device");
}

void DeviceBuffer::copy_to_host(void* dst, std::size_t bytes, std::size_t offset) const {
  check_range(offset, bytes, bytes_, "copy to host");
  if (bytes == 0) return;
  detail::ScopedContext scope(detail::primary_context(device_));
  check_driver(driver().cuMemcpyDtoH(dst, ptr_ + offset, bytes), "copying device to host");
}

void DeviceBuffer::fill_u32(std::uint32_t pattern) {
  if (bytes_ % 4 != 0) throw InvalidArgument("fill_u32: buffer size is not a multiple of 4 bytes");
  if (bytes_ == 0) return;
  detail::ScopedContext scope(detail::primary_context(device_));
  check_driver(driver().cuMemsetD32(ptr_, pattern, bytes_ / 4), "filling a device buffer");
  // cuMemsetD32 is asynchronous on the legacy stream, which non-blocking streams do not wait for:
  // without this a kernel launched next on such a stream can be overwritten by the fill.
  check_driver(driver().cuStreamSynchronize(CU_STREAM_LEGACY), "finishing a device fill");
}

void DeviceBuffer::fill_u32_async(std::uint32_t pattern, CUstream stream) {
  if (bytes_ % 4 != 0) throw InvalidArgument("fill_u32_async: buffer size is not a multiple of 4 bytes");
  if (bytes_ == 0) return;
  detail::ScopedContext scope(detail::primary_context(device_));
  check_driver(driver().cuMemsetD32Async(ptr_, pattern, bytes_ / 4, stream), "filling a device buffer");
}

void DeviceBuffer::copy_from_async(const DeviceBuffer& src, std::size_t bytes, CUstream stream) {
  check_range(0, bytes, src.bytes_, "copy from a device buffer");
  check_range(0, bytes, bytes_, "copy to a device buffer");
  if (bytes == 0) return;
  detail::ScopedContext scope(detail::primary_context(device_));
  check_driver(driver().cuMemcpyDtoDAsync(ptr_, src.ptr_, bytes, stream), "copying device to device");
}

// ---- Stream / Event ----------------------------------------------------------------------------

Stream::Stream(int device) {
  detail::ScopedContext scope(detail::primary_context(device >= 0 ? device : current_device()));
  check_driver(driver().cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "creating a stream");
}

Stream::~Stream() {
  if (stream_ != nullptr) {
    const CUresult r = driver().cuStreamDestroy(stream_);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_DEINITIALIZED)
      logger()->error("destroying a stream: {}", driver_error_string(r));
  }
}

Stream::Stream(Stream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    Stream old(std::move(*this));
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

void Stream::synchronize() const {
  check_driver(driver().cuStreamSynchronize(stream_), "synchronizing a stream");
}

Event::Event() {
  detail::ensure_current_context();
  check_driver(driver().cuEventCreate(&event_, CU_EVENT_DEFAULT), "creating an event");
}

Event::~Event() {
  if (event_ != nullptr) {
    const CUresult r = driver().cuEventDestroy(event_);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_DEINITIALIZED)
      logger()->error("destroying an event: {}", driver_error_string(r));
  }
}

Event::Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    Event old(std::move(*this));
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

void Event::record(CUstream stream) {
  check_driver(driver().cuEventRecord(event_, stream), "recording an event");
}

void Event::synchronize() const {
  check_driver(driver().cuEventSynchronize(event_), "waiting for an event");
}

// ---- Graph -------------------------------------------------------------------------------------

Graph::~Graph() {
  const detail::DriverApi* api = detail::driver_or_null();
  if (api == nullptr) return;
  if (exec_ != nullptr) api->cuGraphExecDestroy(exec_);
  if (graph_ != nullptr) api->cuGraphDestroy(graph_);
}

Graph::Graph(Graph&& other) noexcept
    : graph_(std::exchange(other.graph_, nullptr)), exec_(std::exchange(other.exec_, nullptr)) {}

Graph& Graph::operator=(Graph&& other) noexcept {
  if (this != &other) {
    Graph old(std::move(*this));
    graph_ = std::exchange(other.graph_, nullptr);
    exec_ = std::exchange(other.exec_, nullptr);
  }
  return *this;
}

void Graph::begin(CUstream stream, CaptureMode mode) {
  if (stream == nullptr || stream == CU_STREAM_LEGACY) {
    throw InvalidArgument("capturing a graph: the legacy default stream cannot be captured; use a stream of your own");
  }
  const CUstreamCaptureMode m = mode == CaptureMode::global            ? CU_STREAM_CAPTURE_MODE_GLOBAL
                                : mode == CaptureMode::thread_local_mode ? CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
                                                                       : CU_STREAM_CAPTURE_MODE_RELAXED;
  check_driver(driver().cuStreamBeginCapture(stream, m), "beginning a stream capture");
}

void Graph::end(CUstream stream) {
  const detail::DriverApi& api = driver();
  check_driver(api.cuStreamEndCapture(stream, &graph_), "ending a stream capture");
  check_driver(api.cuGraphInstantiateWithFlags(&exec_, graph_, 0), "instantiating a captured graph");
}

void Graph::abandon(CUstream stream) noexcept {
  const detail::DriverApi* api = detail::driver_or_null();
  if (api == nullptr) return;
  CUgraph g = nullptr;
  if (api->cuStreamEndCapture(stream, &g) == CUDA_SUCCESS && g != nullptr) api->cuGraphDestroy(g);
}

void Graph::launch(CUstream stream) const {
  if (exec_ == nullptr) throw InvalidArgument("launching an empty cuinline::Graph");
  check_driver(driver().cuGraphLaunch(exec_, stream), "launching a graph");
}

float Event::elapsed_ms_since(const Event& start) const {
  float ms = 0.0f;
  check_driver(driver().cuEventElapsedTime(&ms, start.event_, event_), "reading elapsed time");
  return ms;
}

}  // namespace cuinline
