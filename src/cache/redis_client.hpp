#pragma once
// One connection to Redis (built only with CUINLINE_WITH_REDIS). The socket is driven here
// (non-blocking, poll with the time left), hiredis only parses replies: every operation has a total
// deadline whatever the peer does, a reply's size is checked from its headers before its bytes are
// buffered, and Redis errors are sorted into what the remote tier does about them.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cache/disk_cache_io.hpp"
#include "cache/remote_endpoint.hpp"

struct redisReader;
struct redisReply;

namespace cuinline::detail {

using RedisClock = std::chrono::steady_clock;

/// What went wrong with a command, in the terms the remote tier acts on.
enum class RedisFailure {
  none,
  unavailable,  ///< connect/IO error, deadline passed, a reply over the size bound, a protocol error,
                ///< LOADING, MASTERDOWN, BUSY: skip the tier for a while
  auth,         ///< NOAUTH, WRONGPASS, NOPERM: skip the tier for a while
  oom,          ///< OOM (maxmemory with noeviction): skip writes for a while
  readonly,     ///< READONLY (a replica): skip writes for a while
  wrong_type,   ///< WRONGTYPE: the key holds another Redis type (the key's problem, not the server's)
  refused,      ///< the endpoint itself is not trusted (a unix socket of another user): nothing was sent
  other,        ///< any other error reply (the command's own problem)
};

RedisFailure classify_redis_error(std::string_view message) noexcept;

/// Text from Redis (an error reply, an INFO field) made safe to print or log: control characters,
/// bytes >= 0x7f and '\' become \xNN.
std::string printable(std::string_view text);

struct ReplyDeleter {
  void operator()(redisReply* reply) const noexcept;
};
using RedisReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

struct RedisResult {
  RedisReplyPtr reply;  ///< null on failure (also for an error reply)
  RedisFailure failure = RedisFailure::none;
  std::string error;  ///< what failed, for the log (already printable())

  bool ok() const noexcept { return failure == RedisFailure::none; }
  bool is_nil() const noexcept;
  bool is_status(std::string_view status) const noexcept;
  /// The string reply (empty view if not a string).
  std::string_view string() const noexcept;
  long long integer() const noexcept;
  bool is_integer() const noexcept;
};

struct RedisLimits {
  std::chrono::milliseconds connect_timeout{50};   ///< the TCP / unix connect alone
  std::chrono::milliseconds command_timeout{200};  ///< one command; connect + AUTH + SELECT get both
  /// No reply may be larger than this: a bulk or array header announcing more, or more bytes
  /// received for one reply, drops the connection before they are buffered.
  std::uint64_t max_reply_bytes = (std::uint64_t{64} << 20) + (std::uint64_t{1} << 20);
};

/// Extra time a command moving `bytes` (request or expected reply) gets beyond the command timeout:
/// 1 ms per 32 KiB (32 MiB/s; 2 s for a 64 MiB entry). A peer cannot raise it: it is computed from
/// the request and from sizes already checked against the bound.
std::chrono::milliseconds transfer_allowance(std::uint64_t bytes) noexcept;

/// Whether a unix socket may be connected to: the socket must be a socket owned by this user or
/// root, its directory owned by this user or root and writable by no one else, and every directory
/// above it checked as the disk cache checks its ancestors (disk_cache_directory.cpp). Empty when it
/// may; otherwise why not, naming the path, its owner and mode. `resolved` gets the path to connect to.
std::string unix_socket_problem(const std::string& path, std::string* resolved);

/// Follows one RESP2 reply through the bytes as they arrive, before they are given to hiredis: checks
/// each bulk and array header against the bounds, and says where the reply ends (bytes after it are
/// a peer speaking out of turn).
class ReplyScanner {
 public:
  explicit ReplyScanner(std::uint64_t max_reply_bytes) : max_bytes_(max_reply_bytes) {}
  /// Scans `bytes`; returns how many belong to the reply (all of them until it is complete), or -1
  /// with error() set when a header breaks a bound or the protocol.
  long long scan(std::string_view bytes);
  bool complete() const noexcept { return complete_; }
  const std::string& error() const noexcept { return error_; }
  void reset();

  static constexpr std::uint64_t kMaxItems = std::uint64_t{1} << 18;  ///< per reply, all levels
  static constexpr std::size_t kMaxDepth = 7;                         ///< hiredis' own limit

 private:
  enum class State { type, line, line_end, bulk };
  bool fail(std::string message);
  bool end_of_line();
  void item_done();

  std::uint64_t max_bytes_;
  State state_ = State::type;
  char type_ = 0;
  bool negative_ = false;
  int digits_ = 0;
  std::uint64_t number_ = 0;
  std::uint64_t line_bytes_ = 0;
  std::uint64_t bulk_left_ = 0;
  std::uint64_t items_ = 0;
  std::uint64_t bytes_ = 0;
  std::vector<std::uint64_t> open_;  // items still to come in each open array
  bool complete_ = false;
  std::string error_;
};

class RedisConnection {
 public:
  /// Connects (within connect_timeout), then AUTH and SELECT as the endpoint says; connect + AUTH +
  /// SELECT together within connect_timeout + command_timeout. nullptr with `result` describing the
  /// failure.
  static std::unique_ptr<RedisConnection> open(const RedisEndpoint& endpoint, const RedisLimits& limits,
                                               RedisResult* result);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  /// Runs one command within command_timeout + transfer_allowance(its size).
  RedisResult command(const std::vector<std::string_view>& args);
  /// Runs one command that must be answered by `deadline`. After an I/O error, a passed deadline, an
  /// oversized reply or bytes out of turn the connection is broken() (drop it).
  RedisResult command(const std::vector<std::string_view>& args, RedisClock::time_point deadline);
  bool broken() const noexcept { return broken_; }
  /// Whether an idle connection can still be used: nothing arrived since its last reply (neither
  /// EOF, as after Redis' idle `timeout`, nor bytes nobody asked for). A false answer breaks it.
  bool still_usable();
  /// Bytes received from the peer on this connection.
  std::uint64_t bytes_received() const noexcept { return bytes_received_; }

 private:
  struct ReaderDeleter {
    void operator()(redisReader* reader) const noexcept;
  };
  RedisConnection(UniqueFd fd, const RedisLimits& limits);
  RedisResult fail(RedisFailure failure, std::string error);
  bool send_all(std::string_view bytes, RedisClock::time_point deadline, std::string* error);

  UniqueFd fd_;
  std::unique_ptr<redisReader, ReaderDeleter> reader_;
  RedisLimits limits_;
  ReplyScanner scanner_;
  bool broken_ = false;
  std::uint64_t bytes_received_ = 0;
};

}  // namespace cuinline::detail
