// One compile per variant, fleet-wide: 4 processes × 8 threads, each process
// with a disk cache of its own, sharing one Redis, all asking for the same 30 kernels at the same
// moment. Exactly one NVRTC compile per kernel in total, every answer right.

#include <fcntl.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>

#include "remote_test_util.hpp"

#if CUINLINE_TEST_HAVE_REDIS

namespace cuinline {
namespace {

// A tools/ program with its stdout in `out` (disk_cache_test_util.hpp has the same, with a TempDir
// of its own that clashes with test_support.hpp's).
pid_t spawn_tool(const std::string& name, const std::vector<std::string>& args, const std::string& out) {
  const std::string path = test::tool_path(name);
  std::vector<std::string> strings{path};
  strings.insert(strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) ::dup2(fd, STDOUT_FILENO);
    ::execv(path.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

int wait_tool(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -2;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(RemoteStress, OneCompilePerVariantAcrossProcesses) {
  REDIS_OR_SKIP();
  test::Fleet fleet(/*tcp=*/true);
  constexpr int kProcesses = 4, kThreads = 16, kKernels = 50;  // the 4 processes x 16 threads, 50 variants
  const int base = static_cast<int>(test::fresh_seed() % 100000) * 100;
  const long long start_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count() +
                             1500;
  std::vector<pid_t> pids;
  std::vector<std::string> outputs;
  for (int p = 0; p < kProcesses; ++p) {
    outputs.push_back((fleet.dir.path() / ("out-" + std::to_string(p))).string());
    pids.push_back(spawn_tool("remote_stress_worker",
                              {(fleet.dir.path() / ("disk-" + std::to_string(p))).string(), fleet.redis.url(),
                               fleet.key_file.string(), std::to_string(kThreads), std::to_string(kKernels),
                               std::to_string(base), std::to_string(start_ms)},
                              outputs.back()));
  }
  std::map<int, int> compiled;  // kernel → compiles across all processes
  for (int p = 0; p < kProcesses; ++p) {
    EXPECT_EQ(wait_tool(pids[static_cast<std::size_t>(p)]), 0) << "process " << p;
    const std::string out = read_file(outputs[static_cast<std::size_t>(p)]);
    std::printf("%s", out.c_str());
    const auto at = out.find("compiled=");
    ASSERT_NE(at, std::string::npos) << out;
    std::istringstream list(out.substr(at + 9, out.find(' ', at) - at - 9));
    for (std::string item; std::getline(list, item, ',');) {
      if (item != "-") ++compiled[std::stoi(item)];
    }
  }
  for (int k = 0; k < kKernels; ++k)
    EXPECT_EQ(compiled[k], 1) << "kernel " << k << " compiled " << compiled[k] << " times";
  EXPECT_EQ(fleet.redis.integer({"DBSIZE"}), kKernels) << "an entry per kernel and no lease left behind";
  RemoteCache remote(fleet.config("check").remote);
  for (const CacheKey& key : remote.keys()) EXPECT_EQ(remote.check(key), RemoteEntryCheck::ok);
}

}  // namespace
}  // namespace cuinline

#else  // a build without hiredis: nothing to test but that it says so

TEST(RemoteStressBuild, NeedsRedisSupport) {
  GTEST_SKIP() << ::cuinline::test::redis_skip_reason();
}

#endif
