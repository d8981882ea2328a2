#pragma once
// A private redis-server for the remote-cache tests: started on a unix socket in a temp directory
// (or on 127.0.0.1 and a free port) with --save '' --appendonly no, stopped (SIGKILL) by the
// destructor; plus a fleet key file and a raw hiredis connection for planting entries. Tests call
// REDIS_OR_SKIP() first: without redis-server (or a build without hiredis) they are skipped with a
// message. scripts/setup installs redis-server, so in CI they run.

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"

#if CUINLINE_TEST_HAVE_REDIS
#include <hiredis/hiredis.h>
#endif

namespace cuinline::test {

/// The redis-server program, or "" when not installed.
inline std::string redis_server_binary() {
  for (const char* candidate :
       {"/usr/bin/redis-server", "/usr/local/bin/redis-server", "/usr/sbin/redis-server"}) {
    if (::access(candidate, X_OK) == 0) return candidate;
  }
  return "";
}

inline std::string redis_skip_reason() {
#if !CUINLINE_TEST_HAVE_REDIS
  return "this build has no Redis support (hiredis not found; CUINLINE_WITH_REDIS)";
#else
  if (redis_server_binary().empty()) return "redis-server is not installed (scripts/setup installs it)";
  return "";
#endif
}

#define REDIS_OR_SKIP()                                                                                   \
  do {                                                                                                    \
    if (const std::string why = ::cuinline::test::redis_skip_reason(); !why.empty()) GTEST_SKIP() << why; \
  } while (0)

/// A free TCP port on 127.0.0.1 (bound and released; a race with another program is unlikely).
inline int free_tcp_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    return 0;
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

/// Writes a fleet key file ("<id> <hex>" per line) with `mode`; returns its path.
inline std::filesystem::path write_key_file(const std::filesystem::path& dir, const std::string& name,
                                            const std::vector<std::pair<std::string, std::string>>& keys,
                                            mode_t mode = 0600) {
  const auto path = dir / name;
  {
    std::ofstream out(path, std::ios::trunc);
    out << "# cuinline fleet keys: the first signs\n";
    for (const auto& [id, hex] : keys) out << id << " " << hex << "\n";
  }
  ::chmod(path.c_str(), mode);
  return path;
}

inline std::string random_hex(std::size_t bytes) {
  std::mt19937_64 gen(fresh_seed());
  std::string out;
  for (std::size_t i = 0; i < bytes; ++i) {
    char b[3];
    std::snprintf(b, sizeof b, "%02x", static_cast<unsigned>(gen() & 0xff));
    out += b;
  }
  return out;
}

class RedisServer {
 public:
  /// `tcp`: listen on 127.0.0.1 and a free port (else only on a unix socket). `extra`: more
  /// redis-server arguments ("--maxmemory", "1mb", ...).
  explicit RedisServer(bool tcp = false, std::vector<std::string> extra = {})
      : dir_("redis"), tcp_(tcp), extra_(std::move(extra)) {
    socket_ = (dir_.path() / "redis.sock").string();
    start();
  }
  ~RedisServer() { stop(); }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  bool running() const { return pid_ > 0; }
  int port() const { return port_; }
  const std::string& socket_path() const { return socket_; }
  std::string url(const std::string& userinfo = "") const {
    if (!tcp_) return "unix://" + socket_;
    return "redis://" + (userinfo.empty() ? "" : userinfo + "@") + "127.0.0.1:" + std::to_string(port_);
  }

  /// Starts redis-server (again, on the same socket/port) and waits until it answers PING.
  bool start() {
    const std::string binary = redis_server_binary();
    if (binary.empty()) return false;
    if (tcp_ && port_ == 0) port_ = free_tcp_port();
    std::vector<std::string> args{binary,
                                  "--port",
                                  tcp_ ? std::to_string(port_) : "0",
                                  "--bind",
                                  "127.0.0.1",
                                  "--unixsocket",
                                  socket_,
                                  "--unixsocketperm",
                                  "700",
                                  "--save",
                                  "",
                                  "--appendonly",
                                  "no",
                                  "--dir",
                                  dir_.path().string(),
                                  "--daemonize",
                                  "no",
                                  "--loglevel",
                                  "warning",
                                  "--logfile",
                                  (dir_.path() / "log").string()};
    args.insert(args.end(), extra_.begin(), extra_.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      if (ping()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGCONT);
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    ::unlink(socket_.c_str());
  }
  void pause() { ::kill(pid_, SIGSTOP); }
  void resume() { ::kill(pid_, SIGCONT); }

#if CUINLINE_TEST_HAVE_REDIS
  struct ReplyFree {
    void operator()(redisReply* r) const { freeReplyObject(r); }
  };
  using Reply = std::unique_ptr<redisReply, ReplyFree>;

  /// Runs one command on a fresh connection over the unix socket (never affected by AUTH tests
  /// unless `password` is given). Binary-safe arguments.
  Reply command(const std::vector<std::string>& args, const std::string& password = "") const {
    timeval tv{2, 0};
    redisContext* c = redisConnectUnixWithTimeout(socket_.c_str(), tv);
    if (c == nullptr || c->err) {
      if (c) redisFree(c);
      return nullptr;
    }
    redisSetTimeout(c, tv);
    if (!password.empty()) freeReplyObject(redisCommand(c, "AUTH %s", password.c_str()));
    std::vector<const char*> argv;
    std::vector<size_t> len;
    for (const auto& a : args) {
      argv.push_back(a.data());
      len.push_back(a.size());
    }
    auto* r =
        static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), len.data()));
    redisFree(c);
    return Reply(r);
  }
  std::string get(const std::string& key, const std::string& password = "") const {
    Reply r = command({"GET", key}, password);
    return r && r->type == REDIS_REPLY_STRING ? std::string(r->str, r->len) : std::string();
  }
  /// INFO `section` as text ("" if Redis does not answer).
  std::string info(const std::string& section) const {
    Reply r = command({"INFO", section});
    return r && r->type == REDIS_REPLY_STRING ? std::string(r->str, r->len) : std::string();
  }
  long long integer(const std::vector<std::string>& args, const std::string& password = "") const {
    Reply r = command(args, password);
    return r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
  }
  bool ping(const std::string& password = "") const {
    Reply r = command({"PING"}, password);
    return r && (r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_ERROR);
  }
#else
  bool ping(const std::string& = "") const {
    return false;
  }
#endif

 private:
  TempDir dir_;
  bool tcp_;
  std::vector<std::string> extra_;
  std::string socket_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace cuinline::test
