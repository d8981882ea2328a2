#include "cuinline/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

namespace cuinline {
namespace {

std::shared_ptr<spdlog::logger> make_default_logger() {
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  auto log = std::make_shared<spdlog::logger>("cuinline", std::move(sink));
  log->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [cuinline] [%^%l%$] %v");
  spdlog::level::level_enum level = spdlog::level::warn;
  if (const char* env = std::getenv("CUINLINE_LOG_LEVEL"); env != nullptr && *env != '\0') {
    // from_str maps unknown names to `off`; only accept the names it really knows.
    const auto parsed = spdlog::level::from_str(env);
    if (parsed != spdlog::level::off || std::string_view(env) == "off") {
      level = parsed;
    } else {
      log->warn(
          "CUINLINE_LOG_LEVEL='{}' is not a level (trace, debug, info, warn, error, critical, off); "
          "using warn",
          env);
    }
  }
  log->set_level(level);
  return log;
}

std::mutex& logger_mutex() {
  static std::mutex m;
  return m;
}

std::shared_ptr<spdlog::logger>& logger_slot() {
  static std::shared_ptr<spdlog::logger> slot = make_default_logger();
  return slot;
}

}  // namespace

std::shared_ptr<spdlog::logger> logger() {
  std::lock_guard<std::mutex> lock(logger_mutex());
  return logger_slot();
}

void set_logger(std::shared_ptr<spdlog::logger> replacement) {
  std::lock_guard<std::mutex> lock(logger_mutex());
  logger_slot() = replacement ? std::move(replacement) : make_default_logger();
}

}  // namespace cuinline
