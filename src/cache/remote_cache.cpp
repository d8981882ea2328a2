// The remote tier on Redis (remote_cache.hpp): construction, the connection pool and back-off,
// load / store, and the compile lease. Built only with CUINLINE_WITH_REDIS.

#include <sys/random.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <thread>

#include "cache/disk_cache_entry.hpp"
#include "cache/remote_cache_impl.hpp"
#include "common/log.hpp"
#include "cuinline/error.hpp"

namespace cuinline {
namespace {

using detail::RedisFailure;
using detail::RedisResult;
using Clock = std::chrono::steady_clock;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

// Deletes the lease only if it is still ours (it may have expired and been taken by another).
constexpr const char* kUnlockScript =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

std::string random_token() {
  unsigned char bytes[16] = {};
  if (::getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes)) {
    const auto t = static_cast<unsigned long long>(now_ns());
    std::memcpy(bytes, &t, sizeof t);
  }
  char hex[33];
  for (int i = 0; i < 16; ++i) std::snprintf(hex + 2 * i, 3, "%02x", bytes[i]);
  return std::string(hex, 32);
}

// The configuration problems of a process are warned about once each, however many caches it makes.
void warn_once(std::atomic<bool>& flag, const std::string& message) {
  logger()->log(flag.exchange(true) ? spdlog::level::debug : spdlog::level::warn, "{}", message);
}

class RemoteLease final : public TierLock {
 public:
  RemoteLease(RemoteCache::Impl* impl, std::string key, std::string token)
      : impl_(impl), key_(std::move(key)), token_(std::move(token)) {}
  ~RemoteLease() override {
    // Best effort: a lease that cannot be released expires after lock_ttl. Destructors never throw.
    try {
      impl_->run(RemoteCache::Impl::Access::write, {"EVAL", kUnlockScript, "1", key_, token_});
    } catch (...) {
    }
  }

 private:
  RemoteCache::Impl* impl_;
  std::string key_, token_;
};

}  // namespace

// ---- health and commands ----------------------------------------------------------------------

bool RemoteCache::Impl::admitted(Access access) const {
  const std::int64_t now = now_ns();
  if (reads.down_until_ns.load(std::memory_order_relaxed) > now) return false;
  return access == Access::read || writes.down_until_ns.load(std::memory_order_relaxed) <= now;
}

void RemoteCache::Impl::note_failure(const RedisResult& result, const char* what) {
  ++errors;
  const bool writes_only = result.failure == RedisFailure::oom || result.failure == RedisFailure::readonly;
  Health& health = writes_only ? writes : reads;
  std::int64_t backoff = 0;
  bool first = false;
  {
    std::lock_guard<std::mutex> guard(health_mutex);
    if (health.backoff_ms == 0) health.backoff_ms = config.retry_initial.count();
    backoff = health.backoff_ms;
    health.down_until_ns = now_ns() + backoff * 1000000;
    health.backoff_ms = std::min<std::int64_t>(health.backoff_ms * 2, config.retry_max.count());
    first = !health.in_outage.exchange(true);
  }
  logger()->log(
      first ? spdlog::level::warn : spdlog::level::debug,
      "remote cache {}: {} failed ({}); {}, retrying in {} ms", shown, what, result.error,
      writes_only ? "still reading from it but publishing nothing" : "continuing with the local tiers",
      backoff);
}

void RemoteCache::Impl::note_success(Access access) {
  for (Health* health : {&reads, access == Access::write ? &writes : nullptr}) {
    if (health == nullptr || !health->in_outage.load(std::memory_order_relaxed)) continue;
    std::lock_guard<std::mutex> guard(health_mutex);
    if (health->in_outage.exchange(false)) {
      health->backoff_ms = 0;
      health->down_until_ns = 0;
      logger()->info("remote cache {}: {} work again", shown, health == &reads ? "commands" : "writes");
    }
  }
  if (access == Access::write) use_getex.store(true, std::memory_order_relaxed);
}

detail::RedisLimits RemoteCache::Impl::limits() const {
  detail::RedisLimits limits;
  limits.connect_timeout = config.connect_timeout;
  limits.command_timeout = config.command_timeout;
  // The largest entry plus room for the envelope of a reply (and a SCAN page or INFO of any limit).
  limits.max_reply_bytes = config.max_entry_bytes + (std::uint64_t{1} << 20);
  return limits;
}

RedisResult RemoteCache::Impl::run(Access access, const std::vector<std::string_view>& args,
                                   std::optional<detail::RedisClock::time_point> deadline) {
  RedisResult result;
  if (!admitted(access)) {
    ++errors;
    result.failure = RedisFailure::unavailable;
    result.error = "skipped: backing off after a failure";
    return result;
  }
  std::unique_ptr<detail::RedisConnection> connection;
  {
    std::lock_guard<std::mutex> guard(pool_mutex);
    // After a fork the child must not talk on the parent's sockets: replies would interleave.
    if (const pid_t pid = ::getpid(); pool_pid != pid) {
      idle.clear();  // closes this process's copies of the descriptors only
      pool_pid = pid;
    }
    while (!connection && !idle.empty()) {
      connection = std::move(idle.back());
      idle.pop_back();
      // Closed by Redis while idle (its `timeout`), or holding bytes nobody asked for: not reused.
      if (!connection->still_usable()) connection.reset();
    }
  }
  if (!connection) {
    connection = detail::RedisConnection::open(*endpoint, limits(), &result);
    if (!connection) {
      note_failure(result, "connecting");
      return result;
    }
  }
  result = deadline ? connection->command(args, *deadline) : connection->command(args);
  if (!connection->broken()) {
    std::lock_guard<std::mutex> guard(pool_mutex);
    if (idle.size() < 8) idle.push_back(std::move(connection));
  }
  if (result.ok()) {
    note_success(access);
  } else if (result.failure != RedisFailure::other && result.failure != RedisFailure::wrong_type) {
    note_failure(result, args.empty() ? "a command" : std::string(args[0]).c_str());
  } else {
    ++errors;
    logger()->debug("remote cache {}: {}: {}", shown, args.empty() ? "" : std::string(args[0]), result.error);
  }
  return result;
}

RemoteEntryCheck RemoteCache::Impl::validate(const CacheKey& key, std::string_view value,
                                             CompiledProgram* out, EntryCheck* entry_check,
                                             DiskEntryInfo* info) const {
  if (value.size() > config.max_entry_bytes) return RemoteEntryCheck::too_large;
  std::string_view entry;
  switch (auth->open(key, value, &entry)) {
    case detail::AuthCheck::ok:
      break;
    case detail::AuthCheck::not_sealed:
      return RemoteEntryCheck::not_sealed;
    case detail::AuthCheck::unknown_key_id:
      return RemoteEntryCheck::unknown_key_id;
    case detail::AuthCheck::revoked_key:
      return RemoteEntryCheck::revoked_key;
    case detail::AuthCheck::bad_tag:
      return RemoteEntryCheck::bad_tag;
    case detail::AuthCheck::bad_signature:
      return RemoteEntryCheck::bad_signature;
  }
  const EntryCheck check = detail::decode_entry(entry, &key, nvrtc, out, info);
  if (entry_check != nullptr) *entry_check = check;
  return check == EntryCheck::ok ? RemoteEntryCheck::ok : RemoteEntryCheck::bad_entry;
}

// ---- construction ------------------------------------------------------------------------------

RemoteCache::RemoteCache(RemoteCacheConfig config) : impl_(std::make_unique<Impl>()) {
  static std::atomic<bool> url_warned{false}, key_warned{false};
  Impl& d = *impl_;
  d.config = std::move(config);
  if (d.config.url.empty()) {
    d.reason = "no remote cache configured (CUINLINE_REMOTE_CACHE)";
    return;
  }
  std::string error;
  d.endpoint = detail::parse_redis_url(d.config.url, &error);
  if (!d.endpoint) {
    d.reason = error;
    warn_once(url_warned, "remote cache not used: " + error);
    return;
  }
  d.shown = d.endpoint->shown;
  d.auth = detail::EntryAuth::from_config(d.config, &error);
  if (!d.auth) {
    d.reason = !error.empty()
                   ? error
                   : "no fleet key (CUINLINE_CACHE_KEY_FILE) and no trusted keys "
                     "(CUINLINE_CACHE_TRUSTED_KEYS): unauthenticated entries would let anyone who can "
                     "write to Redis run machine code on every server";
    warn_once(key_warned, "remote cache " + d.shown + " not used: " + d.reason);
    return;
  }
  try {
    d.nvrtc = nvrtc_version();
  } catch (const std::exception& e) {
    d.reason = std::string("no NVRTC: ") + e.what();
    d.auth.reset();
    return;
  }
  logger()->debug("remote cache at {} ({}{})", d.shown, d.auth->describe(),
                  d.auth->can_seal() ? "" : ": entries are loaded, none published");
}

RemoteCache::~RemoteCache() = default;

bool RemoteCache::supported() noexcept {
  return true;
}
bool RemoteCache::usable() const noexcept {
  return impl_->auth.has_value();
}
const std::string& RemoteCache::unusable_reason() const noexcept {
  return impl_->reason;
}
const std::string& RemoteCache::endpoint() const noexcept {
  return impl_->shown;
}
std::string RemoteCache::signing_key_id() const {
  return impl_->auth ? impl_->auth->signing_key_id() : std::string();
}

// ---- load / store / lease ----------------------------------------------------------------------

RemoteCache::Impl::Fetched RemoteCache::Impl::fetch(const CacheKey& key, bool refresh) {
  Fetched out;
  const std::string name = entry_key(key);
  // The size first: a value over the limit (or a key of another type) is never fetched.
  const RedisResult length = run(Access::read, {"STRLEN", name});
  if (length.failure == RedisFailure::wrong_type) {
    out.check = RemoteEntryCheck::wrong_type;
    return out;
  }
  if (!length.ok() || !length.is_integer() || length.integer() < 0) return out;
  out.size = static_cast<std::uint64_t>(length.integer());
  if (out.size > config.max_entry_bytes) {
    out.check = RemoteEntryCheck::too_large;
    return out;
  }
  const auto deadline = [&] {
    return detail::RedisClock::now() + config.command_timeout + detail::transfer_allowance(out.size);
  };
  RedisResult value;
  if (refresh && use_getex.load(std::memory_order_relaxed)) {
    const std::string ttl =
        std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(config.entry_ttl).count());
    value = run(Access::read, {"GETEX", name, "PX", ttl}, deadline());
    // A read-only replica refuses GETEX (it writes the TTL); Redis before 6.2 does not know it.
    if (value.failure == RedisFailure::readonly ||
        (value.failure == RedisFailure::other && value.error.find("unknown command") != std::string::npos)) {
      use_getex = false;
      value = run(Access::read, {"GET", name}, deadline());
    }
  } else {
    value = run(Access::read, {"GET", name}, deadline());
  }
  if (value.failure == RedisFailure::wrong_type) {
    out.check = RemoteEntryCheck::wrong_type;  // replaced since the STRLEN
  } else if (value.ok()) {
    out.check = value.is_nil() ? RemoteEntryCheck::missing : RemoteEntryCheck::ok;
    out.value = std::move(value);
  }
  return out;
}

std::optional<CompiledProgram> RemoteCache::load(const CacheKey& key) {
  Impl& d = *impl_;
  if (!usable()) return std::nullopt;
  try {
    const Impl::Fetched fetched = d.fetch(key, /*refresh=*/true);
    if (fetched.check == RemoteEntryCheck::missing || fetched.check == RemoteEntryCheck::unavailable) {
      return std::nullopt;
    }
    CompiledProgram program;
    EntryCheck entry_check = EntryCheck::ok;
    const RemoteEntryCheck check = fetched.check == RemoteEntryCheck::ok
                                       ? d.validate(key, fetched.value.string(), &program, &entry_check)
                                       : fetched.check;
    if (check == RemoteEntryCheck::ok) {
      ++d.hits;
      return program;
    }
    const bool unauthenticated =
        check == RemoteEntryCheck::not_sealed || check == RemoteEntryCheck::unknown_key_id ||
        check == RemoteEntryCheck::bad_tag || check == RemoteEntryCheck::revoked_key ||
        check == RemoteEntryCheck::bad_signature;
    ++(unauthenticated ? d.unauthenticated : d.rejected);
    const bool expected = check == RemoteEntryCheck::bad_entry &&
                          (entry_check == EntryCheck::foreign || entry_check == EntryCheck::wrong_version);
    std::string why = to_string(check);
    if (check == RemoteEntryCheck::bad_entry) why += std::string(": ") + to_string(entry_check);
    if (fetched.check == RemoteEntryCheck::too_large) {
      why += ": " + std::to_string(fetched.size) + " bytes, over " +
             std::to_string(d.config.max_entry_bytes) + "; not fetched";
    }
    if (check == RemoteEntryCheck::wrong_type) why += ": not a string; not read";
    logger()->log(expected || d.bad_entry_warned.exchange(true) ? spdlog::level::debug : spdlog::level::warn,
                  "remote cache {}: refusing entry {} ({}); {}", d.shown, key.hex(), why,
                  d.auth->can_seal() ? "it will be rebuilt and replaced"
                                     : "compiled here; the signer's next publish replaces it");
    return std::nullopt;
  } catch (const std::exception& e) {
    logger()->warn("remote cache {}: load failed, treating it as a miss: {}", d.shown, e.what());
    return std::nullopt;
  }
}

bool RemoteCache::store(const CacheKey& key, const CompiledProgram& program) {
  Impl& d = *impl_;
  // A verifier (trusted public keys, no signing key) publishes nothing: no one would accept it.
  if (!usable() || !d.auth->can_seal() || program.binary.empty()) return false;
  try {
    const std::string sealed = d.auth->seal(key, detail::encode_entry(key, d.nvrtc, program));
    if (sealed.size() > d.config.max_entry_bytes) {
      ++d.write_failures;
      logger()->debug("remote cache: not publishing {}: {} bytes is over the limit", key.hex(),
                      sealed.size());
      return false;
    }
    const std::string ttl =
        std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d.config.entry_ttl).count());
    const RedisResult result = d.run(Impl::Access::write, {"SET", d.entry_key(key), sealed, "PX", ttl});
    if (!result.is_status("OK")) {
      ++d.write_failures;
      return false;
    }
    ++d.writes_done;
    return true;
  } catch (const std::exception& e) {
    ++d.write_failures;
    logger()->warn("remote cache {}: store failed: {}", d.shown, e.what());
    return false;
  }
}

std::unique_ptr<TierLock> RemoteCache::lock_key(const CacheKey& key) {
  Impl& d = *impl_;
  // A verifier publishes nothing: a lease it held would only make others wait for nothing.
  if (!usable() || !d.auth->can_seal()) return nullptr;
  try {
    const std::string lock = d.lock_key(key), entry = d.entry_key(key), token = random_token();
    const std::string ttl = std::to_string(d.config.lock_ttl.count());
    const auto deadline = Clock::now() + d.config.lock_wait;
    auto poll = std::chrono::milliseconds(2);
    bool waited = false;
    for (;;) {
      const RedisResult taken = d.run(Impl::Access::write, {"SET", lock, token, "NX", "PX", ttl});
      if (taken.is_status("OK")) return std::make_unique<RemoteLease>(&d, lock, token);
      if (!taken.ok()) return nullptr;  // Redis down or read-only: compile without a lease
      // Another process holds the lease: wait for its entry (or for the lease to go).
      if (!waited) {
        waited = true;
        ++d.lock_waits;
      }
      if (Clock::now() >= deadline) {
        ++d.lock_timeouts;
        warn_once(d.lock_timeout_warned, "remote cache " + d.shown + ": waited " +
                                             std::to_string(d.config.lock_wait.count()) +
                                             " ms for another process to "
                                             "compile " +
                                             key.hex() + "; compiling it here");
        return nullptr;
      }
      std::this_thread::sleep_for(poll);
      poll = std::min(poll * 3 / 2 + std::chrono::milliseconds(1), std::chrono::milliseconds(50));
      const RedisResult exists = d.run(Impl::Access::read, {"EXISTS", entry});
      if (!exists.ok() || exists.integer() > 0) return nullptr;  // published (or Redis gone): look again
    }
  } catch (const std::exception& e) {
    logger()->warn("remote cache {}: lock failed: {}", d.shown, e.what());
    return nullptr;
  }
}

CacheStats RemoteCache::stats() const {
  const Impl& d = *impl_;
  CacheStats s;
  s.remote_hits = d.hits;
  s.remote_writes = d.writes_done;
  s.remote_write_failures = d.write_failures;
  s.remote_errors = d.errors;
  s.remote_rejected = d.rejected;
  s.unauthenticated_entries = d.unauthenticated;
  s.remote_lock_waits = d.lock_waits;
  s.remote_lock_timeouts = d.lock_timeouts;
  return s;
}

}  // namespace cuinline
