// Remote-cache benchmark (issue 18): a remote hit in a new process on loopback beside a disk hit
// and a compile, and `cuinline warm --remote` of a spec into an empty Redis beside a local warm.
//
//   bench_remote_cache [--cli PATH/TO/cuinline] [--spec examples/specs/bench200.json] [-j N] [--runs N]
//
// No GPU needed: everything is compiled for sm_90 and timed up to the program in memory (a GPU run
// adds the same module load to every row). Starts its own redis-server on 127.0.0.1 and a free port
// (--save '' --appendonly no); prints markdown tables, medians of --runs new processes.

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cuinline/cuinline.hpp"

using namespace cuinline;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5)];
}

InlineOptions small_kernel(int variant) {
  InlineOptions o;
  o.name = "bench_remote";
  o.cuda_sources = {
      "extern \"C\" __global__ void small(float* y, const float* x, float a, unsigned n) {\n"
      "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  if (i < n) y[i] = a * x[i] + " +
      std::to_string(variant) + ".0f;\n}\n"};
  o.functions = {"small"};
  o.arch = Arch::parse("sm_90");
  return o;
}

// Child: a new process asks for kernel `variant` once; prints the milliseconds from before the cache
// is created to the program in hand, and where it came from.
int child(const char* dir, const char* url, const char* key_file, int variant) {
  const auto t0 = Clock::now();
  CacheConfig config;
  config.directory = dir;
  config.remote.url = url;
  config.remote.key_file = key_file;
  KernelCache cache(config);
  InlineOptions o = small_kernel(variant);
  o.cache = &cache;
  Module m = load_inline(o);
  const double ms = ms_since(t0);
  std::printf("%.4f %s\n", ms, to_string(m.tier()));
  return 0;
}

std::string self_path() {
  char buf[4096] = {};
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "";
}

// Runs `argv`; returns stdout, the wall time in `ms`.
std::string run(const std::vector<std::string>& args, double* ms = nullptr,
                const std::vector<std::string>& env = {}) {
  int fds[2];
  if (pipe(fds) != 0) return "";
  const auto t0 = Clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    for (const auto& e : env) putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  waitpid(pid, nullptr, 0);
  if (ms) *ms = ms_since(t0);
  return out;
}

int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

struct Redis {
  pid_t pid = -1;
  int port = 0;
  ~Redis() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
  bool start(const std::string& dir) {
    port = free_port();
    const std::vector<std::string> args{"/usr/bin/redis-server",
                                        "--port",
                                        std::to_string(port),
                                        "--bind",
                                        "127.0.0.1",
                                        "--save",
                                        "",
                                        "--appendonly",
                                        "no",
                                        "--dir",
                                        dir,
                                        "--loglevel",
                                        "warning",
                                        "--logfile",
                                        dir + "/redis.log"};
    pid = fork();
    if (pid == 0) {
      std::vector<char*> argv;
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    RemoteCacheConfig c;
    c.url = url();
    for (int i = 0; i < 500; ++i) {  // up when a connection is accepted
      const int fd = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(static_cast<uint16_t>(port));
      const bool up = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
      close(fd);
      if (up) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port); }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc == 6 && std::strcmp(argv[1], "--child") == 0)
    return child(argv[2], argv[3], argv[4], std::atoi(argv[5]));
  std::string cli, spec = std::string(CUINLINE_BENCH_SOURCE_DIR) + "/examples/specs/bench200.json",
                   jobs = "2";
  int runs = 21;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--cli") == 0) cli = argv[i + 1];
    if (std::strcmp(argv[i], "--spec") == 0) spec = argv[i + 1];
    if (std::strcmp(argv[i], "-j") == 0) jobs = argv[i + 1];
    if (std::strcmp(argv[i], "--runs") == 0) runs = std::atoi(argv[i + 1]);
  }
  if (!RemoteCache::supported()) {
    std::printf(
        "bench_remote_cache: this build has no Redis support (CUINLINE_WITH_REDIS); nothing to measure\n");
    return 0;
  }
  if (access("/usr/bin/redis-server", X_OK) != 0) {
    std::printf("bench_remote_cache: /usr/bin/redis-server is not installed (scripts/setup installs it)\n");
    return 0;
  }
  char tmpl[] = "/tmp/cuinline-bench-remote-XXXXXX";
  const std::string root = mkdtemp(tmpl);
  Redis redis;
  if (!redis.start(root)) {
    std::fprintf(stderr, "bench_remote_cache: redis-server did not start\n");
    return 1;
  }
  const std::string key_file = root + "/fleet.key";
  {
    std::ofstream out(key_file);
    out << "bench 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n";
  }
  chmod(key_file.c_str(), 0600);
  const std::string self = self_path(), none = "";

  // One process per sample; each row's process finds the state its name says.
  std::vector<double> compile_ms, disk_ms, remote_ms;
  for (int r = 0; r < runs; ++r) {
    const int variant = 1000 + r;
    const std::string d1 = root + "/m1-" + std::to_string(r), d2 = root + "/m2-" + std::to_string(r);
    double ms = 0;
    std::string out = run({self, "--child", d1, redis.url(), key_file, std::to_string(variant)});
    if (out.find("compiled") != std::string::npos) compile_ms.push_back(std::atof(out.c_str()));
    out = run({self, "--child", d1, redis.url(), key_file, std::to_string(variant)});
    if (out.find("disk") != std::string::npos) disk_ms.push_back(std::atof(out.c_str()));
    out = run({self, "--child", d2, redis.url(), key_file, std::to_string(variant)}, &ms);
    if (out.find("remote") != std::string::npos) remote_ms.push_back(std::atof(out.c_str()));
  }
  std::printf("## Remote cache: one small kernel (load_inline, sm_90) in a new process, %d runs\n\n", runs);
  std::printf("| served from | median ms | p90 ms | samples |\n|---|---:|---:|---:|\n");
  std::printf("| compile (miss everywhere; publish to disk + Redis) | %.3f | %.3f | %zu |\n",
              percentile(compile_ms, 0.5), percentile(compile_ms, 0.9), compile_ms.size());
  std::printf("| disk hit | %.3f | %.3f | %zu |\n", percentile(disk_ms, 0.5), percentile(disk_ms, 0.9),
              disk_ms.size());
  std::printf("| remote hit on loopback (copy to the local disk in the background) | %.3f | %.3f | %zu |\n",
              percentile(remote_ms, 0.5), percentile(remote_ms, 0.9), remote_ms.size());
  std::printf(
      "\nTimed from before the KernelCache is created to the program in hand (no GPU: no module load).\n");

  if (!cli.empty()) {
    std::printf("\n## `cuinline warm` of %s, sm_90, -j %s\n\n", spec.c_str(), jobs.c_str());
    std::printf("| run | wall s | summary |\n|---|---:|---|\n");
    const auto warm = [&](const std::string& label, const std::string& dir, bool remote) {
      std::vector<std::string> args{cli,     "warm", "--spec", spec,           "--arch",
                                    "sm_90", "-j",   jobs,     "--no-progress"};
      if (remote) args.push_back("--remote");
      double ms = 0;
      const std::string out = run(args, &ms,
                                  {"CUINLINE_CACHE_DIR=" + dir, "CUINLINE_REMOTE_CACHE=" + redis.url(),
                                   "CUINLINE_CACHE_KEY_FILE=" + key_file, "CUINLINE_LOG_LEVEL=error"});
      std::string summary;
      if (const auto at = out.find("warm: "); at != std::string::npos)
        summary = out.substr(at, out.find('\n', at) - at);
      std::printf("| %s | %.2f | %s |\n", label.c_str(), ms / 1000.0, summary.c_str());
      std::fflush(stdout);
    };
    warm("local warm, empty disk", root + "/w-local", false);
    warm("warm --remote, empty disk, empty Redis", root + "/w-remote1", true);
    warm("warm --remote, empty disk, Redis full of them (another build machine)", root + "/w-remote2", true);
    warm("local warm, disk full of them", root + "/w-local", false);
  }
  std::error_code ec;
  std::filesystem::remove_all(root, ec);
  return 0;
}
