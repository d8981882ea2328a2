// conv2d in f16 and bf16 on tensor cores (mma.sync m16n8k16, fp32 accumulation;
// kernel_templates/conv2d_hmma.cuh): which variants it computes, which are staged (copied into a
// channels-last workspace first), the block tiling chosen on the host, the rendering of the template
// into one CompileRequest per variant, and the staging copy's shape-generic request and arguments
// (kernel_templates/conv2d_stage.cuh).
#include <algorithm>
#include <cstdint>
#include <cuinline/error.hpp>
#include <string>
#include <vector>

#include "conv2d_hmma/plan.cuh"
#include "ops/conv2d/conv2d_internal.hpp"
#include "ops/conv2d/select.hpp"
#include "ops/conv2d/tuning.hpp"
#include "ops/elementwise/render.hpp"
#include "templates/template_source.hpp"

namespace cuinline::ops::conv2d_impl {
namespace {

// The wgmma tiling (and its halo and window forms) for v: its target is sm90 (227 KiB a block; wgmma
// where the device is an sm_90) and CUINLINE_CONV2D_WGMMA is not 0. Elsewhere the mma.sync tilings,
// which need at most 83 KiB.
bool wgmma_off(const Conv2dVariant& v) {
  return !conv2d_knobs().wgmma || v.target != Conv2dTarget::sm90;
}

// CUINLINE_CONV2D_HMMA_TILE (tuning only): that block tiling for every f16 / bf16 variant instead of
// the planner's (bk must divide the padded channels; a tiling the template rejects fails to compile).
bool tile_override(int (&f)[6]) {
  const Conv2dKnobs& k = conv2d_knobs();
  for (int i = 0; i < 6; ++i) f[i] = k.hmma_tile[i];
  return k.hmma_tile_set;
}

// Whether v (steps k steps of its k step on the cp.async wgmma tiling) is a long reduction over a small
// plane: an output plane of at most 128 pixels, more than 5 k steps, more than one filter tap.
bool long_small_plane(const Conv2dVariant& v, int steps) {
  return v.out_height() * v.out_width() <= 128 && steps > 5 && v.kernel_h * v.kernel_w > 1;
}

// Whether the cp.async wgmma tiling of v takes batch tiles: f32 in TF32 on a long small plane (f16 and
// bf16 take per-image m64 tiles there: see wgmma_tiling).
bool batch_tiles_apply(const Conv2dVariant& v, int steps) {
  return v.dtype == DType::f32 && long_small_plane(v, steps) && conv2d_knobs().batch_tiles;
}

// The padded input channels of the kernel's K axis: f16 / bf16 hmma_ci_pad; f32 (TF32, always a
// staged channels-last copy) Cin rounded up to 8, one k8 slice.
int ci_pad_of(const Conv2dVariant& v) {
  return v.dtype == DType::f32 ? (v.in_channels + 7) / 8 * 8 : hmma_ci_pad(v.in_channels);
}
// Bytes of one element of the kernel's storage type.
int elem_bytes(const Conv2dVariant& v) {
  return v.dtype == DType::f32 ? 4 : 2;
}

// CUINLINE_CONV2D_HMMA_PIPE (tuning only): cp.async buffers (0: the plan's) and 1 for cp.async.cg
// (L2 only) instead of .ca.
struct Pipe {
  int depth = 0, l2 = 0;
  bool set = false;
};
Pipe pipe_override() {
  const Conv2dKnobs& k = conv2d_knobs();
  return Pipe{k.hmma_pipe_depth, k.hmma_pipe_l2, k.hmma_pipe_set};
}

// cp.async.cg (L2 only) for the conv's tiles, else .ca: the TF32 kernel with up to 9 filter taps
// (4-byte operands: the L1 traffic of .ca's fills costs more than neighbouring taps' hits; KernelBench
// L2-54, 3 x 3 over 64 -> 64 channels, 3.019 ms against 3.323 with .ca), the override's where set,
// else .ca (f16 / bf16: .cg was slower everywhere; the TF32 kernel's 5 x 9 filters 2.376 against
// 2.221 ms with .ca, which keeps the rows that later taps read again in L1; H100).
int copy_l2(const Conv2dVariant& v) {
  if (pipe_override().set) return pipe_override().l2;
  // The pointwise form: .ca, though every input value is read once (H100, ms .ca / .cg:
  // KernelBench's 16 x 64 x 1024^2 -> 128 f16 2.487 / 2.687, tf32 4.760 / 4.915; 32 x 512 x 28^2 ->
  // 128 f16 0.0225 / 0.0267; 8 x 128 x 128^2 -> 128 f16 0.0363 / 0.0394).
  if (pointwise_applies(v)) return 0;
  return v.dtype == DType::f32 && v.kernel_h * v.kernel_w <= 9 ? 1 : 0;
}

// Whether the halo form would copy an NCHW input as laid out (with the input 16-byte aligned).
bool halo_nchw_copy(const Conv2dVariant& v) {
  return v.input_layout == Conv2dLayout::nchw && v.width % 8 == 0;
}

// The plan of a tiling: conv2d_hmma/plan.cuh's figures (what the kernel's Plan<S> compiles) of the
// shape constants direct_source renders for v and t.
namespace hmma_plan = cuinline_conv2d_hmma_detail;
hmma_plan::PlanShape hmma_plan_shape_of(const Conv2dVariant& v, const HmmaTiling& t);
hmma_plan::PlanFigures hmma_figures_of(const Conv2dVariant& v, const HmmaTiling& t) {
  return hmma_plan::plan_figures(hmma_plan_shape_of(v, t));
}
int k_steps(const Conv2dVariant& v, const HmmaTiling& t) {
  return hmma_figures_of(v, t).steps;
}
// Shared memory of a tiling (conv2d_hmma/plan.cuh's kSmemBytes): the stages, the halo or window
// form's buffers, the epilogue's tile.
unsigned shared_bytes(const Conv2dVariant& v, const HmmaTiling& t) {
  return static_cast<unsigned>(hmma_figures_of(v, t).smem_bytes);
}
// A tiling's shared memory and grid from its plan (kSmemBytes, kTilesX, kTilesY).
void set_hmma_plan_figures(const Conv2dVariant& v, HmmaTiling& t) {
  const hmma_plan::PlanFigures f = hmma_figures_of(v, t);
  if (f.tiles_x > 0x7fffffff) {
    throw InvalidArgument("conv2d variant " + v.name() + ": more than 2^31 - 1 blocks an image");
  }
  t.shared_bytes = static_cast<unsigned>(f.smem_bytes);
  t.tiles_x = static_cast<int>(f.tiles_x);
  t.tiles_y = f.tiles_y;
}

}  // namespace

bool hmma_weight_channels_last(const Conv2dVariant& v) {
  return v.weight_layout == Conv2dLayout::nhwc || (v.kernel_h == 1 && v.kernel_w == 1);
}

bool hmma_async_layout(const Conv2dVariant& v) {
  return v.input_layout == Conv2dLayout::nhwc && hmma_weight_channels_last(v) && v.in_channels % 8 == 0;
}

namespace {

hmma_plan::PlanShape hmma_plan_shape_of(const Conv2dVariant& v, const HmmaTiling& t) {
  const Conv2dParams& p = v.params;
  hmma_plan::PlanShape s{};
  s.elem = elem_bytes(v);
  s.cin = v.in_channels, s.h = v.height, s.w = v.width, s.cout = v.out_channels;
  s.kh = v.kernel_h, s.kw = v.kernel_w, s.sh = p.stride_h, s.sw = p.stride_w, s.ph = p.pad_h, s.pw = p.pad_w;
  s.dh = p.dilation_h, s.dw = p.dilation_w;
  s.oh = static_cast<int>(v.out_height()), s.ow = static_cast<int>(v.out_width());
  s.in_nhwc = v.input_layout == Conv2dLayout::nhwc ? 1 : 0;
  s.w_nhwc = hmma_weight_channels_last(v) ? 1 : 0;
  s.out_nhwc = v.output_layout == Conv2dLayout::nhwc ? 1 : 0;
  s.in_aligned = v.inputs_aligned ? 1 : 0, s.out_aligned = v.output_aligned ? 1 : 0;
  s.warps_m = t.warps_m, s.warps_n = t.warps_n, s.mt = t.m_tiles, s.nt = t.n_tiles;
  s.ci_pad = ci_pad_of(v), s.bk = t.ci_chunk;
  // cp.async buffers: the tiling's (the wgmma and pointwise forms', a depth the plan lowered to fit),
  // or CUINLINE_CONV2D_HMMA_PIPE's.
  s.async_depth = t.wgmma() || t.pointwise() || pipe_override().depth == 0 ? t.stages : pipe_override().depth;
  s.wgmma = t.wgmma() ? 1 : 0, s.halo = t.halo() ? 1 : 0, s.window = t.window() ? 1 : 0;
  s.window_tiles = t.window() && t.row_tiles > 1 ? 1 : 0;
  s.pointwise = t.pointwise() ? 1 : 0;
  return s;
}

// conv2d_hmma/plan.cuh's kOutVec for v with its output aligned, on a wgmma tiling or not: 8 outputs
// (16 bytes) a store where the wgmma tiling rounds in registers (the template's kHalfEpi), else at
// most 4. (The halo form's blocks are parts of output rows: an NCHW vector stays within one.)
int out_vec_of(const Conv2dVariant& v, bool wgmma) {
  const std::int64_t run = v.output_layout == Conv2dLayout::nhwc ? v.out_channels
                           : hmma_halo(v)                          ? v.out_width()
                                                                   : v.out_height() * v.out_width();
  return hmma_plan::plan_out_vec(run, wgmma && v.dtype != DType::f32, true);
}

}  // namespace

int hmma_out_vec(const Conv2dVariant& v) {
  // The widest store of the kernel a call runs, which sets the alignment asked of the output
  // (called for every conv2d call, through set_hmma_alignment: the wgmma test, not the planner).
  // A staged call's no-workspace kernel is not a wgmma one and stores at most 4 (out_vec_of): an
  // output aligned for 8 is aligned for those.
  return out_vec_of(v, hmma_uses_wgmma(v));
}

void set_hmma_alignment(Conv2dVariant& v, const void* input, const void* weight, const void* output,
                        const void* residual) {
  v.inputs_aligned = true;
  v.output_aligned = true;
  const auto in = reinterpret_cast<std::uintptr_t>(input), w = reinterpret_cast<std::uintptr_t>(weight);
  // The pointwise form copies the input and weight as they are by cp.async (f32 too: the f32 output's
  // alignment is set by conv2d_variant_for).
  const bool pointwise = pointwise_shape(v);
  if (v.dtype == DType::f32) {
    if (pointwise) v.inputs_aligned = ((in | w) & 15u) == 0;
    return;
  }
  if (!hmma_applies(v)) return;
  // The tensors that cp.async could copy as they are (channels-last with Cin % 8 == 0: both for the
  // cp.async main loop, or the one a staged call does not copy): an unaligned one makes the variant
  // the register gather's, or, staged, has it copied too.
  std::uintptr_t used = 0;
  if (v.in_channels % 8 == 0) {
    if (v.input_layout == Conv2dLayout::nhwc) used |= in;
    if (hmma_weight_channels_last(v)) used |= w;
  }
  // The halo form copies an NCHW input of whole 16-byte rows (W % 8 == 0) by cp.async too.
  if (halo_nchw_copy(v) && hmma_halo(v)) used |= in;
  if (pointwise) used |= in | w;
  v.inputs_aligned = (used & 15u) == 0;
  // The flag must hold for the plan a call runs on its device (conv2d_variant_for_device), not only
  // for sm90's: off sm90 the mma.sync tilings (no halo form, no wgmma) store up to 4 outputs along the
  // whole NCHW plane, where sm90's halo form stores along a row. (An NCHW output of odd rows and an
  // even plane, 2 bytes off, is aligned for the halo form's single stores but not for the sm86
  // plan's pairs: computed for one plan only, the flag faulted the other with a misaligned address.)
  const std::int64_t run = v.output_layout == Conv2dLayout::nhwc ? v.out_channels : v.out_height() * v.out_width();
  const int vec = std::max(hmma_out_vec(v), run % 4 == 0 ? 4 : run % 2 == 0 ? 2 : 1);
  const auto out = reinterpret_cast<std::uintptr_t>(output) | reinterpret_cast<std::uintptr_t>(residual);
  if (vec > 1) v.output_aligned = out % (2u * vec) == 0;  // (a null residual is aligned)
}

int hmma_ci_pad(int in_channels) {
  return in_channels <= 8 ? 8 : (in_channels + 15) / 16 * 16;
}

bool hmma_applies(const Conv2dVariant& v) {
  // (sm_75 has neither bf16 tensor cores nor m16n8k16 and cp.async: the general kernel there.)
  // (Grouped convolutions: the general kernel.)
  return (v.dtype == DType::f16 || v.dtype == DType::bf16) && conv2d_knobs().hmma &&
         v.target != Conv2dTarget::sm75 && v.params.groups == 1;
}

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
HmmaTiling wgmma_tiling(const Conv2dVariant& v, bool window = true, bool few_tiles = false) {
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
  int bk = f32 ? (ci_pad % 32 == 0 ? 32 : ci_pad % 16 == 0 ? 16 : 8)
               : ci_pad == 8 ? 16 : ci_pad % 64 == 0 ? 64 : ci_pad % 32 == 0 ? 32 : 16;
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
  const bool small_plane = !f32 && plane <= 128;
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
  const bool mid_plane = few_tiles && !f32 && bk == 64 && steps_at_bk >= 8 && steps_at_bk <= 36 &&
                         plane >= 14 * 14 && plane <= 28 * 28 && !window_shape;
  const bool per_image_m64 = small_plane || mid_plane;
  const bool two_groups = steps_at_bk > 5 && !(f32 && bn <= 64) && !batch && !per_image_m64;
  const bool one_tile = (two_groups && bn <= 64 && taps < tune.large_filter_taps) || per_image_m64;
  t.warps_m = two_groups ? 8 : 4, t.warps_n = 1, t.m_tiles = one_tile ? 1 : 2, t.n_tiles = bn / 8;
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
      (t.tile_cols % ow == 0 || ow % t.tile_cols == 0) && taps >= std::max(2, t.stages - 1) && !v.has_residual) {
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
  set_hmma_plan_figures(v, t);
  if (batch && !t.window() && !overridden) t.form = HmmaForm::batch;
  t.few_tiles = mid_plane;
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
  if (static_cast<unsigned>(hmma_plan::plan_figures(copied).smem_bytes) > conv2d_max_shared_bytes(v.target)) return false;
  set_hmma_plan_figures(v, t);
  t.min_blocks = one_group_min_blocks(t, 0);
  return true;
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

// The conv kernel's source (conv2d_hmma.cuh specialized for v, tiling t), without the request.
std::string direct_source(const Conv2dVariant& v, const HmmaTiling& t) {
  const auto c = render_constant;
  std::string src = "// cuinline conv2d variant " + v.name() +
                    "\n#include \"ew_ops.cuh\"\n#include \"conv2d_hmma.cuh\"\n\n" +
                    render_conv2d_epilogue(v.epilogue, v.dtype, v.out_channels);
  src += "\nstruct cuinline_conv2d_shape {\n  typedef " + std::string(cuinline::detail::storage_type(v.dtype)) +
         " storage;\n";
  src += render_shape_constants(v);
  // The constants plan.cuh's figures depend on, as the host planned with them (plan_shape_of).
  const hmma_plan::PlanShape s = hmma_plan_shape_of(v, t);
  src += c("kInNhwc", s.in_nhwc) + c("kWNhwc", s.w_nhwc) + c("kOutNhwc", s.out_nhwc);
  src += c("kInAligned", s.in_aligned) + c("kOutAligned", s.out_aligned);
  src += c("kWarpsM", s.warps_m) + c("kWarpsN", s.warps_n) + c("kMT", s.mt) + c("kNT", s.nt);
  src += c("kCiPad", s.ci_pad) + c("kBK", s.bk) + c("kMinBlocks", t.min_blocks);
  src += c("kAsyncDepth", s.async_depth) + c("kCopyL2", copy_l2(v)) + c("kWgmma", s.wgmma) + c("kHalo", s.halo) +
         c("kWindow", s.window);
  src += c("kWindowTiles", s.window_tiles) + c("kPointwise", s.pointwise) + c("kBatchTiles", t.batch_tiles() ? 1 : 0);
  // The 16-bit epilogue's stores in batches: by default for the halo form's NCHW output only (H100,
  // f16, ms unbatched / batched: seed NCHW on the halo form 0.1596 / 0.1569; channels-last 0.1115 /
  // 0.1252; ResNet-like NCHW 0.0477 / 0.0518, UNet-like NHWC 0.0889 / 0.1010);
  // CUINLINE_CONV2D_STORE_BATCH sets it for every wgmma tiling.
  const bool out_nhwc = v.output_layout == Conv2dLayout::nhwc;
  src += c("kStoreBatch", t.wgmma() && conv2d_knobs().store_batch >= 0 ? conv2d_knobs().store_batch
                                                                     : (t.halo() && !out_nhwc ? 1 : 0));
  src += c("kHaloWeightBatch", t.halo() && !conv2d_knobs().halo_weight_batch ? 0 : 1);
  if (t.split_k > 0) src += c("kSplitK", 1);  // (the split kernel's only: the plain one's source without it)
  src += "};\n\n";
  const std::string plan = "cuinline_conv2d_hmma_detail::Plan<cuinline_conv2d_shape>";
  src += render_plan_checks(plan, t, t.threads());
  src += "static_assert(" + plan + "::kBN == " + std::to_string(t.block_channels()) + ", \"channels\");\n";
  // The host's view of the alignment-dependent code (the variant's key) is the template's.
  src += "static_assert(" + plan + "::kAsync == " +
         ((hmma_async_layout(v) && v.inputs_aligned) || t.pointwise() ? "true" : "false") +
         " && " + plan + "::kOutVec == " + std::to_string(v.output_aligned ? out_vec_of(v, t.wgmma()) : 1) +
         ", \"main loop and stores\");\n";
  return src;
}

CompileRequest request_of(std::string source, const HmmaTiling& t) {
  CompileRequest request;
  // wgmma: sm_90a on an sm_90 device (the template keeps mma.sync for every other arch).
  request.arch_specific = t.wgmma();
  request.name = "conv2d_hmma.cu";
  request.source = std::move(source);
  // conv2d_hmma.cuh and the files it includes (arch/, conv2d_hmma/).
  request.headers = cuinline::detail::template_headers({"ew_common.cuh", "ew_ops.cuh", "conv2d_hmma.cuh"});
  // No contraction: bias, residual and epilogue round after every step like the separate PyTorch ops.
  request.options = {"--fmad=false", "-minimal"};  // -minimal: see elementwise.cpp
  request.name_expressions = {hmma_kernel_name(t)};
  return request;
}

}  // namespace

bool hmma_uses_wgmma(const Conv2dVariant& v) {
  // The selector's forms on the wgmma tiling: the halo and cp.async forms as called, and a staged
  // variant's conv (its channels-last copy is in the cp.async form) where the wgmma tilings run.
  switch (conv2d_algo(v)) {
    case Conv2dAlgo::hmma_halo:
    case Conv2dAlgo::hmma_wgmma:
      return true;
    case Conv2dAlgo::hmma_staged:
      return !wgmma_off(v);
    default:
      return false;
  }
}

bool hmma_halo(const Conv2dVariant& v) {
  HmmaTiling t;
  return halo_tiling(v, t);
}

bool hmma_stages(const Conv2dVariant& v) {
  return conv2d_algo(v) == Conv2dAlgo::hmma_staged;
}

bool hmma_wgmma_enabled(const Conv2dVariant& v) {
  return !wgmma_off(v);
}

bool hmma_stage_rule(const Conv2dVariant& v) {
  const int setting = conv2d_knobs().stage;
  if (setting != 2) return setting == 1;
  // Small planes with a long reduction over 64+ channels (ResNet's 7 x 7 3 x 3 layers) too, whatever the image's size:
  // the staged copy runs on the wgmma tiling (ResNet-50's 512 x 7 x 7 3 x 3, batch 32: 0.183 ms
  // gathered, 0.090 staged; H200).
  // (k steps of the staged copy's tiling: its channels padded to 16, 64 a step where they divide.)
  const int cp = (v.in_channels + 15) / 16 * 16;
  if (v.in_channels >= 64 &&
      long_small_plane(v, v.kernel_h * v.kernel_w * (cp / (cp % 64 == 0 ? 64 : cp % 32 == 0 ? 32 : 16)))) {
    return true;  // (a few channels over many taps — a 5 x 5 stem — keeps its gather)
  }
  return std::int64_t{v.in_channels} * v.height * v.width >= conv2d_tuning(v.target).stage_min_elements;
}

int hmma_stage_tile_channels(int cp) {
  return cp % 64 == 0 ? 64 : cp % 32 == 0 ? 32 : cp % 16 == 0 ? 16 : 8;
}

std::int64_t hmma_stage_tiles(int stage_channels, std::int64_t pixels) {
  const int tc = hmma_stage_tile_channels(stage_channels);
  const std::int64_t tp = 4096 / tc;  // pixels a tile (conv2d_stage.cuh): 8 x 256 threads / (tc / 2) pairs
  return (pixels + tp - 1) / tp * (stage_channels / tc);
}

StageFastDiv fast_div_of(std::uint32_t d) {
  if (d <= 1) return {};
  int l = 1;  // ceil(log2 d)
  while ((std::uint64_t{1} << l) < d) ++l;
  const std::uint64_t mul = ((std::uint64_t{1} << (31 + l)) + d - 1) / d;  // < 2^32 (d > 2^(l-1))
  return {static_cast<std::uint32_t>(mul), static_cast<std::uint32_t>(l - 1)};
}

StageTensor hmma_stage_tensor(const void* src, void* dst, std::int64_t images, int channels,
                              std::int64_t pixels, bool nhwc, int cp) {
  const std::int64_t tiles = hmma_stage_tiles(cp, pixels);
  if (images * tiles > 0x7fffffff) {
    throw InvalidArgument("conv2d staging copy: " + std::to_string(images * tiles) +
                          " blocks (at most 2^31 - 1)");
  }
  StageTensor t;
  t.src = src;
  t.dst = dst;
  t.pixels = pixels;
  t.channels = channels;
  t.nhwc = nhwc ? 1 : 0;
  t.vec = !nhwc && pixels % 8 == 0 && reinterpret_cast<std::uintptr_t>(src) % 16 == 0 ? 1 : 0;
  t.blocks = static_cast<std::uint32_t>(images * tiles);
  t.tiles = static_cast<std::uint32_t>(tiles);
  t.tiles_c = static_cast<std::uint32_t>(cp / hmma_stage_tile_channels(cp));
  t.by_tiles = fast_div_of(t.tiles);
  t.by_tiles_c = fast_div_of(t.tiles_c);
  return t;
}

Conv2dVariant hmma_staged_variant(const Conv2dVariant& v) {
  Conv2dVariant s = v;
  s.in_channels = (v.in_channels + 7) / 8 * 8;
  s.input_layout = Conv2dLayout::nhwc;
  s.weight_layout = Conv2dLayout::nhwc;
  s.inputs_aligned = true;  // the workspace, or the caller's tensors where they are aligned (else staged)
  return s;
}

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

CompileRequest make_hmma_direct_request(const Conv2dVariant& v) {
  const HmmaTiling t = hmma_direct_tiling(v);
  return request_of(direct_source(v, t), t);
}

CompileRequest make_hmma_request(const Conv2dVariant& v) {
  const HmmaTiling t = hmma_tiling(v);  // validates
  if (t.stage_channels == 0) return request_of(direct_source(v, t), t);
  // The conv of the channels-last copies: exactly the staged variant's own request (the staging
  // copy is a module of its own, make_hmma_stage_request), so NCHW variants that stage to the same
  // shape, and that channels-last variant, share one cache entry.
  return make_hmma_request(hmma_staged_variant(v));
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
    if (t.window() || few.few_tiles) {
      t = few.few_tiles ? few : wgmma_tiling(conv, false);
      t.stage_channels = plain.stage_channels, t.stage_input = plain.stage_input, t.stage_weight = plain.stage_weight;
    }
  }
  const int knob = conv2d_knobs().split_k;
  t.split_k = split_k_most(conv, t, k_steps(conv, t), knob);
  // (Its own tiles are worth a launch in one slice: at least 1 there, unless the knob turns the
  // split form off.)
  if (t.few_tiles && knob != 0) t.split_k = std::max(t.split_k, 1);
  return t;
}

std::optional<CompileRequest> make_hmma_split_request(const Conv2dVariant& v) {
  const HmmaTiling t = hmma_split_tiling(v);
  if (t.split_k == 0) return std::nullopt;
  if (t.stage_channels > 0) return make_hmma_split_request(hmma_staged_variant(v));
  return request_of(direct_source(v, t), t);
}

CompileRequest make_hmma_stage_request() {
  CompileRequest request;
  request.name = "conv2d_stage.cu";
  request.source =
      "// cuinline conv2d staging copies (every staged f16 / bf16 variant; the f32 TF32 wgmma variants)\n"
      "#include \"conv2d_stage.cuh\"\n";
  request.headers.push_back({"conv2d_stage.cuh", cuinline::detail::template_text("conv2d_stage.cuh")});
  request.options = {"-minimal"};  // see elementwise.cpp (copies and a rounding only: nothing to contract)
  request.name_expressions = {kHmmaStageKernel, kTf32StageKernel};
  return request;
}

bool tf32_wgmma_applies(const Conv2dVariant& v) {
  // (A 1 x 1 filter reads each input value once: the staging copy would add two passes over the input
  // to a memory-bound GEMM. KernelBench's 16 x 64 x 1024^2 -> 128 pointwise conv: 8.68 ms staged on
  // wgmma against 7.16 on the mma.sync kernel; H100.)
  // The staging copy costs two passes over the input; the conv's work a staged value is Cout x taps /
  // (stride_h x stride_w) products. From 512 on the TF32 kernel repays it (the sweep, H100,
  // ms wgmma / mma.sync: 32 x 64 x 56^2 -> 64 3x3, 576 a value, 0.092 / 0.129; 4 x 16 x
  // 40^2 -> 48 3x5, 720, 0.022 / 0.030; below: 128 x 16 x 32^2 -> 32 3x3, 288, 0.038 / 0.027; 32 x
  // 32 x 64^2 -> 64 3x3 stride 2x1, 288, 0.053 / 0.048; 8 x 32 x 64 x 96 -> 64 7x1, 448, 0.034 /
  // 0.030; 16 x 64 x 56^2 -> 128 3x3 stride 2, 288, 0.047 / 0.055, the one loss of the rule).
  const std::int64_t taps = std::int64_t{v.kernel_h} * v.kernel_w;
  const std::int64_t work = std::int64_t{v.out_channels} * taps;
  return v.dtype == DType::f32 && v.precision == Conv2dPrecision::tf32 && v.params.groups == 1 &&
         v.in_channels >= conv2d_tuning(v.target).tf32_wgmma_min_channels && taps > 1 &&
         work >= conv2d_tuning(v.target).tf32_wgmma_min_work * v.params.stride_h * v.params.stride_w && !wgmma_off(v) &&
         conv2d_knobs().tf32_wgmma;
}

HmmaTiling tf32_wgmma_tiling(const Conv2dVariant& v) {
  v.validate();
  HmmaTiling t = wgmma_tiling(hmma_staged_variant(v));
  t.stage_channels = (v.in_channels + 7) / 8 * 8;
  t.stage_input = true;  // (also rounds every value to TF32: the tensor cores would truncate it)
  t.stage_weight = true;
  return t;
}

CompileRequest make_tf32_wgmma_request(const Conv2dVariant& v) {
  v.validate();
  // The conv of the channels-last copies: one entry for every tf32 variant staged to that shape.
  const Conv2dVariant s = hmma_staged_variant(v);
  const HmmaTiling t = wgmma_tiling(s);
  return request_of(direct_source(s, t), t);
}

bool pointwise_shape(const Conv2dVariant& v) {
  const bool f32 = v.dtype == DType::f32;
  if (!conv2d_knobs().pointwise || v.target == Conv2dTarget::sm75) return false;
  // f32 in precision tf32 only: 3xTF32 on this form (three products and a split of every operand
  // as it is read) was compute-bound, slower than the fp32 FMA kernels on 4 of 7 measured 1 x 1
  // layers (KernelBench's 16 x 64 x 1024^2 -> 128: 10.43 ms against 7.90; H100).
  if (f32 ? v.precision != Conv2dPrecision::tf32 : !hmma_applies(v)) return false;
  const Conv2dParams& p = v.params;
  if (v.kernel_h != 1 || v.kernel_w != 1 || p.stride_h != 1 || p.stride_w != 1 || p.pad_h != 0 || p.pad_w != 0 ||
      p.groups != 1 || v.input_layout != Conv2dLayout::nchw) {
    return false;
  }
  // Whole 16-byte runs: each input channel's plane (the A tile's rows) and each weight row.
  const int run = f32 ? 4 : 8;
  const std::int64_t plane = std::int64_t{v.height} * v.width;
  return v.in_channels % run == 0 && v.in_channels >= (f32 ? 8 : 16) && plane % run == 0;
}

bool pointwise_applies(const Conv2dVariant& v) {
  return v.inputs_aligned && pointwise_shape(v);
}

HmmaTiling pointwise_tiling(const Conv2dVariant& v) {
  v.validate();
  return pointwise_plan(v);
}

CompileRequest make_pointwise_request(const Conv2dVariant& v) {
  const HmmaTiling t = pointwise_tiling(v);  // validates
  return request_of(direct_source(v, t), t);
}

}  // namespace cuinline::ops::conv2d_impl
