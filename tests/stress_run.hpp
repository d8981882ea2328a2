#pragma once
// The body of the stress tests (test_stress.cpp offline for sm_90, test_stress_gpu.cpp with
// launches): P processes × T threads asking for K kernels through one cache directory with a
// small size cap, so the disk tier evicts all the time. Scaled by environment variables for a
// longer soak: CUINLINE_STRESS_SECONDS (default 12), CUINLINE_STRESS_PROCESSES (4),
// CUINLINE_STRESS_THREADS (16), CUINLINE_STRESS_KERNELS (50), CUINLINE_STRESS_MAX_BYTES (40000,
// about ten entries).

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "cuinline/cuinline.hpp"
#include "hardening_support.hpp"
#include "stress_kernels.hpp"
#include "test_support.hpp"

namespace cuinline::test {

inline void run_stress(bool gpu) {
  const double seconds = env_double("CUINLINE_STRESS_SECONDS", 12.0);
  const long processes = env_long("CUINLINE_STRESS_PROCESSES", 4);
  const long threads = env_long("CUINLINE_STRESS_THREADS", 16);
  const long kernels = env_long("CUINLINE_STRESS_KERNELS", 50);
  const long max_bytes = env_long("CUINLINE_STRESS_MAX_BYTES", 40000);
  TempDir dir(gpu ? "stress-gpu" : "stress");
  const auto cache_dir = dir.path() / "cache";

  const auto start = std::chrono::steady_clock::now();
  std::vector<Child> children;
  for (long p = 0; p < processes; ++p) {
    std::vector<std::string> argv = {tool_path("stress_worker"), cache_dir.string(),
                                     std::to_string(seconds),    std::to_string(threads),
                                     std::to_string(kernels),    std::to_string(max_bytes)};
    if (gpu) argv.push_back("gpu");
    children.push_back(start_child(argv, (dir.path() / ("worker-" + std::to_string(p) + ".out")).string()));
  }
  // The directory's size while they run (the cap is enforced by whoever stores; entries in use
  // are not evicted, so it can be passed for a while under load).
  std::atomic<bool> running{true};
  std::atomic<std::uint64_t> peak_bytes{0};
  std::thread sampler([&] {
    while (running) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      std::error_code ec;
      std::uint64_t bytes = 0;
      for (const auto& item : std::filesystem::directory_iterator(cache_dir, ec)) {
        if (item.path().filename().string().size() == 64) bytes += item.file_size(ec);
      }
      if (bytes > peak_bytes) peak_bytes = bytes;
    }
  });
  // Requests stop at the deadline; a compile in flight then finishes. Anything far past it hangs.
  const auto limit = std::chrono::milliseconds(static_cast<long>(seconds * 1000) + 180000);
  std::map<std::string, std::uint64_t> total;
  for (std::size_t p = 0; p < children.size(); ++p) {
    const ChildExit exit = wait_child(children[p], limit);
    const std::string output = children[p].output();
    EXPECT_FALSE(exit.timed_out) << "worker " << p << " hung:\n" << output;
    EXPECT_EQ(exit.signal, 0) << "worker " << p << " crashed:\n" << output;
    EXPECT_EQ(exit.exit_code, 0) << "worker " << p << ":\n" << output;
    const auto counters = parse_counters(output, "stress:");
    ASSERT_FALSE(counters.empty()) << output;
    for (const char* zero : {"errors", "wrong", "duplicate_compiles", "rejected"}) {
      EXPECT_EQ(counters.at(zero), 0u) << zero << " in worker " << p << ":\n" << output;
    }
    EXPECT_GT(counters.at("requests"), 0u) << output;
    EXPECT_LE(counters.at("compiles"), static_cast<std::uint64_t>(kernels)) << "a key compiled twice:\n"
                                                                            << output;
    if (gpu) {
      EXPECT_GT(counters.at("launches"), 0u) << output;
    }
    for (const auto& [name, value] : counters) total[name] += value;
  }
  running = false;
  sampler.join();
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GT(total["evictions"], 0u) << "the size cap never made the disk tier evict";

  // What the processes left behind: only whole, valid entries of the kernels asked for, no temp file.
  CacheConfig config;
  config.directory = cache_dir;
  config.max_bytes = static_cast<std::uint64_t>(max_bytes);
  DiskCache disk(config);
  ASSERT_TRUE(disk.usable());
  const VerifyReport report = disk.verify(/*fix=*/false);
  EXPECT_TRUE(report.bad.empty()) << report.bad.size() << " bad entries, first " << report.bad[0].first;
  std::size_t temp_files = 0;
  for (const auto& item : std::filesystem::directory_iterator(cache_dir)) {
    temp_files += item.path().filename().string().rfind(".tmp-", 0) == 0 ? 1 : 0;
  }
  EXPECT_EQ(temp_files, 0u);
  const Arch arch = gpu ? device_arch(0) : Arch::parse("sm_90");
  std::size_t on_disk = 0;
  for (long i = 0; i < kernels; ++i) {
    const auto program = disk.load(make_cache_key(stress_request(static_cast<int>(i)), arch));
    if (!program) continue;
    ++on_disk;
    ASSERT_EQ(program->lowered_names.size(), 1u);
    EXPECT_EQ(program->lowered_names[0].second, stress_mangled(static_cast<int>(i)));
  }
  const std::uint64_t bytes_left = disk.total_bytes();
  // With nobody else using the entries, the next publish brings the directory back under the cap.
  ASSERT_TRUE(disk.store(make_cache_key(stress_request(static_cast<int>(kernels)), arch),
                         compile(stress_request(static_cast<int>(kernels)), arch)));
  const std::uint64_t bytes_after_store = disk.total_bytes();
  EXPECT_LE(bytes_after_store, static_cast<std::uint64_t>(max_bytes));

  char line[1024];
  std::snprintf(
      line, sizeof line,
      "stress figures (%s): %ld processes x %ld threads, %ld kernels, cap %ld bytes, %.1f s of requests, "
      "%.1f s in all: requests=%llu probes=%llu probe_hits=%llu compiles=%llu memory_hits=%llu "
      "disk_hits=%llu disk_writes=%llu write_failures=%llu evictions=%llu launches=%llu; left on disk: "
      "%zu entries (%zu of the %ld kernels found by key), %llu bytes; peak %llu bytes; %llu bytes after one "
      "more "
      "publish",
      gpu ? "gpu" : "offline sm_90", processes, threads, kernels, max_bytes, seconds, elapsed,
      static_cast<unsigned long long>(total["requests"]), static_cast<unsigned long long>(total["probes"]),
      static_cast<unsigned long long>(total["probe_hits"]),
      static_cast<unsigned long long>(total["compiles"]),
      static_cast<unsigned long long>(total["memory_hits"]),
      static_cast<unsigned long long>(total["disk_hits"]),
      static_cast<unsigned long long>(total["disk_writes"]),
      static_cast<unsigned long long>(total["write_failures"]),
      static_cast<unsigned long long>(total["evictions"]), static_cast<unsigned long long>(total["launches"]),
      static_cast<std::size_t>(report.checked), on_disk, kernels, static_cast<unsigned long long>(bytes_left),
      static_cast<unsigned long long>(peak_bytes.load()), static_cast<unsigned long long>(bytes_after_store));
  std::printf("%s\n", line);
  ::testing::Test::RecordProperty("stress_figures", line);
}

}  // namespace cuinline::test
