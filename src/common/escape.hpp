#pragma once
// Text from outside (a Redis server, a cache entry's program name) made safe to print or log.
#include <string>
#include <string_view>

namespace cuinline::detail {

/// `text` with control characters, bytes >= 0x7f and the backslash written as \xNN.
std::string escape_control(std::string_view text);

}  // namespace cuinline::detail
