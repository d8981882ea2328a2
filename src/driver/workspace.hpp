#pragma once
// Stream-ordered scratch memory for ops that stage a copy of their inputs (the f16 / bf16 conv's
// channels-last copies): cuMemAllocFromPoolAsync / cuMemFreeAsync on the caller's stream, from one
// memory pool per device that cuinline owns (not the device's default pool, which the application
// may have tuned). Inside a stream capture the two calls become the graph's allocation and free
// nodes (the graph owns that memory), so an op that uses a workspace stays capturable.
//
// The pool keeps up to kWorkspaceKeepBytes of freed memory reserved between calls (its release
// threshold), or the largest workspace asked for so far where that is more (up to an eighth of the
// device's memory), so a steady stream of calls does not map and unmap memory; more is returned to
// the device at the next synchronization.
#include <cuda.h>

#include <cstddef>
#include <cstdint>

namespace cuinline::detail {

inline constexpr std::uint64_t kWorkspaceKeepBytes = 256ull << 20;

/// `bytes` of device memory on `device`, usable by work queued on `stream` after this call, or 0
/// where none can be had (out of memory, no memory-pool support): the caller then takes a path that
/// needs none. Never throws; a failure is logged once a process at warn level with the driver's
/// reason.
CUdeviceptr workspace_alloc(int device, std::size_t bytes, CUstream stream) noexcept;

/// Returns a workspace_alloc block once the work queued on `stream` before this call is done. Never
/// throws (a failure is logged).
void workspace_free(CUdeviceptr ptr, CUstream stream) noexcept;

/// Frees a workspace on scope exit (an exception between the allocation and the last launch).
class WorkspaceGuard {
 public:
  WorkspaceGuard(CUdeviceptr ptr, CUstream stream) noexcept : ptr_(ptr), stream_(stream) {}
  ~WorkspaceGuard() {
    if (ptr_ != 0) workspace_free(ptr_, stream_);
  }
  WorkspaceGuard(const WorkspaceGuard&) = delete;
  WorkspaceGuard& operator=(const WorkspaceGuard&) = delete;

 private:
  CUdeviceptr ptr_;
  CUstream stream_;
};

}  // namespace cuinline::detail
