#pragma once
// The CUINLINE_CONV2D_* environment knobs: every one read once, the first time any is asked for,
// into one struct (conv2d_knobs()). Most switch a kernel form off for comparisons; the rest are
// tuning overrides. docs/conv2d.md ("Environment knobs") lists them; conv2d_knob_table() is the same
// table in code (tuning.cpp), each default with where it comes from.
#include <cuinline/arch.hpp>
#include <optional>
#include <string>
#include <vector>

namespace cuinline::ops::conv2d_impl {

/// Every knob's value as parsed (an unset variable, or a value a knob does not accept, leaves the
/// default; the parsing of each is its entry's in tuning.cpp).
struct Conv2dKnobs {
  bool hmma = true;               ///< CUINLINE_CONV2D_HMMA: f16 / bf16 on tensor cores (0: off)
  bool wgmma = true;              ///< CUINLINE_CONV2D_WGMMA: the wgmma tilings on sm90 (0: off)
  bool halo = true;               ///< CUINLINE_CONV2D_HALO: the wgmma tiling's halo form (0: off)
  bool window = true;             ///< CUINLINE_CONV2D_WINDOW: the wgmma tiling's window form (0: off)
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
