#pragma once
// Turning an NVRTC log into a message a person can act on.

#include <cuinline/compiler.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace cuinline::detail {

/// The "what()" of a failed compile: the headline, the log, then a few numbered lines of source
/// (or header) around each line the log reports an error on, and the name expressions the log
/// says it could not resolve.
std::string describe_compile_failure(std::string_view headline, std::string_view log,
                                     const CompileRequest& request);

/// The name expressions of `request` that the log reports as unresolvable, in request order.
std::vector<std::string> failed_name_expressions(std::string_view log, const CompileRequest& request);

/// The log with trailing NULs and whitespace removed.
std::string tidy_log(std::string log);

}  // namespace cuinline::detail
