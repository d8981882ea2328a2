#pragma once
/// @file driver.hpp
/// The CUDA driver, loaded at run time with dlopen (libcuda.so.1), never linked. Everything in
/// cuinline starts on a machine with no driver or GPU; only calls that need the GPU throw
/// DriverError("no CUDA driver found (libcuda.so.1): ...").
///
/// Each device is used through its primary context (the one the CUDA runtime and PyTorch use).

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <cuinline/arch.hpp>
#include <string>

namespace cuinline {

/// True when libcuda could be loaded and cuInit succeeded. Never throws.
bool driver_available() noexcept;
/// Why the driver is not available ("" when it is).
std::string driver_unavailable_reason();
/// Number of CUDA devices; 0 when there is no driver. Never throws.
int device_count() noexcept;
/// The driver's CUDA version, e.g. 13000. Throws DriverError without a driver.
int driver_version();

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  Arch arch;
  int multiprocessors = 0;
  std::size_t l2_bytes = 0;
  std::size_t total_memory = 0;
  int max_threads_per_multiprocessor = 0;
  std::size_t max_shared_per_block_optin = 0;
  /// Peak DRAM bandwidth (bytes/s): 2 x memory clock x bus width; 0 where the driver does not say.
  double memory_bandwidth = 0;
};
DeviceInfo device_info(int ordinal);
/// The architecture of a device (its compute capability as sm_XY).
Arch device_arch(int ordinal);

/// Makes the primary context of `ordinal` current on the calling thread (retaining it for the
/// process's lifetime). cuinline's own calls never change the calling thread's current context
/// (buffers, streams and kernels of another device push and pop that device's context).
void set_device(int ordinal);
/// The device of the calling thread's current context; the primary context of device 0 is made
/// current when there is none.
int current_device();
/// Enables access from kernels on `device` to memory of `peer` (cuCtxEnablePeerAccess in `device`'s
/// primary context; already enabled is fine) and lets cuinline's ops accept tensors of `peer` on
/// streams of `device`. The driver cannot tell whether peer access is enabled for memory from
/// cuMemAlloc (the allocator of the CUDA runtime and of PyTorch's default allocator), so the ops
/// refuse another device's tensor unless this was called, or the memory is a virtual-memory mapping
/// (cuMemMap) whose access for `device` was granted with cuMemSetAccess. Throws DriverError when the
/// two devices cannot access each other.
void enable_peer_access(int device, int peer);
/// Whether enable_peer_access(device, peer) was called in this process.
bool peer_access_enabled(int device, int peer) noexcept;

/// The device a stream belongs to (the current device for the null stream). Allowed while the
/// stream is being captured into a graph: it asks for the stream's context, never for its device
/// (cuStreamGetDevice invalidates a capture in every capture mode; docs/graphs.md).
int stream_device(CUstream stream);

/// Message for a CUresult: "CUDA_ERROR_INVALID_IMAGE (device kernel image is invalid)", falling
/// back to the number when the driver has no string for it.
std::string driver_error_string(CUresult code);

/// A device allocation with one owner (cuMemAlloc / cuMemFree on the primary context).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(std::size_t bytes, int device = -1);  ///< -1: current device
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  CUdeviceptr ptr() const noexcept { return ptr_; }
  template <class T>
  T* as() const noexcept {
    return reinterpret_cast<T*>(ptr_);
  }
  std::size_t bytes() const noexcept { return bytes_; }
  int device() const noexcept { return device_; }

  /// Synchronous copies: the data is in place when they return, for work on any stream.
  void copy_from_host(const void* src, std::size_t bytes, std::size_t offset = 0);
  void copy_to_host(void* dst, std::size_t bytes, std::size_t offset = 0) const;
  /// Fills with a 32-bit pattern (bytes must be a multiple of 4), e.g. to poison outputs; done
  /// when it returns.
  void fill_u32(std::uint32_t pattern);
  /// Enqueue on `stream` and return at once (for work timed on a stream, e.g. a fill that flushes
  /// the L2 between timed calls): a fill with a 32-bit pattern (bytes must be a multiple of 4), and
  /// a copy of the first `bytes` of `src` into this buffer.
  void fill_u32_async(std::uint32_t pattern, CUstream stream);
  void copy_from_async(const DeviceBuffer& src, std::size_t bytes, CUstream stream);

 private:
  CUdeviceptr ptr_ = 0;
  std::size_t bytes_ = 0;
  int device_ = 0;
};

/// A stream with one owner.
class Stream {
 public:
  explicit Stream(int device = -1);
  ~Stream();
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  CUstream get() const noexcept { return stream_; }
  operator CUstream() const noexcept { return stream_; }
  void synchronize() const;

 private:
  CUstream stream_ = nullptr;
};

/// Elapsed device time between two events on a stream (for benchmarks).
class Event {
 public:
  Event();
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(CUstream stream);
  void synchronize() const;
  /// Milliseconds from `start` to this event.
  float elapsed_ms_since(const Event& start) const;
  CUevent get() const noexcept { return event_; }

 private:
  CUevent event_ = nullptr;
};

/// The three stream-capture modes (CUstreamCaptureMode); PyTorch's torch.cuda.graph uses `global`.
enum class CaptureMode { global, thread_local_mode, relaxed };

/// An instantiated CUDA graph (for callers without the CUDA runtime, and for tests): captures what
/// a function enqueues on a stream, then replays it. Every cuinline op and Kernel::launch can be
/// captured (docs/graphs.md).
class Graph {
 public:
  Graph() = default;
  ~Graph();
  Graph(Graph&& other) noexcept;
  Graph& operator=(Graph&& other) noexcept;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  /// Captures everything `work()` enqueues on `stream` in `mode`, then instantiates it. If `work`
  /// throws, the capture is ended and discarded (the stream is no longer capturing) and the
  /// exception propagates. `stream` must not be the legacy default stream.
  template <class Work>
  static Graph capture(CUstream stream, Work&& work, CaptureMode mode = CaptureMode::global) {
    Graph g;
    g.begin(stream, mode);
    try {
      work();
    } catch (...) {
      g.abandon(stream);
      throw;
    }
    g.end(stream);
    return g;
  }

  /// Enqueues one replay on `stream`.
  void launch(CUstream stream) const;
  explicit operator bool() const noexcept { return exec_ != nullptr; }

 private:
  void begin(CUstream stream, CaptureMode mode);
  void end(CUstream stream);
  void abandon(CUstream stream) noexcept;
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
};

/// Throws DriverError if `code` is not CUDA_SUCCESS, the message "<what>: <driver_error_string>".
void check_driver(CUresult code, const char* what);

}  // namespace cuinline
