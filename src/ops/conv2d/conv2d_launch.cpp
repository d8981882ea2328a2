// conv2d at run time: the family skeleton's launch sequence (ops/family.hpp) over the in-process
// kernels of kernels.hpp, on the variant a call's tensors plan (call_plan.hpp).
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <cuinline/conv2d.hpp>
#include <cuinline/driver.hpp>
#include <cuinline/error.hpp>
#include <cuinline/jit.hpp>
#include <cuinline/module.hpp>
#include <optional>
#include <string>
#include <utility>

#include "common/log.hpp"
#include "driver/driver_api.hpp"
#include "driver/tensor_access.hpp"
#include "driver/workspace.hpp"
#include "ops/conv2d/call_plan.hpp"
#include "ops/conv2d/conv2d_generic_rt.hpp"
#include "ops/conv2d/conv2d_internal.hpp"
#include "ops/conv2d/kernels.hpp"
#include "ops/conv2d/select.hpp"
#include "ops/conv2d/tuning.hpp"
#include "ops/elementwise/plan.hpp"
#include "ops/family.hpp"
#include "ops/specialize.hpp"

namespace cuinline::ops {
namespace {

using conv2d_impl::batched;
using conv2d_impl::Batched;
using conv2d_impl::compact_view;
using conv2d_impl::Conv2dCopies;
using conv2d_impl::ConvMap;
using conv2d_impl::copy_map;
using conv2d_impl::device_target;
using conv2d_impl::direct_map;
using conv2d_impl::kernel_map;
using conv2d_impl::launch_choice;
using conv2d_impl::Launchable;
using conv2d_impl::make_direct_launchable;
using conv2d_impl::make_launchable;
using conv2d_impl::plan_call;
using conv2d_impl::split_map;
using conv2d_impl::submit_conv_specialization;
using conv2d_impl::variant_hash;

// Every conv2d kernel's last argument (ew_common.cuh's cuinline_conv2d_chan): the epilogue's
// per-channel operands, null past those it reads.
struct ChannelArgs {
  const void* p[kMaxConv2dChannelOperands];
};
static_assert(sizeof(ChannelArgs) == 4 * sizeof(void*), "the layout of cuinline_conv2d_chan");

int row_tiles_for(const Conv2dTiling& tiling, const Conv2dVariant& v, std::int64_t n, const Launchable& e) {
  const Conv2dGrid& t = tiling.grid();
  if (t.row_tiles <= 1) return 1;
  const std::int64_t cout_tiles = (v.out_channels + tiling.block_channels() - 1) / tiling.block_channels();
  const std::int64_t per_strip = std::int64_t{t.tiles_x} * cout_tiles * n;  // blocks per row strip
  if (tiling.row_streaming()) {
    // Row streaming: the image's tile rows (steps of tile_rows output rows) are cut into strips, one
    // block each; the fewest (waves x steps a block), a block's start (weights and the first window)
    // counted as 2 steps. For a given number of waves more strips only shorten them, so the
    // candidates are the most strips that fill 1, 2, 3 or 4 waves (past 4 waves more strips only add
    // starts): four evaluations a launch.
    const std::int64_t slots = std::int64_t{e.resident_blocks} * e.multiprocessors;
    int best_rows = t.tiles_y;
    std::int64_t best_cost = -1;
    for (std::int64_t waves = 1; waves <= 4; ++waves) {
      const std::int64_t strips = std::clamp<std::int64_t>(waves * slots / per_strip, 1, t.tiles_y);
      const std::int64_t rows = (t.tiles_y + strips - 1) / strips;
      const std::int64_t blocks = per_strip * ((t.tiles_y + rows - 1) / rows);
      const std::int64_t cost = (blocks + slots - 1) / slots * (rows + 2);
      if (best_cost < 0 || cost < best_cost) {
        best_cost = cost;
        best_rows = static_cast<int>(rows);
      }
    }
    return best_rows;
  }
  if (tiling.winograd()) {
    const int rows = conv2d_impl::conv2d_knobs().winograd_rows;  // (a tuning override)
    if (rows > 0) return std::min(rows, t.row_tiles);
    // A block walks down up to 8 tile rows (its weights transformed once): the most rows that
    // leave at least 24 blocks an SM, else the most that leave 8, else 1. Fewer rows a block keep
    // the output that blocks in flight write together (NCHW: 2 rows of each of their channels a
    // step) closer: the seed with 2 x 4 warps ran 0.3976 ms with 4 rows (4096 blocks) against
    // 0.4170 with 8 and 0.4081 with 2 (library, H100); 1 x 4 warps with a channels-last
    // output kept 8 (4096 blocks): 0.4142-0.4195 against 0.4243 with 4.
    for (const std::int64_t per_sm : {24, 8}) {
      for (int rt : {8, 4, 2}) {
        if (rt > t.row_tiles) continue;
        const std::int64_t blocks = per_strip * ((t.tiles_y + rt - 1) / rt);
        if (blocks >= per_sm * e.multiprocessors) return rt;
      }
    }
    return 1;
  }
  if (tiling.window()) {
    // The window form's blocks compute tiles in turn (each tile's first copies overlap the previous
    // one's stores): the fewest waves x (tiles a block + 1), of 1, 2 and 4 tiles a block (the +1:
    // a block's first copies, which nothing hides).
    const int rows = conv2d_impl::conv2d_knobs().window_rows;  // (a tuning override)
    if (rows > 0) return std::min(rows, t.row_tiles);
    const std::int64_t slots = std::int64_t{e.resident_blocks} * e.multiprocessors;
    int best = 1;
    std::int64_t best_cost = -1;
    for (int rt : {1, 2, 4}) {
      if (rt > t.row_tiles) continue;
      const std::int64_t blocks = cout_tiles * n * ((t.tiles_x + rt - 1) / rt);
      const std::int64_t cost = (blocks + slots - 1) / slots * (rt + 1);
      if (best_cost < 0 || cost < best_cost) {
        best_cost = cost;
        best = rt;
      }
    }
    return best;
  }
  if (tiling.halo()) {
    const int rows = conv2d_impl::conv2d_knobs().halo_rows;  // (a tuning override)
    if (rows > 0) return std::min(rows, t.row_tiles);
    // The halo form stages its weights once a block: the most tiles a block (4 for a channels-last
    // output; for an NCHW one 2, or 4 from 4 TB/s of DRAM bandwidth) that leave at least 3 waves of
    // its resident blocks (a short tail). Fewer tiles a block keep the rows that blocks in flight
    // write closer together: f16 seed, L2 flushed, NCHW output, on an H100 (3.35 TB/s)
    // 0.1685-0.1689 ms with 2 tiles a block against 0.1740-0.1745 with 4, 0.1883-0.1891 with 8 and
    // 0.2027 with 1; on an H200 (4.8 TB/s) 0.1486 with 4 against 0.1638-0.1648 with 2 and
    // 0.1511 with 8. Channels-last on the H100: 0.1106-0.1108 with 4 against 0.1141-0.1148 with 2 and
    // 0.1153-0.1155 with 8 (H200: 0.1036-0.1040 with 4, 0.1033 with 8).
    const int most = v.output_layout == Conv2dLayout::nhwc || e.memory_bandwidth >= 4e12 ? 4 : 2;
    const std::int64_t slots = std::int64_t{e.resident_blocks} * e.multiprocessors;
    for (int rt : {8, 4, 2}) {
      if (rt > t.row_tiles || rt > most) continue;
      const std::int64_t blocks = per_strip * ((t.tiles_y + rt - 1) / rt);
      if (blocks >= 3 * slots) return rt;
    }
    return 1;
  }
  // Keep at least ~4 blocks per resident slot (2 per SM) so the tail stays short.
  for (int rt : {4, 2}) {
    const std::int64_t blocks = per_strip * ((t.tiles_y + rt - 1) / rt);
    if (blocks >= std::int64_t{8} * e.multiprocessors) return rt;
  }
  return 1;
}

// The TMA form's tensor maps (conv2d_hmma.cuh's cuinline_conv2d_hmma_tma): the channels-last input
// of `n` images as {C, W, H, N} with a box of {kBK, box columns, box rows, 1} — one tile's pixels:
// whole output rows, or a part of one — or (tma_im2col) as an im2col map of kBK channels a pixel and
// a tile's pixels a copy, the convolution's strides its element strides and its bounding box that of
// filter tap (0, 0)'s input positions: from (-pad) to (pad - (k - 1) dilation) past the far edge, W
// first; and the channels-last weight as {KH KW C, Cout} with a box of {kBK, the block's channels};
// 16-bit elements, the 128-byte swizzle of the cp.async form's tiles, zeros outside the tensors.
// Encoded on the host (no device work, so capturable) for each launch.
std::array<CUtensorMap, 2> tma_maps(const HmmaTiling& t, const Conv2dVariant& v, std::int64_t n, const void* in,
                                    const void* w) {
  const auto& d = cuinline::detail::driver();
  const CUtensorMapDataType type =
      v.dtype == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  // (The figures, and the driver's limits on them, are conv2d_impl::tma_map_shapes's: host-tested.)
  const conv2d_impl::TmaMapShapes s = conv2d_impl::tma_map_shapes(t, v, n);
  const auto u64 = [](const std::uint64_t* x, int count) {
    std::array<cuuint64_t, 4> r{};
    for (int i = 0; i < count; ++i) r[static_cast<std::size_t>(i)] = static_cast<cuuint64_t>(x[i]);
    return r;
  };
  const auto u32 = [](const std::uint32_t* x, int count) {
    std::array<cuuint32_t, 4> r{};
    for (int i = 0; i < count; ++i) r[static_cast<std::size_t>(i)] = static_cast<cuuint32_t>(x[i]);
    return r;
  };
  const std::array<cuuint32_t, 4> unit = {1, 1, 1, 1};
  std::array<CUtensorMap, 2> maps{};
  const std::array<cuuint64_t, 4> in_dims = u64(s.in_dims, 4), in_strides = u64(s.in_strides, 3);
  if (s.im2col) {
    const std::array<cuuint32_t, 4> strides = u32(s.element_strides, 4);
    check_driver(
        d.cuTensorMapEncodeIm2col(&maps[0], type, 4, const_cast<void*>(in), in_dims.data(), in_strides.data(),
                                  s.lower, s.upper, s.channels_per_pixel, s.pixels_per_column, strides.data(),
                                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
        "encoding the conv2d input's im2col tensor map");
  } else {
    const std::array<cuuint32_t, 4> in_box = u32(s.in_box, 4);
    check_driver(d.cuTensorMapEncodeTiled(
                     &maps[0], type, 4, const_cast<void*>(in), in_dims.data(), in_strides.data(),
                     in_box.data(), unit.data(), CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                     CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
                 "encoding the conv2d input's tensor map");
  }
  const std::array<cuuint64_t, 4> w_dims = u64(s.w_dims, 2), w_strides = u64(s.w_strides, 1);
  const std::array<cuuint32_t, 4> w_box = u32(s.w_box, 2);
  check_driver(d.cuTensorMapEncodeTiled(
                   &maps[1], type, 2, const_cast<void*>(w), w_dims.data(), w_strides.data(), w_box.data(),
                   unit.data(), CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                   CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
               "encoding the conv2d weight's tensor map");
  return maps;
}

// The split form's launch (e.tiling.split()): the slices the launch chose (e.slices,
// launch_choice), a workspace of the partial tiles and the tiles' arrival counters, the counters
// zeroed on the stream (a memset node under capture, so every replay starts from zero; the last
// block of a tile also resets its counter), the grid's z axis images x slices. No workspace to be
// had (out of memory): the same kernel runs its tiles whole.
void launch_split(const Launchable& e, const Conv2dVariant& v, std::int64_t n, const void* in, const void* w,
                  const void* b, void* out, const void* res, const ChannelArgs& chan, CUstream stream,
                  int device) {
  const HmmaTiling& t = e.tiling.as_hmma();
  const std::int64_t channel_blocks = (v.out_channels + t.block_channels() - 1) / t.block_channels();
  const std::int64_t tiles = conv2d_impl::split_k_tiles(t, v.out_channels, n);
  int slices = e.slices;
  CUdeviceptr ws = 0;
  conv2d_impl::SplitKWorkspace parts;
  if (slices > 1) {
    parts = conv2d_impl::split_k_workspace(t, tiles, slices);
    ws = cuinline::detail::workspace_alloc(
        device, static_cast<std::size_t>(parts.partial_bytes + parts.counter_bytes), stream);
    if (ws == 0) slices = 1;
  }
  cuinline::detail::WorkspaceGuard guard(ws, stream);  // freed after the launch (or a throw)
  float* partials = slices > 1 ? reinterpret_cast<float*>(ws) : nullptr;
  unsigned* counters =
      slices > 1 ? reinterpret_cast<unsigned*>(ws + static_cast<CUdeviceptr>(parts.partial_bytes)) : nullptr;
  if (slices > 1) {
    check_driver(cuinline::detail::driver().cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(counters), 0,
                                                             static_cast<std::size_t>(tiles), stream),
                 "zeroing the split-K counters");
  }
  LaunchConfig cfg;
  cfg.grid = Dim3(static_cast<unsigned>(t.tiles_x), static_cast<unsigned>(channel_blocks),
                  static_cast<unsigned>(n * slices));
  cfg.block = Dim3(static_cast<unsigned>(t.block_threads()));
  cfg.shared_bytes = t.shared_bytes;
  cfg.stream = stream;
  if (t.tma()) {
    const std::array<CUtensorMap, 2> maps = tma_maps(t, v, n, in, w);
    e.kernel.launch(cfg, maps[0], maps[1], b, out, slices, res, chan, partials, counters);
    return;
  }
  e.kernel.launch(cfg, in, w, b, out, slices, res, chan, partials, counters);
}

// The conv kernel of `e` on the given tensors (device pointers of the variant's dtype; a staged
// call passes its copies).
void launch_conv(const Launchable& e, const Conv2dVariant& v, std::int64_t n, const void* in, const void* w,
                 const void* b, void* out, const void* res, const ChannelArgs& chan, CUstream stream, int device) {
  const Conv2dTiling& t = e.tiling;
  if (t.split()) {
    launch_split(e, v, n, in, w, b, out, res, chan, stream, device);
    return;
  }
  const Conv2dGrid& g = t.grid();
  // (Batch tiles: the kernel's row_tiles is the number of images; one block row spans the batch.)
  const int row_tiles = t.batch_tiles() ? static_cast<int>(n) : row_tiles_for(t, v, n, e);
  const std::int64_t batch_blocks =
      t.batch_tiles()
          ? (n * v.out_height() * v.out_width() + t.as_hmma().tile_cols - 1) / t.as_hmma().tile_cols
          : 0;
  LaunchConfig cfg;
  // (The window form's tiles in turn run along x: tiles_y is 1.)
  const std::int64_t blocks_x = t.batch_tiles() ? batch_blocks
                                : t.window() && g.row_tiles > 1
                                    ? (g.tiles_x + row_tiles - 1) / row_tiles
                                    : g.tiles_x * ((g.tiles_y + row_tiles - 1) / row_tiles);
  cfg.grid = Dim3(static_cast<unsigned>(blocks_x),
                  static_cast<unsigned>(t.channel_fast() || t.row_fast() || t.pointwise() ? 1 : (v.out_channels + t.block_channels() - 1) / t.block_channels()),
                  static_cast<unsigned>(t.batch_tiles() ? 1 : n));
  cfg.block = Dim3(static_cast<unsigned>(t.block_threads()));
  cfg.shared_bytes = g.shared_bytes;
  cfg.stream = stream;
  if (t.tma()) {
    const std::array<CUtensorMap, 2> maps = tma_maps(t.as_hmma(), v, n, in, w);
    e.kernel.launch(cfg, maps[0], maps[1], b, out, row_tiles, res, chan);
    return;
  }
  e.kernel.launch(cfg, in, w, b, out, row_tiles, res, chan);
}

// A workspace part's bytes: rounded up to 256, so that every part starts aligned.
std::int64_t round256(std::int64_t bytes) {
  return (bytes + 255) / 256 * 256;
}

// A staged call (e.tiling.staged()): a workspace on the stream, the staging copy into it,
// the conv of the copies, the workspace freed after them (all stream-ordered: capturable). False,
// with nothing launched, where no workspace can be had.
bool launch_staged(const Launchable& e, const Conv2dVariant& v, std::int64_t n, const TensorView& input,
                   const TensorView& weight, const TensorView& bias, const TensorView& output,
                   const TensorView& residual, const ChannelArgs& chan, CUstream stream, int device) {
  const HmmaTiling& t = e.tiling.as_hmma();
  const std::int64_t pixels = std::int64_t{v.height} * v.width;
  const std::int64_t taps = std::int64_t{v.kernel_h} * v.kernel_w;
  const std::int64_t elem = t.tf32_wgmma() ? 4 : 2;  // (f32 copies for TF32, else 16-bit ones)
  const std::int64_t in_bytes = t.stage_input ? round256(n * pixels * t.stage_channels * elem) : 0;
  const std::int64_t w_bytes = t.stage_weight ? round256(std::int64_t{v.out_channels} * taps * t.stage_channels * elem) : 0;
  const int cp = t.stage_channels;
  const std::int64_t blocks = (t.stage_input ? n * conv2d_impl::hmma_stage_tiles(cp, pixels) : 0) +
                              (t.stage_weight ? v.out_channels * conv2d_impl::hmma_stage_tiles(cp, taps) : 0);
  if (blocks > 0x7fffffff) return false;  // past a grid's x extent
  const CUdeviceptr ws = cuinline::detail::workspace_alloc(device, static_cast<std::size_t>(in_bytes + w_bytes), stream);
  if (ws == 0) return false;
  cuinline::detail::WorkspaceGuard guard(ws, stream);  // freed after the launches (or a throw)
  void* in_ws = t.stage_input ? reinterpret_cast<void*>(ws) : nullptr;
  void* w_ws = t.stage_weight ? reinterpret_cast<void*>(ws + static_cast<CUdeviceptr>(in_bytes)) : nullptr;
  // The copy's shapes are its arguments (one kernel for every staged variant); a tensor not staged
  // has no blocks.
  const bool in_nhwc = v.input_layout == Conv2dLayout::nhwc, w_nhwc = v.weight_layout == Conv2dLayout::nhwc;
  conv2d_impl::StageTensor in_args, w_args;
  if (t.stage_input) {
    in_args = conv2d_impl::hmma_stage_tensor(input.data, in_ws, n, v.in_channels, pixels, in_nhwc, cp);
  }
  if (t.stage_weight) {
    w_args =
        conv2d_impl::hmma_stage_tensor(weight.data, w_ws, v.out_channels, v.in_channels, taps, w_nhwc, cp);
  }
  LaunchConfig cfg;
  cfg.grid = Dim3(static_cast<unsigned>(blocks));
  cfg.block = Dim3(256);
  cfg.stream = stream;
  e.stage.launch(cfg, in_args, w_args, cp, conv2d_impl::hmma_stage_tile_channels(cp));
  // The conv runs on the copies as the variant it was compiled for (make_hmma_request): their
  // channels are stage_channels (Cin rounded up to 8), which the TMA form's tensor maps describe.
  launch_conv(e, conv2d_impl::launched_variant(e.tiling, v), n, t.stage_input ? in_ws : input.data,
              t.stage_weight ? w_ws : weight.data, bias.data, output.data, residual.data, chan, stream,
              device);
  return true;
}

// A transposing call (e.tiling.transposes(): f32 with channels-last tensors): a workspace on the
// stream; the channels-last input and weight copied to NCHW in it; where the output is copied
// (transpose.output: every kernel but Winograd's) the channels-last residual too, and the kernel
// writes NCHW scratch that is then copied into the output; the workspace freed after them (all
// stream-ordered: capturable). False, with nothing launched, where no workspace can be had or a
// copy's grid is too large.
bool launch_transposed(const Launchable& e, const Conv2dVariant& v, std::int64_t n, const TensorView& input,
                       const TensorView& weight, const TensorView& bias, const TensorView& output,
                       const TensorView& residual, const ChannelArgs& chan, CUstream stream, int device) {
  const Conv2dTransposes& t = e.tiling.transpose;
  const std::int64_t pixels = std::int64_t{v.height} * v.width;
  const std::int64_t taps = std::int64_t{v.kernel_h} * v.kernel_w;
  const std::int64_t out_pixels = v.out_height() * v.out_width();
  const bool res = t.output && v.has_residual;
  const std::int64_t in_bytes = t.input ? round256(n * pixels * v.in_channels * 4) : 0;
  const std::int64_t w_bytes =
      t.weight ? round256(std::int64_t{v.out_channels} * taps * v.in_channels * 4) : 0;
  const std::int64_t out_bytes = t.output ? round256(n * out_pixels * v.out_channels * 4) : 0;
  const std::int64_t res_bytes = res ? out_bytes : 0;
  const auto grid_ok = [](std::int64_t rows, std::int64_t cols) {
    return conv2d_impl::transpose_grid(rows, cols).blocks <= 0x7fffffff;
  };
  if ((t.input && !grid_ok(pixels, v.in_channels)) || (t.weight && !grid_ok(taps, v.in_channels)) ||
      (t.output && (!grid_ok(v.out_channels, out_pixels) || !grid_ok(out_pixels, v.out_channels)))) {
    return false;
  }
  const CUdeviceptr ws = cuinline::detail::workspace_alloc(
      device, static_cast<std::size_t>(in_bytes + w_bytes + out_bytes + res_bytes), stream);
  if (ws == 0) return false;
  cuinline::detail::WorkspaceGuard guard(ws, stream);  // freed after the launches (or a throw)
  const auto at = [&](std::int64_t offset) { return reinterpret_cast<void*>(ws + static_cast<CUdeviceptr>(offset)); };
  void* in_ws = t.input ? at(0) : nullptr;
  void* w_ws = t.weight ? at(in_bytes) : nullptr;
  void* out_ws = t.output ? at(in_bytes + w_bytes) : nullptr;
  void* res_ws = res ? at(in_bytes + w_bytes + out_bytes) : nullptr;
  // batch x [rows][cols] at src -> batch x [cols][rows] at dst.
  const auto copy = [&](const void* src, void* dst, std::int64_t batch, long long rows, long long cols) {
    const conv2d_impl::TransposeGrid g = conv2d_impl::transpose_grid(rows, cols);
    LaunchConfig cfg;
    cfg.grid = Dim3(static_cast<unsigned>(g.blocks), static_cast<unsigned>(batch));
    cfg.block = Dim3(256);
    cfg.stream = stream;
    const unsigned col_tiles = g.col_tiles;
    const int lc = g.lc, lt = g.lt;
    e.stage.launch(cfg, src, dst, rows, cols, col_tiles, lc, lt);
  };
  // Channels-last [N][H*W][C] -> [N][C][H*W]; the weight [Cout][KH*KW][Cin] -> [Cout][Cin][KH*KW].
  if (t.input) copy(input.data, in_ws, n, pixels, v.in_channels);
  if (t.weight) copy(weight.data, w_ws, v.out_channels, taps, v.in_channels);
  if (res) copy(residual.data, res_ws, n, out_pixels, v.out_channels);
  launch_conv(e, v, n, t.input ? in_ws : input.data, t.weight ? w_ws : weight.data, bias.data,
              t.output ? out_ws : output.data, res ? res_ws : residual.data, chan, stream, device);
  // NCHW [N][Cout][OH*OW] -> the channels-last output [N][OH*OW][Cout].
  if (t.output) copy(out_ws, output.data, n, v.out_channels, out_pixels);
  return true;
}

// The conv's launches on the tensors the kernels read and write: the plain launch, a staged or
// transposing one, or (where those get no workspace) the variant's direct kernel.
void run_conv(const Launchable& e, const Conv2dVariant& v, std::int64_t n, const TensorView& input,
              const TensorView& weight, const TensorView& bias, const TensorView& output,
              const TensorView& residual, const ChannelArgs& chan, CUstream stream, int device, std::uint64_t hash) {
  if (!e.tiling.staged() && !e.tiling.transposes()) {
    launch_conv(e, v, n, input.data, weight.data, bias.data, output.data, residual.data, chan, stream, device);
    return;
  }
  if (e.tiling.staged()
          ? launch_staged(e, v, n, input, weight, bias, output, residual, chan, stream, device)
          : launch_transposed(e, v, n, input, weight, bias, output, residual, chan, stream, device)) {
    return;
  }
  const Launchable direct = direct_map().find_or_make(
      hash, device, [&](const Conv2dVariant& d) { return d == v; }, [&] { return make_direct_launchable(v, device); });
  launch_conv(direct, v, n, input.data, weight.data, bias.data, output.data, residual.data, chan, stream, device);
}

}  // namespace

Conv2dVariant conv2d_variant_for_device(const Conv2dVariant& variant, int device) {
  Conv2dVariant p = variant;
  p.target = device_target(device);
  return p;
}

void conv2d(const TensorView& input, const TensorView& weight, const TensorView& bias,
            const TensorView& output, const Conv2dParams& params, const Op& epilogue, CUstream stream,
            Conv2dPrecision precision, const TensorView& residual, const std::vector<TensorView>& channel_operands) {
  if (input.ndim == 3) {
    const Batched b = batched(input, output, residual);
    conv2d(b.input, weight, bias, b.output, params, epilogue, stream, precision, b.residual, channel_operands);
    return;
  }
  Conv2dCopies copies;
  const Conv2dVariant v =
      plan_call(input, weight, bias, output, params, epilogue, precision, residual, channel_operands, copies);
  const std::int64_t n = input.shape[0];
  if (n == 0) return;
  // The kernels' grids hold up to 65535 images: a larger batch runs as consecutive calls on its
  // slices, each a multiple of 128 images from the start (so every slice's pointers keep the
  // alignment the variant was planned for), in stream order.
  if (n > kMaxConv2dBatch) {
    constexpr std::int64_t kSlice = kMaxConv2dBatch / 128 * 128;
    const auto slice = [](const TensorView& t, std::int64_t first, std::int64_t count) {
      TensorView s = t;
      s.data = static_cast<char*>(t.data) + first * t.strides[0] * static_cast<std::int64_t>(dtype_size(t.dtype));
      s.shape[0] = count;
      return s;
    };
    for (std::int64_t first = 0; first < n; first += kSlice) {
      const std::int64_t count = std::min(kSlice, n - first);
      conv2d(slice(input, first, count), weight, bias, slice(output, first, count), params, epilogue, stream,
             precision, v.has_residual ? slice(residual, first, count) : residual, channel_operands);
    }
    return;
  }
  // Piece 4 (ops/family.hpp): device, tensor checks, map lookup, launch.
  detail::TensorUses tensors{{&input, "conv2d: input"}, {&weight, "conv2d: weight"}, {&output, "conv2d: output"}};
  if (bias.data != nullptr) tensors.add(bias, "conv2d: bias");
  if (v.has_residual) tensors.add(residual, "conv2d: residual");
  static const char* const kOperandNames[kMaxConv2dChannelOperands] = {
      "conv2d: channel operand 1", "conv2d: channel operand 2", "conv2d: channel operand 3",
      "conv2d: channel operand 4"};
  for (std::size_t k = 0; k < channel_operands.size(); ++k) tensors.add(channel_operands[k], kOperandNames[k]);
  const std::uint64_t hash = variant_hash(v);
  const auto equal = [&](const Conv2dVariant& e) { return e == v; };
  // The conv on the tensors the kernels read and write: run(input, weight, bias, output, residual,
  // chan) with the caller's tensors, or with compact copies in one stream-ordered workspace (freed
  // after the conv's launches) — made before the conv by the N-ary elementwise kernel's strided path
  // (bit for bit), the output copied out after it.
  const auto with_tensors = [&](int device, auto&& run) {
    if (!copies.any()) {  // the common call: the caller's tensors as they are
      ChannelArgs chan{};
      for (std::size_t k = 0; k < channel_operands.size(); ++k) chan.p[k] = channel_operands[k].data;
      run(input, weight, bias, output, residual, chan);
      return;
    }
    TensorView in_k = input, w_k = weight, b_k = bias, out_k = output, res_k = residual;
    std::vector<TensorView> ops_k;  // (only where an operand is copied: no allocation otherwise)
    CUdeviceptr ws = 0;
    {
      std::int64_t bytes = 0;
      const auto place = [&](bool copied, TensorView& view, const TensorView& like, Conv2dLayout layout) {
        if (!copied) return;
        view = compact_view(like, layout);
        view.data = reinterpret_cast<void*>(static_cast<std::uintptr_t>(bytes));  // an offset until ws
        bytes += round256(static_cast<std::int64_t>(like.nbytes()));
      };
      place(copies.input, in_k, input, v.input_layout);
      place(copies.weight, w_k, weight, v.weight_layout);
      place(copies.bias, b_k, bias, Conv2dLayout::nchw);
      place(copies.output, out_k, output, v.output_layout);
      place(copies.residual, res_k, output, v.output_layout);
      if (copies.operands != 0) {
        ops_k = channel_operands;
        for (std::size_t k = 0; k < ops_k.size(); ++k) {
          place((copies.operands >> k) & 1u, ops_k[k], channel_operands[k], Conv2dLayout::nchw);
        }
      }
      ws = cuinline::detail::workspace_alloc(device, static_cast<std::size_t>(bytes), stream);
      if (ws == 0) {
        throw DriverError(CUDA_ERROR_OUT_OF_MEMORY,
                          "conv2d: no workspace could be had on device " + std::to_string(device) +
                              " for copies of " + std::to_string(bytes) +
                              " bytes (tensors whose strides the kernels do not take, or a residual not in "
                              "the output's layout); nothing was launched. Pass contiguous or channels-last "
                              "tensors laid out as the output");
      }
      const auto rebase = [ws](bool copied, TensorView& view) {
        if (copied) view.data = reinterpret_cast<void*>(ws + reinterpret_cast<std::uintptr_t>(view.data));
      };
      rebase(copies.input, in_k);
      rebase(copies.weight, w_k);
      rebase(copies.bias, b_k);
      rebase(copies.output, out_k);
      rebase(copies.residual, res_k);
      for (std::size_t k = 0; k < ops_k.size(); ++k) rebase((copies.operands >> k) & 1u, ops_k[k]);
    }
    cuinline::detail::WorkspaceGuard guard(ws, stream);
    static const Op copy = Op::expr("x");
    if (copies.input) detail::apply_into_workspace(copy, input, in_k, stream);
    if (copies.weight) detail::apply_into_workspace(copy, weight, w_k, stream);
    if (copies.bias) detail::apply_into_workspace(copy, bias, b_k, stream);
    if (copies.residual) detail::apply_into_workspace(copy, residual, res_k, stream);
    ChannelArgs chan{};
    for (std::size_t k = 0; k < channel_operands.size(); ++k) {
      if ((copies.operands >> k) & 1u) detail::apply_into_workspace(copy, channel_operands[k], ops_k[k], stream);
      chan.p[k] = (copies.operands >> k) & 1u ? ops_k[k].data : channel_operands[k].data;
    }
    run(in_k, w_k, b_k, out_k, res_k, chan);
    // (A copy of the output reads the workspace: an unchecked input, the caller's output checked.)
    if (copies.output) detail::apply_from_workspace(copy, out_k, output, stream);
  };
  // Piece 4 with the JIT policy (include/cuinline/jit.hpp), as the elementwise launch: a variant
  // whose specialized kernel is not in the map runs on the generic conv2d kernel where it applies —
  // at once, while the specialized kernel (and the staging or transposing copy it needs) compiles
  // on the background pool (async), or for good (generic); otherwise, and under sync or a capture,
  // the call loads or compiles it first.
  const int device = detail::launch_device(stream, tensors);
  Launchable e;
  const auto state = kernel_map().find(hash, device, equal, &e);
  if (state != ConvMap::State::ready && conv2d_impl::generic_conv_applies(v)) {
    const JitPolicy policy = detail::effective_policy(stream);
    if (policy == JitPolicy::async && !state) submit_conv_specialization(v, hash, device);
    if (policy != JitPolicy::sync) {
      kernel_map().count_launch();
      with_tensors(device, [&](const TensorView& in_k, const TensorView& w_k, const TensorView& b_k,
                               const TensorView& out_k, const TensorView& res_k, const ChannelArgs& chan) {
        conv2d_impl::launch_generic_conv(v, n, in_k.data, w_k.data, b_k.data, out_k.data,
                                         v.has_residual ? res_k.data : nullptr, chan.p, stream, device);
      });
      return;
    }
  }
  bool waited = state != ConvMap::State::ready;
  if (waited) e = kernel_map().find_or_make(hash, device, equal, [&] { return make_launchable(v, device); });
  // The plain kernel, or its variant's split-K form where this launch's tiles are few.
  const Launchable chosen = launch_choice(e, v, n, hash, device, stream, waited);
  if (waited) detail::count_sync_wait();
  kernel_map().count_launch();
  with_tensors(device, [&](const TensorView& in_k, const TensorView& w_k, const TensorView& b_k,
                           const TensorView& out_k, const TensorView& res_k, const ChannelArgs& chan) {
    run_conv(chosen, v, n, in_k, w_k, b_k, out_k, res_k, chan, stream, device, hash);
  });
}

void conv2d_div_leaky_relu(const TensorView& input, const TensorView& weight, const TensorView& bias,
                           const TensorView& output, const Conv2dParams& params, double divisor, double slope,
                           CUstream stream, Conv2dPrecision precision) {
  conv2d(input, weight, bias, output, params, div_leaky_relu_epilogue(divisor, slope), stream, precision);
}

Conv2dStats conv2d_stats() {
  // Launches and map hits are the calls' (one a call); the lookups count every module a call
  // fetched from the KernelCache: the conv's, a no-workspace call's direct kernel, the copies.
  Conv2dStats s = kernel_map().counts();
  s.cache_lookups += direct_map().counts().cache_lookups + copy_map().counts().cache_lookups +
                     split_map().counts().cache_lookups;
  return s;
}

void clear_conv2d_kernel_map() {
  kernel_map().clear();
  split_map().clear();
  direct_map().clear();
  copy_map().clear();
}

}  // namespace cuinline::ops
