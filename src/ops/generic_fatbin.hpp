#pragma once
// The generic kernels' fatbins, embedded at build time (CUINLINE_GENERIC_KERNELS): the elementwise,
// conv2d and row-reduction kernels' (one fatbin a family), and the one module each family loads its
// kernels from.
#include <cuinline/module.hpp>
#include <string_view>

namespace cuinline::detail {

/// Whether this build embeds the generic kernels.
bool generic_fatbin_built() noexcept;
enum class GenericFatbin { elementwise, conv2d, reductions };

/// A family's fatbin (empty where not built).
std::string_view generic_fatbin(GenericFatbin which) noexcept;

/// The module of one embedded fatbin, made on the first call (thread-safe) and then the same for
/// every call and every device: cuLibraryLoadData is context-independent, and the driver picks the
/// device's code from the fatbin when a kernel is first used there. Callers check
/// generic_fatbin_built() first; the module is never destroyed, as ops may run during static teardown.
const Module& generic_module(GenericFatbin which);

}  // namespace cuinline::detail
