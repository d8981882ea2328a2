// Split-K for the f16 / bf16 wgmma tiling: which variants have a split form beside their plain
// kernel, which of the two a launch runs and over how many slices, and the workspace it needs
// (docs/conv2d.md, "Split-K").
#include <algorithm>

#include "ops/conv2d/conv2d_internal.hpp"

namespace cuinline::ops::conv2d_impl {

int split_k_most(const Conv2dVariant& v, const HmmaTiling& t, int k_steps, int knob) {
  if (knob == 0 || !t.wgmma() || !t.half_mma() || t.halo() || t.window() || t.batch_tiles() || t.pointwise()) return 0;
  if (v.dtype != DType::f16 && v.dtype != DType::bf16) return 0;
  const std::int64_t channel_blocks = (v.out_channels + t.block_channels() - 1) / t.block_channels();
  if (std::int64_t{t.tiles_x} * channel_blocks > kSplitKMaxImageTiles) return 0;
  // (Fewer than 2 slices of kSplitKMinSteps steps: nothing to split.)
  const int by_steps = std::min(k_steps / kSplitKMinSteps, kSplitKMaxSlices);
  if (by_steps < 2) return 0;
  if (knob > 0) return std::min(knob, by_steps);
  return k_steps >= kSplitKAutoMinSteps ? by_steps : 0;
}

int split_k_slices(std::int64_t tiles, int most, int multiprocessors, bool forced) {
  if (most < 2 || tiles <= 0) return 1;
  if (forced) return most;
  if (multiprocessors <= 0 || 2 * tiles > multiprocessors) return 1;
  return static_cast<int>(std::min<std::int64_t>(most, multiprocessors / tiles));
}

std::int64_t split_k_tiles(const HmmaTiling& t, int out_channels, std::int64_t images) {
  const std::int64_t channel_blocks = (out_channels + t.block_channels() - 1) / t.block_channels();
  return std::int64_t{t.tiles_x} * channel_blocks * images;
}

SplitKChoice split_k_choice(std::int64_t tiles, std::int64_t images, int most, int multiprocessors, bool forced,
                            bool split_loaded, bool few_tiles, std::int64_t split_tiles) {
  constexpr std::int64_t kMaxGridZ = 65535;
  SplitKChoice c;
  int slices = 1;
  if (!few_tiles) {
    slices = split_k_slices(tiles, most, multiprocessors, forced);
    c.wanted = slices > 1;
  } else {
    const bool few = forced || (multiprocessors > 0 && tiles > 0 && 2 * tiles <= multiprocessors);
    slices = most < 2 ? 1 : split_k_slices(split_tiles, most, multiprocessors, forced);
    c.wanted = most > 0 && few;
  }
  c.wanted = c.wanted && images * slices <= kMaxGridZ;
  if (c.wanted && split_loaded) {
    c.split = true;
    c.slices = slices;
  }
  return c;
}

SplitKWorkspace split_k_workspace(const HmmaTiling& t, std::int64_t tiles, int slices) {
  const auto round256 = [](std::int64_t b) { return (b + 255) / 256 * 256; };
  SplitKWorkspace w;
  w.partial_bytes = round256(tiles * slices * std::int64_t{t.tile_cols} * t.block_channels() * 4);
  w.counter_bytes = round256(tiles * 4);
  return w;
}

}  // namespace cuinline::ops::conv2d_impl
