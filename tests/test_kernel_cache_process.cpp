// KernelCache across processes (tools/kernel_cache_tool): one NVRTC compile per key across
// processes, and a process killed mid-compile (holding the key lock) does not block the next one.
// Needs NVRTC only, no GPU.

#include <gtest/gtest.h>

#include <regex>

#include "disk_cache_test_util.hpp"

namespace cuinline {
namespace {

using namespace cuinline::test;

struct ToolResult {
  int exit_code = -1;
  std::string tier;
  std::uint64_t compiles = 0;
  std::uint64_t disk_hits = 0;
  std::string output;
};

ToolResult parse(int exit_code, const std::string& output) {
  ToolResult result;
  result.exit_code = exit_code;
  result.output = output;
  std::smatch m;
  if (std::regex_search(output, m, std::regex(R"(tier=(\w+) compiles=(\d+) disk_hits=(\d+))"))) {
    result.tier = m[1];
    result.compiles = std::stoull(m[2]);
    result.disk_hits = std::stoull(m[3]);
  }
  return result;
}

std::string unique_tag() {
  return std::to_string(rng()() % 1000000);
}

// Is any key lock (byte 1 onwards of the lock file) held by another open file description?
bool key_lock_held(const fs::path& cache_dir) {
  const int fd = ::open((cache_dir / "lock").c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  struct flock probe {};
  probe.l_type = F_WRLCK;
  probe.l_whence = SEEK_SET;
  probe.l_start = 1;
  probe.l_len = 0;  // to the end of all possible offsets
  const bool held = ::fcntl(fd, F_OFD_GETLK, &probe) == 0 && probe.l_type != F_UNLCK;
  ::close(fd);
  return held;
}

TEST(KernelCacheProcess, ConcurrentProcessesCompileOnce) {
  TempDir dir, scratch;
  const fs::path cache = dir.path() / "cache";
  const std::string tag = unique_tag();
  constexpr int kProcesses = 4;
  std::vector<pid_t> pids;
  std::vector<std::string> outputs;
  for (int i = 0; i < kProcesses; ++i) {
    outputs.push_back((scratch.path() / ("out" + std::to_string(i))).string());
    pids.push_back(spawn_tool("kernel_cache_tool", {"get", cache.string(), tag, "2000"}, outputs.back()));
  }
  std::uint64_t compiles = 0, disk_hits = 0;
  for (int i = 0; i < kProcesses; ++i) {
    const int code = wait_tool(pids[i], std::chrono::seconds(120));  // before reading its output
    const ToolResult r = parse(code, read_file(outputs[i]));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_TRUE(r.tier == "compiled" || r.tier == "disk") << r.output;
    compiles += r.compiles;
    disk_hits += r.disk_hits;
  }
  EXPECT_EQ(compiles, 1u) << "one NVRTC compile across all processes";
  EXPECT_EQ(disk_hits, kProcesses - 1u);
  EXPECT_EQ(files_in(cache).size(), 1u);
}

TEST(KernelCacheProcess, ProcessKilledMidCompileDoesNotBlockTheNext) {
  TempDir dir, scratch;
  const fs::path cache = dir.path() / "cache";
  const std::string tag = unique_tag();
  const std::string unroll = "4000";  // a compile of a second or more
  const pid_t victim = spawn_tool("kernel_cache_tool", {"get", cache.string(), tag, unroll},
                                  (scratch.path() / "victim").string());
  bool held = false;
  for (int i = 0; i < 20000 && !held; ++i) {
    held = key_lock_held(cache);
    if (!held) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(held) << "the first process never took the key lock";
  int status = 0;
  ASSERT_EQ(::waitpid(victim, &status, WNOHANG), 0) << "it finished before it could be killed";
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  EXPECT_EQ(wait_tool(victim), -2);

  std::string output;
  const int code =
      run_tool("kernel_cache_tool", {"get", cache.string(), tag, unroll}, &output, scratch.path());
  const ToolResult next = parse(code, output);
  EXPECT_EQ(next.exit_code, 0) << output;
  EXPECT_EQ(next.tier, "compiled") << "the killed process published nothing";
  EXPECT_EQ(next.compiles, 1u);
  EXPECT_EQ(files_in(cache).size(), 1u) << "one entry, no temp file";

  const int again_code =
      run_tool("kernel_cache_tool", {"get", cache.string(), tag, unroll}, &output, scratch.path());
  const ToolResult again = parse(again_code, output);
  EXPECT_EQ(again.tier, "disk") << output;
  EXPECT_EQ(again.compiles, 0u);
}

}  // namespace
}  // namespace cuinline
