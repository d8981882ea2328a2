// Separate processes for the fault tests (tests/test_faults.cpp): ones that get killed, and ones
// that change process-wide state (resource limits, mount namespaces) the test must not change.
//
//   fault_tool store-big <dir> <key-hex> <mib>   publish a <mib> MiB entry (the test SIGKILLs it mid-write)
//   fault_tool hold <dir> <key-hex> <ready-file> take the key lock, create <ready-file>, wait forever
//   fault_tool fsize <dir> <limit-bytes>         with RLIMIT_FSIZE at <limit-bytes> (SIGXFSZ ignored,
//                                                so a write past it fails with EFBIG), compile kernels
//   fault_tool enospc <mount-point> <fill>       in a private mount namespace, a 64 KiB tmpfs on
//                                                <mount-point> with the cache in it; with fill=1 the
//                                                tmpfs is filled first, so publishing fails with ENOSPC
//
// fsize and enospc compile two tiny kernels for sm_90 through a KernelCache, ask for the first again,
// and print "faults: first=<tier> again=<tier> second=<tier> ok=<0|1> disk_writes=N
// write_failures=N entries=N temp_files=N"; ok=1 means every module had the right lowered name.
// Exit 0 on success, 1 on an error, 2 on bad usage, 3 when the environment cannot set up the fault.

#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>

#include "cuinline/cuinline.hpp"
#include "stress_kernels.hpp"

namespace {

using namespace cuinline;
namespace fs = std::filesystem;

int usage() {
  std::fprintf(stderr, "usage: fault_tool store-big|hold|fsize|enospc ...\n");
  return 2;
}

CacheConfig config_at(const fs::path& dir) {
  CacheConfig config;
  config.directory = dir;
  return config;
}

void count_files(const fs::path& dir, int& entries, int& temps) {
  entries = temps = 0;
  std::error_code ec;
  for (const auto& item : fs::directory_iterator(dir, ec)) {
    const std::string name = item.path().filename().string();
    if (name.rfind(".tmp-", 0) == 0) ++temps;
    if (name.size() == 64) ++entries;
  }
}

// Two kernels and a repeat through one KernelCache on `dir`; prints the "faults:" line.
int compile_and_report(const fs::path& dir) {
  KernelCache cache(config_at(dir));
  const Arch arch = Arch::parse("sm_90");
  CacheTier first = CacheTier::memory, again = CacheTier::memory, second = CacheTier::memory;
  const Module a = cache.get(test::stress_request(7), arch, &first);
  const Module a2 = cache.get(test::stress_request(7), arch, &again);
  const Module b = cache.get(test::stress_request(8), arch, &second);
  const bool ok = a.program().lowered_name(test::stress_expression(7)) == test::stress_mangled(7) &&
                  a2.program().lowered_name(test::stress_expression(7)) == test::stress_mangled(7) &&
                  b.program().lowered_name(test::stress_expression(8)) == test::stress_mangled(8);
  const CacheStats s = cache.stats();
  int entries = 0, temps = 0;
  count_files(dir, entries, temps);
  std::printf(
      "faults: first=%s again=%s second=%s ok=%d disk_writes=%llu write_failures=%llu entries=%d "
      "temp_files=%d\n",
      to_string(first), to_string(again), to_string(second), ok ? 1 : 0,
      static_cast<unsigned long long>(s.disk_writes), static_cast<unsigned long long>(s.disk_write_failures),
      entries, temps);
  return ok ? 0 : 1;
}

int store_big(const fs::path& dir, const CacheKey& key, long mib) {
  DiskCache cache(config_at(dir));
  if (!cache.usable()) return 3;
  CompiledProgram program;
  program.arch = Arch::parse("sm_90");
  program.program_name = "big";
  program.binary.assign(static_cast<std::size_t>(mib) << 20, '\x5a');
  program.lowered_names = {{"k", "k"}};
  return cache.store(key, program) ? 0 : 1;
}

int hold(const fs::path& dir, const CacheKey& key, const std::string& ready) {
  DiskCache cache(config_at(dir));
  const DiskCache::KeyLock lock = cache.lock(key);
  if (!lock.held()) return 3;
  std::ofstream(ready) << "held\n";
  while (true) ::pause();
}

int fsize(const fs::path& dir, long limit) {
  // The directory and its lock file first, under no limit.
  { DiskCache create(config_at(dir)); }
  std::signal(SIGXFSZ, SIG_IGN);
  const struct rlimit rl = {static_cast<rlim_t>(limit), static_cast<rlim_t>(limit)};
  if (::setrlimit(RLIMIT_FSIZE, &rl) != 0) return 3;
  return compile_and_report(dir);
}

int enospc(const fs::path& mount_point, bool fill) {
  if (::unshare(CLONE_NEWNS) != 0) {
    std::printf("enospc: skipped: unshare(CLONE_NEWNS): %s\n", std::strerror(errno));
    return 3;
  }
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
      ::mount("cuinline-test", mount_point.c_str(), "tmpfs", 0, "size=64k,mode=0700") != 0) {
    std::printf("enospc: skipped: mount: %s\n", std::strerror(errno));
    return 3;
  }
  const fs::path dir = mount_point / "cache";
  { DiskCache create(config_at(dir)); }
  if (fill) {
    // Fill every block, so the temp file of the publish cannot grow.
    std::FILE* filler = std::fopen((mount_point / "filler").c_str(), "wb");
    if (filler == nullptr) return 3;
    static const char block[4096] = {};
    while (std::fwrite(block, 1, sizeof block, filler) == sizeof block && std::fflush(filler) == 0) {
    }
    std::fclose(filler);
  }
  return compile_and_report(dir);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) return usage();
  const std::string command = argv[1];
  try {
    if (command == "store-big" || command == "hold") {
      if (argc != 5) return usage();
      const auto key = CacheKey::from_hex(argv[3]);
      if (!key) return usage();
      return command == "hold" ? hold(argv[2], *key, argv[4]) : store_big(argv[2], *key, std::atol(argv[4]));
    }
    if (command == "fsize") return fsize(argv[2], std::atol(argv[3]));
    if (command == "enospc") return enospc(argv[2], std::string(argv[3]) == "1");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fault_tool: %s\n", e.what());
    return 1;
  }
  return usage();
}
