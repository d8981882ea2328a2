// The reductions planner: a call's tensors → (RowVariant, RowArgs, grid). Every check (dtypes,
// shapes, row layout, weight length, overlap, alignment, eps) throws InvalidArgument here, before
// anything is compiled or launched; no driver call, no allocation beyond error messages.
#include "ops/reductions/plan.hpp"

#include <algorithm>
#include <cmath>
#include <cuinline/error.hpp>
#include <limits>
#include <string>
#include <vector>

#include "driver/tensor_access.hpp"
#include "ops/reductions/knobs.hpp"

namespace cuinline::ops::detail {
namespace {

struct Checker {
  RowOp op;
  [[noreturn]] void bad(const std::string& what) const {
    throw InvalidArgument(std::string(to_string(op)) + ": " + what);
  }
};

bool present(const TensorView& t) {
  return t.data != nullptr;
}

// The row layout of a tensor over rows x n: its row stride (offset of row r = r * stride), with
// the checks every row tensor shares.
std::int64_t row_stride(const Checker& c, const TensorView& t, const char* name, std::int64_t n) {
  if (t.ndim == 0) return n;
  const int last = t.ndim - 1;
  if (t.shape[last] > 1 && t.strides[last] != 1) {
    c.bad(std::string(name) + " " + t.describe() + " is not contiguous in its last dimension (stride " +
          std::to_string(t.strides[last]) + "); make it contiguous first");
  }
  // The innermost leading dimension with more than one element gives the stride; every outer one
  // must be a whole number of those rows further on.
  std::int64_t stride = n, inner = 1;
  bool found = false;
  for (int d = last - 1; d >= 0; --d) {
    if (t.shape[d] == 1) continue;
    if (!found) {
      stride = t.strides[d];
      found = true;
    } else if (t.strides[d] != stride * inner) {
      c.bad(std::string(name) + " " + t.describe() +
            ": its rows are not evenly spaced (one stride between all rows is needed); make it contiguous first");
    }
    inner *= t.shape[d];
  }
  return stride;
}

void check_vector(const Checker& c, const TensorView& t, const char* name, DType dtype, std::int64_t n) {
  if (t.dtype != dtype) {
    c.bad(std::string(name) + " is " + to_string(t.dtype) + ", the input " + to_string(dtype) +
          " (mixed dtypes are not supported)");
  }
  if (t.ndim != 1 || t.shape[0] != n) {
    c.bad(std::string(name) + " " + t.describe() + " must be 1-D of the row length " + std::to_string(n));
  }
  if (n > 1 && t.strides[0] != 1) c.bad(std::string(name) + " " + t.describe() + " must be contiguous");
}

void byte_range(const TensorView& v, std::uintptr_t& lo, std::uintptr_t& hi) {
  std::uintptr_t first = 0, last = 0;
  cuinline::detail::byte_span(v, first, last);
  lo = first;
  hi = last + 1;
}

bool overlap(const TensorView& a, const TensorView& b) {
  std::uintptr_t alo, ahi, blo, bhi;
  byte_range(a, alo, ahi);
  byte_range(b, blo, bhi);
  return alo < bhi && blo < ahi;
}

bool same_view(const TensorView& a, const TensorView& b) {
  if (a.data != b.data || a.ndim != b.ndim) return false;
  for (int d = 0; d < a.ndim; ++d) {
    if (a.shape[d] != b.shape[d] || (a.shape[d] > 1 && a.strides[d] != b.strides[d])) return false;
  }
  return true;
}

std::int64_t pow2_at_least(std::int64_t v) {
  std::int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

}  // namespace

int block_max_per_thread(DType dtype) noexcept {
  return dtype == DType::f64 ? 8 : 32;
}

int block_max_per_thread(const RowVariant& v) noexcept {
  const bool heavy = (v.op == RowOp::layer_norm && !light(v)) || v.epilogue_inputs > 2;
  return heavy ? std::min(16, block_max_per_thread(v.dtype)) : block_max_per_thread(v.dtype);
}

std::int64_t warp_form_max(RowOp op, DType dtype) noexcept {
  if (row_knobs().warp_max != 0) return row_knobs().warp_max;
  const std::int64_t read =
      static_cast<std::int64_t>(dtype_size(dtype)) * (op == RowOp::add_rms_norm ? 2 : 1);
  return std::min<std::int64_t>(kWarpLongestRow, 32 * kWarpMaxLaneBytes / read);
}

int block_min_per_thread(DType dtype) noexcept {
  return dtype == DType::f64 ? 8 : 16;
}

RowCall plan_row_call(RowOp op, const TensorView& in, const TensorView& out, const TensorView& weight,
                      const TensorView& bias, const TensorView& residual, double eps, const RowFusion& fusion) {
  const Checker c{op};
  const std::vector<TensorView>& extra = fusion.epilogue_inputs;
  if (extra.size() > static_cast<std::size_t>(kMaxEpilogueInputs)) {
    c.bad("the epilogue takes at most " + std::to_string(kMaxEpilogueInputs) + " extra tensors, got " +
          std::to_string(extra.size()));
  }
  RowCall call;
  RowPlan& p = call.plan;
  p.variant.op = op;
  // Copied only where present: an unfused call copies no chain.
  if (has_chain(fusion.prologue)) p.variant.prologue = fusion.prologue;
  if (has_chain(fusion.epilogue)) p.variant.epilogue = fusion.epilogue;
  p.variant.epilogue_inputs = static_cast<int>(extra.size());
  check_chains(p.variant);
  const auto extra_name = [](std::size_t k) { return "epilogue input in" + std::to_string(k + 1); };
  const bool softmax = op == RowOp::softmax || op == RowOp::log_softmax;
  const bool add = op == RowOp::add_rms_norm;
  const DType dt = in.dtype;
  const std::size_t es = dtype_size(dt);
  if (es == 0) c.bad("unsupported dtype " + std::to_string(static_cast<int>(dt)));
  // Every tensor (no allocation: this runs on every call).
  const TensorView* all[5 + kMaxEpilogueInputs] = {&in, &out, &weight, &bias, &residual};
  std::size_t count = 5;
  for (const TensorView& t : extra) all[count++] = &t;
  for (std::size_t i = 0; i < count; ++i) {
    const TensorView* t = all[i];
    if (t->ndim < 0 || t->ndim > TensorView::kMaxDims) c.bad("a tensor has " + std::to_string(t->ndim) + " dimensions");
    for (int d = 0; d < t->ndim; ++d) {
      if (t->shape[d] < 0) c.bad("negative dimension in " + t->describe());
    }
  }
  if (softmax && (present(weight) || present(bias) || present(residual))) c.bad("takes no weight, bias or residual");
  if (op != RowOp::layer_norm && present(bias)) c.bad("takes no bias");
  if (!add && present(residual)) c.bad("takes no residual");
  if (!softmax && !(std::isfinite(eps) && eps >= 0)) c.bad("eps must be finite and >= 0, got " + std::to_string(eps));

  const auto same_shape = [&](const TensorView& t, const char* name) {
    if (t.dtype != dt) {
      c.bad(std::string(name) + " is " + to_string(t.dtype) + ", the input " + to_string(dt) +
            " (mixed dtypes are not supported)");
    }
    bool same = t.ndim == in.ndim;
    for (int d = 0; same && d < t.ndim; ++d) same = t.shape[d] == in.shape[d];
    if (!same) c.bad(std::string(name) + " " + t.describe() + " does not have the input's shape " + in.describe());
  };
  same_shape(out, "output");
  if (add) same_shape(residual, "residual");
  for (std::size_t k = 0; k < extra.size(); ++k) same_shape(extra[k], extra_name(k).c_str());

  const std::int64_t n = in.ndim == 0 ? 1 : in.shape[in.ndim - 1];
  std::int64_t rows = 1;
  for (int d = 0; d + 1 < in.ndim; ++d) {
    if (in.shape[d] != 0 && rows > std::numeric_limits<std::int64_t>::max() / in.shape[d]) c.bad("too many elements");
    rows *= in.shape[d];
  }
  if (n != 0 && rows > std::numeric_limits<std::int64_t>::max() / n) c.bad("too many elements");
  if (present(weight)) check_vector(c, weight, "weight", dt, n);
  if (present(bias)) check_vector(c, bias, "bias", dt, n);

  p.variant.dtype = dt;
  p.n = n;
  p.in_stride = row_stride(c, in, "input", n);
  p.out_stride = row_stride(c, out, "output", n);
  if (add) p.residual_stride = row_stride(c, residual, "residual", n);
  std::int64_t extra_stride[kMaxEpilogueInputs] = {};
  for (std::size_t k = 0; k < extra.size(); ++k) extra_stride[k] = row_stride(c, extra[k], extra_name(k).c_str(), n);
  if (rows > 1 && n > 0 && p.out_stride < n) {
    c.bad("output " + out.describe() + ": its rows overlap (row stride " + std::to_string(p.out_stride) + " < " +
          std::to_string(n) + ")");
  }
  if (add && rows > 1 && n > 0 && p.residual_stride < n) {
    c.bad("residual " + residual.describe() + ": its rows overlap (row stride " + std::to_string(p.residual_stride) +
          " < " + std::to_string(n) + ")");
  }
  if (rows == 0 || n == 0) return call;  // nothing to do (rows stays 0)
  p.rows = rows;

  const auto check_pointer = [&](const TensorView& t, const char* name) {
    if (t.data == nullptr) c.bad(std::string(name) + " is a null pointer with elements");
    if (reinterpret_cast<std::uintptr_t>(t.data) % es != 0) c.bad(std::string(name) + " is not aligned to its element size");
  };
  check_pointer(in, "input");
  check_pointer(out, "output");
  if (add) check_pointer(residual, "residual");
  if (present(weight)) check_pointer(weight, "weight");
  if (present(bias)) check_pointer(bias, "bias");
  for (std::size_t k = 0; k < extra.size(); ++k) check_pointer(extra[k], extra_name(k).c_str());

  // Aliasing: the output may be the input itself; nothing written may overlap anything else.
  if (!same_view(out, in) && overlap(out, in)) c.bad("the output overlaps the input without being the same view");
  if (present(weight) && overlap(out, weight)) c.bad("the output overlaps the weight");
  if (present(bias) && overlap(out, bias)) c.bad("the output overlaps the bias");
  if (add) {
    if (overlap(residual, in)) c.bad("the residual overlaps the input");
    if (overlap(residual, out)) c.bad("the residual overlaps the output");
    if (present(weight) && overlap(residual, weight)) c.bad("the residual overlaps the weight");
  }
  for (std::size_t k = 0; k < extra.size(); ++k) {
    if (overlap(out, extra[k])) c.bad("the output overlaps the " + extra_name(k));
    if (add && overlap(residual, extra[k])) c.bad("the residual overlaps the " + extra_name(k));
  }

  // The widest access (<= 16 bytes) that every row of every tensor is aligned to.
  int v = static_cast<int>(16 / es);
  for (; v > 1; v /= 2) {
    const std::uintptr_t vb = es * static_cast<std::uintptr_t>(v);
    bool ok = n % v == 0;
    for (std::size_t i = 0; i < count; ++i) {
      ok = ok && (!present(*all[i]) || reinterpret_cast<std::uintptr_t>(all[i]->data) % vb == 0);
    }
    if (rows > 1) ok = ok && p.in_stride % v == 0 && p.out_stride % v == 0 && (!add || p.residual_stride % v == 0);
    for (std::size_t k = 0; rows > 1 && k < extra.size(); ++k) ok = ok && extra_stride[k] % v == 0;
    if (ok) break;
  }
  RowVariant& var = p.variant;
  var.vector_width = v;
  std::int64_t grid = rows;
  if (n <= warp_form_max(op, dt)) {
    // The fewest lanes whose accesses of v cover the row (one access each), else a whole warp with
    // more elements a lane.
    var.form = RowForm::warp;
    const std::int64_t least = std::int64_t{v} * row_knobs().warp_vectors;
    const std::int64_t lanes =
        std::clamp<std::int64_t>(pow2_at_least((n + least - 1) / least), kWarpMinLanes, 32);
    var.threads = static_cast<int>(lanes);
    var.per_thread = static_cast<int>(std::max<std::int64_t>(v, pow2_at_least((n + lanes - 1) / lanes)));
    // Rows a group past one (CUINLINE_ROWS_WARP_ROWS) where the lane's elements over them stay at 64
    // at most (the variant's check) and the rows fill more than one block's groups once.
    const std::int64_t rows_per_block = kWarpBlock / lanes;
    int group_rows = row_knobs().warp_rows;
    while (group_rows > 1 &&
           (std::int64_t{group_rows} * var.per_thread > 64 || rows < rows_per_block * group_rows)) {
      group_rows /= 2;
    }
    var.rows_per_group = group_rows;
    grid = (rows + rows_per_block * group_rows - 1) / (rows_per_block * group_rows);
    p.block = kWarpBlock;
  } else if (n <= std::int64_t{1024} * block_max_per_thread(p.variant)) {
    // At least 16 elements a thread (8 in f64) before more threads: a thread's loads are all in
    // flight before the row's reductions stall it, so fewer, fuller threads keep more bytes in
    // flight per SM (docs/reductions.md, "Forms, by row length").
    var.form = RowForm::block;
    const std::int64_t least = block_min_per_thread(dt);
    var.threads = static_cast<int>(
        std::min<std::int64_t>(1024, std::max<std::int64_t>(128, pow2_at_least((n + least - 1) / least))));
    var.per_thread = static_cast<int>(std::max<std::int64_t>(v, pow2_at_least((n + var.threads - 1) / var.threads)));
    p.block = static_cast<std::uint32_t>(var.threads);
  } else {
    var.form = RowForm::split_stats;
    var.threads = kSplitThreads;
    var.per_thread = split_per_thread(dt, !light(var));
    const std::int64_t chunk = std::int64_t{kSplitThreads} * var.per_thread;
    const std::int64_t splits = (n + chunk - 1) / chunk;
    if (rows > std::numeric_limits<std::int32_t>::max() / splits) c.bad("too many rows for one launch (" + std::to_string(rows) + ")");
    grid = rows * splits;
    p.block = kSplitThreads;
    p.workspace_bytes = static_cast<std::size_t>(grid) * 2 * (dt == DType::f64 ? 8 : 4);
    call.args.chunk = chunk;
  }
  if (grid > std::numeric_limits<std::int32_t>::max()) c.bad("too many rows for one launch (" + std::to_string(rows) + ")");
  p.grid = static_cast<std::uint32_t>(grid);
  p.shared_bytes = row_shared_bytes(var);

  RowArgs& a = call.args;
  a.x = in.data;
  a.y = out.data;
  a.w = weight.data;
  a.b = op == RowOp::layer_norm ? bias.data : nullptr;
  a.r = add ? residual.data : nullptr;
  a.rows = rows;
  a.n = n;
  a.sx = p.in_stride;
  a.sy = p.out_stride;
  a.sr = p.residual_stride;
  a.eps = eps;
  for (std::size_t k = 0; k < extra.size(); ++k) {
    a.e[k].p = extra[k].data;
    a.e[k].s = extra_stride[k];
  }
  if (var.form == RowForm::split_stats && cluster_pays(op, dt, (n + a.chunk - 1) / a.chunk))
    return cluster_form(call);
  return call;
}

std::int64_t cluster_groups(DType dtype, std::int64_t chunks) noexcept {
  if (chunks > std::int64_t{kClusterMaxBlocks} * cluster_max_groups(dtype)) return 0;
  return (chunks + kClusterMaxBlocks - 1) / kClusterMaxBlocks;
}

bool cluster_pays(RowOp op, DType dtype, std::int64_t chunks) noexcept {
  // Where the cluster form moved more bytes a second than the split form: H200, rows of 40000,
  // 65536, 131072 and 262144, bf16 and f16 (16-bit chunks of 256 x 64) and f32,
  // CUINLINE_ROWS_CLUSTER=0 against =all in one machine session each (docs/reductions.md, "Rows past
  // 32768 elements"). One chunk a block: softmax +15-32 %, log_softmax +26-48 %, rms_norm +24-36 %,
  // add_rms_norm -1 to +5 % (one launch, no workspace), layer_norm f32 +5-8 %, f16 +19-20 %, bf16
  // 1528-2320 -> 2502-2905 GB/s (widened at each read: 64 registers a thread where it held 120 and
  // lost 14-23 %). Two: softmax +3-7 %, log_softmax +13-19 %, rms_norm +19-20 %, add_rms_norm -1 to
  // -3 %, layer_norm -18-21 %. Clusters of 9-16 blocks (the tree with clusters of 8 at most against
  // this one, one process each, one H200): bf16 x 262144 softmax 2655 -> 3084 GB/s (two chunks a
  // block -> one), log_softmax 2759 -> 2993, rms_norm 3046 -> 3042, layer_norm 2318 -> 2596 (split ->
  // one chunk a block), add_rms_norm 3098 -> 2907 (split -> one; f32 x 131072 3287 -> 3022); bf16 x
  // 524288, split -> two a block: softmax 1998 -> 2478, log_softmax 2001 -> 2629, rms_norm 2417 ->
  // 2763; f32 x 131072 softmax 2594 -> 3064, log_softmax 2786 -> 3294 (two -> one); f32 x 262144,
  // split -> two: softmax 2302 -> 2414, log_softmax 2340 -> 2612, rms_norm 2626 -> 3108. So
  // add_rms_norm keeps clusters of one chunk a block up to the portable 8. f64 not measured: it
  // splits.
  const std::int64_t groups = cluster_groups(dtype, chunks);
  if (groups == 0 || dtype == DType::f64) return false;
  if (op == RowOp::add_rms_norm) return groups == 1 && chunks <= kClusterPortableBlocks;
  if (op == RowOp::layer_norm) return groups == 1;
  return true;
}

RowCall cluster_form(RowCall call) {
  RowPlan& p = call.plan;
  if (p.variant.form != RowForm::split_stats) return call;
  const std::int64_t splits = (p.n + call.args.chunk - 1) / call.args.chunk;
  const std::int64_t groups = cluster_groups(p.variant.dtype, splits);
  if (groups == 0) return call;
  // As few chunks a block as let a cluster of kClusterMaxBlocks hold the row, then as few blocks as
  // hold them (every group but the last block's holding a chunk); the split form's workspace kept
  // for its split form.
  p.variant.form = RowForm::cluster;
  p.variant.threads = static_cast<int>(groups * kSplitThreads);
  p.variant.cluster = static_cast<int>((splits + groups - 1) / groups);
  p.grid = static_cast<std::uint32_t>(p.rows * p.variant.cluster);  // at most the split form's grid
  p.block = static_cast<std::uint32_t>(p.variant.threads);
  return call;
}

std::uint32_t row_shared_bytes(const RowVariant& v) noexcept {
  const bool parks = v.dtype == DType::f32 && v.form == RowForm::block && v.threads == 1024 && v.per_thread == 32 &&
                     (v.op == RowOp::softmax || v.op == RowOp::log_softmax || v.op == RowOp::rms_norm) && !fused(v);
  return parks ? static_cast<std::uint32_t>(v.threads * (v.per_thread / 2) * 4) : 0u;
}

std::uint32_t row_shared_bytes(const RowVariant& v, const Arch& target) noexcept {
  // reductions.cuh's rd_arch_parks: where two 64 KiB blocks share a multiprocessor.
  const int a = target.number();
  const bool parks = a == 80 || a == 87 || (a >= 90 && a < 120);
  return parks ? row_shared_bytes(v) : 0u;
}

RowCall split_form(RowCall call) {
  RowPlan& p = call.plan;
  if (p.variant.form != RowForm::cluster) return call;
  p.variant.form = RowForm::split_stats;
  p.variant.threads = kSplitThreads;
  p.variant.cluster = 0;
  p.grid = static_cast<std::uint32_t>(p.rows * ((p.n + call.args.chunk - 1) / call.args.chunk));  // checked
  p.block = kSplitThreads;
  return call;
}

RowCall looped_fallback(RowCall call) {
  RowPlan& p = call.plan;
  p.variant.form = RowForm::looped;
  p.variant.threads = kLoopedThreads;
  p.variant.cluster = 0;
  p.variant.per_thread = p.variant.vector_width;
  p.grid = static_cast<std::uint32_t>(p.rows);  // rows * splits fitted the grid
  p.block = kLoopedThreads;
  p.workspace_bytes = 0;
  p.shared_bytes = 0;
  call.args.chunk = 0;
  return call;
}

}  // namespace cuinline::ops::detail
