#pragma once
// RemoteCache's state (remote_cache.cpp: load/store/lease; remote_cache_admin.cpp: SCAN, check,
// INFO). Built only with CUINLINE_WITH_REDIS.

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cache/entry_auth.hpp"
#include "cache/redis_client.hpp"
#include "cache/remote_endpoint.hpp"
#include "cuinline/remote_cache.hpp"

namespace cuinline {

struct RemoteCache::Impl {
  /// Whether a command reads or writes: a read-only or full Redis still serves reads.
  enum class Access { read, write };

  /// Back-off state of one kind of access: skipped until down_until after a failure.
  struct Health {
    std::atomic<std::int64_t> down_until_ns{0};  // steady clock; 0: up
    std::atomic<bool> in_outage{false};
    std::int64_t backoff_ms = 0;  // under health_mutex
  };

  RemoteCacheConfig config;
  std::optional<detail::RedisEndpoint> endpoint;
  std::optional<detail::EntryAuth> auth;
  NvrtcVersion nvrtc;
  std::string reason;  // why not usable
  std::string shown;   // the URL without its password

  std::mutex pool_mutex;
  std::vector<std::unique_ptr<detail::RedisConnection>> idle;
  pid_t pool_pid = 0;  // the process the idle connections belong to (a forked child opens its own)

  std::mutex health_mutex;
  Health reads, writes;
  std::atomic<bool> use_getex{true};  // false after READONLY / an old Redis: GET without refreshing the TTL
  std::atomic<bool> bad_entry_warned{false};
  std::atomic<bool> lock_timeout_warned{false};

  std::atomic<std::uint64_t> hits{0}, writes_done{0}, write_failures{0}, errors{0}, rejected{0},
      unauthenticated{0}, lock_waits{0}, lock_timeouts{0};

  std::string entry_key(const CacheKey& key) const { return config.key_prefix + "e:" + key.hex(); }
  std::string lock_key(const CacheKey& key) const { return config.key_prefix + "l:" + key.hex(); }

  /// Whether `access` may be tried now (not inside a back-off period).
  bool admitted(Access access) const;
  /// One command on a pooled connection, with the back-off bookkeeping. Never throws. Answered by
  /// `deadline`, or by default within command_timeout + transfer_allowance(the request's size).
  detail::RedisResult run(Access access, const std::vector<std::string_view>& args,
                          std::optional<detail::RedisClock::time_point> deadline = std::nullopt);
  detail::RedisLimits limits() const;

  /// One entry's value, its size asked first (STRLEN): nothing larger than max_entry_bytes and no
  /// key of another type is ever fetched.
  struct Fetched {
    RemoteEntryCheck check = RemoteEntryCheck::unavailable;  ///< ok (value set), missing, too_large,
                                                             ///< wrong_type or unavailable
    detail::RedisResult value;
    std::uint64_t size = 0;  ///< STRLEN's answer
  };
  /// `refresh`: GETEX with the entry TTL (GET where that is refused), else GET.
  Fetched fetch(const CacheKey& key, bool refresh);
  void note_failure(const detail::RedisResult& result, const char* what);
  void note_success(Access access);

  /// Size, tag and entry checks of one value read from Redis.
  RemoteEntryCheck validate(const CacheKey& key, std::string_view value, CompiledProgram* out,
                            EntryCheck* entry, DiskEntryInfo* info = nullptr) const;
};

}  // namespace cuinline
