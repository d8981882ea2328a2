#pragma once
// Lookup of the kernel templates: the copies embedded at build time, or the files of
// CUINLINE_TEMPLATE_DIR (for editing templates without rebuilding).
#include <cuinline/compiler.hpp>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace cuinline::detail {

/// The text of kernel template `name` (its path under kernel_templates: "elementwise.cuh",
/// "arch/mma_sm80.cuh"): $CUINLINE_TEMPLATE_DIR/<name> when
/// the variable is set and that file exists (read on every call), else the embedded copy. Throws
/// InvalidArgument when neither has it, or when the override file exists but cannot be read.
std::string template_text(std::string_view name);

/// The headers of a program that includes the templates `names`: each of them and, recursively,
/// every embedded template one of them includes (`#include "x"`, in any conditional), each once, in
/// the order first met; texts as template_text gives them.
std::vector<Header> template_headers(std::initializer_list<std::string_view> names);

/// Names of the embedded templates, in embedding order.
std::vector<std::string> embedded_template_names();

}  // namespace cuinline::detail
