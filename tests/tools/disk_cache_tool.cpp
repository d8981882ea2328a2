// A separate process for the disk-cache tests.
//
//   disk_cache_tool load <dir> <key-hex>                  exit 0 and print "hit <name> <bytes>", or exit 1
//   disk_cache_tool lock <dir> <key-hex> <hold-ms> <log>   hold the key lock, appending "start <pid>" and
//                                                          "end <pid>" lines to <log> while holding it
//   disk_cache_tool probe <dir> <key-hex>                 print usable/store/load/lock results; exit 3 if
//                                                          anything threw
//   disk_cache_tool hold <dir> <key-hex> <ready-file>      take the key lock, create <ready-file>, wait
//                                                          forever (the test kills it)
//   disk_cache_tool hold-dir <dir> <any-key> <ready-file>  the same with the directory lock (byte 0 of
//                                                          <dir>/lock, as clear and prune take it)
// Exit code 2 means a usage or setup error.

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>

#include "cuinline/cache.hpp"

namespace {

bool append_line(const std::string& path, const std::string& line) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  const std::string text = line + "\n";
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

int usage() {
  std::fprintf(stderr, "usage: disk_cache_tool load|lock|hold|probe <dir> <key-hex> ...\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) return usage();
  const std::string command = argv[1];
  const auto key = cuinline::CacheKey::from_hex(argv[3]);
  if (!key) return usage();
  if (command == "hold-dir" && argc == 5) {
    // A process that took the directory lock and never lets go (stopped, hung, or hostile).
    const int fd = ::open((std::string(argv[2]) + "/lock").c_str(), O_RDWR | O_CLOEXEC);
    struct flock range {};
    range.l_type = F_WRLCK;
    range.l_whence = SEEK_SET;
    range.l_start = 0;
    range.l_len = 1;
    if (fd < 0 || ::fcntl(fd, F_OFD_SETLK, &range) != 0) return 2;
    if (!append_line(argv[4], "held " + std::to_string(::getpid()))) return 2;
    while (true) ::pause();
  }
  cuinline::CacheConfig config;
  config.directory = argv[2];
  cuinline::DiskCache cache(config);
  if (command == "probe" && argc == 4) {
    // Everything a caller may do with an unusable cache; none of it may throw.
    try {
      const bool usable = cache.usable();
      cuinline::CompiledProgram program;
      program.program_name = "probe.cu";
      program.binary.assign(64, 'x');
      const bool stored = cache.store(*key, program);
      const bool loaded = cache.load(*key).has_value();
      const bool locked = cache.lock(*key).held();
      std::printf("usable=%d store=%d load=%d lock=%d\n", usable, stored, loaded, locked);
      return 0;
    } catch (const std::exception& e) {
      std::printf("exception: %s\n", e.what());
      return 3;
    }
  }
  if (!cache.usable()) {
    std::fprintf(stderr, "disk_cache_tool: cache at %s is not usable\n", argv[2]);
    return 2;
  }
  const std::string pid = std::to_string(::getpid());

  if (command == "load" && argc == 4) {
    const auto program = cache.load(*key);
    const auto stats = cache.stats();
    if (program) {
      std::printf("hit %s %zu %zu\n", program->program_name.c_str(), program->binary.size(),
                  program->lowered_names.size());
    } else {
      std::printf("miss\n");
    }
    std::printf("disk_hits=%llu rejected_entries=%llu\n", static_cast<unsigned long long>(stats.disk_hits),
                static_cast<unsigned long long>(stats.rejected_entries));
    return program ? 0 : 1;
  }
  if (command == "lock" && argc == 6) {
    const auto lock = cache.lock(*key);
    if (!lock.held()) return 2;
    if (!append_line(argv[5], "start " + pid)) return 2;
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(argv[4])));
    if (!append_line(argv[5], "end " + pid)) return 2;
    return 0;
  }
  if (command == "hold" && argc == 5) {
    const auto lock = cache.lock(*key);
    if (!lock.held() || !append_line(argv[4], "held " + pid)) return 2;
    while (true) ::pause();
  }
  return usage();
}
