#pragma once
// The generic kernels' fatbins, embedded at build time (CUINLINE_GENERIC_KERNELS): the elementwise
// kernels' and the conv2d kernels' (compiled with different options: two fatbins).
#include <string_view>

namespace cuinline::detail {

/// Whether this build embeds the generic kernels.
bool generic_fatbin_built() noexcept;
/// The elementwise fatbin (empty where not built).
std::string_view generic_fatbin() noexcept;
/// The conv2d fatbin (empty where not built).
std::string_view generic_conv_fatbin() noexcept;

}  // namespace cuinline::detail
