// The conv2d planners' tuning as two tables: the tuned figures a target (each with its provenance),
// and the CUINLINE_CONV2D_* knobs (each entry's variable, meaning, accepted values and default, and
// how its value is parsed; every default says where it comes from).
#include "ops/conv2d/tuning.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iterator>
#include <string>

#include "common/log.hpp"

namespace cuinline::ops::conv2d_impl {
namespace {

constexpr std::int64_t kKiB = 1024;
// The shared-memory budgets of a block on each target: the tuned budget, or the target's limit
// where that is less (sm90 227 KiB, sm80 163, sm86 99, sm75 64: conv2d_max_shared_bytes).
constexpr std::int64_t kSm86Limit = 99 * kKiB, kSm75Limit = 64 * kKiB;

// Provenance: "H100" / "H200" runs are the tuning runs whose figures docs/conv2d.md gives; targets
// other than sm90 take sm90's figures, capped by their limits, unless a row says otherwise.
const Conv2dTuningInfo kTuning[] = {
    {"direct_max_threads", &Conv2dTuning::direct_max_threads, {256, 256, 256, 256},
     "f32 direct kernel: 256-thread thread sets (a set is split further by k_split up to 8 sets, same bound)"},
    {"direct_single_stage_bytes", &Conv2dTuning::direct_single_stage_bytes, {48 * kKiB, 48 * kKiB, 48 * kKiB, 48 * kKiB},
     "a single stage stays under the 48 KiB that needs no opt-in"},
    {"direct_pipelined_bytes", &Conv2dTuning::direct_pipelined_bytes, {100 * kKiB, 100 * kKiB, kSm86Limit, kSm75Limit},
     "double-buffered: two blocks still fit an H100 / H200 multiprocessor"},
    {"direct_pipelined_bytes7", &Conv2dTuning::direct_pipelined_bytes7, {75 * kKiB, 75 * kKiB, 75 * kKiB, kSm75Limit},
     "7-pixel tiles (128-thread blocks, 3 or 4 resident): a third of a multiprocessor"},
    {"direct_macs7", &Conv2dTuning::direct_macs7, {100000000, 100000000, 100000000, 100000000},
     "7-pixel tiles level on 58 M-MAC images, 11-18 % faster on 115-640 M ones (harness, H200)"},
    {"direct_unroll_budget", &Conv2dTuning::direct_unroll_budget, {576, 576, 576, 576},
     "bounds code size and NVRTC time, long enough a body to hide shared-memory latency"},
    {"mma_pipelined_bytes", &Conv2dTuning::mma_pipelined_bytes, {100 * kKiB, 100 * kKiB, kSm86Limit, kSm75Limit},
     "TF32 mma.sync: two blocks still fit an H100 / H200 multiprocessor"},
    {"mma_unroll_taps", &Conv2dTuning::mma_unroll_taps, {4, 4, 4, 4},
     "rolling cost the 3 x 3 seed 11-15 % and saved 7 x 7 filters 4-12 % (H200); 7 x 7 stem NVRTC 0.59 -> 0.20 s"},
    {"mma_unrolled_mma", &Conv2dTuning::mma_unrolled_mma, {144, 144, 144, 144},
     "3xTF32's 3 x 3 block tile (3 taps x 48 mma); wider 3xTF32 bodies spilled 36-92 bytes"},
    {"wgmma_stage_budget", &Conv2dTuning::wgmma_stage_budget, {100 * kKiB, 100 * kKiB, kSm86Limit, kSm75Limit},
     "two wgmma blocks a multiprocessor; more buffers lost everywhere (H200, f16, the three reference shapes)"},
    {"window_row_tiles", &Conv2dTuning::window_row_tiles, {4, 4, 4, 4},
     "the launch picks 1, 2 or 4 tiles a window-form block (docs/conv2d.md, window form)"},
    {"halo_row_tiles", &Conv2dTuning::halo_row_tiles, {8, 8, 8, 8},
     "the launch picks up to 8 tiles a halo-form block, its weights staged once"},
    {"large_filter_taps", &Conv2dTuning::large_filter_taps, {16, 16, 16, 16},
     "5 x 9 filters 1.13-1.24 ms on two m64 tiles against 1.43-1.51 on one; 3 x 3 kept one (H100)"},
    {"two_tile_min_steps", &Conv2dTuning::two_tile_min_steps, {16, 16, 16, 16},
     "3 x 3 128 -> 64 on 256^2 (18 steps), f16: 0.2311 -> 0.1945 ms at batch 8, 0.890 -> 0.713 at 32 (H200); 9 steps kept one"},
    {"small_plane_pixels", &Conv2dTuning::small_plane_pixels, {128, 128, 128, 128},
     "3 x 3 512 on 7^2-11^2: 0.036 ms on m64 tiles against 0.070-0.073 on batch tiles; 12^2 slower at batch 32 (H200)"},
    {"mid_plane_min_pixels", &Conv2dTuning::mid_plane_min_pixels, {14 * 14, 14 * 14, 14 * 14, 14 * 14},
     "ResNet-50's 14^2 layers: m64 tiles 0.5-0.7x the 256-pixel tiles' time at batches 1 and 8 (H200)"},
    {"mid_plane_max_pixels", &Conv2dTuning::mid_plane_max_pixels, {28 * 28, 28 * 28, 28 * 28, 28 * 28},
     "ResNet-50's 28^2 layers won there too; 3 x 3 64 on 56^2 lost at batch 32, 0.0342 -> 0.0546 (H200)"},
    {"mid_plane_min_steps", &Conv2dTuning::mid_plane_min_steps, {8, 8, 8, 8},
     "1 x 1 256 -> 1024 + residual on 14^2 (4 steps): 0.0257 -> 0.0291 ms at batch 32 on m64 tiles (H200)"},
    {"mid_plane_max_steps", &Conv2dTuning::mid_plane_max_steps, {36, 36, 36, 36},
     "ResNet-50's 14^2-28^2 layers of 8-36 steps won on m64 tiles at batches 1 and 8; UNet's 72-144 lost at 32 (H200)"},
    {"tma_m64_max_steps", &Conv2dTuning::tma_m64_max_steps, {72, 72, 72, 72},
     "3 x 3 512 on 12^2 (72 steps) in the TMA form: batch 1 0.0181 -> 0.015 ms, batch 8 0.030 -> 0.026 (H200)"},
    {"tma_split_min_steps", &Conv2dTuning::tma_split_min_steps, {16, 16, 16, 16},
     "1 x 1 over 512 channels (8 steps) ran 15-18 % slower at batch 8 on m64 TMA tiles than on cp.async (H200)"},
    {"pointwise_two_group_steps", &Conv2dTuning::pointwise_two_group_steps, {4, 4, 4, 4},
     "1 x 1 256 -> 128 on 56^2 at batch 32: 0.0381 -> 0.033 ms; layers of 1-2 steps lost there (H200)"},
    {"stage_min_elements", &Conv2dTuning::stage_min_elements, {32768, 32768, 32768, 32768},
     "below, the staging copy's extra launch cost more than the cp.async main loop saved (CUINLINE_CONV2D_STAGE)"},
    {"tf32_wgmma_min_channels", &Conv2dTuning::tf32_wgmma_min_channels, {16, 16, 16, 16},
     "fewer channels: mma.sync row streaming keeps their rows in shared memory"},
    {"tf32_wgmma_min_work", &Conv2dTuning::tf32_wgmma_min_work, {512, 512, 512, 512},
     "products a staged value feeds from which the staging copy repays (the H100 sweep: one loss of the rule)"},
    {"winograd_max_weight_bytes", &Conv2dTuning::winograd_max_weight_bytes, {80 * kKiB, 80 * kKiB, 80 * kKiB, 80 * kKiB},
     "a block's transformed weights (a^2 floats an input and output channel) stay in shared memory"},
    {"transpose_min_macs", &Conv2dTuning::transpose_min_macs,
     {std::int64_t{1} << 22, std::int64_t{1} << 22, std::int64_t{1} << 22, std::int64_t{1} << 22},
     "from here the transposing copies' few launches cost less than the general kernel's time (CUINLINE_CONV2D_TRANSPOSE)"},
};

int target_index(Conv2dTarget target) noexcept {
  switch (target) {
    case Conv2dTarget::sm80:
      return 1;
    case Conv2dTarget::sm86:
      return 2;
    case Conv2dTarget::sm75:
      return 3;
    case Conv2dTarget::sm90:
      break;
  }
  return 0;
}

struct Knob {
  Conv2dKnobInfo info;
  /// Applies a set variable's value (never null) to the knobs; a value the knob does not accept
  /// leaves (or gives) its default.
  void (*apply)(Conv2dKnobs& k, const char* value);
};

bool is(const char* value, const char* text) {
  return std::strcmp(value, text) == 0;
}
// "0" switches a form off; anything else keeps it.
bool on_unless_zero(const char* value) {
  return !is(value, "0");
}
// "0" never, "1" always, anything else the default rule (2).
int never_always_rule(const char* value) {
  return is(value, "0") ? 0 : is(value, "1") ? 1 : 2;
}
// Tiles a block computes in turn: 1, 2, 4 or 8 (atoi, as the launch has always read them); 0 (the
// launch's rule) for anything else.
int tile_rows(const char* value) {
  const int r = std::atoi(value);
  return r == 1 || r == 2 || r == 4 || r == 8 ? r : 0;
}

const std::vector<Knob>& knobs() {
  static const std::vector<Knob> table = {
      // Default on: f16 / bf16 on tensor cores is the library's fast path; 0 is for comparing with the
      // general direct kernel.
      {{"CUINLINE_CONV2D_HMMA", "0: f16 / bf16 on the general direct kernel instead of tensor cores", "0",
        "tensor cores"},
       [](Conv2dKnobs& k, const char* e) { k.hmma = on_unless_zero(e); }},
      // Default on: wgmma is what sm_90 runs fastest (docs/conv2d.md, "wgmma on sm_90a").
      {{"CUINLINE_CONV2D_WGMMA", "0: the mma.sync tilings on sm90 instead of the wgmma kernel (tf32 too)",
        "0", "wgmma on sm90"},
       [](Conv2dKnobs& k, const char* e) { k.wgmma = on_unless_zero(e); }},
      // Default on: the halo form is the wgmma tiling of up to 8 input channels (the seed's NCHW RGB
      // layers) without a staging copy.
      {{"CUINLINE_CONV2D_HALO", "0: up to 8 input channels off the wgmma tiling's halo form (staged instead)",
        "0", "halo form"},
       [](Conv2dKnobs& k, const char* e) { k.halo = on_unless_zero(e); }},
      // Default: the launch's rule (3 waves; 4 tiles on >= 4 TB/s devices, measured on an H200 and an H100).
      {{"CUINLINE_CONV2D_HALO_ROWS", "most tiles a halo-form block computes in turn (tuning)", "1, 2, 4, 8",
        "the launch's rule"},
       [](Conv2dKnobs& k, const char* e) { k.halo_rows = tile_rows(e); }},
      // Default on: batched weight gathers measured faster on the halo form (for measuring the two).
      {{"CUINLINE_CONV2D_HALO_WBATCH", "0: the halo form gathers its NCHW weights a chunk at a time", "0",
        "batched"},
       [](Conv2dKnobs& k, const char* e) { k.halo_weight_batch = on_unless_zero(e); }},
      // Default: batched stores for the halo form's NCHW output only (slower on every other shape).
      {{"CUINLINE_CONV2D_STORE_BATCH", "0 / 1: the 16-bit epilogue's batched stores nowhere / everywhere",
        "0, 1", "the halo form's NCHW output only"},
       [](Conv2dKnobs& k, const char* e) { k.store_batch = is(e, "1")   ? 1
                                                           : is(e, "0") ? 0
                                                                        : -1; }},
      // Default on: the window form copies a tile's input once a k chunk instead of once a tap (the
      // UNet-like 128 -> 128 3 x 3 layer's stalls were mostly those copies).
      {{"CUINLINE_CONV2D_WINDOW", "0: the wgmma tiling's cp.async form without its window form", "0",
        "window form"},
       [](Conv2dKnobs& k, const char* e) { k.window = on_unless_zero(e); }},
      // Default on: the TMA form ran UNet's 3 x 3 layers over 256-1024 channels 1.16-1.41x faster than
      // the cp.async and window forms at batch 32 (H200); 0 is for comparisons.
      // im2col is for measuring the two copies on the shapes a box serves.
      {{"CUINLINE_CONV2D_TMA",
        "0: the wgmma tiling without its TMA form; im2col: the TMA form's im2col copies also where one box "
        "of the input is a tile (tuning)",
        "0, im2col", "the TMA form where it applies, a box a tile where one serves"},
       [](Conv2dKnobs& k, const char* e) {
         k.tma = on_unless_zero(e);
         k.tma_im2col = is(e, "im2col");
       }},
      // Default: the launch's rule (fewest waves x (tiles + 1); 4-7 % faster with tiles in turn).
      {{"CUINLINE_CONV2D_WINDOW_ROWS",
        "tiles a window-form block computes in turn; 0 plans one a block (tuning)", "0, 1, 2, 4, 8",
        "the launch's rule"},
       [](Conv2dKnobs& k, const char* e) {
         k.window_tiles = on_unless_zero(e);
         k.window_rows = tile_rows(e);
       }},
      // Default on: batch tiles ran ResNet-50's 7 x 7 layers up to 2x faster (docs/conv2d.md, "Small
      // planes: batch tiles"); 0 is for comparisons.
      {{"CUINLINE_CONV2D_BATCH_TILES", "0: output planes of at most 128 pixels keep per-image tiles", "0",
        "batch tiles"},
       [](Conv2dKnobs& k, const char* e) { k.batch_tiles = on_unless_zero(e); }},
      // Default: the planner's tilings, swept on an H200 through this very knob.
      {{"CUINLINE_CONV2D_HMMA_TILE",
        "the f16 / bf16 / TF32 block tiling (tuning; a tiling the template rejects "
        "fails to compile)",
        "wm,wn,mt,nt,bk,min_blocks", "the planner's"},
       [](Conv2dKnobs& k, const char* e) {
         int o[6];
         if (std::sscanf(e, "%d,%d,%d,%d,%d,%d", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5]) != 6) return;
         k.hmma_tile_set = true;
         for (int i = 0; i < 6; ++i) k.hmma_tile[i] = o[i];
       }},
      // Default: the plan's buffers; .cg only for the TF32 kernel with up to 9 taps (KernelBench L2-54
      // 3.019 ms against 3.323 with .ca), .ca elsewhere (f16 / bf16: .cg was slower everywhere; H100).
      {{"CUINLINE_CONV2D_HMMA_PIPE", "cp.async buffers (0: the plan's) and 1 for cp.async.cg (tuning)",
        "depth,l2", "the plan's"},
       [](Conv2dKnobs& k, const char* e) {
         int depth = 0, l2 = 0;
         if (std::sscanf(e, "%d,%d", &depth, &l2) != 2) return;
         k.hmma_pipe_set = true;
         k.hmma_pipe_depth = depth;
         k.hmma_pipe_l2 = l2;
       }},
      // Default auto: a launch whose tiles fill at most half of the multiprocessors runs the split
      // form (0.56-0.82x the time of the plain kernel at batches 1 and 8 on 512- and 1024-channel
      // 3 x 3 layers, H200); any other launch the plain kernel, so a full GPU loses nothing
      // (docs/conv2d.md, "Split-K"). N forces N slices wherever the form applies (tuning).
      {{"CUINLINE_CONV2D_SPLIT_K",
        "f16 / bf16 layers whose output tiles fill at most half of the multiprocessors split their "
        "reduction (split-K): 0 off, auto the launch's rule, N: N slices wherever the form applies (tuning)",
        "0, auto, 2-8", "auto"},
       [](Conv2dKnobs& k, const char* e) {
         if (is(e, "auto") || *e == '\0') {
           k.split_k = -1;
         } else if (e[0] >= '0' && e[0] <= '8' && e[0] != '1' && e[1] == '\0') {
           k.split_k = e[0] - '0';
         } else {
           k.split_k = -1;
           k.split_k_error = std::string("CUINLINE_CONV2D_SPLIT_K='") + e +
                             "' is not 0 (off), auto or a number of slices from 2 to 8; using auto";
         }
       }},
      // Default: kGenericConvMinSplitKTiles (conv2d_generic_rt.hpp says where it comes from).
      {{"CUINLINE_CONV2D_GENERIC_SPLIT_K",
        "the K tiles (32 input channels of a tap each) from which the generic tensor-core kernel splits "
        "the reduction of a launch whose tiles fill at most half of the multiprocessors: 0 never (tuning)",
        "0, 16-4096", "the plan's"},
       [](Conv2dKnobs& k, const char* e) {
         const int v = std::atoi(e);
         k.generic_split_k_min = is(e, "0") ? 0 : v >= 16 && v <= 4096 ? v : -1;
       }},
      // Default: plan_generic_conv's rule (kGenericConvWideMinChannels, _MinKTiles, _MinSliceTiles).
      {{"CUINLINE_CONV2D_GENERIC_WIDE",
        "the generic tensor-core kernel's 128 x 128 tiles for a channels-last input: 0 never, 1 wherever "
        "its vector form runs (tuning)",
        "0, 1", "long reductions whose tiles (split as needed) fill the multiprocessors"},
       [](Conv2dKnobs& k, const char* e) {
         if (is(e, "0") || is(e, "1")) {
           k.generic_wide = e[0] - '0';
         } else {
           k.generic_wide = -1;
         }
       }},
      // Default on: the TF32 wgmma kernel repays its staging copy from 512 products a staged value
      // (the sweep in tf32_wgmma_applies, H100).
      {{"CUINLINE_CONV2D_TF32_WGMMA", "0: f32 in precision tf32 stays on the mma.sync kernel", "0",
        "TF32 wgmma on sm90"},
       [](Conv2dKnobs& k, const char* e) { k.tf32_wgmma = on_unless_zero(e); }},
      // Default on: the pointwise form reads the tensors as they are (no staging copy) for 1 x 1 layers.
      {{"CUINLINE_CONV2D_POINTWISE", "0: 1 x 1 stride-1 convolutions on an NCHW input off the pointwise form",
        "0", "pointwise form"},
       [](Conv2dKnobs& k, const char* e) { k.pointwise = on_unless_zero(e); }},
      // Default: from stage_min_elements (32768) input elements an image, below which the extra launch
      // costs more than the gather; batch-tiled variants from 64 NCHW channels.
      {{"CUINLINE_CONV2D_STAGE", "f16 / bf16 not in the cp.async form: 0 never stages, 1 always", "0, 1",
        "by size (32768 input elements an image)"},
       [](Conv2dKnobs& k, const char* e) { k.stage = never_always_rule(e); }},
      // Default: from transpose_min_macs (2^22) multiply-adds an image, where the copies' few launches
      // cost less than the general kernel's work.
      {{"CUINLINE_CONV2D_TRANSPOSE",
        "f32 with a channels-last tensor: 0 never runs the NCHW kernels between "
        "transposing copies, 1 always",
        "0, 1", "by work (2^22 multiply-adds an image)"},
       [](Conv2dKnobs& k, const char* e) { k.transpose = never_always_rule(e); }},
      // Default 11 (kTransposeLogTile): a tile of 2^11 32-bit words a block.
      {{"CUINLINE_CONV2D_TRANSPOSE_TILE", "log2 of the elements a transposing copy's block moves (tuning)",
        "10, 11, 12", "11"},
       [](Conv2dKnobs& k, const char* e) {
         const int v = std::atoi(e);
         k.transpose_log_tile = v >= 10 && v <= 12 ? v : kTransposeLogTile;
       }},
      // Default on: Winograd F(2x2, 3x3) ran the seed 1.26x faster than the direct kernel (NCHW
      // output; 2.2x channels-last, H200); 0 is for comparisons.
      {{"CUINLINE_CONV2D_WINOGRAD", "0: the direct kernel instead of Winograd F(2x2, 3x3)", "0", "Winograd"},
       [](Conv2dKnobs& k, const char* e) { k.winograd = on_unless_zero(e); }},
      // Default: 2 x 4 warps for an NCHW output, 1 x 4 for a channels-last one (H100, L2 flushed).
      {{"CUINLINE_CONV2D_WINOGRAD_WARPS", "warps a Winograd F(2x2) block (tuning)", "4, 8", "the plan's"},
       [](Conv2dKnobs& k, const char* e) { k.winograd_warps = is(e, "4")   ? 4
                                                              : is(e, "8") ? 8
                                                                           : 0; }},
      // Default: the launch's rule (the most tile rows that leave >= 24 blocks an SM, else >= 8, else 1).
      {{"CUINLINE_CONV2D_WINOGRAD_ROWS", "tile rows a Winograd block computes in turn (tuning)", "1, 2, 4, 8",
        "the launch's rule"},
       [](Conv2dKnobs& k, const char* e) { k.winograd_rows = tile_rows(e); }},
      // Default 1: with per-step sums unrolled filter columns spill and run slower.
      {{"CUINLINE_CONV2D_TF32X3_KW", "filter columns the 3xTF32 kernel unrolls (tuning)", "1-31", "1"},
       [](Conv2dKnobs& k, const char* e) {
         const int n = std::atoi(e);
         k.tf32x3_kw = n >= 1 && n <= 31 ? n : 1;
       }},
      // Default per-step sums: chained sums are faster but not fp32-accurate on long reductions.
      {{"CUINLINE_CONV2D_TF32X3_SUMS",
        "chained: 3xTF32's products chained into the running sum (faster, not "
        "fp32-accurate on long reductions)",
        "chained", "per-step sums"},
       [](Conv2dKnobs& k, const char* e) { k.tf32x3_chained_sums = is(e, "chained"); }},
      // Default: each call plans for its own device; the override lets one GPU run other GPUs' plans
      // (ctest's sm75. and sm86. runs).
      {{"CUINLINE_CONV2D_TARGET",
        "plan every call for this arch's target where the device has what it plans "
        "for (testing)",
        "an arch name (sm_75, sm_86, ...)", "the device's"},
       [](Conv2dKnobs& k, const char* e) {
         if (*e == '\0') return;
         try {
           k.target = Arch::parse(e);
         } catch (const std::exception& x) {
           k.target_error = x.what();
         }
       }},
  };
  return table;
}

}  // namespace

Conv2dKnobs read_conv2d_knobs(const char* (*lookup)(const char* name)) {
  Conv2dKnobs k;
  for (const Knob& knob : knobs()) {
    if (const char* value = lookup(knob.info.name); value != nullptr) knob.apply(k, value);
  }
  return k;
}

const Conv2dKnobs& conv2d_knobs() {
  static const Conv2dKnobs k = [] {
    Conv2dKnobs read = read_conv2d_knobs([](const char* name) -> const char* { return std::getenv(name); });
    if (!read.split_k_error.empty()) logger()->warn("{}", read.split_k_error);
    return read;
  }();
  return k;
}

const Conv2dTuning& conv2d_tuning(Conv2dTarget target) noexcept {
  static const auto* tunings = [] {
    auto* t = new Conv2dTuning[4]{};
    for (int i = 0; i < 4; ++i) {
      for (const Conv2dTuningInfo& row : kTuning) t[i].*row.field = row.value[i];
    }
    return t;
  }();
  return tunings[target_index(target)];
}

const std::vector<Conv2dTuningInfo>& conv2d_tuning_table() {
  static const std::vector<Conv2dTuningInfo> table(std::begin(kTuning), std::end(kTuning));
  return table;
}

const std::vector<Conv2dKnobInfo>& conv2d_knob_table() {
  static const std::vector<Conv2dKnobInfo> table = [] {
    std::vector<Conv2dKnobInfo> t;
    for (const Knob& knob : knobs()) t.push_back(knob.info);
    return t;
  }();
  return table;
}

}  // namespace cuinline::ops::conv2d_impl
