// hiredis behind RedisConnection (redis_client.hpp).

#include "cache/redis_client.hpp"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>

#include <cerrno>
#include <ctime>

namespace cuinline::detail {
namespace {

timeval to_timeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// hiredis writes with write(): a server that went away (killed mid-run) would raise SIGPIPE and kill
// the process. A library must not change the process's signal handling, so SIGPIPE is blocked in
// this thread around each command and a SIGPIPE it raised is consumed before unblocking.
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeGuard() {
    if (!was_pending_) {
      sigset_t pending;
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        const timespec zero{0, 0};
        while (sigtimedwait(&pipe_, nullptr, &zero) < 0 && errno == EINTR) {
        }
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t pipe_{}, old_{};
  bool was_pending_ = false;
};

}  // namespace

RedisFailure classify_redis_error(std::string_view message) noexcept {
  if (starts_with(message, "NOAUTH") || starts_with(message, "WRONGPASS") || starts_with(message, "NOPERM") ||
      starts_with(message, "ERR invalid password") || starts_with(message, "ERR AUTH") ||
      starts_with(message, "ERR Client sent AUTH")) {
    return RedisFailure::auth;
  }
  if (starts_with(message, "OOM")) return RedisFailure::oom;
  if (starts_with(message, "READONLY")) return RedisFailure::readonly;
  if (starts_with(message, "LOADING") || starts_with(message, "MASTERDOWN") || starts_with(message, "BUSY") ||
      starts_with(message, "TRYAGAIN") || starts_with(message, "CLUSTERDOWN")) {
    return RedisFailure::unavailable;
  }
  return RedisFailure::other;
}

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

std::unique_ptr<RedisConnection> RedisConnection::open(const RedisEndpoint& endpoint,
                                                       std::chrono::milliseconds connect_timeout,
                                                       std::chrono::milliseconds command_timeout,
                                                       RedisResult* result) {
  const timeval connect_tv = to_timeval(connect_timeout);
  redisContext* context = endpoint.unix_socket
                              ? redisConnectUnixWithTimeout(endpoint.path.c_str(), connect_tv)
                              : redisConnectWithTimeout(endpoint.host.c_str(), endpoint.port, connect_tv);
  if (context == nullptr || context->err != 0) {
    result->failure = RedisFailure::unavailable;
    result->error = std::string("cannot connect: ") + (context ? context->errstr : "out of memory");
    if (context) redisFree(context);
    return nullptr;
  }
  std::unique_ptr<RedisConnection> connection(new RedisConnection(context));
  if (redisSetTimeout(context, to_timeval(command_timeout)) != REDIS_OK) {
    result->failure = RedisFailure::unavailable;
    result->error = "cannot set the command timeout";
    return nullptr;
  }
  if (!endpoint.password.empty()) {
    RedisResult auth = endpoint.user.empty()
                           ? connection->command({"AUTH", endpoint.password})
                           : connection->command({"AUTH", endpoint.user, endpoint.password});
    if (!auth.ok()) {
      *result = std::move(auth);
      result->error = "AUTH: " + result->error;
      return nullptr;
    }
  }
  if (endpoint.db != 0) {
    const std::string db = std::to_string(endpoint.db);
    RedisResult select = connection->command({"SELECT", db});
    if (!select.ok()) {
      *result = std::move(select);
      result->error = "SELECT: " + result->error;
      return nullptr;
    }
  }
  return connection;
}

RedisConnection::~RedisConnection() {
  redisFree(context_);
}

RedisResult RedisConnection::command(const std::vector<std::string_view>& args) {
  RedisResult result;
  if (broken_) {
    result.failure = RedisFailure::unavailable;
    result.error = "connection broken";
    return result;
  }
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  argv.reserve(args.size());
  lengths.reserve(args.size());
  for (std::string_view a : args) {
    argv.push_back(a.data());
    lengths.push_back(a.size());
  }
  void* raw = nullptr;
  {
    SigpipeGuard guard;
    raw = redisCommandArgv(context_, static_cast<int>(argv.size()), argv.data(), lengths.data());
  }
  if (raw == nullptr) {
    broken_ = true;
    result.failure = RedisFailure::unavailable;
    result.error = context_->errstr[0] != '\0' ? context_->errstr : "no reply";
    if (context_->err == REDIS_ERR_IO && (errno == EAGAIN || errno == ETIMEDOUT)) result.error = "timed out";
    return result;
  }
  result.reply.reset(static_cast<redisReply*>(raw));
  if (result.reply->type == REDIS_REPLY_ERROR) {
    result.error = std::string(result.reply->str, result.reply->len);
    result.failure = classify_redis_error(result.error);
    result.reply.reset();
  }
  return result;
}

}  // namespace cuinline::detail
