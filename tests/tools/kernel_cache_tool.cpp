// A separate process for test_kernel_cache_process: asks KernelCache for one program and prints this
// process's counters. Needs NVRTC, no GPU (the module is never loaded).
//
//   kernel_cache_tool get <cache-dir> <tag> <unroll>
//
// <tag> makes the program (and its key) unique to a test; <unroll> makes the compile slow (a
// fully unrolled loop of that many steps), so a test can kill this process mid-compile.
// Prints "tier=<memory|disk|compiled> compiles=<n> disk_hits=<n> disk_writes=<n>"; exit 0, or 1
// with the error.

#include <cstdio>
#include <exception>
#include <string>

#include "cuinline/kernel_cache.hpp"
#include "cuinline/module.hpp"

namespace {

constexpr const char* kSource = R"(
extern "C" __global__ void churn(float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i] + TAG;
#pragma unroll
  for (int k = 0; k < UNROLL; ++k) v = v * 1.0001f + __sinf(v + k);
  x[i] = v;
}
)";

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5 || std::string(argv[1]) != "get") {
    std::fprintf(stderr, "usage: kernel_cache_tool get <cache-dir> <tag> <unroll>\n");
    return 2;
  }
  try {
    cuinline::CacheConfig config;
    config.directory = argv[2];
    cuinline::KernelCache cache(config);
    cuinline::CompileRequest request;
    request.name = "churn.cu";
    request.source = kSource;
    request.options = {std::string("-DTAG=") + argv[3] + ".0f", std::string("-DUNROLL=") + argv[4]};
    request.name_expressions = {"churn"};
    cuinline::CacheTier tier = cuinline::CacheTier::compiled;
    const cuinline::Module module = cache.get(request, cuinline::Arch::parse("sm_80"), &tier);
    const cuinline::CacheStats stats = cache.stats();
    std::printf("tier=%s compiles=%llu disk_hits=%llu disk_writes=%llu\n", cuinline::to_string(tier),
                static_cast<unsigned long long>(stats.compiles),
                static_cast<unsigned long long>(stats.disk_hits),
                static_cast<unsigned long long>(stats.disk_writes));
    return module.program().binary.empty() ? 1 : 0;
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
}
