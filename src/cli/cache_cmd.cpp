// cuinline cache list | stats | verify | prune | clear: the disk tier, through DiskCache.

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <cstdio>
#include <cuinline/cache.hpp>
#include <cuinline/error.hpp>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cli/commands.hpp"
#include "cli/util.hpp"

namespace cuinline::cli {
namespace {

std::string kind_name(BinaryKind kind) {
  return kind == BinaryKind::ptx ? "ptx" : "cubin";
}

std::string kernel_names(const DiskEntryInfo& entry) {
  std::string out;
  for (const auto& name : entry.lowered_names) out += (out.empty() ? "" : ", ") + name.first;
  // An entry is data from a file: a terminal must not interpret what its names hold.
  return escape_control(out.empty() ? entry.program_name : out);
}

std::string nvrtc_name(const NvrtcVersion& v) {
  return std::to_string(v.major) + "." + std::to_string(v.minor);
}

std::string shorten(std::string text, std::size_t max) {
  if (text.size() > max) text = text.substr(0, max - 3) + "...";
  return text;
}

// Opens the directory. `inspect` (list, stats, verify without --fix): nothing is created, not even
// the directory or its lock file; a directory that does not exist yet is an empty cache (nullptr).
std::unique_ptr<DiskCache> open_cache(const CacheOptions& options, bool inspect = false) {
  CacheConfig config = cache_command_config(options);
  config.create = !inspect;
  auto disk = std::make_unique<DiskCache>(config);
  if (!disk->usable()) {
    struct stat st {};
    if (inspect && ::lstat(disk->directory().c_str(), &st) != 0 && errno == ENOENT) return nullptr;
    throw Error("the cache directory " + disk->directory().string() + " cannot be used");
  }
  // prune, clear, verify --fix: a shipped cache this user may not write is refused before anything.
  if (!inspect && disk->read_only()) {
    throw Error("the cache directory " + disk->directory().string() +
                " is read-only (this user cannot write it); nothing was changed");
  }
  return disk;
}

// The directory a command works on, for messages when it does not exist.
std::string directory_of(const CacheOptions& options) {
  const CacheConfig config = cli_cache_config(options.cache_dir);
  return (config.directory.empty() ? default_cache_directory() : config.directory).string();
}

std::vector<DiskEntryInfo> sorted_entries(const DiskCache& disk) {
  auto entries = disk.list();
  std::sort(entries.begin(), entries.end(),
            [](const DiskEntryInfo& a, const DiskEntryInfo& b) { return a.last_use > b.last_use; });
  return entries;
}

}  // namespace

CacheConfig cache_command_config(const CacheOptions& options) {
  CacheConfig config = cli_cache_config(options.cache_dir);
  if (!options.trusted_keys.empty()) config.remote.trusted_keys_file = options.trusted_keys;
  return config;
}

int run_cache_list(const CacheOptions& options) {
  auto disk = open_cache(options, /*inspect=*/true);
  auto entries = disk ? sorted_entries(*disk) : std::vector<DiskEntryInfo>{};
  const std::string directory = disk ? disk->directory().string() : directory_of(options);
  if (options.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& e : entries) {
      nlohmann::json names = nlohmann::json::array();
      for (const auto& [expression, lowered] : e.lowered_names)
        names.push_back({{"expression", expression}, {"lowered", lowered}});
      out.push_back({{"key", e.key.hex()},
                     {"program", e.program_name},
                     {"kernels", names},
                     {"arch", e.arch.name()},
                     {"kind", kind_name(e.kind)},
                     {"nvrtc", nvrtc_name(e.nvrtc)},
                     {"bytes", e.size_bytes},
                     {"last_use", format_file_time(e.last_use)},
                     {"path", e.path.string()}});
    }
    std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return kExitOk;
  }
  std::printf("%-16s  %-7s %-5s %10s  %-19s  %s\n", "KEY", "ARCH", "KIND", "SIZE", "LAST USE", "KERNELS");
  std::uint64_t total = 0;
  for (const auto& e : entries) {
    total += e.size_bytes;
    std::printf("%-16s  %-7s %-5s %10s  %-19s  %s\n", e.key.hex().substr(0, 16).c_str(),
                e.arch.name().c_str(), kind_name(e.kind).c_str(), format_bytes(e.size_bytes).c_str(),
                format_file_time(e.last_use).c_str(), shorten(kernel_names(e), 80).c_str());
  }
  std::printf("%zu entr%s, %s in %s%s\n", entries.size(), entries.size() == 1 ? "y" : "ies",
              format_bytes(total).c_str(), directory.c_str(), disk ? "" : " (does not exist yet)");
  return kExitOk;
}

int run_cache_stats(const CacheOptions& options) {
  auto disk = open_cache(options, /*inspect=*/true);
  if (!disk) {  // no directory yet: its name and cap, zero entries
    CacheConfig off = cli_cache_config(options.cache_dir);
    off.disk_enabled = false;
    off.directory = directory_of(options);
    disk = std::make_unique<DiskCache>(off);
  }
  auto entries = disk->usable() ? disk->list() : std::vector<DiskEntryInfo>{};
  std::uint64_t total = 0;
  std::map<std::string, std::size_t> by_arch, by_kind, by_nvrtc;
  std::optional<std::filesystem::file_time_type> oldest, newest;
  for (const auto& e : entries) {
    total += e.size_bytes;
    ++by_arch[e.arch.name()];
    ++by_kind[kind_name(e.kind)];
    ++by_nvrtc[nvrtc_name(e.nvrtc)];
    if (!oldest || e.last_use < *oldest) oldest = e.last_use;
    if (!newest || e.last_use > *newest) newest = e.last_use;
  }
  if (options.json) {
    nlohmann::json out = {{"directory", disk->directory().string()},
                          {"entries", entries.size()},
                          {"bytes", total},
                          {"max_bytes", disk->max_bytes()},
                          {"by_arch", by_arch},
                          {"by_kind", by_kind},
                          {"by_nvrtc", by_nvrtc}};
    if (oldest) out["oldest_use"] = format_file_time(*oldest);
    if (newest) out["newest_use"] = format_file_time(*newest);
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  auto print_map = [](const char* title, const std::map<std::string, std::size_t>& counts) {
    std::string line;
    for (const auto& [name, count] : counts)
      line += (line.empty() ? "" : ", ") + name + ": " + std::to_string(count);
    std::printf("%-12s %s\n", title, line.empty() ? "-" : line.c_str());
  };
  double used =
      disk->max_bytes() ? 100.0 * static_cast<double>(total) / static_cast<double>(disk->max_bytes()) : 0;
  std::printf("%-12s %s\n", "directory", disk->directory().c_str());
  std::printf("%-12s %zu\n", "entries", entries.size());
  std::printf("%-12s %s of %s (%.1f %%)\n", "size", format_bytes(total).c_str(),
              format_bytes(disk->max_bytes()).c_str(), used);
  print_map("by arch", by_arch);
  print_map("by kind", by_kind);
  print_map("by NVRTC", by_nvrtc);
  if (oldest)
    std::printf("%-12s %s .. %s\n", "last use", format_file_time(*oldest).c_str(),
                format_file_time(*newest).c_str());
  // Hit/miss counters live in each process (KernelCache::stats()); the disk keeps only the use time.
  std::printf("%-12s not recorded on disk; a process reads its own with KernelCache::stats()\n",
              "hits/misses");
  return kExitOk;
}

int run_cache_verify(const CacheOptions& options) {
  auto disk = open_cache(options, /*inspect=*/!options.fix);
  VerifyReport report = disk ? disk->verify(options.fix) : VerifyReport{};
  for (const auto& [path, check] : report.bad) {
    std::printf("%-13s %s%s\n", to_string(check), path.c_str(), options.fix ? "  (removed)" : "");
  }
  std::printf("verify: %llu entr%s checked, %zu bad", static_cast<unsigned long long>(report.checked),
              report.checked == 1 ? "y" : "ies", report.bad.size());
  if (options.fix) {
    std::printf(", %llu removed, %llu stale temp file%s removed",
                static_cast<unsigned long long>(report.removed),
                static_cast<unsigned long long>(report.stale_temp_files_removed),
                report.stale_temp_files_removed == 1 ? "" : "s");
  }
  std::printf("\n");
  if (!report.bad.empty() && !options.fix) {
    std::fprintf(stderr,
                 "cuinline cache verify: %zu bad entr%s; run `cuinline cache verify --fix` to remove them\n",
                 report.bad.size(), report.bad.size() == 1 ? "y" : "ies");
    return kExitFailure;
  }
  if (options.fix && report.removed < report.bad.size()) return kExitFailure;
  return kExitOk;
}

int run_cache_prune(const CacheOptions& options) {
  auto limit = parse_byte_size(options.max_bytes);
  if (!limit) {
    throw InvalidArgument("--max-bytes: expected a size such as 500000000, 500M or 1GiB, got '" +
                          options.max_bytes + "'");
  }
  auto disk = open_cache(options);
  std::uint64_t before = disk->total_bytes();
  std::uint64_t removed = disk->prune(*limit);
  std::uint64_t after = disk->total_bytes();
  std::printf("prune: %llu entr%s evicted; %s -> %s (limit %s)\n", static_cast<unsigned long long>(removed),
              removed == 1 ? "y" : "ies", format_bytes(before).c_str(), format_bytes(after).c_str(),
              format_bytes(*limit).c_str());
  return after <= *limit ? kExitOk : kExitFailure;
}

int run_cache_clear(const CacheOptions& options) {
  auto disk = open_cache(options);
  auto entries = disk->list();
  if (!options.yes) {
    std::printf("Remove all %zu entries (%s) from %s? [y/N] ", entries.size(),
                format_bytes(disk->total_bytes()).c_str(), disk->directory().c_str());
    std::fflush(stdout);
    std::string answer;
    if (!std::getline(std::cin, answer) || (answer != "y" && answer != "Y" && answer != "yes")) {
      std::printf("\n");
      std::fprintf(
          stderr, "cuinline cache clear: not confirmed; nothing removed (pass --yes to skip the question)\n");
      return kExitFailure;
    }
  }
  std::uint64_t removed = disk->clear();
  std::printf("clear: %llu entr%s removed from %s\n", static_cast<unsigned long long>(removed),
              removed == 1 ? "y" : "ies", disk->directory().c_str());
  return kExitOk;
}

}  // namespace cuinline::cli
