#pragma once
// The skeleton every op family follows (docs/ops-families.md). A family — elementwise
// (src/ops/elementwise/), conv2d, reductions next — is four pieces:
//
//  1. a variant: everything that selects one compiled kernel, with name(), validate(), and free
//     functions make_request(variant) (the CompileRequest: rendered source, headers, options, one
//     name expression) and kernel_name(variant). Equal variants give equal requests, so `cuinline
//     warm` (which enumerates variants) writes exactly the cache entries the run-time path reads;
//  2. a planner: pure host code from the call's tensors to (variant, launch arguments); it throws
//     InvalidArgument before anything is compiled or launched, and touches no driver;
//  3. the in-process map (VariantMap, ops/variant_map.hpp) in front of the KernelCache:
//     find_or_make keyed by a hash of the variant and the device; a miss loads the kernel
//     (load_kernel below: KernelCache::get, memory / disk / remote tier or NVRTC);
//  4. one launch sequence, launch_variant below: stream → device, the tensor access checks, the map
//     lookup, count_launch, Kernel::launch — nothing in it breaks a CUDA graph capture.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cuinline/driver.hpp>
#include <cuinline/kernel_cache.hpp>
#include <cuinline/module.hpp>
#include <cuinline/tensor.hpp>
#include <initializer_list>

#include "driver/tensor_access.hpp"
#include "ops/variant_map.hpp"

namespace cuinline::ops::detail {

/// A tensor a launch touches, with the name its errors give it ("input 0", "conv2d: weight").
struct TensorUse {
  const TensorView* view = nullptr;
  const char* name = "";
};

/// The tensors of one launch (at most 16: 8 inputs and 4 outputs for elementwise), no allocation.
class TensorUses {
 public:
  TensorUses() = default;
  TensorUses(std::initializer_list<TensorUse> uses) {
    for (const TensorUse& u : uses) add(*u.view, u.name);
  }
  void add(const TensorView& view, const char* name) { items_[size_++] = TensorUse{&view, name}; }
  const TensorUse* begin() const noexcept { return items_.data(); }
  const TensorUse* end() const noexcept { return items_.data() + size_; }

 private:
  std::array<TensorUse, 16> items_{};
  std::size_t size_ = 0;
};

/// Piece 3's usual miss: the variant's kernel on `device` through the KernelCache. make_request and
/// kernel_name are found by argument-dependent lookup (ops:: for public variants, ops::detail:: for
/// internal ones).
template <class Variant>
Kernel load_kernel(const Variant& variant, int device) {
  Module module = default_cache().get(make_request(variant), device_arch(device));
  return module.kernel(kernel_name(variant));
}

/// The first steps of every launch: the stream's device (cuStreamGetCtx: allowed while the stream is
/// captured), then every tensor checked for access from it (cuPointerGetAttributes, capture-safe).
inline int launch_device(CUstream stream, const TensorUses& tensors) {
  const int device = stream_device(stream);
  for (const TensorUse& t : tensors) cuinline::detail::check_tensor_access(*t.view, t.name, device);
  return device;
}

/// Piece 4: the launch sequence of a planned call (the planner has already thrown for bad input).
///   - the stream's device (cuStreamGetCtx: allowed while the stream is captured);
///   - every tensor checked for access from that device (cuPointerGetAttributes, capture-safe);
///   - the kernel from `map`: find_or_make(hash, device, equal, [&] { return make(device); }), where
///     make returns pair<Key, Value> (usually {variant, load_kernel(variant, device)});
///   - count_launch, then `launch(value, device)` (Kernel::launch with the family's arguments).
/// No allocation on a map hit beyond what `equal` and `launch` do; no synchronizing call.
template <class Key, class Value, class Equal, class Make, class Launch>
void launch_variant(VariantMap<Key, Value>& map, CUstream stream, const TensorUses& tensors,
                    std::uint64_t hash, Equal&& equal, Make&& make, Launch&& launch) {
  const int device = launch_device(stream, tensors);
  const Value value = map.find_or_make(hash, device, equal, [&] { return make(device); });
  map.count_launch();
  launch(value, device);
}

}  // namespace cuinline::ops::detail
