#pragma once
/// @file log.hpp
/// What cuinline logs (cache warnings, compile times, driver failures in destructors) and where it
/// goes. By default messages of level warn and above go to stderr; the initial level comes from
/// CUINLINE_LOG_LEVEL (trace, debug, info, warn, error, critical, off; an unknown name is warned
/// about and warn is used). An embedding application routes the messages into its own logging with
/// set_log_sink. The C API has the same (cuinline_set_log_level, cuinline_set_log_sink).

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace cuinline {

/// Severity of a message, lowest first; `off` as a level drops every message.
enum class LogLevel : int { trace = 0, debug = 1, info = 2, warn = 3, error = 4, critical = 5, off = 6 };

/// "trace", "debug", "info", "warn", "error", "critical", "off".
const char* to_string(LogLevel level) noexcept;
/// The level named by to_string (also "warning" and "err", as CUINLINE_LOG_LEVEL reads them);
/// std::nullopt for any other text.
std::optional<LogLevel> parse_log_level(std::string_view name) noexcept;

/// Messages below `level` are dropped before they are formatted. Thread-safe. Throws
/// InvalidArgument for a value that is not a LogLevel.
void set_log_level(LogLevel level);
/// The current level (CUINLINE_LOG_LEVEL's, or warn, until set_log_level).
LogLevel log_level();

/// Receives each message that passes the level: its level and its text (one line or a few, no
/// trailing newline; the view is valid during the call only). cuinline's threads call it too (the
/// background compiles and cache writes), one message at a time: calls never overlap. It must not
/// call set_log_sink (that throws InvalidArgument); an exception it throws is dropped.
using LogSink = std::function<void(LogLevel level, std::string_view message)>;

/// Sends every message to `sink` from now on; an empty sink restores the default (stderr, with a
/// time stamp and the level). The level is not changed. Thread-safe: a message being written when
/// the sink is replaced finishes in the old one first.
void set_log_sink(LogSink sink);

/// `text` with control characters, bytes >= 0x7f and the backslash written as \\xNN: how cuinline
/// shows text from outside (a program name read from a cache entry, a Redis server's reply, a
/// command-line word) in its messages, so that a name reads the same in a log line and in a
/// program's own output.
std::string escape_control(std::string_view text);

}  // namespace cuinline
