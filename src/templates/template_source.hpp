#pragma once
// Lookup of the kernel templates: the copies embedded at build time, or the files of
// CUINLINE_TEMPLATE_DIR (for editing templates without rebuilding).
#include <string>
#include <string_view>
#include <vector>

namespace cuinline::detail {

/// The text of kernel template `name` (e.g. "elementwise.cuh"): $CUINLINE_TEMPLATE_DIR/<name> when
/// the variable is set and that file exists (read on every call), else the embedded copy. Throws
/// InvalidArgument when neither has it, or when the override file exists but cannot be read.
std::string template_text(std::string_view name);

/// Names of the embedded templates, in embedding order.
std::vector<std::string> embedded_template_names();

}  // namespace cuinline::detail
