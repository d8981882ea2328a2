#pragma once
// A thin owner of one hiredis connection (built only with CUINLINE_WITH_REDIS): connect with a
// timeout, AUTH/SELECT, commands with a per-command timeout, and Redis errors sorted into what the
// remote tier does about them.

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cache/remote_endpoint.hpp"

struct redisContext;
struct redisReply;

namespace cuinline::detail {

/// What went wrong with a command, in the terms the remote tier acts on.
enum class RedisFailure {
  none,
  unavailable,  ///< connect/IO error, timeout, LOADING, MASTERDOWN, BUSY: skip the tier for a while
  auth,         ///< NOAUTH, WRONGPASS, NOPERM: skip the tier for a while
  oom,          ///< OOM (maxmemory with noeviction): skip writes for a while
  readonly,     ///< READONLY (a replica): skip writes for a while
  other,        ///< any other error reply (the command's own problem)
};

RedisFailure classify_redis_error(std::string_view message) noexcept;

struct ReplyDeleter {
  void operator()(redisReply* reply) const noexcept;
};
using RedisReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

struct RedisResult {
  RedisReplyPtr reply;  ///< null on failure (also for an error reply)
  RedisFailure failure = RedisFailure::none;
  std::string error;  ///< what failed, for the log

  bool ok() const noexcept { return failure == RedisFailure::none; }
  bool is_nil() const noexcept;
  bool is_status(std::string_view status) const noexcept;
  /// The string reply (empty view if not a string).
  std::string_view string() const noexcept;
  long long integer() const noexcept;
};

class RedisConnection {
 public:
  /// Connects (connect_timeout), sets the command timeout, then AUTH and SELECT as the endpoint says.
  /// nullptr with `result` describing the failure.
  static std::unique_ptr<RedisConnection> open(const RedisEndpoint& endpoint,
                                               std::chrono::milliseconds connect_timeout,
                                               std::chrono::milliseconds command_timeout,
                                               RedisResult* result);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  /// Runs one command. After an I/O error or a timeout the connection is broken() (drop it).
  RedisResult command(const std::vector<std::string_view>& args);
  bool broken() const noexcept { return broken_; }

 private:
  explicit RedisConnection(redisContext* context) : context_(context) {}
  redisContext* context_;
  bool broken_ = false;
};

}  // namespace cuinline::detail
