// RemoteCache's management calls (SCAN, check, DEL, INFO, list) for the CLI. Built only with
// CUINLINE_WITH_REDIS.

#include <hiredis/hiredis.h>

#include <sstream>

#include "cache/remote_cache_impl.hpp"
#include "cuinline/error.hpp"

namespace cuinline {
namespace {

using detail::RedisResult;

std::string field(const std::string& info, const std::string& name) {
  std::istringstream in(info);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind(name + ":", 0) == 0) return line.substr(name.size() + 1);
  }
  return "";
}

}  // namespace

std::vector<CacheKey> RemoteCache::keys() const {
  Impl& d = *impl_;
  if (!usable()) throw CacheError("remote cache: " + d.reason);
  std::vector<CacheKey> out;
  const std::string pattern = d.config.key_prefix + "e:*";
  const std::size_t prefix = d.config.key_prefix.size() + 2;
  std::string cursor = "0";
  do {
    const RedisResult result = d.run(Impl::Access::read, {"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
    if (!result.ok()) throw CacheError("remote cache " + d.shown + ": SCAN failed: " + result.error);
    const redisReply* reply = result.reply.get();
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2)
      throw CacheError("remote cache: odd SCAN reply");
    cursor.assign(reply->element[0]->str, reply->element[0]->len);
    const redisReply* names = reply->element[1];
    for (std::size_t i = 0; i < names->elements; ++i) {
      const std::string_view name(names->element[i]->str, names->element[i]->len);
      if (name.size() <= prefix) continue;
      if (auto key = CacheKey::from_hex(name.substr(prefix))) out.push_back(*key);
    }
  } while (cursor != "0");
  return out;
}

RemoteEntryCheck RemoteCache::check(const CacheKey& key, CompiledProgram* out, EntryCheck* entry,
                                    std::uint64_t* bytes) const {
  Impl& d = *impl_;
  if (!usable()) return RemoteEntryCheck::unavailable;
  const RedisResult result = d.run(Impl::Access::read, {"GET", d.entry_key(key)});
  if (!result.ok()) return RemoteEntryCheck::unavailable;
  if (result.is_nil()) return RemoteEntryCheck::missing;
  if (bytes != nullptr) *bytes = result.string().size();
  return d.validate(key, result.string(), out, entry);
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
    const RedisResult result = d.run(Impl::Access::read, {"GET", d.entry_key(key)});
    if (!result.ok() || result.is_nil()) continue;
    DiskEntryInfo info;
    if (d.validate(key, result.string(), nullptr, nullptr, &info) != RemoteEntryCheck::ok) continue;
    info.key = key;
    info.size_bytes = result.string().size();
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace cuinline
