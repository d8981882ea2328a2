// conv2d in f16 and bf16 on tensor cores (mma.sync m16n8k16 and wgmma, fp32 accumulation;
// kernel_templates/conv2d_hmma.cuh): which variants it computes, which are staged (copied into a
// channels-last workspace first), the pointers' alignment a call's kernel is compiled for, the
// rendering of the template for a tiling (hmma_tiling.cpp plans them) into one CompileRequest per
// variant, and the staging copy's shape-generic request and arguments (kernel_templates/conv2d_stage.cuh).
#include <algorithm>
#include <cstdint>
#include <cuinline/error.hpp>
#include <string>
#include <vector>

#include "conv2d_hmma/plan.cuh"
#include "ops/conv2d/conv2d_internal.hpp"
#include "ops/conv2d/hmma_parts.hpp"
#include "ops/conv2d/select.hpp"
#include "ops/conv2d/tuning.hpp"
#include "ops/elementwise/render.hpp"
#include "templates/template_source.hpp"

namespace cuinline::ops::conv2d_impl {

using namespace hmma_parts;

namespace hmma_parts {

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

}  // namespace hmma_parts

bool hmma_weight_channels_last(const Conv2dVariant& v) {
  return v.weight_layout == Conv2dLayout::nhwc || (v.kernel_h == 1 && v.kernel_w == 1);
}

bool hmma_async_layout(const Conv2dVariant& v) {
  return v.input_layout == Conv2dLayout::nhwc && hmma_weight_channels_last(v) && v.in_channels % 8 == 0;
}

namespace hmma_parts {

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
  s.tma = t.tma() ? (t.tma_im2col ? 2 : 1) : 0;
  s.residual = v.has_residual ? 1 : 0;
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

}  // namespace hmma_parts

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
  src += c("kWindowTiles", s.window_tiles) + c("kPointwise", s.pointwise) + c("kBatchTiles", t.batch_tiles() ? 1 : 0) +
         c("kTma", s.tma);
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

CompileRequest make_pointwise_request(const Conv2dVariant& v) {
  const HmmaTiling t = pointwise_tiling(v);  // validates
  return request_of(direct_source(v, t), t);
}

}  // namespace cuinline::ops::conv2d_impl
