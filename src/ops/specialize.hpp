#pragma once
// Asynchronous specialization (include/cuinline/jit.hpp): the policy a call runs under, and the
// bounded background pool that compiles specialized kernels while generic ones serve the calls.
#include <cuda.h>

#include <cstdint>
#include <cuinline/jit.hpp>
#include <functional>

namespace cuinline::ops::detail {

/// The policy of a call on `stream`: the thread's ScopedJitPolicy, else the process's; `async`
/// becomes `sync` while the stream is being captured (a graph keeps the specialized kernel).
JitPolicy effective_policy(CUstream stream);

/// Runs `job` on the background pool. False (and nothing queued) when the queue is full or the
/// process is exiting: the caller stays on the generic kernel and may submit again later. `job`
/// must not throw (it reports its own failure).
bool submit_specialization(std::function<void()> job);

/// Counters (jit_stats()).
void count_generic_launch() noexcept;
void count_sync_wait() noexcept;
void count_swap() noexcept;
void count_background_failure() noexcept;

}  // namespace cuinline::ops::detail
