// RemoteCacheConfig::from_environment and the Redis URL parser (remote_endpoint.hpp). Built with and
// without hiredis.

#include <atomic>
#include <cstdlib>
#include <string>

#include "cache/remote_endpoint.hpp"
#include "common/log.hpp"
#include "cuinline/cache.hpp"

namespace cuinline {
namespace detail {
namespace {

std::optional<std::string> percent_decode(std::string_view text) {
  const auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out.push_back(text[i]);
      continue;
    }
    if (i + 2 >= text.size()) return std::nullopt;
    const int hi = hex(text[i + 1]), lo = hex(text[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

bool parse_int(std::string_view text, int min, int max, int* out) {
  if (text.empty() || text.size() > 9) return false;
  int value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + (c - '0');
  }
  if (value < min || value > max) return false;
  *out = value;
  return true;
}

}  // namespace

std::optional<RedisEndpoint> parse_redis_url(std::string_view url, std::string* error) {
  RedisEndpoint ep;
  const auto fail = [&](const std::string& why) -> std::optional<RedisEndpoint> {
    // Never echo the URL itself: it may hold a password.
    *error = "CUINLINE_REMOTE_CACHE is not a Redis URL (" + why +
             "; expected redis://[user:password@]host:port[/db] or unix:///path/to/redis.sock)";
    return std::nullopt;
  };
  constexpr std::string_view kRedis = "redis://", kUnix = "unix://", kTls = "rediss://";
  if (url.rfind(kTls, 0) == 0) return fail("TLS (rediss://) is not built; use a tunnel or a private network");
  if (url.rfind(kUnix, 0) == 0) {
    std::string_view rest = url.substr(kUnix.size());
    if (const auto q = rest.find('?'); q != std::string_view::npos) {
      const std::string_view query = rest.substr(q + 1);
      rest = rest.substr(0, q);
      if (query.rfind("db=", 0) != 0 || !parse_int(query.substr(3), 0, 1 << 20, &ep.db))
        return fail("bad query");
    }
    if (rest.empty() || rest.front() != '/') return fail("the socket path must be absolute");
    ep.unix_socket = true;
    ep.path = std::string(rest);
    ep.shown = std::string(url);
    return ep;
  }
  if (url.rfind(kRedis, 0) != 0) return fail("unknown scheme");
  std::string_view rest = url.substr(kRedis.size());
  std::string_view authority = rest.substr(0, rest.find('/'));
  std::string_view path =
      rest.size() > authority.size() ? rest.substr(authority.size() + 1) : std::string_view();
  std::string shown_auth;
  if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
    const std::string_view userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    const auto colon = userinfo.find(':');
    const auto user = percent_decode(userinfo.substr(0, colon));
    const auto password = colon == std::string_view::npos ? std::optional<std::string>("")
                                                          : percent_decode(userinfo.substr(colon + 1));
    if (!user || !password) return fail("bad percent-encoding in the user or password");
    if (colon == std::string_view::npos) {
      ep.password = *user;  // redis://password@host (what redis-cli -u accepts)
    } else {
      ep.user = *user;
      ep.password = *password;
    }
    shown_auth = (ep.user.empty() ? "" : ep.user) + ":***@";
  }
  if (authority.empty()) return fail("no host");
  if (authority.front() == '[') {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) return fail("unclosed '['");
    ep.host = std::string(authority.substr(1, close - 1));
    authority = authority.substr(close + 1);
    if (!authority.empty() && authority.front() != ':') return fail("junk after the address");
    if (!authority.empty() && !parse_int(authority.substr(1), 1, 65535, &ep.port)) return fail("bad port");
  } else {
    const auto colon = authority.find(':');
    ep.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos && !parse_int(authority.substr(colon + 1), 1, 65535, &ep.port))
      return fail("bad port");
  }
  if (ep.host.empty()) return fail("no host");
  if (!path.empty() && !parse_int(path, 0, 1 << 20, &ep.db)) return fail("bad database number");
  ep.shown = "redis://" + shown_auth +
             (ep.host.find(':') != std::string::npos ? "[" + ep.host + "]" : ep.host) + ":" +
             std::to_string(ep.port) + (ep.db != 0 ? "/" + std::to_string(ep.db) : "");
  return ep;
}

}  // namespace detail

namespace {

std::optional<std::string> environment(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

// A positive integer variable; a bad value is warned about once a process and ignored.
template <class Duration>
void duration_from_environment(const char* name, Duration& out, std::atomic<bool>& warned) {
  const auto text = environment(name);
  if (!text) return;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text->c_str(), &end, 10);
  if (end == text->c_str() || *end != '\0' || value == 0 || value > 1000ULL * 3600 * 24 * 3650) {
    if (!warned.exchange(true)) logger()->warn("{}='{}' is not a positive integer; ignoring it", name, *text);
    return;
  }
  out = Duration(static_cast<typename Duration::rep>(value));
}

}  // namespace

RemoteCacheConfig RemoteCacheConfig::from_environment() {
  static std::atomic<bool> w1{false}, w2{false}, w3{false}, w4{false}, w5{false}, w6{false}, w7{false};
  RemoteCacheConfig config;
  if (auto url = environment("CUINLINE_REMOTE_CACHE")) config.url = *url;
  if (auto file = environment("CUINLINE_CACHE_KEY_FILE")) config.key_file = *file;
  if (auto file = environment("CUINLINE_CACHE_SIGNING_KEY")) config.signing_key_file = *file;
  if (auto file = environment("CUINLINE_CACHE_TRUSTED_KEYS")) config.trusted_keys_file = *file;
  if (auto prefix = environment("CUINLINE_REMOTE_PREFIX")) config.key_prefix = *prefix;
  duration_from_environment("CUINLINE_REMOTE_CONNECT_TIMEOUT_MS", config.connect_timeout, w1);
  duration_from_environment("CUINLINE_REMOTE_TIMEOUT_MS", config.command_timeout, w2);
  duration_from_environment("CUINLINE_REMOTE_SCAN_TIMEOUT_MS", config.scan_timeout, w7);
  duration_from_environment("CUINLINE_REMOTE_LOCK_WAIT_MS", config.lock_wait, w3);
  duration_from_environment("CUINLINE_REMOTE_LOCK_TTL_MS", config.lock_ttl, w4);
  duration_from_environment("CUINLINE_REMOTE_TTL_S", config.entry_ttl, w5);
  std::chrono::duration<std::uint64_t> max_bytes{config.max_entry_bytes};
  duration_from_environment("CUINLINE_REMOTE_MAX_ENTRY_BYTES", max_bytes, w6);
  config.max_entry_bytes = max_bytes.count();
  return config;
}

}  // namespace cuinline
