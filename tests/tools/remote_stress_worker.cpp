// One "machine" of the fleet stress test (tests/test_remote_stress.cpp):
//
//   remote_stress_worker <disk_dir> <redis_url> <key_file> <threads> <kernels> <base> <start_epoch_ms>
//
// Waits until <start_epoch_ms> (so every process starts at once), then <threads> threads each request
// kernels <base>..<base>+<kernels>-1 (stress_t<i>, compiled for sm_90 offline) in an order of their
// own, twice, through one KernelCache with its own disk directory and the shared Redis. Each answer
// is checked (module key, lowered name, the name inside the binary). Prints
//   remote_stress: compiled=<i,j,...> compiles=N remote_hits=N disk_hits=N memory_hits=N lock_waits=N
//                  lock_timeouts=N unauthenticated=N errors=N wrong=N
// and exits 0 when nothing was wrong.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cuinline/cuinline.hpp"
#include "stress_kernels.hpp"

using namespace cuinline;

int main(int argc, char** argv) {
  if (argc < 8) {
    std::fprintf(stderr,
                 "usage: remote_stress_worker <disk_dir> <redis_url> <key_file> <threads> <kernels> <base> "
                 "<start_epoch_ms>\n");
    return 2;
  }
  try {
    CacheConfig config;
    config.directory = argv[1];
    config.remote.url = argv[2];
    config.remote.key_file = argv[3];
    // Generous: on a loaded machine a wait that ran out would make a second compile (not wrong, but
    // the test counts compiles exactly).
    config.remote.lock_wait = std::chrono::seconds(120);
    config.remote.lock_ttl = std::chrono::seconds(120);
    // Likewise the command timeouts: 64 threads of 4 processes and Redis on two cores (under ASan in
    // CI) once saw a SET take over 200 ms; the tier was then skipped for a second and three kernels were
    // compiled twice. This test counts single-flight, not how a slow Redis is survived
    // (test_remote_faults does that with the default timeouts).
    config.remote.connect_timeout = std::chrono::seconds(5);
    config.remote.command_timeout = std::chrono::seconds(10);
    const int threads = std::atoi(argv[4]), kernels = std::atoi(argv[5]), base = std::atoi(argv[6]);
    const long long start_ms = std::atoll(argv[7]);
    KernelCache cache(config);
    if (cache.remote() == nullptr) {
      std::fprintf(stderr, "remote_stress_worker: the remote tier is not usable\n");
      return 2;
    }
    const Arch arch = Arch::parse("sm_90");
    std::vector<CacheKey> keys;
    for (int i = 0; i < kernels; ++i) keys.push_back(make_cache_key(test::stress_request(base + i), arch));
    std::vector<std::atomic<int>> compiled(static_cast<std::size_t>(kernels));
    std::atomic<std::uint64_t> errors{0}, wrong{0};
    std::mutex print;
    const auto start = std::chrono::system_clock::time_point(std::chrono::milliseconds(start_ms));
    std::this_thread::sleep_until(start);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        std::mt19937 rng(std::random_device{}() + static_cast<unsigned>(t));
        std::vector<int> order(static_cast<std::size_t>(kernels));
        for (int i = 0; i < kernels; ++i) order[static_cast<std::size_t>(i)] = i;
        for (int round = 0; round < 2; ++round) {
          std::shuffle(order.begin(), order.end(), rng);
          for (int k : order) {
            const int i = base + k;
            try {
              CacheTier tier = CacheTier::memory;
              Module m = cache.get(keys[static_cast<std::size_t>(k)], test::stress_request(i), arch, &tier);
              if (tier == CacheTier::compiled) ++compiled[static_cast<std::size_t>(k)];
              const CompiledProgram& p = m.program();
              const std::string name = test::stress_mangled(i);
              const bool ok =
                  m.key() == keys[static_cast<std::size_t>(k)] && p.arch == arch &&
                  p.lowered_names.size() == 1 && p.lowered_names[0].second == name &&
                  std::search(p.binary.begin(), p.binary.end(), name.begin(), name.end()) != p.binary.end();
              if (!ok) {
                ++wrong;
                std::lock_guard<std::mutex> guard(print);
                std::fprintf(stderr, "WRONG answer for %s\n", test::stress_expression(i).c_str());
              }
            } catch (const std::exception& e) {
              ++errors;
              std::lock_guard<std::mutex> guard(print);
              std::fprintf(stderr, "error for %s: %s\n", test::stress_expression(i).c_str(), e.what());
            }
          }
        }
      });
    }
    for (auto& t : pool) t.join();
    std::string list;
    for (int k = 0; k < kernels; ++k) {
      for (int n = 0; n < compiled[static_cast<std::size_t>(k)].load(); ++n)
        list += (list.empty() ? "" : ",") + std::to_string(k);
    }
    const CacheStats s = cache.stats();
    std::printf(
        "remote_stress: compiled=%s compiles=%llu remote_hits=%llu disk_hits=%llu memory_hits=%llu "
        "lock_waits=%llu lock_timeouts=%llu unauthenticated=%llu errors=%llu wrong=%llu\n",
        list.empty() ? "-" : list.c_str(), static_cast<unsigned long long>(s.compiles),
        static_cast<unsigned long long>(s.remote_hits), static_cast<unsigned long long>(s.disk_hits),
        static_cast<unsigned long long>(s.memory_hits), static_cast<unsigned long long>(s.remote_lock_waits),
        static_cast<unsigned long long>(s.remote_lock_timeouts),
        static_cast<unsigned long long>(s.unauthenticated_entries),
        static_cast<unsigned long long>(errors.load()), static_cast<unsigned long long>(wrong.load()));
    std::fflush(stdout);
    return errors == 0 && wrong == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "remote_stress_worker: %s\n", e.what());
    return 1;
  }
}
