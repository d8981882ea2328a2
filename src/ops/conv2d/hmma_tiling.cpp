// The f16 / bf16 / TF32 tensor-core kernel's block tilings (kernel_templates/conv2d_hmma.cuh): the
// wgmma tiling and its halo, window, batch-tile and split forms on sm90, the pointwise GEMM, the
// mma.sync tilings elsewhere, and a staged variant's. Each planner returns the HmmaTiling that
// conv2d_hmma.cpp renders.
#include <algorithm>
#include <cstdint>
#include <cuinline/error.hpp>
#include <string>

#include "ops/conv2d/conv2d_internal.hpp"
#include "ops/conv2d/hmma_parts.hpp"
#include "ops/conv2d/select.hpp"
#include "ops/conv2d/tuning.hpp"

namespace cuinline::ops::conv2d_impl {

using namespace hmma_parts;

namespace {

// The blocks a multiprocessor for a one-warpgroup wgmma tiling: as many as its shared memory
// allows, up to a register budget of its accumulators (m_tiles x bn / 2 a thread) + 32, or + half
// as many past 64 (__launch_bounds__; latency-bound short reductions want the most blocks; 128
// accumulators spilled 36 bytes at 168). The seed's 64 accumulators: 5 blocks at 96 registers, no
// spills; unbounded, ptxas took 99 after the stmatrix epilogue and 4 blocks fit (H200, f16: 0.1446
// ms channels-last against 0.135 at 5).
int one_group_min_blocks(const HmmaTiling& t, int extra_registers) {
  constexpr int kRegistersPerSm = 65536;
  constexpr int kSharedPerSm = 228 * 1024, kSharedReservedPerBlock = 1024;
  const int accumulators = t.m_tiles * t.block_channels() / 2;
  const int registers = (accumulators + std::max(32, accumulators / 2) + extra_registers + 7) / 8 * 8;
  const int by_registers = kRegistersPerSm / (t.threads() * registers);
  const int by_shared = kSharedPerSm / static_cast<int>(t.shared_bytes + kSharedReservedPerBlock);
  return std::clamp(std::min(by_registers, by_shared), 1, 8);
}

// Whether the wgmma tiling's TMA form (conv2d_hmma.cuh's kTma) can copy v's tiles: on sm90, 16-bit
// k steps of `bk` = 64 unpadded channels (Cin a multiple of 64), unless CUINLINE_CONV2D_TMA=0.
bool tma_form_applies(const Conv2dVariant& v, int bk) {
  return conv2d_knobs().tma && v.target == Conv2dTarget::sm90 && v.dtype != DType::f32 && bk == 64 &&
         ci_pad_of(v) == v.in_channels;
}

// Whether an im2col tensor map (cuTensorMapEncodeIm2col, 4-d) describes v's input: element strides
// (the convolution's) up to 8, and a bounding box of filter tap (0, 0)'s input positions whose
// corners, -pad and pad - (k - 1) dilation, lie within [-128, 127] (and the taps' offsets within 127).
bool im2col_map_applies(const Conv2dVariant& v) {
  const Conv2dParams& p = v.params;
  const auto in_corner = [](int pad, int k, int dilation) {
    const int reach = (k - 1) * dilation;
    return pad <= 127 && reach <= 127 && reach - pad <= 128;
  };
  return p.stride_h <= 8 && p.stride_w <= 8 && in_corner(p.pad_h, v.kernel_h, p.dilation_h) &&
         in_corner(p.pad_w, v.kernel_w, p.dilation_w);
}

// The pointwise form's tiling (conv2d_hmma.cuh's kPointwise): 128 pixels a block x the channels
// (16, 32, 64, or 128 a block past 64: each input value is then read once for up to 128 output
// channels) — 4 x 1 warps of 2 x (bn / 8) tiles up to 32 channels, 4 x 2 of 2 x 4 for 64, 2 x 4 of 4
// x 4 for 128 (256 threads, at most 128 registers: two blocks a multiprocessor); a k step of 64 bytes
// of channels where they allow (32 f16 / bf16, 16 f32), else 32 bytes; four cp.async buffers.
// Why (H100, KernelBench's 16 x 64 x 1024^2 -> 128 f16 / tf32 and three ResNet / UNet 1 x 1 layers):
// .ca copies beat .cg by 5-15 %, four buffers beat three and two, and three blocks a multiprocessor
// (85 registers), 64-channel blocks or k steps of 16 f16 channels were slower on most of them.
HmmaTiling pointwise_plan(const Conv2dVariant& v) {
  const bool f32 = v.dtype == DType::f32;
  HmmaTiling t;
  t.form = HmmaForm::pointwise;
  t.tf32 = f32;
  const int cout = v.out_channels;
  const int bn = cout <= 16 ? 16 : cout <= 32 ? 32 : cout <= 64 ? 64 : 128;
  if (bn <= 32) {
    t.warps_m = 4, t.warps_n = 1, t.m_tiles = 2, t.n_tiles = bn / 8, t.min_blocks = 4;
  } else if (bn == 64) {
    t.warps_m = 4, t.warps_n = 2, t.m_tiles = 2, t.n_tiles = 4, t.min_blocks = 2;
  } else {
    t.warps_m = 2, t.warps_n = 4, t.m_tiles = 4, t.n_tiles = 4, t.min_blocks = 2;
  }
  const int ci_pad = ci_pad_of(v);
  int bk = f32 ? (ci_pad % 16 == 0 ? 16 : 8) : (ci_pad % 32 == 0 ? 32 : 16);
  int o[6];
  if (tile_override(o)) {
    t.warps_m = o[0], t.warps_n = o[1], t.m_tiles = o[2], t.n_tiles = o[3], bk = o[4], t.min_blocks = o[5];
  }
  t.tile_cols = 16 * t.m_tiles * t.warps_m;  // pixels of the H x W plane
  t.ci_chunk = bk;
  t.row_tiles = 1;
  // Blocks an image: pixel tiles x channel blocks, channel blocks fastest (one block column; plan.cuh).
  t.stages = pipe_override().depth > 0 ? pipe_override().depth : 4;
  set_hmma_plan_figures(v, t);
  if (t.shared_bytes > conv2d_max_shared_bytes(v.target)) {
    throw InvalidArgument("conv2d variant " + v.name() + ": the pointwise tile needs " +
                          std::to_string(t.shared_bytes) + " bytes of shared memory");
  }
  return t;
}

// The tiling of a variant as its tensors are (no staging copy).
HmmaTiling direct_tiling(const Conv2dVariant& v) {
  HmmaTiling t;
  // The channels of a block: the smallest of 16, 32 or 64 that covers Cout (more blocks along the
  // channels past 64), except 128 for Cout > 64 through the register gather with a residual (the
  // 64-channel tiling below spills there). Warps and tiles, measured on an H200 (f16, ms, NCHW /
  // NHWC; tilings swept through CUINLINE_CONV2D_HMMA_TILE):
  //   16 or 32 channels: 4 x 1 warps of 2 x (bn / 8) tiles, 128 pixels;
  //   64 channels, a short reduction (at most 5 k steps: the seed) or Cout > 64 copied by cp.async:
  //     2 x 2 warps of 4 x 4 tiles (128 pixels, 128 threads; seed 0.301 / 0.230 against 0.371 / 0.269
  //     with 4 x 2 of 2 x 4; UNet-like NHWC 0.155 against 0.202 with 128 channels a block);
  //   64 channels, Cout > 64 through the register gather: 4 x 2 warps of 2 x 4 (UNet-like NCHW 0.410
  //     against 0.491 with 128 channels, 0.512 with 2 x 2 of 2 x 4);
  //   64 channels otherwise: 2 x 2 warps of 2 x 4 tiles, 64 pixels, three blocks a multiprocessor
  //     (ResNet-like 0.090 / 0.042 against 0.092 / 0.045 with 4 x 2 of 2 x 4);
  //   128 channels: 2 x 4 warps of 4 x 4 tiles, 128 pixels, a k step of 32.
  const int cout = v.out_channels;
  // (A misaligned input or weight takes the register gather's tiling: what it runs.)
  const bool async = hmma_async_layout(v) && v.inputs_aligned;
  const int ci_pad = hmma_ci_pad(v.in_channels);
  const int taps = v.kernel_h * v.kernel_w;
  if (pointwise_applies(v)) return pointwise_plan(v);
  if (HmmaTiling h; halo_tiling(v, h)) return h;
  if (async && !wgmma_off(v)) return wgmma_tiling(v);
  const int bn = cout <= 16 ? 16 : cout <= 32 ? 32 : cout <= 64 || async || !v.has_residual ? 64 : 128;
  // A k step of 64 channels, 32 with 128 channels a block; and 32 for blocks of up to 32 channels
  // through the register gather: their 128 threads hold a step of 128 pixels x 64 channels in 32
  // words each beside the accumulators and spilled 60-76 bytes at 128 registers (Cin 571 and 626, a
  // residual; shapes test), none with 32.
  int bk = bn == 128 || (bn <= 32 && !async) ? 32 : 64;
  while (ci_pad % bk != 0 && bk > 16) bk /= 2;
  const int steps = ci_pad == 8 ? (taps + 1) / 2 : taps * (ci_pad / bk);
  t.min_blocks = 0;
  if (bn <= 32) {
    t.warps_m = 4, t.warps_n = 1, t.m_tiles = 2, t.n_tiles = bn / 8;
  } else if (bn == 64 && (steps <= 5 || (async && cout > 64))) {
    // A short reduction copied by cp.async (the seed, staged or channels-last): four blocks a
    // multiprocessor (at most 128 registers; seed 0.221 / 0.190 ms NCHW / NHWC with two, 0.202 /
    // 0.172 with four after the epilogue rework, H200).
    t.warps_m = 2, t.warps_n = 2, t.m_tiles = 4, t.n_tiles = 4, t.min_blocks = steps <= 5 && async ? 4 : 2;
  } else if (bn == 64 && cout > 64) {
    t.warps_m = 4, t.warps_n = 2, t.m_tiles = 2, t.n_tiles = 4, t.min_blocks = 2;
    // A channels-last input gathered through registers: a thread keeps the window origin of each
    // pixel row it gathers (16 at a k step of 64), and spilled 4 bytes at these 128 registers (random
    // shapes, Cout 148 and 192): a k step of 32, 8 rows (107 registers).
    if (v.input_layout == Conv2dLayout::nhwc) bk = std::min(bk, 32);
  } else if (bn == 64) {
    t.warps_m = 2, t.warps_n = 2, t.m_tiles = 2, t.n_tiles = 4, t.min_blocks = 3;
  } else {
    t.warps_m = 2, t.warps_n = 4, t.m_tiles = 4, t.n_tiles = 4, t.min_blocks = 1;
  }
  int o[6];
  const bool overridden = tile_override(o);
  if (overridden) t.warps_m = o[0], t.warps_n = o[1], t.m_tiles = o[2], t.n_tiles = o[3];
  t.tile_cols = 16 * t.m_tiles * t.warps_m;  // pixels of the flattened OH x OW plane
  // A k step: kBK input channels of one filter tap (64 where the padded channels allow); up to 8
  // channels: padded to 8, a step of 16 is two taps (half the steps and mma of padding to 16).
  if (overridden) bk = o[4];
  t.ci_chunk = bk;
  t.row_tiles = 1;
  // 256-thread blocks of 4 x 4 tiles a warp: up to 255 registers (one block a multiprocessor);
  // else 128 registers a thread.
  if (t.min_blocks == 0) t.min_blocks = 512 / t.threads();
  set_hmma_plan_figures(v, t);
  if (overridden) t.min_blocks = o[5];
  // A target of less shared memory (sm_86's 99 KiB a block) takes fewer cp.async buffers where the
  // default's do not fit (a short reduction rings over its 4-5 steps: 110592 bytes at 128 pixels x 64
  // channels, k step 64, 4 steps); at least 2 (kStages - 2 steps' copies ahead).
  const std::int64_t limit = conv2d_max_shared_bytes(v.target);
  if (async && t.shared_bytes > limit && pipe_override().depth == 0) {
    for (int depth = hmma_figures_of(v, t).stages - 1; depth >= 2 && t.shared_bytes > limit; --depth) {
      t.stages = depth;
      t.shared_bytes = shared_bytes(v, t);
    }
  }
  if (t.shared_bytes > limit) {
    throw InvalidArgument("conv2d variant " + v.name() + ": the f16/bf16 tensor-core tile needs " +
                          std::to_string(t.shared_bytes) + " bytes of shared memory");
  }
  return t;
}

}  // namespace

namespace hmma_parts {

// The halo form of the wgmma tiling (conv2d_hmma.cuh's kHalo), where it applies: one warpgroup of
// two m64 tiles (128 output columns; one, 64 columns, for outputs up to 64 wide), the channels of
// wgmma_tiling, every k step (two taps of 8 channels) at once. False where the variant is not
// eligible (see hmma_halo) or its window does not fit.
bool halo_tiling(const Conv2dVariant& v, HmmaTiling& t) {
  if (!hmma_applies(v) || wgmma_off(v) || !conv2d_knobs().halo) return false;
  if (v.in_channels > 8 || v.params.stride_w != 1 || v.has_residual || v.out_width() < 32) return false;
  const int cout = v.out_channels;
  const int bn = cout <= 16 ? 16 : cout <= 32 ? 32 : cout <= 64 ? 64 : 128;
  t = HmmaTiling{};
  t.form = HmmaForm::halo;
  t.warps_m = 4, t.warps_n = 1, t.m_tiles = v.out_width() <= 64 ? 1 : 2, t.n_tiles = bn / 8;
  t.tile_cols = 16 * t.m_tiles * t.warps_m;
  t.ci_chunk = 16;
  t.stages = 1;
  // Tiles along y (output row x column block; plan.cuh's kTilesY); a block computes up to row_tiles of
  // them in turn, the launch picks how many (row_tiles_for).
  t.row_tiles = static_cast<int>(conv2d_tuning(v.target).halo_row_tiles);  // (its weights staged once)
  // (Whether it fits does not depend on the pointers: checked with the NCHW copy's buffers, which an
  // aligned input adds. Planned on every conv2d call, through set_hmma_alignment: no copies here.)
  hmma_plan::PlanShape copied = hmma_plan_shape_of(v, t);
  copied.in_aligned = 1;
  if (static_cast<unsigned>(hmma_plan::plan_figures(copied).smem_bytes) > conv2d_max_shared_bytes(v.target))
    return false;
  set_hmma_plan_figures(v, t);
  t.min_blocks = one_group_min_blocks(t, 0);
  return true;
}

// The wgmma tiling of a variant in the cp.async form (conv2d_hmma.cuh, kWgmma): the channels (16,
// 32, 64, or 128 a block past 64), a k step of 64 channels where the padded channels allow (the
// 128-byte swizzle), 32 or 16 (two taps of 8 channels) otherwise; at most 5 k steps (the seed): one
// warpgroup of 128 pixels (two m64 tiles); more: two warpgroups, 256 pixels with 128 channels, 128
// with fewer; 3 or 4 buffers, as many as the tuning's wgmma_stage_budget holds (kStages - 2 steps' copies in
// flight). Why (H200, f16, the three reference shapes, tilings swept through
// CUINLINE_CONV2D_HMMA_TILE / _PIPE): more buffers lose everywhere (fewer blocks a multiprocessor);
// a 128-channel block lets the UNet-like layer read its input tile once; two warpgroups gained the
// long reductions 2-7 % (ms NCHW staged / NHWC: UNet-like 0.123 / 0.0999 -> 0.121 / 0.0950,
// ResNet-like 0.0469 / 0.0371 -> 0.0459 / 0.0345) and lost on the seed, whose time is its epilogue,
// not its 5 k steps. `window`: whether the window form may be chosen (the split form is the
// cp.async form without it, hmma_split_tiling). `few_tiles`: the tiling of the split form, which a
// launch runs where the plain tiles are few (a small batch): mid planes take per-image m64 tiles
// there (below).
HmmaTiling wgmma_tiling(const Conv2dVariant& v, bool window, bool few_tiles) {
  const Conv2dTuning& tune = conv2d_tuning(v.target);
  HmmaTiling t;
  // f32: the same tiling with TF32 operands, 4 bytes an element (tf32_wgmma_tiling).
  const bool f32 = v.dtype == DType::f32;
  t.form = HmmaForm::wgmma;
  t.tf32 = f32;
  const int cout = v.out_channels;
  const int ci_pad = ci_pad_of(v);
  const int bn = cout <= 16 ? 16 : cout <= 32 ? 32 : cout <= 64 ? 64 : 128;
  // A k step of 128 bytes of channels where the padded channels allow (64 f16 / bf16, 32 f32).
  int bk = f32                ? (ci_pad % 32 == 0   ? 32
                                 : ci_pad % 16 == 0 ? 16
                                                    : 8)
           : ci_pad == 8      ? 16
           : ci_pad % 64 == 0 ? 64
           : ci_pad % 32 == 0 ? 32
                              : 16;
  const int taps = v.kernel_h * v.kernel_w;
  const int steps_at_bk = ci_pad == 8 && !f32 ? (taps + 1) / 2 : taps * (ci_pad / bk);
  // Short reductions (the seed): one warpgroup of two m64 tiles; longer ones: two warpgroups, of two
  // m64 tiles each with 128 channels, or with fewer for filters of large_filter_taps or more (256
  // pixels a block), else one (128 pixels).
  // (f32 with up to 64 channels a block: one warpgroup of two m64 tiles reads each B tile for twice
  // the pixels — KernelBench's 5 x 9 over 32 -> 64 channels 2.276 ms against 2.394 with two groups of
  // two tiles and 2.534 with two of one; H100.)
  // (f16 / bf16 with up to 64 channels a block and a filter of at least large_filter_taps: two
  // warpgroups of two m64 tiles each, 256 pixels a block — KernelBench's 5 x 9 filters over 32 -> 64
  // channels 1.145-1.235 / 1.132-1.186 ms (62 / 80) against 1.446-1.510 / 1.434-1.465 with two
  // warpgroups of one tile, 1.381-1.437 / 1.356-1.388 with one of two. 3 x 3 filters keep two of one
  // tile: the ResNet-like layer over 64 channels ran 0.0489-0.0492 / 0.0396 ms NCHW / NHWC with two
  // tiles against 0.0474-0.0476 / 0.0350-0.0351, KernelBench L2-54 1.819-1.869 against 1.765-1.911;
  // H100.)
  // Batch tiles (kBatchTiles; TF32 only) where one image's plane fills at most half of a
  // two-warpgroup tile of 256 pixels: the tile spans images, one warpgroup of two m64 tiles.
  // (ResNet-50's 7 x 7 3 x 3 layer, batch 32, TF32: 0.180 -> 0.126 ms; H200.)
  const bool batch = batch_tiles_apply(v, steps_at_bk);
  // f16 / bf16 output planes of at most 128 pixels: per-image tiles of one warpgroup of one m64 tile
  // (one or two an image) instead of 128 or 256 pixels of which at most 128 are used. A block's k
  // steps are then a quarter of the work, and the layer's time is its blocks' k loop whatever the
  // batch: 3 x 3 over 512 channels on 7 x 7 to 11 x 11 planes ran 0.036 ms against 0.070-0.073 on
  // batch tiles at batch 1, 8 and 32 (256 channels: 0.020 against 0.038; H200, f16). (12 x 12 = 144
  // pixels, three m64 tiles an image, ran slower at batch 32: 0.100 against 0.072.)
  const std::int64_t plane = v.out_height() * v.out_width();
  const bool small_plane = !f32 && plane <= tune.small_plane_pixels;
  // Planes of 14 x 14 to 28 x 28 with a reduction of 8 to 36 k steps of 64 channels (ResNet-50's
  // 3 x 3 layers over 128 and 256 channels, its 1 x 1 layers from 512 and 1024) take them in the
  // split form (few_tiles), which a launch runs where the plain tiles fill at most half of the
  // multiprocessors: tiles of 256 pixels left such a launch a few large blocks, each with the whole
  // reduction (1024 -> 256 channels on 14 x 14: two an image), at 0.64-0.85x eager's speed at
  // batches 1 and 8, where m64 tiles ran 0.5-0.7x their time; at batch 32 the 256-pixel tiles were
  // faster on five of the seven layers (docs/conv2d.md, "Small planes"). Longer reductions (UNet's
  // 512 and 1024 channels on 16 x 16), smaller planes (12 x 12) and shorter reductions lost at batch
  // 8 or 32 on m64 tiles. (k steps of 16 over 136 channels spilled at the five blocks a
  // multiprocessor that m64 tiles allow.) Rows of a multiple of 64 columns under a filter of several
  // taps at column stride 1 keep their tiles: the window form may take them, and it was measured on
  // its own tiles only.
  const bool window_shape = taps > 1 && v.params.stride_w == 1 && v.out_width() % 64 == 0;
  // The TMA form (below) and its im2col copies, which serve any tiling.
  const bool tma = tma_form_applies(v, bk);
  const bool im2col = im2col_map_applies(v);
  const bool tma_copies = tma && im2col;
  // Planes of 12 x 12 and 13 x 13 (past the small planes' bound) take them too where the split form
  // runs in the TMA form, for reductions of 16 to 72 k steps.
  const bool mid_plane =
      few_tiles && !f32 && bk == 64 && !window_shape &&
      ((steps_at_bk >= tune.mid_plane_min_steps && steps_at_bk <= tune.mid_plane_max_steps &&
        plane >= tune.mid_plane_min_pixels && plane <= tune.mid_plane_max_pixels) ||
       (tma_copies && steps_at_bk >= tune.tma_split_min_steps && steps_at_bk <= tune.tma_m64_max_steps &&
        plane > tune.small_plane_pixels && plane < tune.mid_plane_min_pixels));
  const bool per_image_m64 = small_plane || mid_plane;
  // (A 1 x 1 filter over 256-320 channels — 4 or 5 k steps — into more than 64 channels takes two
  // warpgroups of 256 pixels too where the TMA form's copies apply: ResNet-50's 256 -> 128 on 56 x 56
  // at batch 32, f16, 0.0384 -> 0.0333 ms, 256 -> 1024 + residual on 14 x 14 0.0258 -> 0.0247; its
  // 1 x 1 layers of 1 and 2 k steps lost there, 0.054 -> 0.061 and 0.037 -> 0.040; H200.)
  const bool short_pointwise =
      taps == 1 && bk == 64 && steps_at_bk >= tune.pointwise_two_group_steps && bn == 128 && tma_copies;
  const bool two_groups =
      (steps_at_bk > 5 || short_pointwise) && !(f32 && bn <= 64) && !batch && !per_image_m64;
  // (Into at most 64 channels over a reduction of two_tile_min_steps k steps of 64 channels or more,
  // small filters keep two m64 tiles too: UNet's 3 x 3 128 -> 64 on 256 x 256 (18 k steps), f16,
  // 0.0357 / 0.2311 / 0.8898 ms at batches 1 / 8 / 32 on one tile against 0.0304 / 0.1945 / 0.7131
  // on two; H200.)
  const bool one_tile = (two_groups && bn <= 64 && taps < tune.large_filter_taps &&
                         !(bk == 64 && steps_at_bk >= tune.two_tile_min_steps)) ||
                        per_image_m64;
  // The split form of two warpgroups' tiles of 256 pixels (f16 / bf16, a reduction split-K takes,
  // at most kSplitKMaxImageTiles of 128 pixels an image): tiles of 128 (few_tiles), which a launch
  // whose plain tiles are few runs whole or split. H200, bf16, batch 1, UNet's 3 x 3 layers over
  // 128-512 channels on 16 x 16 to 64 x 64 and 512 channels on 12 x 12: 0.0174-0.0220 ms against
  // 0.0222-0.0255 on the 256-pixel tiles, in 2-8 slices each (512 -> 256 on 64 x 64: 0.0323
  // against 0.0312).
  const std::int64_t half_image_tiles = (plane + 127) / 128 * ((cout + bn - 1) / bn);
  const bool half_tiles = few_tiles && !f32 && two_groups && !one_tile &&
                          steps_at_bk >= kSplitKAutoMinSteps && half_image_tiles <= kSplitKMaxImageTiles;
  t.warps_m = two_groups ? 8 : 4, t.warps_n = 1, t.m_tiles = one_tile || half_tiles ? 1 : 2,
  t.n_tiles = bn / 8;
  t.min_blocks = 1;
  int o[6];
  const bool overridden = tile_override(o);
  if (overridden) {
    if ((o[0] != 4 && o[0] != 8) || o[1] != 1) {
      throw InvalidArgument("CUINLINE_CONV2D_HMMA_TILE: the wgmma tiling is 4 x 1 or 8 x 1 warps");
    }
    t.warps_m = o[0], t.m_tiles = o[2], t.n_tiles = o[3], bk = o[4], t.min_blocks = o[5];
  }
  t.tile_cols = 16 * t.m_tiles * t.warps_m;  // m_tiles m64 tiles a warpgroup
  t.ci_chunk = bk;
  t.row_tiles = 1;
  const int steps = k_steps(v, t);
  const std::int64_t stage = std::int64_t{t.tile_cols + t.block_channels()} * bk * elem_bytes(v);
  t.stages = static_cast<int>(std::clamp<std::int64_t>(tune.wgmma_stage_budget / stage, 3, 4));
  // A block that has its multiprocessor to itself at 3 buffers anyway (UNet-like: 256 x 128, 48 KiB
  // a buffer): 4 where they fit (H200: 0.1219 / 0.0962 -> 0.1167 / 0.0899 ms).
  const std::int64_t limit = conv2d_max_shared_bytes(v.target);
  if (3 * stage > limit / 2 && 4 * stage + 1024 <= limit) t.stages = 4;
  t.stages = std::max(3, std::min(t.stages, steps + 2));
  if (pipe_override().depth >= 3) t.stages = pipe_override().depth;
  // The window form (conv2d_hmma.cuh's kWindow): the input a tile reads copied once a k chunk, not
  // once a filter tap — for column stride 1 and output rows of a multiple of 64 columns that the
  // tile covers whole or in equal parts, with at least stages - 1 taps (the next chunk's window is
  // copied within a chunk) and where it fits. Without a residual: its 16-bit output tile overlaps
  // the buffers (the fp32 one of a residual would too, but is not measured).
  const std::int64_t ow = v.out_width();
  if (window && conv2d_knobs().window && !f32 && ci_pad > 8 && v.params.stride_w == 1 && ow % 64 == 0 &&
      (t.tile_cols % ow == 0 || ow % t.tile_cols == 0) && taps >= std::max(2, t.stages - 1) &&
      !v.has_residual) {
    t.form = HmmaForm::window;
    if (shared_bytes(v, t) > limit) t.form = HmmaForm::wgmma;
    // Two or more k chunks (two window buffers): a block computes up to window_row_tiles tiles in
    // turn (the launch picks how many, conv2d_launch.cpp), the next tile's first copies issued while
    // this one's outputs are stored, where the output tile's own place fits.
    if (t.window() && ci_pad / bk > 1 && conv2d_knobs().window_tiles) {
      t.row_tiles = static_cast<int>(tune.window_row_tiles);
      if (shared_bytes(v, t) > limit) t.row_tiles = 1;
    }
  }
  // The TMA form (conv2d_hmma.cuh's kTma): the same tiles, their copies made by the tensor memory
  // accelerator from a producer warp while the warpgroups wait on mbarriers instead of a barrier of
  // the block a step — on sm90, for the two-warpgroup tilings and the per-image m64 tiles of 16-bit
  // k steps of 64 unpadded channels. A tile's input is one box where the tile is whole output rows
  // (kBM a multiple of the output width) or a part of one at stride 1; else one im2col copy
  // (tma_im2col: any plane, strides up to 8, padding and filter extents within the im2col map's
  // bounding box of [-128, 127]). In place of the window form too (UNet's 256 -> 256 on 64 x 64 at
  // batch 32: 0.2195 ms against 0.2654, H200) but for an input of one k chunk (64 channels), whose
  // window the window form copies once a tile (UNet's 64 -> 64 on 256 x 256 at batch 32: 0.4467 ms
  // against 0.5537 on the TMA form). In the split forms of tiles of their own (few_tiles) of at
  // least 16 k steps (on m64 tiles, 1 x 1 layers over 512 channels ran 15-18 % slower at batch 8 than
  // on cp.async), not in that of a window-form variant (`window` false: its cp.async tiling).
  const bool box = v.params.stride_h == 1 && v.params.stride_w == 1 &&
                   (t.tile_cols % ow == 0 || ow % t.tile_cols == 0) && !conv2d_knobs().tma_im2col;
  if ((window || (few_tiles && steps_at_bk >= tune.tma_split_min_steps)) && tma &&
      (t.warps_m == 8 || (per_image_m64 && t.m_tiles == 1)) && !batch && (!t.window() || ci_pad > bk) &&
      (box || im2col)) {
    const HmmaForm plain = t.form;
    const int row_tiles = t.row_tiles;
    t.form = HmmaForm::tma;
    t.tma_im2col = !box;
    t.row_tiles = 1;
    if (shared_bytes(v, t) > limit) t.form = plain, t.row_tiles = row_tiles, t.tma_im2col = false;
  }
  set_hmma_plan_figures(v, t);
  if (batch && !t.window() && !overridden) t.form = HmmaForm::batch;
  t.few_tiles = mid_plane || half_tiles;
  if (t.shared_bytes > limit) {
    throw InvalidArgument("conv2d variant " + v.name() + ": the f16/bf16 wgmma tile needs " +
                          std::to_string(t.shared_bytes) + " bytes of shared memory");
  }
  // (An m64 tile of a filter of several taps keeps 48 registers more for its tap offsets: a 1 x 3
  // filter over 40 channels into 200 spilled 52 bytes at 5 blocks a multiprocessor on sm_90a, and its
  // mma.sync form 4 bytes on sm_80 at 4.)
  if (!two_groups && !overridden) t.min_blocks = one_group_min_blocks(t, per_image_m64 && taps > 1 ? 48 : 0);
  // (split_k stays 0: the split form is a second kernel of the variant, hmma_split_tiling.)
  return t;
}

}  // namespace hmma_parts

HmmaTiling hmma_direct_tiling(const Conv2dVariant& v) {
  v.validate();
  return direct_tiling(v);
}

HmmaTiling hmma_tiling(const Conv2dVariant& v) {
  v.validate();
  if (!hmma_stages(v)) return direct_tiling(v);
  HmmaTiling t = direct_tiling(hmma_staged_variant(v));
  t.stage_channels = (v.in_channels + 7) / 8 * 8;
  // Each tensor not already in the cp.async form (both where the pair is not 16-byte aligned).
  const bool ok = v.in_channels % 8 == 0 && v.inputs_aligned;
  t.stage_input = !(ok && v.input_layout == Conv2dLayout::nhwc);
  t.stage_weight = !(ok && hmma_weight_channels_last(v));
  return t;
}

HmmaTiling hmma_split_tiling(const Conv2dVariant& v) {
  HmmaTiling t = hmma_tiling(v);  // validates
  // (split_k_most refuses every form but the cp.async wgmma tiling; a staged variant's conv is that
  // of its channels-last copy.)
  const Conv2dVariant conv = t.stage_channels > 0 ? hmma_staged_variant(v) : v;
  // A window-form variant's split form is its cp.async tiling without the window: the same tiles
  // (the window form keeps the cp.async form's pixels and channels a tile), so the launch chooses
  // between the two kernels as for any other (UNet's 512 -> 256 on 64 x 64 at batch 1, H200: 0.065 ms
  // on 32 blocks of the window form's 72 k steps; docs/conv2d.md, "Split-K").
  // A mid plane's split form is its per-image m64 tiles (wgmma_tiling's few_tiles): the launch runs
  // it, in one slice or more, where the plain tiles are few.
  const bool wgmma_form = t.wgmma() && t.half_mma() && !t.halo() && !t.batch_tiles() && !t.pointwise();
  if (t.window() || wgmma_form) {
    const HmmaTiling plain = t;
    const HmmaTiling few = wgmma_tiling(conv, false, true);
    // (The TMA form's split form is its own tiling; the window form's is the cp.async form's.)
    if (t.window() || few.few_tiles) {
      t = few.few_tiles ? few : wgmma_tiling(conv, false);
      t.stage_channels = plain.stage_channels, t.stage_input = plain.stage_input,
      t.stage_weight = plain.stage_weight;
    }
  }
  const int knob = conv2d_knobs().split_k;
  t.split_k = split_k_most(conv, t, k_steps(conv, t), knob);
  // (Its own tiles are worth a launch in one slice: at least 1 there, unless the knob turns the
  // split form off.)
  if (t.few_tiles && knob != 0) t.split_k = std::max(t.split_k, 1);
  return t;
}

HmmaTiling tf32_wgmma_tiling(const Conv2dVariant& v) {
  v.validate();
  HmmaTiling t = wgmma_tiling(hmma_staged_variant(v));
  t.stage_channels = (v.in_channels + 7) / 8 * 8;
  t.stage_input = true;  // (also rounds every value to TF32: the tensor cores would truncate it)
  t.stage_weight = true;
  return t;
}

HmmaTiling pointwise_tiling(const Conv2dVariant& v) {
  v.validate();
  return pointwise_plan(v);
}

}  // namespace cuinline::ops::conv2d_impl
