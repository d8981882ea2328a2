#pragma once
// The CliTest fixture: runs the `cuinline` command as a subprocess with a temporary CUINLINE_CACHE_DIR
// (test_cli.cpp, test_cli_inputs.cpp).

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cuinline/kernel_cache.hpp>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace cuinline::test {

namespace fs = std::filesystem;

struct Result {
  int code = -1;  // -1 when killed by a signal
  int signal = 0;
  std::string out, err;
  long max_rss_kb = 0;  // the process's peak resident memory
};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "cuinline-cli-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    cache_ = dir_ / "cache";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // Runs `tool args...` with CUINLINE_CACHE_DIR = cache_, stdin from `input`, stdout and stderr
  // captured separately.
  Result run_tool(const std::string& tool, const std::vector<std::string>& args,
                  const std::string& input = "") {
    fs::path in = dir_ / "stdin.txt", out = dir_ / "stdout.txt", err = dir_ / "stderr.txt";
    write_file(in, input);
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
      std::string entry = *e;
      if (entry.rfind("CUINLINE_CACHE_DIR=", 0) != 0 && entry.rfind("CUINLINE_CACHE_MAX_BYTES=", 0) != 0) {
        env.push_back(entry);
      }
    }
    env.push_back("CUINLINE_CACHE_DIR=" + cache_.string());
    std::vector<std::string> argv = {tool};
    argv.insert(argv.end(), args.begin(), args.end());
    pid_t pid = fork();
    if (pid == 0) {
      int fd_in = open(in.c_str(), O_RDONLY), fd_out = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      int fd_err = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      dup2(fd_in, 0);
      dup2(fd_out, 1);
      dup2(fd_err, 2);
      std::vector<char*> cargs, cenv;
      for (auto& a : argv) cargs.push_back(a.data());
      cargs.push_back(nullptr);
      for (auto& e : env) cenv.push_back(e.data());
      cenv.push_back(nullptr);
      execve(cargs[0], cargs.data(), cenv.data());
      _exit(127);
    }
    int status = 0;
    struct rusage usage {};
    wait4(pid, &status, 0, &usage);
    Result r;
    r.max_rss_kb = usage.ru_maxrss;
    if (WIFEXITED(status)) r.code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
    r.out = read_file(out);
    r.err = read_file(err);
    return r;
  }
  Result cli(const std::vector<std::string>& args, const std::string& input = "") {
    return run_tool(CUINLINE_CLI_PATH, args, input);
  }
  Result probe(const std::vector<std::string>& args) {
    return run_tool(std::string(CUINLINE_TEST_TOOLS_DIR) + "/cli_cache_probe", args);
  }
  fs::path write_spec(const std::string& name, const std::string& json) {
    fs::path path = dir_ / name;
    write_file(path, json);
    return path;
  }
  // A spec of seven elementwise variants (sm_90): for tests that need a cache with entries in it, not
  // the seed spec's conv compiles (WarmSeedsThenANewProcessGetsDiskHits warms that spec itself).
  std::string small_spec() {
    return write_spec("small.json",
                      R"({"entries": [{"kind": "op", "op": "relu", "dtype": "f32", "shape": [4096, 1024]},
                                      {"kind": "op", "op": "leaky_relu", "slope": 0.01, "dtype": "f16",
                                       "shape": [4096, 1024]}]})")
        .string();
  }
  // Entry files (64 hex digits) in the cache directory.
  std::vector<fs::path> entry_files() const {
    std::vector<fs::path> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(cache_, ec)) {
      if (e.is_regular_file() && e.path().filename().string().size() == 64) out.push_back(e.path());
    }
    return out;
  }
  std::uint64_t directory_bytes() const {
    std::uint64_t total = 0;
    std::error_code ec;
    for (const auto& e : fs::recursive_directory_iterator(cache_, ec)) {
      if (e.is_regular_file()) total += e.file_size();
    }
    return total;
  }

  // A KernelCache over the cache directory (made on first use: after the warm that filled it).
  cuinline::KernelCache& warmed_cache() {
    if (!warmed_) {
      cuinline::CacheConfig config;
      config.directory = cache_;
      warmed_ = std::make_unique<cuinline::KernelCache>(config);
    }
    return *warmed_;
  }
  // The tier warmed_cache() serves `request` for `arch` from (CacheTier::compiled: it had to compile
  // it). Its memory tier is emptied after, so each lookup reads what is on disk.
  cuinline::CacheTier tier_of(const cuinline::CompileRequest& request,
                              const cuinline::Arch& arch = cuinline::Arch::parse("sm_90")) {
    cuinline::CacheTier tier = cuinline::CacheTier::compiled;
    warmed_cache().get(request, arch, &tier);
    warmed_cache().clear_memory();
    return tier;
  }

  fs::path dir_, cache_;
  std::unique_ptr<cuinline::KernelCache> warmed_;
};
const std::string kSeeds = std::string(CUINLINE_SOURCE_DIR) + "/examples/specs/seeds.json";

#define EXPECT_CONTAINS(haystack, needle) EXPECT_NE((haystack).find(needle), std::string::npos) << (haystack)

}  // namespace cuinline::test
