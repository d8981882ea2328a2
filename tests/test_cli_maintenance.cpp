// Processes and concurrent maintenance: killing `cuinline warm` kills its workers;
// `cache clear` leaves a live writer's temp file; `cache list/stats/verify`, `info` and
// `warm --dry-run` create nothing;
// `cache verify [--fix]` reports and removes entries someone else could have written.

#include <sys/prctl.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <thread>

#include "cli_test_support.hpp"

namespace {

using namespace cuinline::test;

// Children of `pid` (Linux: /proc/<pid>/task/<pid>/children).
std::vector<pid_t> children_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  std::vector<pid_t> out;
  for (pid_t child = 0; in >> child;) out.push_back(child);
  return out;
}

TEST_F(CliTest, KillingWarmKillsItsWorkers) {
  // Enough variants that two workers are busy for minutes: 400 slopes of leaky_relu.
  std::string slopes;
  for (int i = 0; i < 400; ++i) slopes += (i ? "," : "") + std::to_string(0.001 * (i + 1));
  const fs::path spec = write_spec("many.json", R"({"entries": [{"kind": "op", "op": "leaky_relu", "slope": [)" +
                                                    slopes + R"(], "dtype": "f32", "vector_width": 4}]})");
  // Orphans are re-parented to this process, so it can reap the workers and see how they ended.
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  const pid_t warm = ::fork();
  if (warm == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::dup2(null, 2);
    ::setenv("CUINLINE_CACHE_DIR", cache_.c_str(), 1);
    ::execl(CUINLINE_CLI_PATH, CUINLINE_CLI_PATH, "warm", "--spec", spec.c_str(), "--arch", "sm_90", "-j", "2",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ASSERT_GT(warm, 0);
  // Wait for both workers (a guard against a hang, not a timing check).
  std::vector<pid_t> workers;
  for (int i = 0; i < 6000 && workers.size() < 2; ++i) {
    workers = children_of(warm);
    if (workers.size() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(workers.size(), 2u) << "warm never started its workers";
  ASSERT_EQ(::kill(warm, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(warm, &status, 0), warm);
  EXPECT_TRUE(WIFSIGNALED(status));
  // Each worker ends by SIGKILL, sent by the kernel as its parent died (PR_SET_PDEATHSIG). Without
  // it they compiled on as orphans and exited 0 when the spec was done.
  for (const pid_t worker : workers) {
    ASSERT_EQ(::waitpid(worker, &status, 0), worker) << "worker " << worker << ": " << std::strerror(errno);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "worker " << worker << " outlived warm (status " << status << ")";
  }
  ::prctl(PR_SET_CHILD_SUBREAPER, 0);
}

TEST_F(CliTest, ClearLeavesALiveWritersTempFile) {
  Result warm = cli({"warm", "--spec", small_spec(), "--arch", "sm_90", "-j", "2"});
  ASSERT_EQ(warm.code, 0) << warm.err;
  ASSERT_FALSE(entry_files().empty());
  // A writer at work (its temp file just created) and one that died long ago.
  const fs::path live = cache_ / ".tmp-0123456789abcdef-1-0-0000000000000000";
  const fs::path stale = cache_ / ".tmp-0123456789abcdef-2-0-0000000000000000";
  write_file(live, "half an entry");
  write_file(stale, "half an entry");
  struct timespec old[2] = {{::time(nullptr) - 3600, 0}, {::time(nullptr) - 3600, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, stale.c_str(), old, 0), 0);
  Result clear = cli({"cache", "clear", "--yes"});
  ASSERT_EQ(clear.code, 0) << clear.err;
  EXPECT_TRUE(entry_files().empty());
  EXPECT_TRUE(fs::exists(live)) << "clear removed the temp file of a writer still running";
  EXPECT_FALSE(fs::exists(stale)) << "a temp file an hour old is a dead writer's";
}

TEST_F(CliTest, InspectionCreatesNothing) {
  ASSERT_FALSE(fs::exists(cache_));
  const std::vector<std::vector<std::string>> inspections = {
      {"cache", "list"},   {"cache", "list", "--json"}, {"cache", "stats"}, {"cache", "stats", "--json"},
      {"cache", "verify"}, {"info"},
      {"warm", "--spec", kSeeds, "--arch", "sm_90", "--dry-run"}};
  for (const std::vector<std::string>& args : inspections) {
    Result r = cli(args);
    EXPECT_EQ(r.code, 0) << args[0] << " " << args[1] << ": " << r.err;
    EXPECT_FALSE(fs::exists(cache_)) << args[0] << " " << args[1] << " created the cache directory";
  }
  EXPECT_CONTAINS(cli({"cache", "list"}).out, "0 entries, 0 B in " + cache_.string() + " (does not exist yet)");
  EXPECT_CONTAINS(cli({"info"}).out, "does not exist yet");
  EXPECT_CONTAINS(cli({"warm", "--spec", kSeeds, "--arch", "sm_90", "--dry-run"}).out,
                  "would be compiled into " + cache_.string() + " (does not exist yet)");
  // An existing directory with entries but no lock file: inspected, and still no lock file.
  Result warm = cli({"warm", "--spec", small_spec(), "--arch", "sm_90", "-j", "2"});
  ASSERT_EQ(warm.code, 0) << warm.err;
  ASSERT_TRUE(fs::remove(cache_ / "lock"));
  const std::size_t entries = entry_files().size();
  for (const std::vector<std::string>& args : inspections) {
    Result r = cli(args);
    EXPECT_EQ(r.code, 0) << args[0] << " " << args[1] << ": " << r.err;
    EXPECT_FALSE(fs::exists(cache_ / "lock")) << args[0] << " " << args[1] << " created the lock file";
  }
  EXPECT_CONTAINS(cli({"cache", "verify"}).out, std::to_string(entries) + " entries checked, 0 bad");
  EXPECT_CONTAINS(cli({"info"}).out, std::to_string(entries) + " entries");
  EXPECT_CONTAINS(cli({"warm", "--spec", small_spec(), "--arch", "sm_90", "--dry-run"}).out,
                  std::to_string(entries) + " already cached");
}

TEST_F(CliTest, VerifyReportsPlantedEntriesAndFixRemovesThem) {
  Result warm = cli({"warm", "--spec", small_spec(), "--arch", "sm_90", "-j", "2"});
  ASSERT_EQ(warm.code, 0) << warm.err;
  const std::vector<fs::path> entries = entry_files();
  ASSERT_GE(entries.size(), 2u);
  // Valid bytes, but the group could have rewritten it (as when the directory was group-writable).
  ASSERT_EQ(::chmod(entries[0].c_str(), 0664), 0);
  Result verify = cli({"cache", "verify"});
  EXPECT_EQ(verify.code, 1) << verify.out << verify.err;
  EXPECT_CONTAINS(verify.out, "untrusted_owner");
  EXPECT_CONTAINS(verify.out, entries[0].filename().string());
  EXPECT_CONTAINS(verify.out, std::to_string(entries.size()) + " entries checked, 1 bad");
  EXPECT_TRUE(fs::exists(entries[0]));
  Result fix = cli({"cache", "verify", "--fix"});
  EXPECT_EQ(fix.code, 0) << fix.out << fix.err;
  EXPECT_FALSE(fs::exists(entries[0]));
  EXPECT_EQ(entry_files().size(), entries.size() - 1);
  EXPECT_EQ(cli({"cache", "verify"}).code, 0);
}

}  // namespace
