#pragma once
// Where the remote tier's Redis is: parsed from RemoteCacheConfig::url (remote_cache_config.cpp).

#include <optional>
#include <string>
#include <string_view>

namespace cuinline::detail {

struct RedisEndpoint {
  bool unix_socket = false;
  std::string host;  ///< TCP
  int port = 6379;
  std::string path;  ///< unix socket
  std::string user;  ///< empty: AUTH with the password alone (or no AUTH)
  std::string password;
  int db = 0;
  std::string shown;  ///< the URL with the password replaced by "***"
};

/// redis://[user:password@]host[:port][/db], redis://:password@host:port, unix:///path/to.sock[?db=N].
/// nullopt with `error` set for anything else (rediss:// too: TLS is not built).
std::optional<RedisEndpoint> parse_redis_url(std::string_view url, std::string* error);

}  // namespace cuinline::detail
