// conv2d's in-process kernels (the family skeleton's map, ops/family.hpp): what a launch of a variant
// needs (Launchable), the maps of plain kernels, split-K forms, no-workspace direct kernels and
// shape-generic copies, how a miss makes an entry, the background jobs that make one under the
// async policy, and the launch's choice between a variant's plain and split-K kernels.
#pragma once

#include <cstdint>
#include <cuinline/conv2d.hpp>
#include <cuinline/module.hpp>
#include <utility>

#include "driver/driver_api.hpp"
#include "ops/conv2d/tiling.hpp"
#include "ops/family.hpp"

namespace cuinline::ops::conv2d_impl {

// What a launch needs, copied out of the map without copying the variant (no allocation).
struct Launchable {
  Kernel kernel;
  Kernel stage;  ///< the staging copy (tiling.staged()) or the transposing copy (tiling.transposes())
  Conv2dTiling tiling;
  int multiprocessors = 0;
  int resident_blocks = 1;  ///< blocks of this kernel one multiprocessor holds at once
  double memory_bandwidth = 0;  ///< the device's peak DRAM bandwidth (bytes/s; 0: unknown)
  /// The plain kernel's: the most slices of its variant's split-K form (0: it has none), its output
  /// tiles an image and whether they are its own (HmmaTiling::few_tiles).
  int split_most = 0;
  int split_image_tiles = 0;
  /// The split kernel's (tiling.split()): the slices this launch cuts its reduction into, set on
  /// the launch's copy by the launch's choice (split_k_choice).
  int slices = 1;
  bool split_few_tiles = false;
};

using ConvMap = detail::VariantMap<Conv2dVariant, Launchable>;
/// The plain kernels, by the variant as called (never destroyed: launches may run during static
/// teardown).
ConvMap& kernel_map();
/// The split-K forms of the variants that have one (docs/conv2d.md, "Split-K"): a second kernel
/// beside kernel_map's, keyed by the same variant, loaded when a launch first wants it (sync), in
/// the background (async), or never (generic); a failed one stays failed and its calls run plain.
ConvMap& split_map();
/// The direct kernels of staged and transposing variants, for calls that get no workspace (rare:
/// loaded on the first such call).
ConvMap& direct_map();
/// The shape-generic copies, one module each an arch (the staging, transposing and TF32 staging
/// copies), kept beside the conv kernels.
detail::VariantMap<int, Kernel>& copy_map();

/// The map's hash of a variant (equality is still checked field by field).
std::uint64_t variant_hash(const Conv2dVariant& v);
/// The target a call on `device` plans for: the device's (a smaller one where the device reports
/// less shared memory a block than its arch's class has), or CUINLINE_CONV2D_TARGET's.
Conv2dTarget device_target(int device);

/// What a miss of kernel_map makes: the variant planned for the device, compiled or fetched
/// (KernelCache, single-flight per key), its staging or transposing copy, its occupancy.
std::pair<Conv2dVariant, Launchable> make_launchable(const Conv2dVariant& called, int device);
/// What a miss of direct_map makes: a staged variant's direct kernel, or a transposing variant's
/// general direct kernel (the tensors read and written as they are).
std::pair<Conv2dVariant, Launchable> make_direct_launchable(const Conv2dVariant& called, int device);
/// Queues make_launchable(v, device) on the background pool, once: until it is loaded, v's calls
/// run the generic kernel; a failure is counted and logged once, never thrown.
void submit_conv_specialization(const Conv2dVariant& v, std::uint64_t hash, int device);

/// The kernel a launch of `plain` (its variant's plain kernel, ready) over n images runs: the split
/// form with its slices where the launch's tiles fill at most half of the multiprocessors and that
/// form is loaded, else `plain`. A launch that wants the split form and finds it not loaded loads
/// it first under sync (a capture's default; `waited` set), submits it under async unless it is
/// already pending (this call runs plain), and leaves it under generic. A split form that failed to
/// compile or load stays failed: its calls run plain and never throw for it.
Launchable launch_choice(const Launchable& plain, const Conv2dVariant& v, std::int64_t n, std::uint64_t hash,
                         int device, CUstream stream, bool& waited);

}  // namespace cuinline::ops::conv2d_impl
