#pragma once
// A hostile "Redis" for the remote-tier tests: a thread listening on 127.0.0.1 (port 0) that reads
// RESP commands and answers each with what the test says, all at once, one byte per `drip`, or a
// header followed by bytes streamed until the client goes away. Counts connections and bytes sent.

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <thread>

namespace cuinline::test {

class HostilePeer {
 public:
  /// The reply to one command (its name upper-cased); `stream`: after it, send 'x' without end.
  struct Reply {
    std::string bytes;
    bool stream = false;
  };
  using Answer = std::function<Reply(const std::string& command)>;

  explicit HostilePeer(Answer answer, std::chrono::milliseconds drip = std::chrono::milliseconds(0))
      : answer_(std::move(answer)), drip_(drip) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listen_fd_, 16) != 0 ||
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      std::abort();
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~HostilePeer() {
    stop_ = true;
    thread_.join();
    ::close(listen_fd_);
  }
  HostilePeer(const HostilePeer&) = delete;
  HostilePeer& operator=(const HostilePeer&) = delete;

  std::string url(const std::string& userinfo = "") const {
    return "redis://" + (userinfo.empty() ? "" : userinfo + "@") + "127.0.0.1:" + std::to_string(port_);
  }
  int port() const { return port_; }
  int connections() const { return connections_; }
  std::uint64_t bytes_sent() const { return bytes_sent_; }

 private:
  // One complete command at the front of `buffer` (removed), or nullopt if it is not all there yet.
  static std::optional<std::string> take_command(std::string& buffer) {
    std::size_t pos = 0;
    const auto line = [&]() -> std::optional<long long> {
      const auto end = buffer.find("\r\n", pos);
      if (end == std::string::npos || end == pos) return std::nullopt;
      const long long n = std::atoll(buffer.c_str() + pos + 1);
      pos = end + 2;
      return n;
    };
    if (buffer.empty() || buffer[0] != '*') return std::nullopt;
    const auto count = line();
    if (!count) return std::nullopt;
    std::string name;
    for (long long i = 0; i < *count; ++i) {
      const auto size = line();
      if (!size || buffer.size() < pos + static_cast<std::size_t>(*size) + 2) return std::nullopt;
      if (i == 0) name = buffer.substr(pos, static_cast<std::size_t>(*size));
      pos += static_cast<std::size_t>(*size) + 2;
    }
    buffer.erase(0, pos);
    for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return name;
  }

  // Sends all of `bytes` (or one byte per drip); false once the client is gone or the peer stops.
  bool send_bytes(int fd, const std::string& bytes, bool drip) {
    std::size_t done = 0;
    while (done < bytes.size()) {
      if (stop_) return false;
      if (drip) std::this_thread::sleep_for(drip_);
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      if ((p.revents & (POLLERR | POLLHUP)) != 0) return false;
      const std::size_t want = drip ? 1 : bytes.size() - done;
      const ssize_t n = ::send(fd, bytes.data() + done, want, MSG_NOSIGNAL);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n <= 0) return false;
      done += static_cast<std::size_t>(n);
      bytes_sent_ += static_cast<std::uint64_t>(n);
    }
    return true;
  }

  void serve_client(int fd) {
    std::string buffer;
    char chunk[65536];
    while (!stop_) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n <= 0) return;
      buffer.append(chunk, static_cast<std::size_t>(n));
      while (auto command = take_command(buffer)) {
        const Reply reply = answer_(*command);
        if (!send_bytes(fd, reply.bytes, drip_.count() > 0)) return;
        if (reply.stream) {
          const std::string block(65536, 'x');
          while (send_bytes(fd, block, false)) {
          }
          return;
        }
      }
    }
  }

  void serve() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) continue;
      ++connections_;
      serve_client(fd);  // one client at a time: the tests talk on one connection at a time
      ::close(fd);
    }
  }

  Answer answer_;
  std::chrono::milliseconds drip_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::atomic<std::uint64_t> bytes_sent_{0};
  std::thread thread_;
};

}  // namespace cuinline::test
