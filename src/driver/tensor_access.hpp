#pragma once
// Misuse caught before a launch: is a tensor's memory something a kernel on `device` may touch?
#include <cstdint>
#include <cuinline/tensor.hpp>

namespace cuinline::detail {

/// Throws InvalidArgument naming `what` (e.g. "input", "weight") when `t` (with elements) cannot be
/// used by a kernel launched on a stream of `device`:
///   - a null pointer with a non-zero size;
///   - memory the driver does not know (pageable host memory that is not registered, or freed
///     device memory that nothing reuses);
///   - device memory of another device, unless cuinline::enable_peer_access(device, owner) was
///     called or the memory is a cuMemMap mapping with access granted to `device`;
///   - an extent that runs past the end of the allocation the first element is in, into memory the
///     driver does not know or that is on another device.
/// Managed memory and registered (pinned) host memory pass. One cuPointerGetAttributes call per
/// tensor (two when the extent reaches past the allocation holding the first byte; a push / pop of
/// the stream's context for memory of another device). Nothing is cached: a pointer freed and
/// reallocated between two calls must be looked at again. Allowed while a stream is captured.
void check_tensor_access(const TensorView& t, const char* what, int device);

/// The bytes [first, last] a view touches (strides may be negative or zero); false for no elements.
bool byte_span(const TensorView& t, std::uintptr_t& first, std::uintptr_t& last) noexcept;

}  // namespace cuinline::detail
