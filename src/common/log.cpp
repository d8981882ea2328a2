// Logging: one spdlog logger whose sink hands each message to the application's LogSink, or to
// stderr when there is none. The level lives in the logger (spdlog drops a message below it before
// formatting); the sink only chooses the destination.
#include "common/log.hpp"

#include <spdlog/sinks/sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>
#include <cuinline/error.hpp>
#include <mutex>
#include <string>
#include <utility>

namespace cuinline {
namespace {

static_assert(static_cast<int>(LogLevel::trace) == spdlog::level::trace &&
                  static_cast<int>(LogLevel::warn) == spdlog::level::warn &&
                  static_cast<int>(LogLevel::error) == spdlog::level::err &&
                  static_cast<int>(LogLevel::off) == spdlog::level::off,
              "LogLevel mirrors spdlog's levels, so a level converts by value");

// Set while this thread is inside the application's sink: a message logged from there goes to
// stderr (the sink is not re-entered), and set_log_sink is refused (it would destroy the running
// function).
thread_local bool inside_user_sink = false;

class ForwardingSink final : public spdlog::sinks::sink {
 public:
  ForwardingSink() : stderr_(std::make_unique<spdlog::sinks::stderr_color_sink_st>()) {
    stderr_->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [cuinline] [%^%l%$] %v");
  }

  void log(const spdlog::details::log_msg& msg) override {
    // Recursive: a message logged from inside the application's sink on this thread must not
    // deadlock; it goes to stderr.
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    if (!user_ || inside_user_sink) {
      stderr_->log(msg);
      return;
    }
    inside_user_sink = true;
    try {
      user_(static_cast<LogLevel>(msg.level), std::string_view(msg.payload.data(), msg.payload.size()));
    } catch (...) {
      // Documented: the application's exception is dropped (logging happens in destructors too).
    }
    inside_user_sink = false;
  }
  void flush() override {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    stderr_->flush();
  }
  void set_pattern(const std::string& pattern) override {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    stderr_->set_pattern(pattern);
  }
  void set_formatter(std::unique_ptr<spdlog::formatter> formatter) override {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    stderr_->set_formatter(std::move(formatter));
  }

  void replace(LogSink sink) {
    if (inside_user_sink) throw InvalidArgument("set_log_sink called from inside the log sink");
    {
      std::lock_guard<std::recursive_mutex> lock(mutex_);
      std::swap(user_, sink);
    }
    // `sink` (the old one) is destroyed here, outside the lock: its destructor may log.
  }

 private:
  std::recursive_mutex mutex_;
  LogSink user_;
  std::unique_ptr<spdlog::sinks::stderr_color_sink_st> stderr_;
};

struct LogState {
  std::shared_ptr<ForwardingSink> sink = std::make_shared<ForwardingSink>();
  std::shared_ptr<spdlog::logger> logger = std::make_shared<spdlog::logger>("cuinline", sink);
};

LogState& log_state() {
  // Never destroyed: background threads (compiles, cache writes) may log while the process exits.
  static LogState* const state = [] {
    auto* s = new LogState;
    LogLevel level = LogLevel::warn;
    if (const char* env = std::getenv("CUINLINE_LOG_LEVEL"); env != nullptr && *env != '\0') {
      if (const auto parsed = parse_log_level(env)) {
        level = *parsed;
      } else {
        s->logger->warn("CUINLINE_LOG_LEVEL='{}' is not a level (trace, debug, info, warn, error, critical, off); "
                        "using warn",
                        env);
      }
    }
    s->logger->set_level(static_cast<spdlog::level::level_enum>(level));
    return s;
  }();
  return *state;
}

}  // namespace

namespace detail {

const std::shared_ptr<spdlog::logger>& logger() {
  return log_state().logger;
}

}  // namespace detail

const char* to_string(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::trace:
      return "trace";
    case LogLevel::debug:
      return "debug";
    case LogLevel::info:
      return "info";
    case LogLevel::warn:
      return "warn";
    case LogLevel::error:
      return "error";
    case LogLevel::critical:
      return "critical";
    case LogLevel::off:
      return "off";
  }
  return "unknown";
}

std::optional<LogLevel> parse_log_level(std::string_view name) noexcept {
  for (int l = static_cast<int>(LogLevel::trace); l <= static_cast<int>(LogLevel::off); ++l) {
    if (name == to_string(static_cast<LogLevel>(l))) return static_cast<LogLevel>(l);
  }
  // spdlog's names of the same levels, which CUINLINE_LOG_LEVEL has always accepted.
  if (name == "warning") return LogLevel::warn;
  if (name == "err") return LogLevel::error;
  return std::nullopt;
}

void set_log_level(LogLevel level) {
  const int value = static_cast<int>(level);
  if (value < static_cast<int>(LogLevel::trace) || value > static_cast<int>(LogLevel::off)) {
    throw InvalidArgument("unknown log level " + std::to_string(value) + " (trace 0 ... off 6)");
  }
  detail::logger()->set_level(static_cast<spdlog::level::level_enum>(level));
}

LogLevel log_level() {
  return static_cast<LogLevel>(detail::logger()->level());
}

void set_log_sink(LogSink sink) {
  log_state().sink->replace(std::move(sink));
}

}  // namespace cuinline
