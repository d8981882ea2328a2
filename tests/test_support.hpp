#pragma once
// Small helpers shared by the tests: temporary directories, fresh random data, child processes.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cuinline/jit.hpp>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

namespace cuinline::test {

// A test binary's last calls may leave specializations compiling in the background (the default
// async policy: a conv2d's or a chain's first calls). The binary waits for them before it exits,
// so it never exits inside NVRTC's first compile of the process (docs/jit.md, "At exit").
class SettleSpecializations : public ::testing::Environment {
 public:
  void TearDown() override { wait_for_specializations(); }
};
inline ::testing::Environment* const settle_specializations =
    ::testing::AddGlobalTestEnvironment(new SettleSpecializations);

// A fresh directory under the build tree's temp area, removed on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& tag = "t") {
    std::string pattern = (std::filesystem::temp_directory_path() / ("cuinline-" + tag + "-XXXXXX")).string();
    if (mkdtemp(pattern.data()) == nullptr) std::abort();
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, ec);
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// A seed that differs on every run (tests never run on the same data twice), printed on failure
// through SCOPED_TRACE by the caller if wanted.
// A new seed each run (tests print it), or CUINLINE_TEST_SEED's value to replay a printed one.
inline std::uint64_t fresh_seed() {
  if (const char* e = std::getenv("CUINLINE_TEST_SEED"); e != nullptr && *e != '\0') return std::strtoull(e, nullptr, 10);
  return std::random_device{}() ^ (std::uint64_t{std::random_device{}()} << 32);
}

struct ProcessResult {
  int exit_code = -1;  // -1: killed by a signal
  int signal = 0;
  std::string output;  // stdout and stderr
};

// Runs `argv` with extra environment `env` ("NAME=value"), capturing its output.
inline ProcessResult run_process(const std::vector<std::string>& argv,
                                 const std::vector<std::string>& env = {}) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) std::abort();
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(pipe_fds[1], 1);
    dup2(pipe_fds[1], 2);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    for (const auto& e : env) putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(pipe_fds[1]);
  ProcessResult result;
  char buf[4096];
  ssize_t n;
  while ((n = read(pipe_fds[0], buf, sizeof(buf))) > 0)
    result.output.append(buf, static_cast<std::size_t>(n));
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

// The byte counts of ptxas -v's "N bytes spill stores" lines in a compile log, one a function
// compiled; empty when the log holds no report.
inline std::vector<long> spill_stores(const std::string& log) {
  std::vector<long> bytes;
  for (std::size_t at = log.find(" bytes spill stores"); at != std::string::npos;
       at = log.find(" bytes spill stores", at + 1)) {
    std::size_t start = at;
    while (start > 0 && log[start - 1] >= '0' && log[start - 1] <= '9') --start;
    bytes.push_back(start < at ? std::stol(log.substr(start, at - start)) : -1);
  }
  return bytes;
}

inline std::string tool_path(const std::string& name) {
  return std::string(CUINLINE_TEST_TOOLS_DIR) + "/" + name;
}

}  // namespace cuinline::test
