// Runtime-core benchmark: compile cost, disk hit in a new process, memory hit, launch host cost.
//   bench_runtime [--out FILE.md]       (needs a GPU for the disk-hit and launch rows)
// Prints a markdown table; medians throughout.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "cuinline/cuinline.hpp"
#include "driver/driver_api.hpp"

using namespace cuinline;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

std::string small_kernel(int variant) {
  return "extern \"C\" __global__ void small(float* y, const float* x, float a, unsigned n) {\n"
         "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
         "  if (i < n) y[i] = a * x[i] + " +
         std::to_string(variant) + ".0f;\n}\n";
}

InlineOptions options_for(int variant, KernelCache& cache, const Arch& arch) {
  InlineOptions o;
  o.name = "small";
  o.cuda_sources = {small_kernel(variant)};
  o.functions = {"small"};
  o.arch = arch;
  o.cache = &cache;
  return o;
}

// Child mode: context first (outside the figure), then time cache open + disk hit + load + kernel.
int disk_hit_child(const char* dir, const char* arch_name) {
  set_device(0);
  const Arch arch = Arch::parse(arch_name);
  const auto t0 = Clock::now();
  CacheConfig config;
  config.directory = dir;
  KernelCache cache(config);
  Module m = load_inline(options_for(0, cache, arch));
  Kernel k = m.kernel("small");
  const double ms = ms_since(t0);
  if (m.tier() != CacheTier::disk) {
    std::fprintf(stderr, "child: expected a disk hit, got %s\n", to_string(m.tier()));
    return 1;
  }
  (void)k;
  std::printf("%.6f\n", ms);
  return 0;
}

double run_child(const char* self, const std::string& dir, const std::string& arch) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    execl(self, self, "--disk-hit-child", dir.c_str(), arch.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  char buf[128] = {};
  const ssize_t n = read(fds[0], buf, sizeof(buf) - 1);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (n <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  return std::atof(buf);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "--disk-hit-child") == 0) return disk_hit_child(argv[2], argv[3]);
  std::string out_path;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--out") == 0) out_path = argv[i + 1];
  }
  const bool gpu = device_count() > 0;
  const Arch arch = gpu ? device_arch(0) : Arch::parse("sm_90");
  char tmpl[] = "/tmp/cuinline-bench-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  std::string table = "| what | figure |\n|---|---|\n";
  auto row = [&](const std::string& what, const std::string& figure) {
    table += "| " + what + " | " + figure + " |\n";
    std::fprintf(stderr, "%s: %s\n", what.c_str(), figure.c_str());
  };
  char buf[256];

  // 1. Compile: NVRTC alone, first in the process and later ones (distinct sources).
  {
    CompileRequest req;
    req.name = "small.cu";
    req.name_expressions = {"small"};
    req.source = small_kernel(1000);
    auto t = Clock::now();
    compile(req, arch);
    const double first = ms_since(t);
    std::vector<double> later;
    for (int v = 1001; v < 1021; ++v) {
      req.source = small_kernel(v);
      t = Clock::now();
      compile(req, arch);
      later.push_back(ms_since(t));
    }
    std::snprintf(buf, sizeof(buf), "%.1f ms / %.1f ms", first, median(later));
    row("NVRTC compile of a small kernel (" + arch.name() + "), first in process / later (median of 20)",
        buf);
  }
  // 2. load_inline cold (compile + publish to disk), later ones.
  {
    CacheConfig config;
    config.directory = dir;
    KernelCache cache(config);
    std::vector<double> cold;
    for (int v = 1; v <= 20; ++v) {
      const auto t = Clock::now();
      load_inline(options_for(v, cache, arch));
      cold.push_back(ms_since(t));
    }
    std::snprintf(buf, sizeof(buf), "%.1f ms", median(cold));
    row("load_inline miss: compile + disk publish (median of 20)", buf);

    // 3. Memory hit: the full load_inline call (request build + SHA-256 key + lookup), and get() with a known
    // key.
    load_inline(options_for(0, cache, arch));
    const InlineOptions o = options_for(0, cache, arch);
    constexpr int kReps = 20000;
    std::vector<double> per_call;
    for (int batch = 0; batch < 9; ++batch) {
      const auto t = Clock::now();
      for (int i = 0; i < kReps; ++i) load_inline(o);
      per_call.push_back(ms_since(t) * 1000.0 / kReps);
    }
    const CompileRequest req = make_inline_request(o);
    const CacheKey key = make_cache_key(req, arch);
    std::vector<double> keyed;
    for (int batch = 0; batch < 9; ++batch) {
      const auto t = Clock::now();
      for (int i = 0; i < kReps; ++i) cache.get(key, req, arch);
      keyed.push_back(ms_since(t) * 1000.0 / kReps);
    }
    std::vector<double> key_only;
    for (int batch = 0; batch < 9; ++batch) {
      const auto t = Clock::now();
      for (int i = 0; i < kReps; ++i) (void)make_cache_key(req, arch);
      key_only.push_back(ms_since(t) * 1000.0 / kReps);
    }
    std::snprintf(buf, sizeof(buf), "%.3f µs / %.3f µs (of which the SHA-256 key: %.3f µs)", median(per_call),
                  median(keyed), median(key_only));
    row("memory hit: load_inline(same options) / KernelCache::get(known key)", buf);
  }
  if (gpu) {
    // 4. Disk hit in a new process (context created before the clock starts).
    std::vector<double> hits;
    for (int i = 0; i < 15; ++i) {
      const double ms = run_child(argv[0], dir, arch.name());
      if (ms >= 0) hits.push_back(ms);
    }
    std::snprintf(buf, sizeof(buf), "%.3f ms (median of %zu processes)", median(hits), hits.size());
    row("disk hit in a new process: open cache + read + validate + load module + get kernel", buf);

    // 5. Launch host cost: Kernel::launch vs raw cuLaunchKernel on the same kernel and stream.
    CacheConfig config;
    config.directory = dir;
    KernelCache cache(config);
    Kernel k = load_inline(options_for(0, cache, arch)).kernel("small");
    const CUfunction f = k.function(0);
    const auto& api = detail::driver();
    Stream stream;
    DeviceBuffer x(4096), y(4096);
    float a = 2.0f;
    unsigned n = 1024;
    CUdeviceptr px = x.ptr(), py = y.ptr();
    void* args[] = {&py, &px, &a, &n};
    const LaunchConfig cfg{Dim3(4), Dim3(256), 0, stream};
    constexpr int kLaunches = 2000;
    std::vector<double> raw, ours;
    for (int round = 0; round < 15; ++round) {
      stream.synchronize();
      auto t = Clock::now();
      for (int i = 0; i < kLaunches; ++i) api.cuLaunchKernel(f, 4, 1, 1, 256, 1, 1, 0, stream, args, nullptr);
      raw.push_back(ms_since(t) * 1000.0 / kLaunches);
      stream.synchronize();
      t = Clock::now();
      for (int i = 0; i < kLaunches; ++i) k.launch(cfg, py, px, a, n);
      ours.push_back(ms_since(t) * 1000.0 / kLaunches);
    }
    stream.synchronize();
    std::snprintf(buf, sizeof(buf), "%.2f µs / %.2f µs (+%.2f µs)", median(raw), median(ours),
                  median(ours) - median(raw));
    row("host cost per launch: raw cuLaunchKernel / Kernel::launch (checked args)", buf);
    const DeviceInfo info = device_info(0);
    table = "GPU: " + info.name + " (" + info.arch.name() + "), driver " + std::to_string(driver_version()) +
            "\n\n" + table;
  } else {
    table = "no GPU: compile and memory-hit rows only\n\n" + table;
  }
  std::printf("%s", table.c_str());
  if (!out_path.empty()) std::ofstream(out_path) << table;
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return 0;
}
