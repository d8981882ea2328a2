// cuinline cache stats --remote | verify --remote | pull: the remote (Redis) tier, through RemoteCache.
// The remote tier is configured by the environment (CUINLINE_REMOTE_CACHE, CUINLINE_CACHE_KEY_FILE).

#include <cstdio>
#include <cuinline/error.hpp>
#include <cuinline/remote_cache.hpp>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "cli/commands.hpp"
#include "cli/util.hpp"

namespace cuinline::cli {

std::unique_ptr<RemoteCache> open_remote_cache(const RemoteCacheConfig& config) {
  auto remote = std::make_unique<RemoteCache>(config);
  if (!remote->usable()) {
    const std::string why = remote->unusable_reason();
    throw Error("the remote cache cannot be used: " + why +
                (config.url.empty() ? " (set CUINLINE_REMOTE_CACHE=redis://host:port)" : ""));
  }
  return remote;
}

namespace {

bool is_bad(RemoteEntryCheck check) {
  return check != RemoteEntryCheck::ok && check != RemoteEntryCheck::missing;
}

std::string describe(RemoteEntryCheck check, EntryCheck entry) {
  std::string text = to_string(check);
  if (check == RemoteEntryCheck::bad_entry) text += std::string(" (") + to_string(entry) + ")";
  return text;
}

}  // namespace

int run_cache_stats_remote(const CacheOptions& options) {
  auto remote = open_remote_cache();
  const RemoteServerInfo info = remote->server_info();
  const std::size_t entries = remote->keys().size();
  const bool recommended = info.max_memory != 0 && info.eviction_policy == "allkeys-lru";
  if (options.json) {
    nlohmann::json out = {{"endpoint", info.endpoint},
                          {"redis_version", info.version},
                          {"role", info.role},
                          {"entries", entries},
                          {"used_memory", info.used_memory},
                          {"max_memory", info.max_memory},
                          {"eviction_policy", info.eviction_policy},
                          {"signing_key_id", remote->signing_key_id()}};
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  std::printf("%-12s %s\n", "remote", info.endpoint.c_str());
  std::printf("%-12s Redis %s (%s)\n", "server", info.version.c_str(), info.role.c_str());
  std::printf("%-12s %zu\n", "entries", entries);
  std::printf("%-12s %s of %s, eviction %s\n", "memory", format_bytes(info.used_memory).c_str(),
              info.max_memory ? format_bytes(info.max_memory).c_str() : "no limit",
              info.eviction_policy.c_str());
  const std::string signer = remote->signing_key_id();
  std::printf("%-12s %s\n", "signing key",
              signer.empty() ? "none (this machine verifies only)" : signer.c_str());
  if (!recommended) {
    std::fprintf(stderr,
                 "cuinline cache stats: note: set maxmemory and maxmemory-policy allkeys-lru on this Redis "
                 "(docs/RELIABILITY.md, \"Remote cache\"); without them a full Redis refuses new entries\n");
  }
  return kExitOk;
}

int run_cache_verify_remote(const CacheOptions& options) {
  auto remote = open_remote_cache(cache_command_config(options).remote);
  std::uint64_t checked = 0, removed = 0;
  std::size_t bad = 0;
  for (const CacheKey& key : remote->keys()) {
    EntryCheck entry = EntryCheck::ok;
    const RemoteEntryCheck check = remote->check(key, nullptr, &entry);
    if (check == RemoteEntryCheck::missing) continue;  // expired or evicted since the SCAN
    ++checked;
    if (check == RemoteEntryCheck::unavailable)
      throw Error("the remote cache " + remote->endpoint() + " stopped answering");
    if (!is_bad(check)) continue;
    ++bad;
    const bool gone = options.fix && remote->remove(key);
    removed += gone ? 1 : 0;
    std::printf("%-28s %s%s\n", describe(check, entry).c_str(), key.hex().c_str(), gone ? "  (removed)" : "");
  }
  std::printf("verify: %llu remote entr%s checked (tag and checksum), %zu bad",
              static_cast<unsigned long long>(checked), checked == 1 ? "y" : "ies", bad);
  if (options.fix) std::printf(", %llu removed", static_cast<unsigned long long>(removed));
  std::printf(" in %s\n", remote->endpoint().c_str());
  if (bad > 0 && !options.fix) {
    std::fprintf(
        stderr,
        "cuinline cache verify: %zu bad remote entr%s; `cuinline cache verify --remote --fix` removes them\n",
        bad, bad == 1 ? "y" : "ies");
    return kExitFailure;
  }
  return removed < bad ? kExitFailure : kExitOk;
}

int run_cache_pull(const CacheOptions& options) {
  const CacheConfig config = cache_command_config(options);
  auto remote = open_remote_cache(config.remote);
  DiskCache disk(config);
  if (!disk.usable()) throw Error("the cache directory " + disk.directory().string() + " cannot be used");
  std::unordered_set<CacheKey, CacheKeyHash> present;
  for (const auto& entry : disk.list()) present.insert(entry.key);
  std::uint64_t pulled = 0, local = 0, refused = 0, failed = 0;
  for (const CacheKey& key : remote->keys()) {
    if (present.count(key) != 0) {
      ++local;
      continue;
    }
    CompiledProgram program;
    EntryCheck entry = EntryCheck::ok;
    const RemoteEntryCheck check = remote->check(key, &program, &entry);
    if (check == RemoteEntryCheck::missing) continue;
    if (check == RemoteEntryCheck::unavailable)
      throw Error("the remote cache " + remote->endpoint() + " stopped answering");
    if (check != RemoteEntryCheck::ok) {
      ++refused;
      std::fprintf(stderr, "cuinline cache pull: refusing %s: %s\n", key.hex().c_str(),
                   describe(check, entry).c_str());
      continue;
    }
    if (disk.store(key, program)) {
      ++pulled;
    } else {
      ++failed;
    }
  }
  std::printf("pull: %llu entr%s pulled into %s, %llu already there, %llu refused, %llu not written\n",
              static_cast<unsigned long long>(pulled), pulled == 1 ? "y" : "ies", disk.directory().c_str(),
              static_cast<unsigned long long>(local), static_cast<unsigned long long>(refused),
              static_cast<unsigned long long>(failed));
  return refused == 0 && failed == 0 ? kExitOk : kExitFailure;
}

}  // namespace cuinline::cli
