// conv2d in f32 on the FMA direct kernel (kernel_templates/conv2d.cuh): its block tiling and
// pipeline, planned with the kernel's own plan (conv2d_plan.cuh), and the rendering of the template
// into one CompileRequest per variant.
#include <algorithm>
#include <cuinline/conv2d.hpp>
#include <string>

#include "conv2d_plan.cuh"
#include "ops/conv2d/conv2d_internal.hpp"
#include "ops/conv2d/tuning.hpp"
#include "templates/template_source.hpp"

namespace cuinline::ops::conv2d_impl {
namespace {

// The tuned figures (shared-memory budgets, 7-pixel tiles, the unroll budget): conv2d_tuning(target),
// tuning.cpp. 7-pixel tiles apply from direct_macs7 multiply-adds an image: on 58 M-MAC images
// (16x64x56^2 -> 128 k3 s2, 4x16x224^2 -> 32 k3 s2) they measured no faster or slower, on 115-640 M
// ones 11-18 % faster (a standalone harness of the direct kernel's tilings, H200). The unroll budget
// (filter taps x outputs a thread in one unrolled step of the channel loop) bounds code size and
// NVRTC time while keeping the loop body long enough to hide shared-memory latency.

// The FMA kernel's figures beyond DirectTiling. The tiling's threads_y counts the thread rows of
// all k_split thread sets (so threads() is the block size); `rows` is one set's.
struct Fp32Plan {
  DirectTiling t;
  int rows = 0;       // output rows of a block (kTY)
  int k_split = 1;    // thread sets that split each channel chunk (kTK)
  int kh_unroll = 1;  // unroll of the filter-row loop (kKhUnroll)
  int col_phases = 1; // staged rows split into this many column phases (kColPhases)
};

bool compact_cols(const Conv2dVariant& v) {
  return (v.kernel_w - 1) * v.params.dilation_w + 1 <= v.params.stride_w;
}

// Column phases of the staged rows: a strided, non-compact column axis is staged as stride_w phases
// so that neighbouring threads' 16-byte loads are 16 bytes apart (no bank conflicts).
int col_phases(const Conv2dVariant& v) {
  return !compact_cols(v) && v.params.stride_w >= 2 && v.params.stride_w <= 4 ? v.params.stride_w : 1;
}

namespace direct_plan = cuinline_conv2d_detail;

// The plan of a tiling with `rows` output rows a thread set and k_split thread sets (conv2d_plan.cuh's
// figures: what the kernel's Plan<S> compiles for the constants make_fp32_direct_request renders).
direct_plan::DirectPlanFigures direct_figures(const Conv2dVariant& v, const DirectTiling& t, int rows,
                                              int k_split) {
  const Conv2dParams& p = v.params;
  return direct_plan::direct_plan_figures(direct_plan::DirectPlanShape{
      v.kernel_h, v.kernel_w, p.stride_h, p.stride_w, p.dilation_h, p.dilation_w, static_cast<int>(v.out_height()),
      static_cast<int>(v.out_width()), t.threads_x, rows, t.channel_groups, k_split, t.pixels_per_thread,
      t.channels_per_thread, t.ci_chunk, t.pipeline, col_phases(v), v.output_aligned ? 1 : 0});
}
// Shared bytes of t in `pipeline` with `chunk` input channels a stage (one thread set).
std::int64_t stage_bytes(const Conv2dVariant& v, const DirectTiling& t, int rows, int pipeline, int chunk) {
  DirectTiling c = t;
  c.pipeline = pipeline;
  c.ci_chunk = chunk;
  return direct_figures(v, c, rows, 1).smem_bytes;
}

Fp32Plan fp32_plan(const Conv2dVariant& v);

Fp32Plan fp32_plan(const Conv2dVariant& v) {
  const conv2d_impl::Conv2dTuning& tune = conv2d_impl::conv2d_tuning(v.target);
  const int max_threads = static_cast<int>(tune.direct_max_threads);
  const int unroll_budget = static_cast<int>(tune.direct_unroll_budget);
  const int oh = static_cast<int>(v.out_height());
  const int ow = static_cast<int>(v.out_width());
  const int taps = v.kernel_h * v.kernel_w;
  Fp32Plan plan;
  DirectTiling& t = plan.t;
  // Per thread: 4 consecutive output columns x 16 output channels (64 accumulators) when the
  // shape allows; the tile shrinks for narrow outputs and few channels.
  t.pixels_per_thread = ow >= 12 ? 4 : 2;
  t.threads_x = std::clamp(pow2_at_least(ceil_div(ow, t.pixels_per_thread)), 8, 32);
  t.channels_per_thread = v.out_channels >= 16 ? 16 : (v.out_channels >= 8 ? 8 : 4);
  t.channel_groups = std::clamp(ceil_div(v.out_channels, t.channels_per_thread), 1, 4);
  // Widths that are multiples of 7 (7, 14, ..., 56, 112, 224: most CNN feature maps) waste up to
  // 12.5 % of a power-of-two row of 4-pixel threads; 7 pixels x 8 channels a thread (56
  // accumulators, 128 threads a block) cover them exactly. Worth it on images with enough work.
  auto waste = [&](int tile) { return static_cast<double>(ceil_div(ow, tile)) * tile / ow; };
  const int tx7 = std::clamp(pow2_at_least(ceil_div(ow, 7)), 4, 32);
  const double macs = static_cast<double>(v.out_channels) * oh * ow * v.in_channels * taps;
  const bool seven = ow % 7 == 0 && v.out_channels >= 8 && macs >= static_cast<double>(tune.direct_macs7) &&
                     waste(t.threads_x * t.pixels_per_thread) >= 1.1 && waste(7 * tx7) < 1.05;
  if (seven) {
    t.pixels_per_thread = 7;
    t.threads_x = tx7;
    t.channels_per_thread = 8;
    t.channel_groups = std::clamp(ceil_div(v.out_channels, 8), 1, 4);
  }
  const int min_ty = 32 / t.threads_x;  // a warp must not straddle two channel groups
  int ty = std::max(1, max_threads / (t.threads_x * t.channel_groups));
  ty = std::min(ty, std::max(pow2_at_least(oh), min_ty));
  // Whole warps, none straddling two channel groups: rows a multiple of min_ty (threads_x is a
  // power of two of at least 4, so threads_x * rows is then a multiple of 32).
  auto whole_warps = [&](int r) { return std::max(min_ty, r / min_ty * min_ty); };
  int rows = seven ? min_ty : whole_warps(std::max(ty, min_ty));
  auto blocks_per_image = [&] {
    return ceil_div(ow, t.threads_x * t.pixels_per_thread) * ceil_div(oh, rows) *
           ceil_div(v.out_channels, t.block_channels());
  };
  // A long reduction per output on a small image: spread it over more (smaller) blocks, or a
  // small batch leaves most multiprocessors idle; the threads freed split the reduction instead
  // (k_split thread sets per block, partial sums added in shared memory).
  const int reduction = v.in_channels * taps;
  if (reduction >= 256 && !seven) {
    const int target = reduction >= 2048 ? 32 : 12;
    while (blocks_per_image() < target) {
      if (t.channel_groups > 1) {
        t.channel_groups /= 2;
      } else if (rows > min_ty) {
        rows = whole_warps(rows / 2);
      } else {
        break;
      }
    }
    while (plan.k_split < 8 && 2 * plan.k_split * t.threads_x * rows * t.channel_groups <= max_threads &&
           v.in_channels % (2 * plan.k_split) == 0 && v.in_channels / (2 * plan.k_split) >= 2) {
      plan.k_split *= 2;
    }
  }
  t.threads_y = rows;  // one thread set while the layout is sized
  // Very large filters: fewer channels per block until one input channel's stage fits.
  const std::int64_t pipelined_budget = tune.direct_pipelined_bytes;
  while (t.channel_groups > 1 && stage_bytes(v, t, rows, 0, 1) > pipelined_budget) t.channel_groups /= 2;
  // A residual's address and loads need registers the third resident block would cap (spills seen).
  t.min_blocks = t.channels_per_thread * t.pixels_per_thread >= 64 || v.has_residual ? 2 : 3;
  const std::int64_t pipelined_bytes = seven ? tune.direct_pipelined_bytes7 : tune.direct_pipelined_bytes;

  const int cin = v.in_channels;
  // The most channels a stage whose shared bytes are `per_channel` a channel (the chunked stages are
  // linear in their chunk) that divides cin and fits `budget`; 0 if none.
  auto largest_chunk = [&](std::int64_t per_channel, std::int64_t budget) {
    for (int d = cin; d >= 1; --d) {
      if (cin % d == 0 && d * per_channel <= budget) return d;
    }
    return 0;
  };
  t.row_tiles = 1;
  DirectTiling whole = t;
  whole.pipeline = 1;
  whole.ci_chunk = cin;
  if (direct_figures(v, whole, rows, plan.k_split).smem_bytes <= pipelined_bytes) {
    // Row-tile pipeline: all channels in one stage, weights staged once per block.
    t.pipeline = 1;
    t.ci_chunk = cin;
    t.row_tiles = 4;  // an upper bound: the launch picks 1, 2 or 4 from the batch size
  } else if (const int d = largest_chunk(stage_bytes(v, t, rows, 2, 1), pipelined_bytes); d > 0) {
    // Channel-chunk pipeline: the next chunk's input and weights arrive during this chunk's math.
    t.pipeline = 2;
    t.ci_chunk = d;
  } else {
    t.pipeline = 0;
    t.ci_chunk = std::max(1, largest_chunk(stage_bytes(v, t, rows, 0, 1), tune.direct_single_stage_bytes));
  }
  while (t.ci_chunk % plan.k_split != 0) plan.k_split /= 2;
  // (Past the target's limit — a very tall, dilated filter on a wide image — the variant runs on the
  // general direct kernel instead: f32_direct_too_large.)
  const direct_plan::DirectPlanFigures f = direct_figures(v, t, rows, plan.k_split);
  t.shared_bytes = static_cast<unsigned>(std::min<std::int64_t>(f.smem_bytes, 0xffffffffll));
  t.tiles_x = f.tiles_x;
  t.tiles_y = f.tiles_y;
  t.threads_y = rows * plan.k_split;
  plan.rows = rows;
  plan.col_phases = col_phases(v);
  // Unrolled FMAs per step bound code size and NVRTC time: whole channels when a channel's taps
  // fit unroll_budget, else filter rows (the largest divisor of KH that fits).
  const int per_row = v.kernel_w * t.channels_per_thread * t.pixels_per_thread;
  const int per_ci = v.kernel_h * per_row;
  if (per_ci <= unroll_budget) {
    plan.kh_unroll = v.kernel_h;
    // Channels per step: a divisor of the slice (no remainder copy of the body), counting the
    // weight loads too (small thread tiles load more per FMA).
    const int slice = t.ci_chunk / plan.k_split;
    const int cost = taps * (t.channels_per_thread * t.pixels_per_thread + t.channels_per_thread);
    t.ci_unroll = 1;
    for (int d = std::min(slice, unroll_budget / cost); d > 1; --d) {
      if (slice % d == 0) {
        t.ci_unroll = d;
        break;
      }
    }
  } else {
    plan.kh_unroll = 1;
    for (int d = v.kernel_h; d >= 1; --d) {
      if (v.kernel_h % d == 0 && d * per_row <= unroll_budget) {
        plan.kh_unroll = d;
        break;
      }
    }
    t.ci_unroll = 1;
  }
  return plan;
}
}  // namespace

bool f32_direct_too_large(const Conv2dVariant& v) {
  if (v.dtype != DType::f32 || v.uses_generic_kernel() || uses_tensor_cores(v) || winograd_applies(v)) return false;
  const Fp32Plan plan = fp32_plan(v);
  // A filter row is the least the kernel unrolls: past 4 x direct_unroll_budget FMAs (a filter wider than
  // 36 at 16 channels x 4 pixels a thread) NVRTC takes seconds (a 1 x 80 filter: 2.3 s), where
  // the general kernel's loops compile in a fraction of that.
  const int per_row = v.kernel_w * plan.t.channels_per_thread * plan.t.pixels_per_thread;
  return plan.t.shared_bytes > conv2d_max_shared_bytes(v.target) ||
         per_row > 4 * conv2d_tuning(v.target).direct_unroll_budget;
}

DirectTiling fp32_direct_tiling(const Conv2dVariant& v) {
  return fp32_plan(v).t;
}

CompileRequest make_fp32_direct_request(const Conv2dVariant& v) {
  const Fp32Plan fp = fp32_plan(v);
  const DirectTiling& t = fp.t;
  const auto c = render_constant;
  std::string src = "// cuinline conv2d variant " + v.name() + "\n" + render_target_defines(v) +
                    "#include \"ew_ops.cuh\"\n#include \"conv2d.cuh\"\n\n";
  src += render_conv2d_epilogue(v.epilogue, v.dtype, v.out_channels);
  src += "\nstruct cuinline_conv2d_shape {\n" + render_shape_constants(v);
  src += c("kTX", t.threads_x) + c("kTY", fp.rows) + c("kTG", t.channel_groups) + c("kTK", fp.k_split);
  src += c("kTP", t.pixels_per_thread) + c("kTC", t.channels_per_thread) + c("kCiChunk", t.ci_chunk);
  src += c("kCiUnroll", t.ci_unroll) + c("kKhUnroll", fp.kh_unroll) + c("kMinBlocks", t.min_blocks);
  src += c("kPipeline", t.pipeline) + c("kColPhases", fp.col_phases);
  src += c("kOutAligned", v.output_aligned ? 1 : 0);
  src += "};\n\n";
  // The launch uses the host's figures: the template must agree with them.
  src += render_plan_checks("cuinline_conv2d_detail::Plan<cuinline_conv2d_shape>", t, t.threads());

  CompileRequest request;
  request.name = "conv2d.cu";
  request.source = std::move(src);
  // conv2d.cuh and the file it includes (conv2d_plan.cuh).
  request.headers = cuinline::detail::template_headers({"ew_common.cuh", "ew_ops.cuh", "conv2d.cuh"});
  // The conv loop uses explicit __fmaf_rn; no contraction elsewhere, so bias and epilogue round
  // after every step like the separate PyTorch ops.
  request.options = {"--fmad=false", "-minimal"};  // -minimal: see elementwise.cpp
  request.name_expressions = {"cuinline_conv2d<cuinline_conv2d_shape, cuinline_conv2d_epilogue>"};
  return request;
}
}  // namespace cuinline::ops::conv2d_impl
