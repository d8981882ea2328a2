// RemoteCache's management calls (SCAN, check, DEL, INFO, list) for the CLI. Built only with
// CUINLINE_WITH_REDIS.

#include <hiredis/hiredis.h>

#include <sstream>
#include <unordered_set>

#include "cache/remote_cache_impl.hpp"
#include "cuinline/error.hpp"

namespace cuinline {
namespace {

using detail::RedisResult;

using Clock = std::chrono::steady_clock;

// An INFO field, escaped: it is printed by `cache stats --remote`, and Redis (or whoever answers in
// its place) may put anything there.
std::string field(const std::string& info, const std::string& name) {
  std::istringstream in(info);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind(name + ":", 0) == 0) return detail::printable(line.substr(name.size() + 1));
  }
  return "";
}

bool is_cursor(const redisReply* r) {
  if (r == nullptr || r->type != REDIS_REPLY_STRING || r->len == 0 || r->len > 20) return false;
  for (std::size_t i = 0; i < r->len; ++i) {
    if (r->str[i] < '0' || r->str[i] > '9') return false;
  }
  return true;
}

// More entry names than any Redis holds in practice (128 MiB of keys): a SCAN past it is refused.
constexpr std::size_t kMaxScanKeys = std::size_t{1} << 22;

}  // namespace

std::vector<CacheKey> RemoteCache::keys() const {
  Impl& d = *impl_;
  if (!usable()) throw CacheError("remote cache: " + d.reason);
  std::vector<CacheKey> out;
  std::unordered_set<CacheKey, CacheKeyHash> seen;  // SCAN may return a key twice
  const std::string pattern = d.config.key_prefix + "e:*";
  const std::size_t prefix = d.config.key_prefix.size() + 2;
  const auto start = Clock::now();
  const auto deadline = start + d.config.scan_timeout;  // the whole loop, whatever the cursors say
  const auto failed = [&](const std::string& why) {
    return CacheError("remote cache " + d.shown + ": SCAN " + why + " (" + std::to_string(out.size()) +
                      " entries found so far)");
  };
  const std::string late = "did not finish within " + std::to_string(d.config.scan_timeout.count()) +
                           " ms (CUINLINE_REMOTE_SCAN_TIMEOUT_MS)";
  std::string cursor = "0";
  do {
    if (Clock::now() >= deadline) throw failed(late);
    const auto command_deadline = std::min(deadline, Clock::now() + d.config.command_timeout);
    const RedisResult result =
        d.run(Impl::Access::read, {"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"}, command_deadline);
    if (!result.ok())
      throw failed(Clock::now() >= deadline ? late + ": " + result.error : "failed: " + result.error);
    const redisReply* reply = result.reply.get();
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 || !is_cursor(reply->element[0]) ||
        reply->element[1]->type != REDIS_REPLY_ARRAY) {
      throw failed("gave a reply that is not a SCAN reply");
    }
    cursor.assign(reply->element[0]->str, reply->element[0]->len);
    const redisReply* names = reply->element[1];
    for (std::size_t i = 0; i < names->elements; ++i) {
      if (names->element[i]->type != REDIS_REPLY_STRING) continue;
      const std::string_view name(names->element[i]->str, names->element[i]->len);
      if (name.size() <= prefix) continue;
      const auto key = CacheKey::from_hex(name.substr(prefix));
      if (key && seen.insert(*key).second) out.push_back(*key);
    }
    if (out.size() > kMaxScanKeys)
      throw failed("returned more than " + std::to_string(kMaxScanKeys) + " entries");
  } while (cursor != "0");
  return out;
}

RemoteEntryCheck RemoteCache::check(const CacheKey& key, CompiledProgram* out, EntryCheck* entry,
                                    std::uint64_t* bytes) const {
  Impl& d = *impl_;
  if (!usable()) return RemoteEntryCheck::unavailable;
  const Impl::Fetched fetched = d.fetch(key, /*refresh=*/false);
  if (bytes != nullptr) *bytes = fetched.size;
  if (fetched.check != RemoteEntryCheck::ok) return fetched.check;
  return d.validate(key, fetched.value.string(), out, entry);
}

bool RemoteCache::remove(const CacheKey& key) {
  Impl& d = *impl_;
  return usable() && d.run(Impl::Access::write, {"DEL", d.entry_key(key)}).ok();
}

RemoteServerInfo RemoteCache::server_info() const {
  Impl& d = *impl_;
  if (!usable()) throw CacheError("remote cache: " + d.reason);
  const RedisResult result = d.run(Impl::Access::read, {"INFO"});
  if (!result.ok()) throw CacheError("remote cache " + d.shown + ": INFO failed: " + result.error);
  const std::string info(result.string());
  RemoteServerInfo out;
  out.endpoint = d.shown;
  out.version = field(info, "redis_version");
  out.used_memory = std::strtoull(field(info, "used_memory").c_str(), nullptr, 10);
  out.max_memory = std::strtoull(field(info, "maxmemory").c_str(), nullptr, 10);
  out.eviction_policy = field(info, "maxmemory_policy");
  out.role = field(info, "role");
  return out;
}

std::vector<DiskEntryInfo> RemoteCache::list() const {
  std::vector<DiskEntryInfo> out;
  Impl& d = *impl_;
  for (const CacheKey& key : keys()) {
    const Impl::Fetched fetched = d.fetch(key, /*refresh=*/false);
    if (fetched.check != RemoteEntryCheck::ok) continue;
    DiskEntryInfo info;
    if (d.validate(key, fetched.value.string(), nullptr, nullptr, &info) != RemoteEntryCheck::ok) continue;
    info.key = key;
    info.size_bytes = fetched.size;
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace cuinline
