#pragma once
// Shared by the disk-cache tests: temp directories, fabricated programs, file helpers, a log
// capture and a way to run the helper programs of tests/tools.

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cache/disk_cache_entry.hpp"
#include "cuinline/cache.hpp"
#include "cuinline/error.hpp"
#include "log_capture.hpp"

namespace cuinline::test {

namespace fs = std::filesystem;

/// A fresh private directory per test, removed afterwards (even if a test chmod'ed it).
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "cuinline-disk-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(path_, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_directory(ec)) ::chmod(it->path().c_str(), 0700);
    }
    ::chmod(path_.c_str(), 0700);
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

inline std::mt19937_64& rng() {
  static std::mt19937_64 engine{std::random_device{}()};
  return engine;
}

inline CacheKey make_key(const std::string& seed) {
  CacheKey key;
  key.digest = detail::sha256(seed + std::to_string(rng()()));
  return key;
}

/// A CompiledProgram with fabricated (random) binary bytes; the disk tier does not look inside.
inline CompiledProgram make_program(const std::string& name, std::size_t binary_size = 4096) {
  CompiledProgram program;
  program.kind = BinaryKind::cubin;
  program.arch = Arch{9, 0, 'a'};
  program.program_name = name;
  program.binary.resize(binary_size);
  for (auto& byte : program.binary) byte = static_cast<char>(rng()());
  const char elf[4] = {'\x7f', 'E', 'L', 'F'};
  std::copy(elf, elf + 4, program.binary.begin());
  program.lowered_names = {{"leaky<float, 4>", "_Z5leakyILi4EEvPf"}, {"&plain", "plain"}};
  return program;
}

inline CacheConfig config_for(const fs::path& dir, std::uint64_t max_bytes = std::uint64_t{1} << 30) {
  CacheConfig config;
  config.directory = dir;
  config.max_bytes = max_bytes;
  return config;
}

inline std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// Sets atime and mtime to `seconds_ago` before now.
inline void set_age(const fs::path& path, long seconds_ago) {
  struct timespec times[2];
  ::clock_gettime(CLOCK_REALTIME, &times[0]);
  times[0].tv_sec -= seconds_ago;
  times[1] = times[0];
  ::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW);
}

inline long age_seconds(const fs::path& path) {
  struct stat st {};
  ::lstat(path.c_str(), &st);
  return static_cast<long>(::time(nullptr) - st.st_mtim.tv_sec);
}

/// Names in `dir` other than the lock file.
inline std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& item : fs::directory_iterator(dir)) {
    if (item.path().filename() != "lock") names.push_back(item.path().filename().string());
  }
  return names;
}

/// Recomputes the trailing checksum after a test edited an entry's fields.
inline std::string reseal(std::string bytes) {
  const auto sum = detail::sha256(std::string_view(bytes).substr(0, bytes.size() - 32));
  bytes.replace(bytes.size() - 32, 32, reinterpret_cast<const char*>(sum.data()), 32);
  return bytes;
}

inline std::string tool_path(const std::string& name) {
  return std::string(CUINLINE_TEST_TOOLS_DIR) + "/" + name;
}

/// Starts a tools/ program with `args`; its stdout goes to `stdout_path` if given.
inline pid_t spawn_tool(const std::string& name, const std::vector<std::string>& args,
                        const std::string& stdout_path = "") {
  const std::string path = tool_path(name);
  std::vector<std::string> argv_strings{path};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;  // built before fork: the child only makes async-signal-safe calls
  for (auto& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (!stdout_path.empty()) {
      const int fd = ::open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (fd >= 0) ::dup2(fd, STDOUT_FILENO);
    }
    ::execv(path.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

/// Waits up to `timeout` for `pid`; returns its exit code, or -1 (and kills it) on a timeout,
/// -2 if it died from a signal.
inline int wait_tool(pid_t pid, std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (true) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -2;
}

/// Runs a tools/ program to completion; returns its exit code and fills `output` with its stdout.
inline int run_tool(const std::string& name, const std::vector<std::string>& args, std::string* output,
                    const fs::path& scratch) {
  const std::string out_path = (scratch / ("tool-output-" + std::to_string(rng()()))).string();
  const int code = wait_tool(spawn_tool(name, args, out_path));
  if (output != nullptr) *output = read_file(out_path);
  ::unlink(out_path.c_str());
  return code;
}

}  // namespace cuinline::test
