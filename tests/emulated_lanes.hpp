// A block's threads for the host-emulated kernels, run as fibers (ucontext) on the calling thread
// instead of as std::threads: a kernel's lanes meet at barriers (__syncthreads, a warp's exchange in
// a warp-wide instruction) thousands of times a block, and with a thread a lane each meeting costs
// every lane a switch of the kernel's scheduler on a machine of a few cores (most of the tests'
// time, and starting 256 threads a block the rest). A fiber's switch is about a function call's
// cost, and the lanes live for the whole program.
//
// run_lanes(n, body) runs body() once on each of lanes 0 .. n - 1 and returns when every one has
// returned; lane_index() is the running lane's. LaneBarrier::arrive_and_wait() yields until its n
// lanes have arrived. The lanes run in turns, each until it waits at a barrier or returns: in lane
// order, then in reverse order the next turn, so that a read that needs a missing barrier comes
// before the write it needs in one order or the other. One run_lanes at a time, on one thread.
// Under AddressSanitizer the switches are announced (__sanitizer_start/finish_switch_fiber), so it
// follows the stacks (stack-use-after-return included).
// On x86-64 a switch saves the callee-saved registers, MXCSR and the x87 control word on the
// running stack and loads the other's (switch_stacks below): glibc's swapcontext also sets the
// signal mask, a system call at every switch (a third of the mma.sync emulation's time under ASan).
// Elsewhere the lanes are ucontext contexts.
#ifndef CUINLINE_TESTS_EMULATED_LANES_HPP
#define CUINLINE_TESTS_EMULATED_LANES_HPP

#include <sys/mman.h>
#include <ucontext.h>

#include <cstdint>

#include <cstddef>
#include <cstdlib>
#include <functional>
#include <memory>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define CUINLINE_LANES_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CUINLINE_LANES_ASAN 1
#endif
#endif
#ifdef CUINLINE_LANES_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

#if defined(__x86_64__) && defined(__linux__)
#define CUINLINE_LANES_OWN_SWITCH 1
// cuinline_lanes_switch_stacks(from, to): pushes the callee-saved registers and MXCSR / the x87
// control word on the running stack, stores its top in *from, loads `to` as the stack and pops the
// same from it (a stack it left, or a new lane's, which run_lanes prepares), then returns on it.
// (.weak: the header may be in several files of one program.)
extern "C" void cuinline_lanes_switch_stacks(void** from, void* to);
asm(R"(
  .pushsection .text
  .weak cuinline_lanes_switch_stacks
  .type cuinline_lanes_switch_stacks, @function
  .p2align 4
cuinline_lanes_switch_stacks:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size cuinline_lanes_switch_stacks, .-cuinline_lanes_switch_stacks
  .popsection
)");
#endif

namespace cuinline::test::lanes {

// A lane's stack: 128 KiB (a kernel's frames plus the sanitizers' redzones) above a page that
// faults, mapped when the lane is first needed.
inline constexpr std::size_t kStackBytes = 128 * 1024;
inline constexpr std::size_t kGuardBytes = 4096;

// A lane runs body() each time it is started, then waits (done) to be started again: it never
// returns, so its stack, and AddressSanitizer's fake stack for it, are made once.
struct Lane {
#ifdef CUINLINE_LANES_OWN_SWITCH
  void* sp = nullptr;  // the lane's stack top while it is switched out
#else
  ucontext_t context;  // (never moved: a saved context points into itself)
#endif
  char* stack = nullptr;
  void* fake_stack = nullptr;  // AddressSanitizer's fake stack while the lane is switched out
  bool done = true;
};

struct State {
  std::vector<std::unique_ptr<Lane>> lanes;
  std::size_t running = 0;
#ifdef CUINLINE_LANES_OWN_SWITCH
  void* scheduler_sp = nullptr;
#else
  ucontext_t scheduler;
#endif
  const std::function<void()>* body = nullptr;
  const void* scheduler_stack = nullptr;
  std::size_t scheduler_stack_bytes = 0;
};
inline State g_state;

inline std::size_t lane_index() {
  return g_state.running;
}

// From the running lane back to the scheduler; returns when the scheduler resumes this lane.
inline void yield() {
  State& s = g_state;
  Lane& lane = *s.lanes[s.running];
#ifdef CUINLINE_LANES_ASAN
  __sanitizer_start_switch_fiber(&lane.fake_stack, s.scheduler_stack, s.scheduler_stack_bytes);
#endif
#ifdef CUINLINE_LANES_OWN_SWITCH
  cuinline_lanes_switch_stacks(&lane.sp, s.scheduler_sp);
#else
  swapcontext(&lane.context, &s.scheduler);
#endif
#ifdef CUINLINE_LANES_ASAN
  __sanitizer_finish_switch_fiber(lane.fake_stack, &s.scheduler_stack, &s.scheduler_stack_bytes);
#endif
}

inline void lane_main() {
  State& s = g_state;
#ifdef CUINLINE_LANES_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &s.scheduler_stack, &s.scheduler_stack_bytes);
#endif
  for (;;) {
    (*s.body)();
    s.lanes[s.running]->done = true;
    yield();
  }
}

inline void run_lanes(std::size_t n, const std::function<void()>& body) {
  State& s = g_state;
  while (s.lanes.size() < n) {
    auto lane = std::make_unique<Lane>();
    void* p = mmap(nullptr, kGuardBytes + kStackBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED || mprotect(p, kGuardBytes, PROT_NONE) != 0) std::abort();
    lane->stack = static_cast<char*>(p) + kGuardBytes;
#ifdef CUINLINE_LANES_OWN_SWITCH
    // The first switch to the lane pops a frame that returns into lane_main, on a stack aligned as
    // after a call: MXCSR and the x87 control word (the scheduler's), six registers, the return
    // address, and lane_main's own (none: it never returns) at the 16-byte aligned top.
    auto* top = reinterpret_cast<std::uint64_t*>(lane->stack + kStackBytes);
    std::uint64_t* sp = top - 9;
    std::uint32_t mxcsr = 0;
    std::uint16_t fpucw = 0;
    asm volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(mxcsr), "=m"(fpucw));
    sp[0] = mxcsr | std::uint64_t{fpucw} << 32;
    for (int r = 1; r <= 6; ++r) sp[r] = 0;
    sp[7] = reinterpret_cast<std::uint64_t>(&lane_main);
    sp[8] = 0;
    lane->sp = sp;
#else
    getcontext(&lane->context);
    lane->context.uc_stack.ss_sp = lane->stack;
    lane->context.uc_stack.ss_size = kStackBytes;
    lane->context.uc_link = nullptr;  // (lane_main never returns)
    makecontext(&lane->context, lane_main, 0);
#ifdef CUINLINE_LANES_ASAN
    // AddressSanitizer's swapcontext clears the shadow of the whole stack a context names at every
    // switch to it (most of the run's time otherwise); the switches are announced and makecontext
    // has placed the stack: the context names none from here on.
    lane->context.uc_stack.ss_sp = nullptr;
    lane->context.uc_stack.ss_size = 0;
#endif
#endif
    s.lanes.push_back(std::move(lane));
  }
  s.body = &body;
  for (std::size_t i = 0; i < n; ++i) s.lanes[i]->done = false;
  std::size_t left = n;
  for (bool forward = true; left > 0; forward = !forward) {
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t i = forward ? k : n - 1 - k;
      Lane& lane = *s.lanes[i];
      if (lane.done) continue;
      s.running = i;
#ifdef CUINLINE_LANES_ASAN
      void* fake = nullptr;
      __sanitizer_start_switch_fiber(&fake, lane.stack, kStackBytes);
#endif
#ifdef CUINLINE_LANES_OWN_SWITCH
      cuinline_lanes_switch_stacks(&s.scheduler_sp, lane.sp);
#else
      swapcontext(&s.scheduler, &lane.context);
#endif
#ifdef CUINLINE_LANES_ASAN
      __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
      if (lane.done) --left;
    }
  }
  s.body = nullptr;
}

// __syncthreads (n: the block's lanes) or a warp's meeting (its 32): every lane waits until the n
// have arrived.
class LaneBarrier {
 public:
  explicit LaneBarrier(int n) : n_(n) {}
  void arrive_and_wait() {
    const unsigned phase = phase_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++phase_;
      return;
    }
    while (phase_ == phase) yield();
  }

 private:
  int n_;
  int arrived_ = 0;
  unsigned phase_ = 0;
};

}  // namespace cuinline::test::lanes

#endif  // CUINLINE_TESTS_EMULATED_LANES_HPP
