#pragma once
/// @file log.hpp
/// cuinline logs through one named spdlog logger ("cuinline"). An embedding application can replace
/// it (e.g. with one that forwards to its own sinks). The initial level comes from
/// CUINLINE_LOG_LEVEL (trace, debug, info, warn, error, critical, off; default warn).

#include <spdlog/logger.h>

#include <memory>

namespace cuinline {

/// The logger cuinline writes to. Never null. Thread-safe.
std::shared_ptr<spdlog::logger> logger();

/// Replaces the logger; nullptr restores the default (stderr, "cuinline", CUINLINE_LOG_LEVEL).
/// Thread-safe: calls already logging keep the logger they fetched.
void set_logger(std::shared_ptr<spdlog::logger> logger);

}  // namespace cuinline
