// What checking an entry's seal costs a disk hit: a private cache (no seal), a team cache with a fleet
// key (HMAC-SHA256) and one with signed entries (Ed25519, a verifier holding the trusted public keys).
//
//   bench_entry_auth [--runs N] [--bytes N]
//
// No GPU needed: the entries hold fabricated binaries (the disk tier does not look inside). Two
// tables, printed as markdown: a hit in a process that has the cache open (DiskCache::load of one
// entry, again and again: read, seal, checksum, decode), and a hit in a new process (from before the
// DiskCache is made to the program in hand, keys read and OpenSSL started included), medians of
// --runs processes.

#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "cache/entry_sign.hpp"
#include "cuinline/cache.hpp"

using namespace cuinline;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5)];
}

CompiledProgram program_of(std::size_t bytes) {
  CompiledProgram p;
  p.kind = BinaryKind::cubin;
  p.arch = Arch::parse("sm_90");
  p.program_name = "bench.cu";
  p.lowered_names = {{"k", "k"}};
  p.binary.resize(bytes);
  std::mt19937_64 gen(42);
  for (auto& c : p.binary) c = static_cast<char>(gen());
  return p;
}

CacheKey key_of(int i) {
  CacheKey key;
  for (std::size_t j = 0; j < key.digest.size(); ++j) key.digest[j] = static_cast<unsigned char>(i * 131 + j);
  return key;
}

struct Setup {
  fs::path root, fleet_key, signing_key, trusted;
};

// mode: "private", "fleet" (reader and writer hold the fleet key), "signed" (the writer signs; the
// reader holds the trusted list only).
CacheConfig config_for(const Setup& s, const std::string& mode, bool writer) {
  CacheConfig c;
  c.directory = s.root / mode;
  if (mode == "private") return c;
  c.allow_shared_directory = true;
  if (mode == "fleet") {
    c.remote.key_file = s.fleet_key;
  } else {
    c.remote.trusted_keys_file = s.trusted;
    if (writer) c.remote.signing_key_file = s.signing_key;
  }
  return c;
}

double thread_cpu_us() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_nsec) * 1e-3;
}

double cpu_ms() {
  timespec t{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) * 1e-6;
}

// A new process's hit: prints the wall and CPU milliseconds from before the DiskCache to the program
// in hand (CPU time is what the work costs when other programs share the cores).
int child(const Setup& s, const std::string& mode) {
  const auto t0 = Clock::now();
  const double c0 = cpu_ms();
  DiskCache disk(config_for(s, mode, false));
  const auto hit = disk.load(key_of(0));
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  std::printf("%.4f %.4f\n", ms, cpu_ms() - c0);
  return hit ? 0 : 1;
}

// Wall and CPU milliseconds of one new process's hit; false if it failed.
bool run_child(const std::string& self, const Setup& s, const std::string& mode, double* wall, double* cpu) {
  int fds[2];
  if (::pipe(fds) != 0) return false;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    ::close(fds[1]);
    ::execl(self.c_str(), self.c_str(), "--child", mode.c_str(), s.root.c_str(), nullptr);
    ::_exit(127);
  }
  ::close(fds[1]);
  char buf[128] = {};
  const ssize_t n = ::read(fds[0], buf, sizeof buf - 1);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (n <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return false;
  char* end = nullptr;
  *wall = std::strtod(buf, &end);
  *cpu = std::strtod(end, nullptr);
  return true;
}

Setup setup_at(const fs::path& root) {
  Setup s;
  s.root = root;
  s.fleet_key = root / "fleet.key";
  s.signing_key = root / "ci.key";
  s.trusted = root / "trusted_keys";
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "--child") return child(setup_at(argv[3]), argv[2]);
  int runs = 21;
  std::size_t bytes = 16384;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--runs") runs = std::max(3, std::atoi(argv[i + 1]));
    if (std::string(argv[i]) == "--bytes")
      bytes = static_cast<std::size_t>(std::max(64L, std::atol(argv[i + 1])));
  }
  std::string pattern = (fs::temp_directory_path() / "cuinline-bench-auth-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) return 1;
  const Setup s = setup_at(pattern);
  {
    std::ofstream(s.fleet_key)
        << "fleet-1 00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n";
    fs::permissions(s.fleet_key, fs::perms::owner_read | fs::perms::owner_write);
    const auto key = detail::SigningKey::generate("ci-1", "bench");
    key.write_file(s.signing_key);
    std::ofstream(s.trusted) << key.public_line() << "\n";
    fs::permissions(s.trusted, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                                   fs::perms::others_read);
  }
  const std::vector<std::string> modes = {"private", "fleet", "signed"};
  const std::vector<std::size_t> sizes = {bytes, std::size_t{1} << 20};
  std::printf(
      "## A hit in an open cache (DiskCache::load of one entry, 400 times): median microseconds, wall / "
      "CPU\n\n");
  std::printf(
      "| entry binary | private (no seal) | fleet key (HMAC-SHA256) | signed (Ed25519) "
      "|\n|---|---:|---:|---:|\n");
  for (const std::size_t size : sizes) {
    std::printf("| %zu B |", size);
    for (const auto& mode : modes) {
      {
        DiskCache writer(config_for(s, mode, true));
        writer.store(key_of(static_cast<int>(size % 1000) + 1), program_of(size));
      }
      DiskCache reader(config_for(s, mode, false));
      const CacheKey key = key_of(static_cast<int>(size % 1000) + 1);
      std::vector<double> us, cpu_us;
      for (int i = 0; i < 20; ++i) reader.load(key);  // warm up: page cache, OpenSSL
      for (int i = 0; i < 400; ++i) {
        const auto t0 = Clock::now();
        const double c0 = thread_cpu_us();
        const auto hit = reader.load(key);
        cpu_us.push_back(thread_cpu_us() - c0);
        us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
        if (!hit) {
          std::fprintf(stderr, "bench_entry_auth: no hit in mode %s\n", mode.c_str());
          return 1;
        }
      }
      std::printf(" %.1f / %.1f |", median(us), median(cpu_us));
    }
    std::printf("\n");
  }
  for (const auto& mode : modes) {
    DiskCache writer(config_for(s, mode, true));
    writer.store(key_of(0), program_of(bytes));
  }
  char self[4096] = {};
  if (::readlink("/proc/self/exe", self, sizeof self - 1) <= 0) return 1;
  std::printf(
      "\n## A hit in a new process (%zu B binary; DiskCache made, keys read, entry loaded): ms, %d "
      "processes\n\n",
      bytes, runs);
  std::printf("| cache | wall: median | wall: p90 | CPU: median | CPU: min |\n|---|---:|---:|---:|---:|\n");
  for (const auto& mode : modes) {
    std::vector<double> wall, cpu;
    for (int i = 0; i < runs; ++i) {
      double w = 0, c = 0;
      if (!run_child(self, s, mode, &w, &c)) {
        std::fprintf(stderr, "bench_entry_auth: the %s child failed\n", mode.c_str());
        return 1;
      }
      wall.push_back(w);
      cpu.push_back(c);
    }
    std::printf("| %s | %.3f | %.3f | %.3f | %.3f |\n", mode.c_str(), median(wall), percentile(wall, 0.9),
                median(cpu), *std::min_element(cpu.begin(), cpu.end()));
  }
  std::error_code ec;
  fs::remove_all(s.root, ec);
  return 0;
}
