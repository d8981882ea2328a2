#pragma once
// The row reductions' CUINLINE_ROWS_* environment knobs: A/B switches of the planner's and the
// launch's rules, every one read once, the first time any is asked for, into one struct
// (row_knobs()). README.md's environment table lists them; docs/reductions.md says what each
// compares.
#include <cstdint>
#include <string>
#include <vector>

namespace cuinline::ops::detail {

/// CUINLINE_ROWS_CLUSTER's values.
enum class ClusterKnob {
  planned,  ///< unset or "1": the planner's form
  off,      ///< "0": the split form where the planner takes the cluster form
  all,      ///< "all": the cluster form wherever a cluster holds the row
};

/// The longest row CUINLINE_ROWS_WARP_MAX takes: 32 lanes of kWarpMaxPerThread.
constexpr std::int64_t kWarpLongestRow = 1024;

/// Every knob's value as parsed; an unset variable, or a value a knob does not accept, leaves the
/// default (the refused ones each a message in `refused`, which row_knobs() logs once).
struct RowKnobs {
  ClusterKnob cluster = ClusterKnob::planned;  ///< CUINLINE_ROWS_CLUSTER: 0, 1 or all
  /// CUINLINE_ROWS_WORKSPACE: "0" takes no workspace, so the rows past the block form run as where
  /// none can be had (the looped form; the generic kernel's whole rows); "1": a workspace where one
  /// can be had.
  bool workspace = true;
  /// CUINLINE_ROWS_WARP_VECTORS: the warp form's least accesses a lane, 1, 2, 4 or 8.
  int warp_vectors = 1;
  /// CUINLINE_ROWS_WARP_ROWS: the rows a group of the warp form takes (RowVariant::rows_per_group),
  /// 1, 2, 4 or 8.
  int warp_rows = 1;
  /// CUINLINE_ROWS_WARP_MAX: the longest row on the warp form, 1-kWarpLongestRow; the longer rows
  /// take the block form. 0 (unset): the planner's rule (warp_form_max in plan.hpp).
  std::int64_t warp_max = 0;
  std::vector<std::string> refused;
};

/// The knobs `lookup` gives (the environment's: std::getenv), parsed as row_knobs() parses them.
RowKnobs read_row_knobs(const char* (*lookup)(const char* name));
/// The knobs of this process, read from the environment on the first call (thread-safe).
const RowKnobs& row_knobs();

}  // namespace cuinline::ops::detail
