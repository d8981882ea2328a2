#pragma once
// Helpers of the hardening tests (test_stress*, test_faults*): child processes with a time limit
// (a hang fails the test instead of stopping the suite), the "name=value" counter lines the helper
// programs in tests/tools print, entry-file editing and a log capture.

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cache/disk_cache_entry.hpp"
#include "cuinline/cache.hpp"
#include "log_capture.hpp"

namespace cuinline::test {

/// A started helper program whose stdout and stderr go to a file.
struct Child {
  pid_t pid = -1;
  std::string output_path;

  std::string output() const {
    std::ifstream in(output_path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
};

/// Starts `argv` (argv[0] a path) with `env` ("NAME=value") added to the environment.
inline Child start_child(const std::vector<std::string>& argv, const std::string& output_path,
                         const std::vector<std::string>& env = {}) {
  std::vector<std::string> strings = argv;
  std::vector<char*> args;  // built before fork: the child only calls async-signal-safe functions
  for (auto& s : strings) args.push_back(s.data());
  args.push_back(nullptr);
  std::vector<std::string> env_strings = env;
  Child child;
  child.output_path = output_path;
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) {
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
    }
    for (auto& e : env_strings) ::putenv(e.data());
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  child.pid = pid;
  return child;
}

struct ChildExit {
  bool timed_out = false;  ///< killed by us after the time limit: a hang
  int exit_code = -1;      ///< -1 when it died from a signal
  int signal = 0;
};

/// Waits up to `limit` for the child; past it, kills it (SIGKILL) and reports timed_out.
inline ChildExit wait_child(const Child& child, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  ChildExit result;
  int status = 0;
  while (::waitpid(child.pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(child.pid, SIGKILL);
      ::waitpid(child.pid, &status, 0);
      result.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

/// The counters of the first line of `output` that starts with `prefix` ("stress: a=1 b=2").
inline std::map<std::string, std::uint64_t> parse_counters(const std::string& output,
                                                           const std::string& prefix) {
  std::map<std::string, std::uint64_t> counters;
  std::istringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(prefix, 0) != 0) continue;
    std::istringstream words(line.substr(prefix.size()));
    std::string word;
    while (words >> word) {
      const auto eq = word.find('=');
      if (eq != std::string::npos)
        counters[word.substr(0, eq)] = std::strtoull(word.c_str() + eq + 1, nullptr, 10);
    }
    break;
  }
  return counters;
}

/// An integer from the environment, or `fallback`.
inline long env_long(const char* name, long fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::strtol(value, nullptr, 10) : fallback;
}

/// A floating-point number from the environment, or `fallback`.
inline double env_double(const char* name, double fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::strtod(value, nullptr) : fallback;
}

// ---- cache directories and entries -------------------------------------------------------------

inline CacheConfig config_at(const std::filesystem::path& dir) {
  CacheConfig config;
  config.directory = dir;
  return config;
}

inline std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// Names in `dir` starting with `prefix` ("" for all), the lock file left out.
inline std::vector<std::string> names_in(const std::filesystem::path& dir, const std::string& prefix = "") {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& item : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = item.path().filename().string();
    if (name != "lock" && name.rfind(prefix, 0) == 0) names.push_back(name);
  }
  return names;
}

/// Recomputes an entry's trailing checksum after a test edited its fields.
inline std::string reseal(std::string bytes) {
  const auto sum = detail::sha256(std::string_view(bytes).substr(0, bytes.size() - 32));
  bytes.replace(bytes.size() - 32, 32, reinterpret_cast<const char*>(sum.data()), 32);
  return bytes;
}

/// Writes a little-endian u32 at `offset`.
inline void put_u32_at(std::string& bytes, std::size_t offset, std::uint32_t value) {
  for (int i = 0; i < 4; ++i) bytes[offset + i] = static_cast<char>((value >> (8 * i)) & 0xff);
}

}  // namespace cuinline::test
