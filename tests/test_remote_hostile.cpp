// The remote tier against peers that attack it: a reply dripped one byte
// per 100 ms, a bulk header announcing 1 TiB then streaming, an endless SCAN cursor, INFO fields and
// errors carrying terminal escapes (tests/hostile_peer.hpp, on 127.0.0.1); a too-large value and
// keys of another type planted in a real redis-server; unix sockets in a directory others can write
// or owned by another user. Each call returns within its deadline (asserted at 3x, so load on a
// shared machine does not make it flaky), buffers no more than its bound, and serves nothing.

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <chrono>
#include <random>

#include "cache/redis_client.hpp"
#include "hostile_peer.hpp"
#include "remote_test_util.hpp"

#if CUINLINE_TEST_HAVE_REDIS

namespace cuinline {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using test::HostilePeer;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

detail::RedisEndpoint endpoint_of(const std::string& url) {
  std::string error;
  auto endpoint = detail::parse_redis_url(url, &error);
  EXPECT_TRUE(endpoint) << error;
  return endpoint.value_or(detail::RedisEndpoint{});
}

detail::RedisLimits small_limits() {
  detail::RedisLimits limits;
  limits.connect_timeout = milliseconds(50);
  limits.command_timeout = milliseconds(200);
  limits.max_reply_bytes = std::uint64_t{1} << 20;
  return limits;
}

CacheKey random_key() {
  std::mt19937_64 gen(test::fresh_seed());
  CompileRequest request = test::stress_request(static_cast<int>(gen() % 1000000));
  return make_cache_key(request, test::sm90());
}

// A RemoteCache on `url` with the fleet's key and short deadlines.
RemoteCacheConfig remote_config(const test::Fleet& fleet, const std::string& url) {
  RemoteCacheConfig config = fleet.config("x").remote;
  config.url = url;
  config.connect_timeout = milliseconds(50);
  config.command_timeout = milliseconds(200);
  config.scan_timeout = milliseconds(400);
  return config;
}

const char* kDripReply = "+OOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOO\r\n";

TEST(RemoteHostile, SlowDripMeetsTheCommandDeadline) {
  REDIS_OR_SKIP();
  // Each byte comes well inside the 200 ms timeout; the reply as a whole would take 6.7 s.
  HostilePeer peer([](const std::string&) { return HostilePeer::Reply{kDripReply}; }, milliseconds(100));
  const detail::RedisLimits limits = small_limits();
  detail::RedisResult result;
  auto connection = detail::RedisConnection::open(endpoint_of(peer.url()), limits, &result);
  ASSERT_TRUE(connection) << result.error;
  auto start = Clock::now();
  result = connection->command({"PING"});
  double s = seconds_since(start);
  std::printf("drip, one command: %.3f s (%s)\n", s, result.error.c_str());
  EXPECT_FALSE(result.ok());
  EXPECT_NE(result.error.find("timed out"), std::string::npos) << result.error;
  EXPECT_TRUE(connection->broken());
  EXPECT_GE(s, 0.19);
  EXPECT_LT(s, 0.6);

  // AUTH while opening: connect + AUTH within connect + command timeout (250 ms).
  start = Clock::now();
  auto authed = detail::RedisConnection::open(endpoint_of(peer.url(":secret")), limits, &result);
  s = seconds_since(start);
  std::printf("drip, AUTH: %.3f s (%s)\n", s, result.error.c_str());
  EXPECT_FALSE(authed);
  EXPECT_NE(result.error.find("AUTH: timed out"), std::string::npos) << result.error;
  EXPECT_LT(s, 0.75);
}

TEST(RemoteHostile, SlowDripBoundsEveryRemoteCall) {
  REDIS_OR_SKIP();
  test::Fleet fleet;
  HostilePeer peer([](const std::string&) { return HostilePeer::Reply{kDripReply}; }, milliseconds(100));
  const CacheKey key = random_key();
  // A fresh RemoteCache for each call: after the first failure a cache skips Redis (back-off), which
  // would hide a call that hangs.
  const auto timed = [&](const char* what, const std::function<void(RemoteCache&)>& call) {
    RemoteCache remote(remote_config(fleet, peer.url()));
    ASSERT_TRUE(remote.usable()) << remote.unusable_reason();
    const auto start = Clock::now();
    call(remote);
    const double s = seconds_since(start);
    std::printf("drip, %s: %.3f s\n", what, s);
    EXPECT_LT(s, 0.75) << what;  // 3x the deadline of connect + one command
    EXPECT_EQ(remote.stats().remote_hits, 0u);
  };
  timed("load", [&](RemoteCache& r) { EXPECT_FALSE(r.load(key)); });
  timed("check", [&](RemoteCache& r) { EXPECT_EQ(r.check(key), RemoteEntryCheck::unavailable); });
  timed("server_info", [&](RemoteCache& r) { EXPECT_THROW(r.server_info(), CacheError); });
  timed("keys", [&](RemoteCache& r) { EXPECT_THROW(r.keys(), CacheError); });
}

TEST(RemoteHostile, GiantRepliesAreRefusedFromTheirHeader) {
  REDIS_OR_SKIP();
  const detail::RedisLimits limits = small_limits();  // 1 MiB
  struct Case {
    const char* name;
    std::string header;
    const char* error;
  };
  const std::vector<Case> cases = {
      {"1 TiB bulk", "$1099511627776\r\n", "bulk reply announcing more than"},
      {"bulk just over the bound", "$" + std::to_string(limits.max_reply_bytes + 1) + "\r\n",
       "bulk reply announcing more than"},
      {"2^40-element array", "*1099511627776\r\n", "array reply announcing more than"},
      {"status line without end", "+", "reply larger than"},
      {"array of bulks, each small", "*200000\r\n$100\r\n", "reply larger than"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    // The array-of-bulks case needs real bulks after its header: 100 'x' + CRLF each.
    std::string header = c.header;
    HostilePeer peer([&](const std::string&) {
      if (std::string(c.name) != "array of bulks, each small") return HostilePeer::Reply{header, true};
      std::string body = header + std::string(100, 'x') + "\r\n";
      for (int i = 0; i < 20000; ++i) body += "$100\r\n" + std::string(100, 'x') + "\r\n";
      return HostilePeer::Reply{body, false};
    });
    detail::RedisResult result;
    auto connection = detail::RedisConnection::open(endpoint_of(peer.url()), limits, &result);
    ASSERT_TRUE(connection) << result.error;
    const auto start = Clock::now();
    result = connection->command({"GET", "k"});
    const double s = seconds_since(start);
    std::printf("%s: %.3f s, %llu bytes received (bound %llu): %s\n", c.name, s,
                static_cast<unsigned long long>(connection->bytes_received()),
                static_cast<unsigned long long>(limits.max_reply_bytes), result.error.c_str());
    EXPECT_FALSE(result.ok());
    EXPECT_NE(result.error.find(c.error), std::string::npos) << result.error;
    EXPECT_TRUE(connection->broken());
    EXPECT_LE(connection->bytes_received(), limits.max_reply_bytes + 16384);
    EXPECT_LT(s, 0.6);
  }
}

TEST(RemoteHostile, GiantReplyToALookupIsAMiss) {
  REDIS_OR_SKIP();
  test::Fleet fleet;
  HostilePeer peer([](const std::string&) { return HostilePeer::Reply{"$1099511627776\r\n", true}; });
  RemoteCache remote(remote_config(fleet, peer.url()));
  const auto start = Clock::now();
  EXPECT_FALSE(remote.load(random_key()));
  const double s = seconds_since(start);
  std::printf("1 TiB header to a lookup: %.3f s, the peer got %llu bytes out\n", s,
              static_cast<unsigned long long>(peer.bytes_sent()));
  EXPECT_LT(s, 0.75);
  EXPECT_GT(remote.stats().remote_errors, 0u);
  EXPECT_EQ(remote.stats().remote_hits, 0u);
}

TEST(RemoteHostile, EndlessScanCursorIsBounded) {
  REDIS_OR_SKIP();
  test::Fleet fleet;
  std::mt19937_64 gen(test::fresh_seed());
  // Every page a fresh cursor and a fresh entry name: the loop never ends by itself.
  HostilePeer peer([&](const std::string& command) {
    if (command != "SCAN") return HostilePeer::Reply{"-ERR no\r\n"};
    const std::string name = "cuinline:e:" + test::random_hex(32);
    return HostilePeer::Reply{"*2\r\n$2\r\n" + std::to_string(10 + gen() % 90) + "\r\n*1\r\n$" +
                              std::to_string(name.size()) + "\r\n" + name + "\r\n"};
  });
  RemoteCache remote(remote_config(fleet, peer.url()));
  const auto start = Clock::now();
  try {
    remote.keys();
    ADD_FAILURE() << "an endless SCAN ended";
  } catch (const CacheError& e) {
    EXPECT_NE(std::string(e.what()).find("did not finish within 400 ms"), std::string::npos) << e.what();
  }
  const double s = seconds_since(start);
  std::printf("endless SCAN: %.3f s (scan deadline 0.4 s)\n", s);
  EXPECT_GE(s, 0.39);
  EXPECT_LT(s, 1.2);
}

bool has_raw_control(const std::string& text) {
  for (unsigned char c : text) {
    if (c < 0x20 || c >= 0x7f) return true;
  }
  return false;
}

TEST(RemoteHostile, TextFromRedisIsEscaped) {
  REDIS_OR_SKIP();
  test::Fleet fleet;
  const std::string info =
      "# Server\r\nredis_version:7.2\x1b[2J\x1b]0;owned\x07\r\nrole:master\x9b"
      "31m\r\nmaxmemory_policy:allkeys-lru\x1b[8m\r\nused_memory:1000\r\nmaxmemory:0\r\n";
  HostilePeer peer([&](const std::string& command) {
    if (command == "INFO")
      return HostilePeer::Reply{"$" + std::to_string(info.size()) + "\r\n" + info + "\r\n"};
    return HostilePeer::Reply{"-ERR \x1b[31mred\x1b[0m and \r\n"};
  });
  {
    RemoteCache remote(remote_config(fleet, peer.url()));
    const RemoteServerInfo got = remote.server_info();
    EXPECT_EQ(got.version, "7.2\\x1b[2J\\x1b]0;owned\\x07");
    EXPECT_EQ(got.role, "master\\x9b31m");
    EXPECT_EQ(got.eviction_policy, "allkeys-lru\\x1b[8m");
    EXPECT_EQ(got.used_memory, 1000u);
  }  // its pooled connection closed: the peer serves one connection at a time
  detail::RedisResult result;
  auto connection = detail::RedisConnection::open(endpoint_of(peer.url()), small_limits(), &result);
  ASSERT_TRUE(connection) << result.error;
  result = connection->command({"GET", "k"});
  EXPECT_EQ(result.error, "ERR \\x1b[31mred\\x1b[0m and ");
  EXPECT_FALSE(has_raw_control(result.error));
}

TEST(RemoteHostile, PlantedTooLargeEntryIsNotFetchedAndIsReplaced) {
  REDIS_OR_SKIP();
  test::Fleet fleet;
  const int i = static_cast<int>(test::fresh_seed() % 1000000);
  const CacheKey key = make_cache_key(test::stress_request(i), test::sm90());
  ASSERT_TRUE(fleet.redis.command({"SET", fleet.entry_key(key), std::string(4u << 20, 'z')}));
  RemoteCacheConfig config = fleet.config("a").remote;
  config.max_entry_bytes = 256u << 10;
  RemoteCache remote(config);
  const auto sent = [&] {
    const std::string stats = fleet.redis.info("stats");
    const auto at = stats.find("total_net_output_bytes:");
    return at == std::string::npos ? -1LL : std::atoll(stats.c_str() + at + 23);
  };
  const long long before = sent();
  ASSERT_GE(before, 0);
  const auto start = Clock::now();
  EXPECT_FALSE(remote.load(key));
  const double s = seconds_since(start);
  std::uint64_t bytes = 0;
  EXPECT_EQ(remote.check(key, nullptr, nullptr, &bytes), RemoteEntryCheck::too_large);
  EXPECT_EQ(bytes, 4u << 20);
  const long long moved = sent() - before;
  std::printf("planted 4 MiB entry (limit 256 KiB): miss in %.4f s, Redis sent %lld bytes\n", s, moved);
  EXPECT_LT(moved, 64 << 10) << "the value was fetched";
  CacheStats stats = remote.stats();
  EXPECT_EQ(stats.remote_rejected, 1u);
  EXPECT_EQ(stats.remote_errors, 0u) << "a too-large entry is the entry's problem, not Redis's";
  // The next publish of the key replaces it.
  ASSERT_TRUE(remote.store(key, compile(test::stress_request(i), test::sm90())));
  const auto hit = remote.load(key);
  ASSERT_TRUE(hit);
  EXPECT_EQ(remote.stats().remote_hits, 1u);
}

TEST(RemoteHostile, WrongTypedKeysAreSkippedNotFatal) {
  REDIS_OR_SKIP();
  test::Fleet fleet;
  const int i = static_cast<int>(test::fresh_seed() % 1000000);
  const CacheKey key = make_cache_key(test::stress_request(i), test::sm90());
  const CacheKey other = make_cache_key(test::stress_request(i + 1), test::sm90());
  ASSERT_TRUE(fleet.redis.command({"HSET", fleet.entry_key(key), "f", "v"}));
  ASSERT_TRUE(fleet.redis.command({"RPUSH", fleet.entry_key(other), "a", "b"}));
  RemoteCache remote(fleet.config("a").remote);
  EXPECT_FALSE(remote.load(key));
  EXPECT_EQ(remote.stats().remote_rejected, 1u);
  EXPECT_EQ(remote.check(other), RemoteEntryCheck::wrong_type);
  EXPECT_EQ(remote.keys().size(), 2u);
  EXPECT_TRUE(remote.list().empty());
  // Not an outage: the tier is not backed off, and the publish replaces the hash.
  ASSERT_TRUE(remote.store(key, compile(test::stress_request(i), test::sm90())));
  EXPECT_TRUE(remote.load(key));
  EXPECT_EQ(remote.check(key), RemoteEntryCheck::ok);
  EXPECT_EQ(remote.list().size(), 1u);
}

// A listening unix socket at `path`; closes it on destruction.
class UnixListener {
 public:
  explicit UnixListener(const std::filesystem::path& path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd_, 4) != 0)
      std::abort();
  }
  ~UnixListener() { ::close(fd_); }
  /// Whether a client connected (a connection waits to be accepted).
  bool connected() const {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;
  }

 private:
  int fd_ = -1;
};

TEST(RemoteHostile, UnixSocketsOthersControlAreRefused) {
  REDIS_OR_SKIP();
  test::TempDir dir("sock");
  const auto open = [&](const std::filesystem::path& socket, detail::RedisResult* result) {
    return detail::RedisConnection::open(endpoint_of("unix://" + socket.string()), small_limits(), result);
  };
  // The control: a socket of this user in a directory only it can write is connected to.
  {
    std::filesystem::create_directory(dir.path() / "mine");
    ::chmod((dir.path() / "mine").c_str(), 0700);
    UnixListener listener(dir.path() / "mine" / "redis.sock");
    detail::RedisResult result;
    EXPECT_TRUE(open(dir.path() / "mine" / "redis.sock", &result)) << result.error;
    EXPECT_TRUE(listener.connected());
  }
  struct Case {
    const char* name;
    mode_t dir_mode;
    uid_t dir_owner, socket_owner;  // -1: this user
    const char* error;
  };
  const bool root = ::geteuid() == 0;
  std::vector<Case> cases = {
      {"directory mode 0777", 0777, uid_t(-1), uid_t(-1), "is writable by group or others (mode 0777)"},
      {"directory mode 0775", 0775, uid_t(-1), uid_t(-1), "is writable by group or others (mode 0775)"},
      {"sticky directory mode 1777", 01777, uid_t(-1), uid_t(-1),
       "is writable by group or others (mode 1777)"},
  };
  if (root) {
    cases.push_back({"socket of uid 65534", 0700, uid_t(-1), 65534, "it is owned by uid 65534"});
    cases.push_back({"directory of uid 65534", 0700, 65534, uid_t(-1), "is owned by uid 65534"});
  } else {
    std::printf("not root: the cases of another user's socket and directory are not run\n");
  }
  int n = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto sub = dir.path() / ("d" + std::to_string(n++));
    std::filesystem::create_directory(sub);
    UnixListener listener(sub / "redis.sock");
    ASSERT_EQ(::chown((sub / "redis.sock").c_str(), c.socket_owner, uid_t(-1)), 0);
    ASSERT_EQ(::chmod(sub.c_str(), c.dir_mode), 0);
    ASSERT_EQ(::chown(sub.c_str(), c.dir_owner, uid_t(-1)), 0);
    detail::RedisResult result;
    EXPECT_FALSE(open(sub / "redis.sock", &result));
    EXPECT_EQ(result.failure, detail::RedisFailure::refused);
    EXPECT_NE(result.error.find(c.error), std::string::npos) << result.error;
    EXPECT_NE(result.error.find((sub / "redis.sock").string()), std::string::npos) << result.error;
    EXPECT_FALSE(listener.connected()) << "connected to a socket it refused";
  }
  // A symbolic link where the socket should be (to a socket that would pass) is not followed.
  {
    std::filesystem::create_directory(dir.path() / "link");
    ::chmod((dir.path() / "link").c_str(), 0700);
    UnixListener listener(dir.path() / "mine" / "real.sock");
    std::filesystem::create_symlink(dir.path() / "mine" / "real.sock", dir.path() / "link" / "redis.sock");
    detail::RedisResult result;
    EXPECT_FALSE(open(dir.path() / "link" / "redis.sock", &result));
    EXPECT_NE(result.error.find("a symbolic link"), std::string::npos) << result.error;
    EXPECT_FALSE(listener.connected());
  }
  // Through the tier: a refused socket is a miss, one warning, and the local tiers go on.
  {
    test::Fleet fleet;
    RemoteCacheConfig config = fleet.config("a").remote;
    config.url = "unix://" + (dir.path() / "d0" / "redis.sock").string();
    RemoteCache remote(config);
    EXPECT_FALSE(remote.load(random_key()));
    EXPECT_GT(remote.stats().remote_errors, 0u);
  }
}

}  // namespace
}  // namespace cuinline

#else  // a build without hiredis: nothing to test but that it says so

TEST(RemoteHostileBuild, NeedsRedisSupport) {
  GTEST_SKIP() << ::cuinline::test::redis_skip_reason();
}

#endif
