// One process of the cache stress test (tests/test_stress.cpp, tests/test_stress_gpu.cpp).
//
//   stress_worker <cache_dir> <seconds> <threads> <kernels> <max_bytes> [gpu]
//
// <threads> threads request kernels 0..<kernels>-1 in random order through one KernelCache on
// <cache_dir> (disk cap <max_bytes>) until <seconds> have passed. Kernel i is the instantiation
// stress_t<i> of one tiny template, so every kernel has its own key. Each answer is checked: the
// module's key, the lowered name of stress_t<i>, and that name inside the binary itself; with
// `gpu` the kernel is also launched on device 0 and its output checked. Between requests, threads
// also read entries straight from the disk tier (while the other processes write and evict) and
// check those too, and publish entries again from memory (so stores and evictions go on all the
// time). Prints one line of counters:
//   stress: requests=N probes=N probe_hits=N republished=N compiles=N memory_hits=N disk_hits=N disk_writes=N
//           write_failures=N evictions=N rejected=N duplicate_compiles=N errors=N wrong=N launches=N
// and exits 0 only when errors, wrong answers, duplicate compiles and rejected entries are all 0.
// Without gpu, kernels are compiled offline for sm_90 (no GPU needed).

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cuinline/cuinline.hpp"
#include "stress_kernels.hpp"

namespace {

using namespace cuinline;

using test::stress_expression;
using test::stress_mangled;
using test::stress_request;

struct Counters {
  std::atomic<std::uint64_t> requests{0}, probes{0}, probe_hits{0}, republished{0}, errors{0}, wrong{0},
      launches{0};
};

// The checks every answer must pass; returns "" or what is wrong.
std::string check_program(const CompiledProgram& p, int i, const Arch& arch) {
  if (p.arch != arch) return "arch " + p.arch.name() + " instead of " + arch.name();
  if (p.lowered_names.size() != 1) return std::to_string(p.lowered_names.size()) + " lowered names";
  if (p.lowered_names[0].first != stress_expression(i))
    return "expression '" + p.lowered_names[0].first + "'";
  if (p.lowered_names[0].second != stress_mangled(i))
    return "lowered name '" + p.lowered_names[0].second + "'";
  const std::string name = stress_mangled(i);
  if (std::search(p.binary.begin(), p.binary.end(), name.begin(), name.end()) == p.binary.end()) {
    return "binary does not contain " + name;
  }
  return "";
}

class Worker {
 public:
  Worker(KernelCache& cache, int kernels, bool gpu, Arch arch)
      : cache_(cache), kernels_(kernels), gpu_(gpu), arch_(arch), compiled_(kernels) {
    for (int i = 0; i < kernels; ++i) keys_.push_back(make_cache_key(stress_request(i), arch));
  }

  void run(std::chrono::steady_clock::time_point deadline, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    if (gpu_) set_device(0);
    // A random order of all kernels, then uniformly random picks: every key gets requested.
    std::vector<int> order(static_cast<std::size_t>(kernels_));
    for (int i = 0; i < kernels_; ++i) order[static_cast<std::size_t>(i)] = i;
    std::shuffle(order.begin(), order.end(), rng);
    for (std::size_t n = 0; std::chrono::steady_clock::now() < deadline; ++n) {
      const int i =
          n < order.size() ? order[n] : static_cast<int>(rng() % static_cast<std::uint64_t>(kernels_));
      try {
        const auto dice = rng() % 16;
        if (dice < 4) {
          probe(i);
        } else if (dice == 4) {
          republish(i);
        } else {
          request(i, static_cast<int>(rng() % 1000));
        }
      } catch (const std::exception& e) {
        ++counters_.errors;
        report("error on kernel " + std::to_string(i) + ": " + e.what());
      }
    }
  }

  void print() const {
    const CacheStats s = cache_.stats();
    std::uint64_t duplicates = 0;
    for (const auto& c : compiled_) duplicates += c.load() > 1 ? c.load() - 1 : 0;
    std::printf(
        "stress: requests=%llu probes=%llu probe_hits=%llu republished=%llu compiles=%llu memory_hits=%llu "
        "disk_hits=%llu "
        "disk_writes=%llu write_failures=%llu evictions=%llu rejected=%llu duplicate_compiles=%llu "
        "errors=%llu wrong=%llu launches=%llu\n",
        u(counters_.requests), u(counters_.probes), u(counters_.probe_hits), u(counters_.republished),
        u(s.compiles), u(s.memory_hits), u(s.disk_hits), u(s.disk_writes), u(s.disk_write_failures),
        u(s.evictions), u(s.rejected_entries), u(duplicates), u(counters_.errors), u(counters_.wrong),
        u(counters_.launches));
    std::fflush(stdout);
  }

  bool passed() const {
    const CacheStats s = cache_.stats();
    std::uint64_t duplicates = 0;
    std::uint64_t compiled_answers = 0;
    for (const auto& c : compiled_) {
      duplicates += c.load() > 1 ? 1 : 0;
      compiled_answers += c.load();
    }
    // Every compile this process ran answered exactly one request (the others waited for it).
    return compiled_answers == s.compiles && counters_.errors == 0 && counters_.wrong == 0 &&
           duplicates == 0 && s.rejected_entries == 0 && s.compile_failures == 0;
  }

 private:
  static unsigned long long u(std::uint64_t v) { return static_cast<unsigned long long>(v); }

  void report(const std::string& what) {
    std::lock_guard<std::mutex> guard(print_mutex_);
    if (++reports_ <= 20)
      std::fprintf(stderr, "stress_worker %d: %s\n", static_cast<int>(::getpid()), what.c_str());
  }

  void wrong(int i, const std::string& what) {
    ++counters_.wrong;
    report("WRONG kernel for " + stress_expression(i) + ": " + what);
  }

  void request(int i, int salt) {
    CacheTier tier = CacheTier::memory;
    Module m = cache_.get(keys_[static_cast<std::size_t>(i)], stress_request(i), arch_, &tier);
    ++counters_.requests;
    if (tier == CacheTier::compiled) compiled_[static_cast<std::size_t>(i)].fetch_add(1);
    if (m.key() != keys_[static_cast<std::size_t>(i)]) return wrong(i, "module key differs");
    if (const std::string bad = check_program(m.program(), i, arch_); !bad.empty()) return wrong(i, bad);
    if (gpu_) launch(m, i, salt);
  }

  // A direct read of the disk tier, racing with the other processes' stores and evictions.
  void probe(int i) {
    ++counters_.probes;
    DiskCache* disk = cache_.disk();
    if (disk == nullptr) return;
    const auto program = disk->load(keys_[static_cast<std::size_t>(i)]);
    if (!program) return;
    ++counters_.probe_hits;
    if (const std::string bad = check_program(*program, i, arch_); !bad.empty())
      wrong(i, "from disk: " + bad);
  }

  // Publishes the entry again from the module in memory, so stores, and with them evictions, go on
  // for the whole run and race with the other processes' reads.
  void republish(int i) {
    DiskCache* disk = cache_.disk();
    if (disk == nullptr) return;
    CacheTier tier = CacheTier::memory;
    Module m = cache_.get(keys_[static_cast<std::size_t>(i)], stress_request(i), arch_, &tier);
    ++counters_.requests;
    ++counters_.republished;
    if (tier == CacheTier::compiled) compiled_[static_cast<std::size_t>(i)].fetch_add(1);
    disk->store(keys_[static_cast<std::size_t>(i)], m.program());
  }

  void launch(const Module& m, int i, int salt) {
    constexpr unsigned kThreads = 64;
    Kernel k = m.kernel(stress_expression(i));
    if (k.lowered_name() != stress_mangled(i)) return wrong(i, "kernel lowered name " + k.lowered_name());
    DeviceBuffer out(kThreads * sizeof(int));
    out.fill_u32(0xdeadbeefu);  // poison: a kernel that does not run leaves this
    Stream stream;
    LaunchConfig cfg;
    cfg.grid = Dim3(1);
    cfg.block = Dim3(kThreads);
    cfg.stream = stream.get();
    k.launch(cfg, out.ptr(), salt);
    std::vector<int> host(kThreads);
    stream.synchronize();
    out.copy_to_host(host.data(), host.size() * sizeof(int));
    ++counters_.launches;
    for (unsigned t = 0; t < kThreads; ++t) {
      const int expected = i * 1000 + static_cast<int>(t) + salt;
      if (host[t] != expected) {
        return wrong(i, "launch wrote " + std::to_string(host[t]) + " at " + std::to_string(t) +
                            ", expected " + std::to_string(expected));
      }
    }
  }

  KernelCache& cache_;
  const int kernels_;
  const bool gpu_;
  const Arch arch_;
  std::vector<CacheKey> keys_;
  std::vector<std::atomic<std::uint64_t>> compiled_;  // per kernel: requests answered by a compile
  Counters counters_;
  std::mutex print_mutex_;
  int reports_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr,
                 "usage: stress_worker <cache_dir> <seconds> <threads> <kernels> <max_bytes> [gpu]\n");
    return 2;
  }
  try {
    const bool gpu = argc > 6 && std::string(argv[6]) == "gpu";
    CacheConfig config;
    config.directory = argv[1];
    config.max_bytes = std::strtoull(argv[5], nullptr, 10);
    KernelCache cache(config);
    if (cache.disk() == nullptr || !cache.disk()->usable()) {
      std::fprintf(stderr, "stress_worker: the disk tier at %s is not usable\n", argv[1]);
      return 2;
    }
    const Arch arch = gpu ? device_arch(0) : Arch::parse("sm_90");
    Worker worker(cache, std::atoi(argv[4]), gpu, arch);
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(static_cast<long>(std::atof(argv[2]) * 1000));
    std::random_device seeds;
    std::vector<std::thread> threads;
    for (int t = 0; t < std::atoi(argv[3]); ++t) {
      const std::uint64_t seed = (std::uint64_t{seeds()} << 32) ^ seeds();
      threads.emplace_back([&worker, deadline, seed] { worker.run(deadline, seed); });
    }
    for (auto& t : threads) t.join();
    worker.print();
    return worker.passed() ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stress_worker: %s\n", e.what());
    return 1;
  }
}
