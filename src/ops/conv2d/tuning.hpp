#pragma once
// The conv2d planners' tuning, in one place (tuning.cpp):
// - conv2d_tuning(target): the tuned figures the planners read (shared-memory budgets, unroll
//   budgets, the thresholds that choose a form), one set a target, each with a one-line provenance
//   in conv2d_tuning_table();
// - the CUINLINE_CONV2D_* environment knobs: every one read once, the first time any is asked for,
//   into one struct (conv2d_knobs()). Most switch a kernel form off for comparisons; the rest are
//   tuning overrides. docs/conv2d.md ("Environment knobs") lists them; conv2d_knob_table() is the
//   same table in code, each default with where it comes from.
#include <cstdint>
#include <cuinline/arch.hpp>
#include <cuinline/conv2d.hpp>
#include <optional>
#include <string>
#include <vector>

namespace cuinline::ops::conv2d_impl {

/// The planners' tuned figures for one target. Budgets in bytes of shared memory a block; they are
/// the target's limit where that is less (conv2d_max_shared_bytes).
struct Conv2dTuning {
  // f32 on FMA (conv2d_direct.cpp's fp32_plan)
  std::int64_t direct_max_threads;         ///< threads a block of one thread set
  std::int64_t direct_single_stage_bytes;  ///< a single-buffered stage (pipeline 0)
  std::int64_t direct_pipelined_bytes;     ///< a double-buffered block (pipelines 1 and 2)
  std::int64_t direct_pipelined_bytes7;    ///< ... with 7-pixel thread tiles
  std::int64_t direct_macs7;               ///< multiply-adds an image from which 7-pixel tiles apply
  std::int64_t direct_unroll_budget;       ///< FMAs (taps x outputs a thread) an unrolled step
  // f32 in tf32 / tf32x3 on mma.sync (conv2d_mma.cpp)
  std::int64_t mma_pipelined_bytes;  ///< a block (row streaming and the pipelines)
  std::int64_t mma_unroll_taps;      ///< filter taps x 8-channel steps an unrolled body
  std::int64_t mma_unrolled_mma;     ///< mma instructions an unrolled body
  // f16 / bf16 / TF32 on the tensor-core kernel (hmma_tiling.cpp)
  std::int64_t wgmma_stage_budget;  ///< a wgmma tiling's cp.async buffers (3 or 4 of them)
  std::int64_t window_row_tiles;    ///< most tiles a window-form block computes in turn
  std::int64_t halo_row_tiles;      ///< most tiles a halo-form block computes in turn
  std::int64_t large_filter_taps;   ///< taps from which a two-warpgroup tile keeps two m64 tiles
  std::int64_t two_tile_min_steps;  ///< k steps from which it keeps them for smaller filters too
  std::int64_t small_plane_pixels;  ///< output pixels an image up to which f16 / bf16 take m64 tiles
  std::int64_t mid_plane_min_pixels, mid_plane_max_pixels;  ///< output pixels an image of a mid plane
  std::int64_t mid_plane_min_steps, mid_plane_max_steps;    ///< k steps of a mid plane's m64 split form
  std::int64_t tma_m64_max_steps;          ///< ... and 12 x 12 - 13 x 13 ones, in the TMA form
  std::int64_t tma_split_min_steps;        ///< k steps from which a split form of its own tiles is TMA
  std::int64_t pointwise_two_group_steps;  ///< k steps from which a 1 x 1 layer takes two warpgroups (TMA)
  std::int64_t stage_min_elements;  ///< input elements an image from which a variant is staged
  std::int64_t tf32_wgmma_min_channels;  ///< fewest input channels on the TF32 wgmma kernel
  std::int64_t tf32_wgmma_min_work;      ///< fewest products a staged value feeds there
  // f32 Winograd (conv2d_winograd.cpp) and channels-last f32 (conv2d_transpose.cpp)
  std::int64_t winograd_max_weight_bytes;  ///< a block's transformed weights
  std::int64_t transpose_min_macs;         ///< multiply-adds an image from which f32 transposes
};

/// log2 of the elements one block of the transposing copy moves (conv2d_transpose.cuh): a tile of
/// 2^11 32-bit words a block; CUINLINE_CONV2D_TRANSPOSE_TILE picks 10-12 for measuring.
inline constexpr int kTransposeLogTile = 11;

/// The tuning a variant of `target` is planned with.
const Conv2dTuning& conv2d_tuning(Conv2dTarget target) noexcept;

/// One figure of Conv2dTuning: its field, its value on each target (sm90, sm80, sm86, sm75) and
/// where it comes from.
struct Conv2dTuningInfo {
  const char* name;
  std::int64_t Conv2dTuning::*field;
  std::int64_t value[4];
  const char* provenance;
};
/// Every figure, in Conv2dTuning's order.
const std::vector<Conv2dTuningInfo>& conv2d_tuning_table();

/// Every knob's value as parsed (an unset variable, or a value a knob does not accept, leaves the
/// default; the parsing of each is its entry's in tuning.cpp).
struct Conv2dKnobs {
  bool hmma = true;               ///< CUINLINE_CONV2D_HMMA: f16 / bf16 on tensor cores (0: off)
  bool wgmma = true;              ///< CUINLINE_CONV2D_WGMMA: the wgmma tilings on sm90 (0: off)
  bool halo = true;               ///< CUINLINE_CONV2D_HALO: the wgmma tiling's halo form (0: off)
  bool window = true;             ///< CUINLINE_CONV2D_WINDOW: the wgmma tiling's window form (0: off)
  bool tma = true;                ///< CUINLINE_CONV2D_TMA: the wgmma tiling's TMA form (0: off)
  bool tma_im2col = false;        ///< CUINLINE_CONV2D_TMA=im2col: im2col copies where a box would do
  bool window_tiles = true;       ///< CUINLINE_CONV2D_WINDOW_ROWS != 0: window blocks of several tiles
  bool batch_tiles = true;        ///< CUINLINE_CONV2D_BATCH_TILES: batch tiles for small planes (0: off)
  bool tf32_wgmma = true;         ///< CUINLINE_CONV2D_TF32_WGMMA: tf32 on the wgmma kernel (0: off)
  bool pointwise = true;          ///< CUINLINE_CONV2D_POINTWISE: the 1 x 1 pointwise form (0: off)
  bool halo_weight_batch = true;  ///< CUINLINE_CONV2D_HALO_WBATCH: batched halo weight gathers (0: off)
  int store_batch = -1;           ///< CUINLINE_CONV2D_STORE_BATCH: 0 or 1 everywhere; -1 the plan's
  /// CUINLINE_CONV2D_HMMA_TILE "wm,wn,mt,nt,bk,min_blocks": the f16 / bf16 / TF32 block tiling.
  bool hmma_tile_set = false;
  int hmma_tile[6] = {0, 0, 0, 0, 0, 0};
  /// CUINLINE_CONV2D_HMMA_PIPE "depth,l2": cp.async buffers (0: the plan's) and cp.async.cg (1).
  bool hmma_pipe_set = false;
  int hmma_pipe_depth = 0, hmma_pipe_l2 = 0;
  int stage = 2;                ///< CUINLINE_CONV2D_STAGE: 0 never, 1 always, 2 by size
  int transpose = 2;            ///< CUINLINE_CONV2D_TRANSPOSE: 0 never, 1 always, 2 by work
  int transpose_log_tile = 11;  ///< CUINLINE_CONV2D_TRANSPOSE_TILE: 10-12 (kTransposeLogTile)
  bool winograd = true;         ///< CUINLINE_CONV2D_WINOGRAD: Winograd F(2x2, 3x3) (0: off)
  int winograd_warps = 0;       ///< CUINLINE_CONV2D_WINOGRAD_WARPS: 4 or 8; 0 the plan's
  int tf32x3_kw = 1;            ///< CUINLINE_CONV2D_TF32X3_KW: 1-31 filter columns unrolled (3xTF32)
  bool tf32x3_chained_sums = false;  ///< CUINLINE_CONV2D_TF32X3_SUMS=chained
  /// Tiles a block computes in turn, overriding the launch's rule: 1, 2, 4 or 8; 0 the rule's.
  int winograd_rows = 0;  ///< CUINLINE_CONV2D_WINOGRAD_ROWS
  int window_rows = 0;    ///< CUINLINE_CONV2D_WINDOW_ROWS
  int halo_rows = 0;      ///< CUINLINE_CONV2D_HALO_ROWS
  /// CUINLINE_CONV2D_SPLIT_K: the split-K form of the f16 / bf16 wgmma tiling. -1 auto (unset: the
  /// launch's rule, split_k_choice), 0 off, 2-8 that many slices wherever the form applies. Any other
  /// value leaves auto, split_k_error saying why (conv2d_knobs() warns once).
  int split_k = -1;
  std::string split_k_error;
  /// CUINLINE_CONV2D_GENERIC_SPLIT_K: the K tiles from which the generic tensor-core kernel splits a
  /// launch's reduction (plan_generic_conv); 0 never; -1 (unset, or a value it does not accept): the
  /// plan's kGenericConvMinSplitKTiles.
  int generic_split_k_min = -1;
  /// CUINLINE_CONV2D_GENERIC_WIDE: the generic tensor-core kernel's wide tiling (128 x 128) for its
  /// vector form: 0 never, 1 wherever the vector form runs; -1 (unset, or another value): where
  /// plan_generic_conv's rule takes it.
  int generic_wide = -1;
  /// CUINLINE_CONV2D_TARGET (an arch name): every call planned for that arch's target where the
  /// device has what it plans for; a name Arch::parse rejects is ignored (target_error: why; the
  /// launch warns once, the first time a call plans for a device).
  std::optional<Arch> target;
  std::string target_error;
};

/// The knobs of this process, read from the environment on the first call (thread-safe).
const Conv2dKnobs& conv2d_knobs();
/// The knobs `lookup` gives (the environment's: std::getenv): parsed as conv2d_knobs() parses them.
Conv2dKnobs read_conv2d_knobs(const char* (*lookup)(const char* name));

/// One row of the knob table: the variable, what it does, the values it accepts (any other value,
/// or none, gives the default) and the default.
struct Conv2dKnobInfo {
  const char* name;
  const char* meaning;
  const char* values;
  const char* default_value;
};
const std::vector<Conv2dKnobInfo>& conv2d_knob_table();

}  // namespace cuinline::ops::conv2d_impl
