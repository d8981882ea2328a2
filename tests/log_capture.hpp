#pragma once
// What cuinline logs while a LogCapture lives, through the public sink (include/cuinline/log.hpp),
// as an application would route it: every message from debug up, kept with its level. The
// previous level and the default sink come back afterwards.
#include <cstddef>
#include <cuinline/log.hpp>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cuinline::test {

class LogCapture {
 public:
  explicit LogCapture(LogLevel level = LogLevel::debug) : previous_(log_level()) {
    set_log_sink([this](LogLevel l, std::string_view message) {
      std::lock_guard<std::mutex> lock(mutex_);
      messages_.emplace_back(l, std::string(message));
    });
    set_log_level(level);
  }
  ~LogCapture() {
    set_log_sink(nullptr);
    set_log_level(previous_);
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  /// Messages of exactly `level`.
  std::size_t count(LogLevel level) const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::size_t n = 0;
    for (const auto& m : messages_) n += m.first == level ? 1 : 0;
    return n;
  }
  /// Messages of level warn and above.
  std::size_t warnings() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::size_t n = 0;
    for (const auto& m : messages_) n += m.first >= LogLevel::warn ? 1 : 0;
    return n;
  }
  /// Every message, one a line: "[level] text".
  std::string text() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::string out;
    for (const auto& m : messages_) out += std::string("[") + to_string(m.first) + "] " + m.second + "\n";
    return out;
  }

 private:
  LogLevel previous_;
  mutable std::mutex mutex_;
  std::vector<std::pair<LogLevel, std::string>> messages_;
};

}  // namespace cuinline::test
