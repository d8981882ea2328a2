// A process for the JIT tests (tests/test_jit.cpp):
//   jit_tool policy   prints the process's JIT policy (CUINLINE_JIT_POLICY as read at first use)
//   jit_tool exit     after NVRTC's start-up, queues 200 slow background jobs and exits from main
//                     while one runs: exit must drop the queue, wait for the running job and end
//                     cleanly
//   jit_tool prewarm [driver]
//                     prewarm(), then waits for the background jobs and prints whether each generic
//                     library (elementwise, conv2d, row reductions) is loaded; with "driver", the
//                     CUDA driver is loaded and initialized first, as an application's first CUDA
//                     call does ("no driver" where it cannot be)
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cuinline/jit.hpp>
#include <thread>

#include "driver/driver_api.hpp"
#include "ops/generic_fatbin.hpp"
#include "ops/specialize.hpp"

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "policy") == 0) {
    std::printf("policy %s\n", cuinline::to_string(cuinline::jit_policy()));
    return 0;
  }
  if (argc == 2 && std::strcmp(argv[1], "exit") == 0) {
    // NVRTC's start-up first (docs/jit.md: a process should not exit inside its very first compile).
    cuinline::prewarm();
    cuinline::wait_for_specializations();
    int queued = 0;
    for (int i = 0; i < 200; ++i) {
      if (cuinline::ops::detail::submit_specialization([]() noexcept {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
          })) {
        ++queued;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the first job is running
    std::printf("queued %d\n", queued);
    std::fflush(stdout);
    return 0;  // 200 x 100 ms would be 20 s: exit must not wait for the queue
  }
  if ((argc == 2 || argc == 3) && std::strcmp(argv[1], "prewarm") == 0) {
    if (argc == 3 && cuinline::detail::driver_or_null() == nullptr) {
      std::printf("no driver\n");
      return 0;
    }
    cuinline::prewarm();
    cuinline::wait_for_specializations();
    using cuinline::detail::GenericFatbin;
    const bool built = cuinline::generic_kernels_built();
    std::printf("generic libraries loaded:");
    for (GenericFatbin which : {GenericFatbin::elementwise, GenericFatbin::conv2d, GenericFatbin::reductions}) {
      std::printf(" %d", built && cuinline::detail::generic_module(which).loaded() ? 1 : 0);
    }
    std::printf("\n");
    return 0;
  }
  std::fprintf(stderr, "usage: jit_tool policy | exit | prewarm [driver]\n");
  return 2;
}
