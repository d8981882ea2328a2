// The background specialization pool and the JIT policy (include/cuinline/jit.hpp).
//
// NVRTC serializes the compiles of one process, so one worker thread is the default
// (CUINLINE_JIT_THREADS raises it). The queue is bounded (kMaxQueued); a call that finds it full
// keeps running the generic kernel and submits again on a later call. At exit the queue is dropped
// and the running compiles are waited for (an atexit handler, registered when the pool starts and
// again after each of the first jobs, the first being NVRTC's start-up: see run()): nothing is cut
// off half-way, and every cache write is a rename of a complete file anyway. One window stays: a
// process that exits while NVRTC's very first compile is registering its own exit handlers (a few
// milliseconds, tens of milliseconds after the first submission) can crash in that compile;
// docs/jit.md says so.
#include "ops/specialize.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <cuinline/arch.hpp>
#include <cuinline/compiler.hpp>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/log.hpp"
#include "driver/driver_api.hpp"
#include "ops/generic_fatbin.hpp"

namespace cuinline {
namespace {

constexpr std::size_t kMaxQueued = 4096;

int policy_from_environment() {
  const char* env = std::getenv("CUINLINE_JIT_POLICY");
  if (env == nullptr || *env == '\0') return static_cast<int>(JitPolicy::async);
  if (std::strcmp(env, "async") == 0) return static_cast<int>(JitPolicy::async);
  if (std::strcmp(env, "sync") == 0) return static_cast<int>(JitPolicy::sync);
  if (std::strcmp(env, "generic") == 0) return static_cast<int>(JitPolicy::generic);
  logger()->warn("CUINLINE_JIT_POLICY='{}' is not async, sync or generic; using async", env);
  return static_cast<int>(JitPolicy::async);
}

std::atomic<int>& process_policy() {
  static std::atomic<int> policy{policy_from_environment()};
  return policy;
}

constexpr int kNoOverride = -1;
thread_local int thread_policy = kNoOverride;

struct Counters {
  std::atomic<std::uint64_t> generic_launches{0}, submitted{0}, finished{0}, swaps{0}, failures{0},
      sync_waits{0};
};
Counters& counters() {
  static Counters c;
  return c;
}

int worker_count() {
  if (const char* env = std::getenv("CUINLINE_JIT_THREADS"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && n >= 1 && n <= 64) return static_cast<int>(n);
    logger()->warn("CUINLINE_JIT_THREADS='{}' is not a number from 1 to 64; using 1", env);
  }
  return 1;
}

class Pool {
 public:
  static Pool& instance() {
    // Never destroyed: the atexit handler stops it; ops may run during static teardown.
    static Pool* pool = new Pool;
    return *pool;
  }

  // `counted`: a specialization (jit_stats); NVRTC's start-up is not.
  bool submit(std::function<void()> job, bool counted = true) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (stopping_ || queue_.size() >= kMaxQueued) return false;
    if (workers_.empty()) start_locked();
    queue_.push_back(Job{std::move(job), counted});
    if (counted) counters().submitted.fetch_add(1, std::memory_order_relaxed);
    ++outstanding_;
    lock.unlock();
    wake_.notify_one();
    return true;
  }

  void wait_idle() {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [&] { return outstanding_ == 0; });
  }

  // At exit: drop what has not started, wait for what has.
  void stop() {
    std::vector<std::thread> workers;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      std::uint64_t dropped = 0;
      for (const Job& job : queue_) dropped += job.counted ? 1 : 0;
      outstanding_ -= queue_.size();
      queue_.clear();
      counters().finished.fetch_add(dropped, std::memory_order_relaxed);
      workers.swap(workers_);
    }
    wake_.notify_all();
    idle_.notify_all();
    for (std::thread& t : workers) t.join();
  }

 private:
  static void stop_at_exit() { Pool::instance().stop(); }

  void start_locked() {
    const int n = worker_count();
    for (int i = 0; i < n; ++i) workers_.emplace_back([this] { run(); });
    std::atexit(stop_at_exit);
  }

  void run() {
    for (;;) {
      Job job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      job.run();  // reports its own outcome (count_swap / count_background_failure)
      // NVRTC registers exit handlers for its own state as its code paths first run (the front
      // end, then ptxas, ...); exit runs handlers in reverse order, so this one, registered again
      // after each of the first jobs, joins the workers before NVRTC's state is destroyed.
      if (registrations_.fetch_add(1) < kReregistrations) std::atexit(stop_at_exit);
      if (job.counted) counters().finished.fetch_add(1, std::memory_order_relaxed);
      std::lock_guard<std::mutex> lock(mutex_);
      if (--outstanding_ == 0) idle_.notify_all();
    }
  }

  struct Job {
    std::function<void()> run;
    bool counted = true;
  };

  std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<Job> queue_;
  std::vector<std::thread> workers_;
  std::size_t outstanding_ = 0;
  bool stopping_ = false;
  static constexpr int kReregistrations = 8;
  std::atomic<int> registrations_{0};
};

// NVRTC's first compile in a process loads and initializes its builtins (hundreds of ms on a
// server host); a trivial program to CUBIN pays it (ptxas's start-up too). Through compile(), so it
// is serialized with the other first compiles (compiler.cpp's compile_program).
void nvrtc_start_up() noexcept {
  try {
    CompileRequest request;
    request.name = "cuinline_prewarm.cu";
    request.source = "extern \"C\" __global__ void cuinline_prewarm() {}\n";
    request.options = {"-minimal"};
    (void)compile(request, Arch{7, 5});
  } catch (...) {
  }
}

// The generic kernels' libraries (cuLibraryLoadData of a fatbin of 2-8 MB: most of a process's
// first generic call of a family). A failure is left to the call that needs the kernel, which says
// why.
void load_generic_libraries() noexcept {
  using detail::GenericFatbin;
  for (const GenericFatbin which : {GenericFatbin::elementwise, GenericFatbin::reductions, GenericFatbin::conv2d}) {
    try {
      detail::generic_module(which).load();
    } catch (...) {
    }
  }
}

}  // namespace

const char* to_string(JitPolicy policy) noexcept {
  switch (policy) {
    case JitPolicy::async:
      return "async";
    case JitPolicy::sync:
      return "sync";
    case JitPolicy::generic:
      return "generic";
  }
  return "unknown";
}

JitPolicy jit_policy() noexcept {
  return static_cast<JitPolicy>(process_policy().load(std::memory_order_relaxed));
}

void set_jit_policy(JitPolicy policy) noexcept {
  process_policy().store(static_cast<int>(policy), std::memory_order_relaxed);
}

ScopedJitPolicy::ScopedJitPolicy(JitPolicy policy) noexcept : previous_(thread_policy) {
  thread_policy = static_cast<int>(policy);
}
ScopedJitPolicy::~ScopedJitPolicy() {
  thread_policy = previous_;
}

void prewarm() noexcept {
  static std::atomic<bool> started{false};
  if (started.exchange(true)) return;
  if (const char* env = std::getenv("CUINLINE_PREWARM"); env != nullptr && std::strcmp(env, "0") == 0) return;
  // On the pool's worker, ahead of any specialization: exit joins it like any job (a detached
  // thread still inside NVRTC when the process tears down would crash it).
  try {
    // First the generic kernels' libraries, where the process already has the CUDA driver loaded
    // (prewarm never loads or initializes it: a process that forks after start-up keeps CUDA usable
    // in its children); milliseconds, where NVRTC's start-up takes hundreds.
    if (generic_kernels_built() && detail::driver_in_use()) Pool::instance().submit(load_generic_libraries, false);
    Pool::instance().submit(nvrtc_start_up, false);
  } catch (...) {
    // No thread: the first compile pays the start-up, as without prewarm.
  }
}

void wait_for_specializations() {
  Pool::instance().wait_idle();
}

JitStats jit_stats() noexcept {
  const Counters& c = counters();
  JitStats s;
  s.generic_launches = c.generic_launches.load(std::memory_order_relaxed);
  s.submitted = c.submitted.load(std::memory_order_relaxed);
  const std::uint64_t finished = c.finished.load(std::memory_order_relaxed);
  s.pending = s.submitted > finished ? s.submitted - finished : 0;
  s.swaps = c.swaps.load(std::memory_order_relaxed);
  s.background_failures = c.failures.load(std::memory_order_relaxed);
  s.sync_waits = c.sync_waits.load(std::memory_order_relaxed);
  return s;
}

namespace ops::detail {

JitPolicy effective_policy(CUstream stream) {
  const JitPolicy policy =
      thread_policy != kNoOverride ? static_cast<JitPolicy>(thread_policy) : jit_policy();
  if (policy != JitPolicy::async) return policy;
  const cuinline::detail::DriverApi& api = cuinline::detail::driver();
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  // A stream that cannot tell (an implicit capture elsewhere in global mode) waits, as a captured one.
  if (api.cuStreamIsCapturing == nullptr || api.cuStreamIsCapturing(stream, &status) != CUDA_SUCCESS ||
      status != CU_STREAM_CAPTURE_STATUS_NONE) {
    return JitPolicy::sync;
  }
  return policy;
}

bool submit_specialization(std::function<void()> job) {
  prewarm();
  return Pool::instance().submit(std::move(job));
}

void count_generic_launch() noexcept {
  counters().generic_launches.fetch_add(1, std::memory_order_relaxed);
}
void count_sync_wait() noexcept {
  counters().sync_waits.fetch_add(1, std::memory_order_relaxed);
}
void count_swap() noexcept {
  counters().swaps.fetch_add(1, std::memory_order_relaxed);
}
void count_background_failure() noexcept {
  counters().failures.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace ops::detail
}  // namespace cuinline
