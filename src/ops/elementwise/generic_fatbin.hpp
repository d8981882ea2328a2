#pragma once
// The generic elementwise kernels' fatbin, embedded at build time (CUINLINE_GENERIC_KERNELS).
#include <string_view>

namespace cuinline::detail {

/// Whether this build embeds the generic kernels.
bool generic_fatbin_built() noexcept;
/// The fatbin (empty where not built).
std::string_view generic_fatbin() noexcept;

}  // namespace cuinline::detail
