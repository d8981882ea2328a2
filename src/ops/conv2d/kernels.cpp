// conv2d's in-process kernels (kernels.hpp): the maps, what a miss makes, the background jobs and
// the launch's choice between a variant's plain and split-K kernels.
#include "ops/conv2d/kernels.hpp"

#include <algorithm>
#include <cstdint>
#include <cuinline/conv2d.hpp>
#include <cuinline/driver.hpp>
#include <cuinline/error.hpp>
#include <cuinline/jit.hpp>
#include <cuinline/module.hpp>
#include <optional>
#include <string>
#include <utility>

#include "common/log.hpp"
#include "ops/conv2d/conv2d_internal.hpp"
#include "ops/conv2d/select.hpp"
#include "ops/conv2d/tuning.hpp"
#include "ops/specialize.hpp"

namespace cuinline::ops::conv2d_impl {

ConvMap& kernel_map() {
  // Never destroyed: launches may run during static teardown.
  static auto* map = new ConvMap;
  return *map;
}

ConvMap& split_map() {
  static auto* map = new ConvMap;  // never destroyed, as kernel_map
  return *map;
}

ConvMap& direct_map() {
  static auto* map = new ConvMap;
  return *map;
}

// The shape-generic copies (one module each an arch, kept beside the conv kernels): key kStageCopy
// the f16 / bf16 staging copy, kTransposeCopy the f32 transposing copy, kStageCopyTf32 the staging
// copy of the TF32 wgmma variants (a kernel of kStageCopy's module).
constexpr int kStageCopy = 0, kTransposeCopy = 1, kStageCopyTf32 = 2;
detail::VariantMap<int, Kernel>& copy_map() {
  static auto* map = new detail::VariantMap<int, Kernel>;  // never destroyed, as kernel_map
  return *map;
}

std::uint64_t variant_hash(const Conv2dVariant& v) {
  detail::Fnv f;
  for (std::int64_t x :
       {std::int64_t{v.in_channels}, std::int64_t{v.height}, std::int64_t{v.width},
        std::int64_t{v.out_channels}, std::int64_t{v.kernel_h}, std::int64_t{v.kernel_w},
        std::int64_t{v.params.groups}, std::int64_t{v.params.stride_h}, std::int64_t{v.params.stride_w}, std::int64_t{v.params.pad_h},
        std::int64_t{v.params.pad_w}, std::int64_t{v.params.dilation_h}, std::int64_t{v.params.dilation_w},
        std::int64_t{v.has_bias}, std::int64_t{v.has_residual}, std::int64_t{static_cast<int>(v.precision)},
        std::int64_t{static_cast<int>(v.dtype)}, std::int64_t{static_cast<int>(v.input_layout)},
        std::int64_t{static_cast<int>(v.weight_layout)}, std::int64_t{static_cast<int>(v.output_layout)},
        std::int64_t{v.inputs_aligned}, std::int64_t{v.output_aligned}, std::int64_t{static_cast<int>(v.target)}}) {
    f.value(x);
  }
  f.op(v.epilogue);
  return f.h;
}

Conv2dTarget device_target(int device) {
  Conv2dTarget own = conv2d_target_for(device_arch(device));
  const std::size_t optin = device_info(device).max_shared_per_block_optin;
  while (optin > 0 && conv2d_max_shared_bytes(own) > optin && own != Conv2dTarget::sm75) {
    own = own == Conv2dTarget::sm90 ? Conv2dTarget::sm80 : own == Conv2dTarget::sm80 ? Conv2dTarget::sm86 : Conv2dTarget::sm75;
  }
  // CUINLINE_CONV2D_TARGET=sm_75 (or any arch name; a testing override): plan every call for that
  // arch's target where the device has what it plans for (no more shared memory a block, wgmma
  // tilings only on an sm90-class device), e.g. the sm75 kernels on an H100.
  const conv2d_impl::Conv2dKnobs& knobs = conv2d_impl::conv2d_knobs();
  static const bool parsed = [&] {
    if (!knobs.target_error.empty()) logger()->warn("CUINLINE_CONV2D_TARGET ignored: {}", knobs.target_error);
    return true;
  }();
  (void)parsed;
  const std::optional<Arch>& forced = knobs.target;
  if (!forced) return own;
  const Conv2dTarget t = conv2d_target_for(*forced);
  if (conv2d_max_shared_bytes(t) <= conv2d_max_shared_bytes(own) && (t != Conv2dTarget::sm90 || own == Conv2dTarget::sm90)) {
    return t;
  }
  static const bool warned = [&] {
    logger()->warn("CUINLINE_CONV2D_TARGET={} ignored on device {} ({}): it plans for more than the device has",
                   forced->name(), device, device_arch(device).name());
    return true;
  }();
  (void)warned;
  return own;
}

static void finish_launchable(Launchable& l, int device) {
  const unsigned shared_bytes = l.tiling.grid().shared_bytes;
  if (shared_bytes > 48 * 1024) l.kernel.set_max_dynamic_shared_bytes(shared_bytes, device);
  const DeviceInfo info = device_info(device);
  l.multiprocessors = info.multiprocessors;
  l.memory_bandwidth = info.memory_bandwidth;
  l.resident_blocks = std::max(
      1, l.kernel.max_active_blocks(static_cast<unsigned>(l.tiling.block_threads()), shared_bytes, device));
}

// A shape-generic copy on `device` (conv2d_stage.cuh for every staged variant, conv2d_transpose.cuh
// for every transposing one), fetched from the KernelCache once a device (the map is thread-safe; a
// miss runs without its lock and the cache is single-flight per key) and kept beside the conv
// kernels.
static Kernel copy_kernel(int which, int device) {
  return copy_map().find_or_make(
      static_cast<std::uint64_t>(which), device, [&](int k) { return k == which; },
      [&] {
        const bool stage = which != kTransposeCopy;
        Module module = default_cache().get(
            stage ? conv2d_impl::make_hmma_stage_request() : conv2d_impl::make_transpose_request(),
            device_arch(device));
        return std::make_pair(which, module.kernel(which == kStageCopy       ? conv2d_impl::kHmmaStageKernel
                                                   : which == kStageCopyTf32 ? conv2d_impl::kTf32StageKernel
                                                                             : conv2d_impl::kTransposeKernel));
      });
}

std::pair<Conv2dVariant, Launchable> make_launchable(const Conv2dVariant& called, int device) {
  // Render, hash and compile (or fetch); KernelCache is single-flight per key. A staged variant's
  // module is the conv of the copies (that of hmma_staged_variant(v)); the copy is its own module.
  // The map's key is the variant as called; its kernel is planned for the device.
  // (The target first: the selection plans for it.)
  const Conv2dVariant v = conv2d_variant_for_device(called, device);
  v.validate();
  using conv2d_impl::Conv2dAlgo;
  const Conv2dAlgo algo = conv2d_impl::conv2d_algo(v);
  Launchable l;
  l.tiling = conv2d_impl::conv2d_tiling_of(algo, v);
  Module module = default_cache().get(conv2d_impl::make_request_of(algo, v), device_arch(device));
  l.kernel = module.kernel(conv2d_impl::kernel_name_of(algo, v));
  if (algo == Conv2dAlgo::hmma_staged) l.stage = copy_kernel(kStageCopy, device);
  if (algo == Conv2dAlgo::tf32_wgmma) l.stage = copy_kernel(kStageCopyTf32, device);
  // (No copy where Winograd writes the only channels-last tensor, the output, itself.)
  if (algo == Conv2dAlgo::fp32_transposed && l.tiling.transposes()) l.stage = copy_kernel(kTransposeCopy, device);
  if (const std::optional<HmmaTiling> split = conv2d_impl::split_tiling_of(algo, v)) {
    l.split_most = split->split_k;
    l.split_few_tiles = split->few_tiles;
    l.split_image_tiles = static_cast<int>(conv2d_impl::split_k_tiles(*split, v.out_channels, 1));  // (<= 64 k)
  }
  finish_launchable(l, device);
  return std::make_pair(called, l);
}

// The split-K form of a variant whose plain kernel has one (split_most > 0): its kernel (the staging
// copy beside it for a staged variant), its tiling, its occupancy.
static std::pair<Conv2dVariant, Launchable> make_split_launchable(const Conv2dVariant& called, int device) {
  const Conv2dVariant v = conv2d_variant_for_device(called, device);
  const conv2d_impl::Conv2dAlgo algo = conv2d_impl::conv2d_algo(v);
  const std::optional<HmmaTiling> split = conv2d_impl::split_tiling_of(algo, v);
  const std::optional<CompileRequest> request = make_split_request(v);
  if (!split || !request) throw Error("conv2d variant " + v.name() + " has no split-K form");
  Launchable l;
  l.tiling = *split;
  Module module = default_cache().get(*request, device_arch(device));
  l.kernel =
      module.kernel(conv2d_impl::hmma_kernel_name(*split));  // (the TMA form's split kernel, or the other)
  if (algo == conv2d_impl::Conv2dAlgo::hmma_staged) l.stage = copy_kernel(kStageCopy, device);
  finish_launchable(l, device);
  return std::make_pair(called, l);
}

std::pair<Conv2dVariant, Launchable> make_direct_launchable(const Conv2dVariant& called, int device) {
  const Conv2dVariant v = conv2d_variant_for_device(called, device);
  Launchable l;
  const bool f32 = v.dtype == DType::f32;
  l.tiling =
      f32 ? Conv2dTiling(conv2d_impl::generic_tiling(v)) : Conv2dTiling(conv2d_impl::hmma_direct_tiling(v));
  Module module = default_cache().get(
      f32 ? conv2d_impl::make_generic_request(v) : conv2d_impl::make_hmma_direct_request(v), device_arch(device));
  l.kernel =
      module.kernel(f32 ? conv2d_impl::kGenericKernel : conv2d_impl::hmma_kernel_name(l.tiling.as_hmma()));
  finish_launchable(l, device);
  return std::make_pair(called, l);
}

// Queues make(v, device) on the background pool, once per variant and device of `map`: calls find
// it in the map when loaded. A failure leaves their kernel as it is, counted and logged once
// ("background <what> of v on device d failed; its calls keep <keeps>").
template <class Make>
static void submit_background(ConvMap& map, const Conv2dVariant& v, std::uint64_t hash, int device, Make make,
                       const char* what, const char* keeps) {
  const auto equal = [&](const Conv2dVariant& e) { return e == v; };
  if (!map.begin_pending(hash, device, equal, v)) return;
  auto job = [&map, hash, device, v, make, what, keeps]() noexcept {
    const auto same = [&](const Conv2dVariant& e) { return e == v; };
    try {
      const std::pair<Conv2dVariant, Launchable> made = make(v, device);
      map.finish_pending(hash, device, same, &made.second);
      detail::count_swap();
    } catch (const std::exception& e) {
      map.finish_pending(hash, device, same, nullptr);
      detail::count_background_failure();
      logger()->warn("background {} of {} on device {} failed; its calls keep {}: {}", what, v.name(), device, keeps,
                     e.what());
    }
  };
  if (!detail::submit_specialization(std::move(job))) map.cancel_pending(hash, device, equal);
}

void submit_conv_specialization(const Conv2dVariant& v, std::uint64_t hash, int device) {
  submit_background(kernel_map(), v, hash, device, make_launchable, "specialization", "the generic kernel");
}

// Queues the split-K form of v on `device`: calls run the plain kernel until it is loaded, and for
// good if it fails.
static void submit_split_specialization(const Conv2dVariant& v, std::uint64_t hash, int device) {
  submit_background(split_map(), v, hash, device, make_split_launchable, "compile of the split-K form",
                    "the unsplit kernel");
}

Launchable launch_choice(const Launchable& plain, const Conv2dVariant& v, std::int64_t n, std::uint64_t hash,
                         int device, CUstream stream, bool& waited) {
  if (plain.split_most == 0) return plain;
  const int knob = conv2d_impl::conv2d_knobs().split_k;
  // (A plain kernel with a split form is the hmma kernel's.)
  const std::int64_t tiles = conv2d_impl::split_k_tiles(plain.tiling.as_hmma(), v.out_channels, n);
  const auto choose = [&](bool loaded) {
    return conv2d_impl::split_k_choice(tiles, n, plain.split_most, plain.multiprocessors, knob > 0, loaded,
                                       plain.split_few_tiles, std::int64_t{plain.split_image_tiles} * n);
  };
  if (!choose(false).wanted) return plain;
  const auto equal = [&](const Conv2dVariant& e) { return e == v; };
  Launchable split;
  std::optional<ConvMap::State> state = split_map().find(hash, device, equal, &split);
  if (state != ConvMap::State::ready && state != ConvMap::State::failed) {
    // (Absent, or pending in the background: sync loads it itself, as the plain kernel's wait does.)
    const JitPolicy policy = detail::effective_policy(stream);
    if (policy == JitPolicy::async && !state) submit_split_specialization(v, hash, device);
    if (policy == JitPolicy::sync) {
      waited = true;
      try {
        split = split_map().find_or_make(hash, device, equal, [&] { return make_split_launchable(v, device); });
        state = ConvMap::State::ready;
      } catch (const std::exception& e) {
        if (split_map().begin_pending(hash, device, equal, v)) {
          split_map().finish_pending(hash, device, equal, nullptr);
          logger()->warn("the split-K form of {} on device {} failed to compile or load; its calls keep the unsplit kernel: {}",
                         v.name(), device, e.what());
        }
      }
    }
  }
  if (state != ConvMap::State::ready) return plain;
  // (The split form's tiling is the plain one's with split_k, the same tiles, or its own few_tiles.)
  split.slices = choose(true).slices;
  return split;
}

}  // namespace cuinline::ops::conv2d_impl
