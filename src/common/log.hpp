#pragma once
// The library's side of logging: spdlog, behind include/cuinline/log.hpp (which names no spdlog
// type, so an application builds against cuinline without spdlog's headers). One logger for the
// process, created on first use with the level of CUINLINE_LOG_LEVEL; its one sink forwards to the
// application's LogSink, or writes to stderr. Include this from .cpp files only: a header that
// tests or tools include must not pull spdlog in.
#include <spdlog/logger.h>

#include <cuinline/log.hpp>
#include <memory>

namespace cuinline::detail {

/// The logger cuinline writes to: never null, never replaced, alive until the process ends (a
/// background thread may still log during exit).
const std::shared_ptr<spdlog::logger>& logger();

}  // namespace cuinline::detail

namespace cuinline {
// The library's code, in any cuinline namespace, writes logger()->warn(...).
using detail::logger;
}  // namespace cuinline
