// RedisConnection (redis_client.hpp): the socket driven with poll and a deadline, replies checked by
// ReplyScanner (redis_reply_scanner.cpp) and parsed by hiredis' reader; the unix socket checks.

#include "cache/redis_client.hpp"

#include "common/escape.hpp"

#include <hiredis/hiredis.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>

#include "cache/disk_cache_impl.hpp"

namespace cuinline::detail {
namespace {

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// Milliseconds left until `deadline`, rounded up (0: passed), capped for poll()'s int.
int millis_left(RedisClock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - RedisClock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

// Waits for `events` on `fd` until `deadline`: 1 ready, 0 deadline passed, -1 error (errno).
int wait_for(int fd, short events, RedisClock::time_point deadline) {
  for (;;) {
    const int left = millis_left(deadline);
    if (left == 0) return 0;
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, left);
    if (n > 0) return 1;
    if (n < 0 && errno != EINTR) return -1;
  }
}

std::string format_command(const std::vector<std::string_view>& args) {
  std::size_t size = 16;
  for (std::string_view a : args) size += a.size() + 24;
  std::string out;
  out.reserve(size);
  out += '*' + std::to_string(args.size()) + "\r\n";
  for (std::string_view a : args) {
    out += '$' + std::to_string(a.size()) + "\r\n";
    out.append(a.data(), a.size());
    out += "\r\n";
  }
  return out;
}

// Waits for a non-blocking connect() that returned EINPROGRESS; 0 or the errno.
int finish_connect(int fd, RedisClock::time_point deadline) {
  const int ready = wait_for(fd, POLLOUT, deadline);
  if (ready == 0) return ETIMEDOUT;
  if (ready < 0) return errno;
  int error = 0;
  socklen_t len = sizeof error;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0) return errno;
  return error;
}

UniqueFd connect_tcp(const RedisEndpoint& endpoint, RedisClock::time_point deadline, std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  // Name resolution is the one step without a deadline (getaddrinfo has none): use an address or a
  // name /etc/hosts answers where that matters.
  const int rc = ::getaddrinfo(endpoint.host.c_str(), std::to_string(endpoint.port).c_str(), &hints, &found);
  if (rc != 0) {
    *error = "cannot resolve '" + endpoint.host + "': " + ::gai_strerror(rc);
    return UniqueFd();
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> list(found, ::freeaddrinfo);
  int last = ECONNREFUSED;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    UniqueFd fd(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    if (!fd) {
      last = errno;
      continue;
    }
    int err = 0;
    if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
      err = errno == EINPROGRESS || errno == EINTR ? finish_connect(fd.get(), deadline) : errno;
    }
    if (err == 0) {
      const int one = 1;
      ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return fd;
    }
    last = err;
    if (err == ETIMEDOUT) break;  // the deadline is spent
  }
  *error = "cannot connect: " + (last == ETIMEDOUT ? std::string("timed out") : errno_text(last));
  return UniqueFd();
}

UniqueFd connect_unix(const std::string& path, RedisClock::time_point deadline, std::string* error) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) {
    *error = "the socket path '" + path + "' is too long";
    return UniqueFd();
  }
  std::copy(path.begin(), path.end(), addr.sun_path);
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  int err = fd ? 0 : errno;
  if (fd && ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    err = errno == EINPROGRESS || errno == EINTR ? finish_connect(fd.get(), deadline) : errno;
  }
  if (err != 0) {
    *error = "cannot connect to '" + path +
             "': " + (err == ETIMEDOUT ? std::string("timed out") : errno_text(err));
    return UniqueFd();
  }
  return fd;
}

}  // namespace

RedisFailure classify_redis_error(std::string_view message) noexcept {
  if (starts_with(message, "NOAUTH") || starts_with(message, "WRONGPASS") || starts_with(message, "NOPERM") ||
      starts_with(message, "ERR invalid password") || starts_with(message, "ERR AUTH") ||
      starts_with(message, "ERR Client sent AUTH")) {
    return RedisFailure::auth;
  }
  if (starts_with(message, "OOM")) return RedisFailure::oom;
  if (starts_with(message, "READONLY")) return RedisFailure::readonly;
  if (starts_with(message, "WRONGTYPE")) return RedisFailure::wrong_type;
  if (starts_with(message, "LOADING") || starts_with(message, "MASTERDOWN") || starts_with(message, "BUSY") ||
      starts_with(message, "TRYAGAIN") || starts_with(message, "CLUSTERDOWN")) {
    return RedisFailure::unavailable;
  }
  return RedisFailure::other;
}

std::string printable(std::string_view text) {
  return escape_control(text);
}

std::chrono::milliseconds transfer_allowance(std::uint64_t bytes) noexcept {
  return std::chrono::milliseconds(static_cast<std::int64_t>(bytes >> 15));
}

std::string unix_socket_problem(const std::string& path, std::string* resolved) {
  namespace fs = std::filesystem;
  const fs::path socket(path);
  const fs::path name = socket.filename();
  if (name.empty() || name == "." || name == "..") return "the unix socket path '" + path + "' names no file";
  std::error_code ec;
  fs::path directory = fs::weakly_canonical(socket.parent_path(), ec);
  if (ec) directory = socket.parent_path();
  // Every directory above the socket's: owned by this user or root, writable by no one else unless
  // sticky (the disk cache's rule for the directories above it).
  std::string reason;
  int error = 0;
  const UniqueFd dir = open_cache_directory(directory, /*create=*/false, /*shared=*/false, reason, error);
  if (!dir) return "refusing the unix socket '" + path + "': " + reason;
  struct stat st {};
  if (::fstat(dir.get(), &st) != 0) return "cannot stat '" + directory.string() + "': " + errno_text(errno);
  // The socket's own directory: whoever can write it can put their own socket under the name first.
  if (st.st_uid != ::geteuid() && st.st_uid != 0) {
    return "refusing the unix socket '" + path + "': its directory '" + directory.string() +
           "' is owned by uid " + std::to_string(st.st_uid) +
           ", not by this user or root: its owner can put another socket there";
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return "refusing the unix socket '" + path + "': its directory '" + directory.string() +
           "' is writable by group or others (mode " + mode_text(st.st_mode) +
           "): anyone who can write it can put another socket there first; put the socket in a directory "
           "only its owner can write";
  }
  struct stat sock {};
  if (::fstatat(dir.get(), name.c_str(), &sock, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno != ENOENT) return "cannot stat '" + path + "': " + errno_text(errno);
    // Not there (Redis down): connect() says so.
  } else if (!S_ISSOCK(sock.st_mode)) {
    return "refusing the unix socket '" + path + "': it is " +
           (S_ISLNK(sock.st_mode) ? "a symbolic link" : "not a socket");
  } else if (sock.st_uid != ::geteuid() && sock.st_uid != 0) {
    return "refusing the unix socket '" + path + "': it is owned by uid " + std::to_string(sock.st_uid) +
           ", not by this user or root (run Redis as this user, or as root)";
  }
  *resolved = (directory / name).string();
  return {};
}

// ---- RedisResult -------------------------------------------------------------------------------

void ReplyDeleter::operator()(redisReply* reply) const noexcept {
  freeReplyObject(reply);
}

bool RedisResult::is_nil() const noexcept {
  return reply && reply->type == REDIS_REPLY_NIL;
}
bool RedisResult::is_status(std::string_view status) const noexcept {
  return reply && reply->type == REDIS_REPLY_STATUS && std::string_view(reply->str, reply->len) == status;
}
std::string_view RedisResult::string() const noexcept {
  if (!reply || (reply->type != REDIS_REPLY_STRING && reply->type != REDIS_REPLY_STATUS)) return {};
  return std::string_view(reply->str, reply->len);
}
long long RedisResult::integer() const noexcept {
  return reply && reply->type == REDIS_REPLY_INTEGER ? reply->integer : 0;
}
bool RedisResult::is_integer() const noexcept {
  return reply && reply->type == REDIS_REPLY_INTEGER;
}

// ---- RedisConnection ---------------------------------------------------------------------------

void RedisConnection::ReaderDeleter::operator()(redisReader* reader) const noexcept {
  redisReaderFree(reader);
}

RedisConnection::RedisConnection(UniqueFd fd, const RedisLimits& limits)
    : fd_(std::move(fd)), reader_(redisReaderCreate()), limits_(limits), scanner_(limits.max_reply_bytes) {}

RedisConnection::~RedisConnection() = default;

std::unique_ptr<RedisConnection> RedisConnection::open(const RedisEndpoint& endpoint,
                                                       const RedisLimits& limits, RedisResult* result) {
  const auto start = RedisClock::now();
  const auto connect_deadline = start + limits.connect_timeout;
  const auto open_deadline = connect_deadline + limits.command_timeout;
  std::string error;
  UniqueFd fd;
  if (endpoint.unix_socket) {
    std::string path;
    if (std::string problem = unix_socket_problem(endpoint.path, &path); !problem.empty()) {
      result->failure = RedisFailure::refused;
      result->error = std::move(problem);
      return nullptr;
    }
    fd = connect_unix(path, connect_deadline, &error);
  } else {
    fd = connect_tcp(endpoint, connect_deadline, &error);
  }
  if (!fd) {
    result->failure = RedisFailure::unavailable;
    result->error = std::move(error);
    return nullptr;
  }
  std::unique_ptr<RedisConnection> connection(new RedisConnection(std::move(fd), limits));
  if (!connection->reader_) {
    result->failure = RedisFailure::unavailable;
    result->error = "out of memory";
    return nullptr;
  }
  if (!endpoint.password.empty()) {
    RedisResult auth = endpoint.user.empty()
                           ? connection->command({"AUTH", endpoint.password}, open_deadline)
                           : connection->command({"AUTH", endpoint.user, endpoint.password}, open_deadline);
    if (!auth.ok()) {
      *result = std::move(auth);
      result->error = "AUTH: " + result->error;
      return nullptr;
    }
  }
  if (endpoint.db != 0) {
    const std::string db = std::to_string(endpoint.db);
    RedisResult select = connection->command({"SELECT", db}, open_deadline);
    if (!select.ok()) {
      *result = std::move(select);
      result->error = "SELECT: " + result->error;
      return nullptr;
    }
  }
  return connection;
}

RedisResult RedisConnection::fail(RedisFailure failure, std::string error) {
  broken_ = true;
  RedisResult result;
  result.failure = failure;
  result.error = std::move(error);
  return result;
}

bool RedisConnection::send_all(std::string_view bytes, RedisClock::time_point deadline, std::string* error) {
  while (!bytes.empty()) {
    // MSG_NOSIGNAL: a peer that went away gives EPIPE here, never a SIGPIPE to the process.
    const ssize_t n = ::send(fd_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n > 0) {
      bytes.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      const int ready = wait_for(fd_.get(), POLLOUT, deadline);
      if (ready > 0) continue;
      *error = ready == 0 ? "timed out sending" : "poll: " + errno_text(errno);
      return false;
    }
    *error = "send: " + errno_text(n < 0 ? errno : EIO);
    return false;
  }
  return true;
}

bool RedisConnection::still_usable() {
  if (broken_) return false;
  pollfd p{fd_.get(), POLLIN, 0};
  if (::poll(&p, 1, 0) != 0) broken_ = true;  // EOF, an error, or bytes nobody asked for
  return !broken_;
}

RedisResult RedisConnection::command(const std::vector<std::string_view>& args) {
  std::uint64_t bytes = 0;
  for (std::string_view a : args) bytes += a.size();
  return command(args, RedisClock::now() + limits_.command_timeout + transfer_allowance(bytes));
}

RedisResult RedisConnection::command(const std::vector<std::string_view>& args,
                                     RedisClock::time_point deadline) {
  if (broken_) return fail(RedisFailure::unavailable, "connection broken");
  const auto start = RedisClock::now();
  const auto timed_out = [&] {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(RedisClock::now() - start).count();
    return "timed out (no complete reply after " + std::to_string(ms) + " ms)";
  };
  std::string error;
  if (!send_all(format_command(args), deadline, &error)) {
    return fail(RedisFailure::unavailable, error == "timed out sending" ? timed_out() : error);
  }
  scanner_.reset();
  char buffer[16384];
  for (;;) {
    const int ready = wait_for(fd_.get(), POLLIN, deadline);
    if (ready == 0) return fail(RedisFailure::unavailable, timed_out());
    if (ready < 0) return fail(RedisFailure::unavailable, "poll: " + errno_text(errno));
    const ssize_t n = ::recv(fd_.get(), buffer, sizeof buffer, 0);
    if (n == 0) return fail(RedisFailure::unavailable, "connection closed by the server");
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return fail(RedisFailure::unavailable, "recv: " + errno_text(errno));
    }
    bytes_received_ += static_cast<std::uint64_t>(n);
    // Checked before hiredis buffers a byte of it.
    const long long used = scanner_.scan(std::string_view(buffer, static_cast<std::size_t>(n)));
    if (used < 0) return fail(RedisFailure::unavailable, scanner_.error());
    if (redisReaderFeed(reader_.get(), buffer, static_cast<std::size_t>(used)) != REDIS_OK) {
      return fail(RedisFailure::unavailable, "out of memory");
    }
    if (!scanner_.complete()) continue;
    void* raw = nullptr;
    if (redisReaderGetReply(reader_.get(), &raw) != REDIS_OK || raw == nullptr) {
      if (raw != nullptr) freeReplyObject(raw);
      return fail(RedisFailure::unavailable, "protocol error: " + printable(reader_->errstr));
    }
    RedisResult result;
    result.reply.reset(static_cast<redisReply*>(raw));
    // One command, one reply: bytes after it are the peer speaking out of turn.
    if (used < n) broken_ = true;
    if (result.reply->type == REDIS_REPLY_ERROR) {
      const std::string_view message(result.reply->str, result.reply->len);
      result.failure = classify_redis_error(message);
      result.error = printable(message);
      result.reply.reset();
    }
    return result;
  }
}

}  // namespace cuinline::detail
