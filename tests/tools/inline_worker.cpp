// A separate process for the cache tests: loads one fixed program through load_inline (offline,
// sm_90) with a KernelCache on the given directory and prints where it came from.
//   inline_worker <cache_dir> [variant]
// Output: "tier=<memory|disk|compiled> compiles=<n> disk_hits=<n> rejected=<n>"; exit 0, or 1 with
// the error on stderr.
#include <cstdio>
#include <exception>
#include <string>

#include "cuinline/cuinline.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: inline_worker <cache_dir> [variant]\n");
    return 2;
  }
  try {
    cuinline::CacheConfig config;
    config.directory = argv[1];
    cuinline::KernelCache cache(config);
    cuinline::InlineOptions o;
    o.name = "worker";
    o.cuda_sources = {R"(extern "C" __global__ void scale(float* y, const float* x, float a, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + VARIANT;
})"};
    o.defines["VARIANT"] = argc > 2 ? argv[2] : "0.0f";
    o.functions = {"scale"};
    o.arch = cuinline::Arch::parse("sm_90");
    o.cache = &cache;
    cuinline::Module m = cuinline::load_inline(o);
    const cuinline::CacheStats s = cache.stats();
    std::printf("tier=%s compiles=%llu disk_hits=%llu rejected=%llu\n", cuinline::to_string(m.tier()),
                static_cast<unsigned long long>(s.compiles), static_cast<unsigned long long>(s.disk_hits),
                static_cast<unsigned long long>(s.rejected_entries));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "inline_worker: %s\n", e.what());
    return 1;
  }
}
