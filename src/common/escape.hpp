#pragma once
// Text from outside (a Redis server, a cache entry's program name) made safe to print or log:
// cuinline::escape_control (include/cuinline/log.hpp), named here for the library's own code.
#include "cuinline/log.hpp"

namespace cuinline::detail {

using cuinline::escape_control;

}  // namespace cuinline::detail
