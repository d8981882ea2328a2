// Host tests of the f16 / bf16 tensor-core conv2d (conv2d_hmma.cuh, mma.sync m16n8k16): which
// variants the planner sends to it, the invariants of its tiling (whole warps, a block column
// covering the output channels, shared memory within sm_90's limit), and offline compiles for sm_90
// of a sweep of shapes in both dtypes and the layouts, with ptxas's register and spill report: none
// may spill.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cuinline/compiler.hpp>
#include <cuinline/conv2d.hpp>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "ops/conv2d/conv2d_internal.hpp"
#include "ops/conv2d/select.hpp"
#include "ops/conv2d/tuning.hpp"
#include "test_support.hpp"

namespace {

using cuinline::DType;
using namespace cuinline::ops;

struct Shape {
  const char* what;
  int cin, h, w, cout, kh, kw;
  Conv2dParams p;
};

// The seed, the ResNet-like and UNet-like shapes, odd and small channel counts, 1 x 1
// and 5 x 5 filters, stride 2, dilation 2, non-square images, fewer pixels than a block.
const Shape kShapes[] = {
    {"seed", 8, 128, 128, 64, 3, 3, {}},
    {"resnet", 64, 56, 56, 64, 3, 3, Conv2dParams::square(1, 1)},
    {"unet", 128, 128, 128, 128, 3, 3, Conv2dParams::square(1, 1)},
    {"cin 3 stem", 3, 224, 224, 64, 7, 7, Conv2dParams::square(2, 3)},
    {"cin 5 cout 5", 5, 33, 17, 5, 3, 3, Conv2dParams::square(1, 1)},
    {"1x1", 64, 56, 56, 256, 1, 1, {}},
    {"5x5", 32, 40, 40, 48, 5, 5, Conv2dParams::square(1, 2)},
    {"stride 2", 64, 56, 56, 128, 3, 3, Conv2dParams::square(2, 1)},
    {"dilation 2", 24, 30, 30, 40, 3, 3, Conv2dParams::square(1, 2, 2)},
    {"3x5 rect", 16, 20, 37, 24, 3, 5, Conv2dParams{2, 1, 1, 2, 1, 1}},
    {"tiny", 1, 4, 3, 1, 2, 2, {}},
    {"cout 200", 40, 9, 9, 200, 1, 3, Conv2dParams{1, 1, 0, 1, 1, 1}},
};

Conv2dVariant variant(const Shape& s, DType dt, Conv2dLayout in, Conv2dLayout w, Conv2dLayout out,
                      bool residual) {
  Conv2dVariant v =
      make_conv2d_variant(s.cin, s.h, s.w, s.cout, s.kh, s.kw, s.p, true, div_leaky_relu_epilogue(2.0, 0.01));
  v.dtype = dt;
  v.input_layout = in;
  v.weight_layout = w;
  v.output_layout = out;
  v.has_residual = residual;
  return v;
}

TEST(Conv2dHmma, PlannerSendsHalfTypesToTensorCores) {
  for (const Shape& s : kShapes) {
    for (DType dt : {DType::f16, DType::bf16}) {
      for (Conv2dLayout l : {Conv2dLayout::nchw, Conv2dLayout::nhwc}) {
        for (Conv2dPrecision prec : {Conv2dPrecision::fp32, Conv2dPrecision::tf32}) {
          Conv2dVariant v = variant(s, dt, l, l, l, false);
          v.precision = prec;
          SCOPED_TRACE(v.name());
          const Conv2dTiling t = conv2d_tiling(v);
          EXPECT_TRUE(t.half_mma());
          EXPECT_TRUE(t.tensor_cores());
          EXPECT_FALSE(t.generic() || t.winograd());
          EXPECT_TRUE(v.uses_generic_kernel());  // (outside the f32 NCHW kernels)
          // (The plain kernel: a split-K form is a second request, make_split_request.)
          EXPECT_FALSE(t.split());
          EXPECT_EQ(kernel_name(v), t.tma() ? "cuinline_conv2d_hmma_tma<cuinline_conv2d_shape, cuinline_conv2d_epilogue>"
                                            : "cuinline_conv2d_hmma<cuinline_conv2d_shape, cuinline_conv2d_epilogue>");
          EXPECT_EQ(make_request(v).name_expressions.at(0), kernel_name(v));
        }
      }
    }
    // f32 stays off the half kernel: NCHW on the tuned kernels, channels-last on the same kernels
    // between transposing copies from 2^22 multiply-adds an image, on the general kernel below.
    Conv2dVariant f =
        variant(s, DType::f32, Conv2dLayout::nchw, Conv2dLayout::nchw, Conv2dLayout::nchw, false);
    EXPECT_FALSE(conv2d_tiling(f).half_mma());
    EXPECT_FALSE(conv2d_tiling(f).generic());
    f.input_layout = Conv2dLayout::nhwc;
    const bool large = std::int64_t{f.out_channels} * f.out_height() * f.out_width() * f.in_channels * f.kernel_h *
                           f.kernel_w >= conv2d_impl::conv2d_tuning(f.target).transpose_min_macs;
    EXPECT_EQ(conv2d_tiling(f).generic(), !large);
    EXPECT_EQ(conv2d_tiling(f).transpose.input, large);
    EXPECT_FALSE(conv2d_tiling(f).half_mma());
  }
}

TEST(Conv2dHmma, TilingInvariants) {
  for (const Shape& s : kShapes) {
    for (Conv2dLayout out : {Conv2dLayout::nchw, Conv2dLayout::nhwc}) {
      const Conv2dVariant v = variant(s, DType::f16, Conv2dLayout::nchw, Conv2dLayout::nchw, out, false);
      SCOPED_TRACE(v.name());
      const HmmaTiling t = conv2d_tiling(v).as_hmma();  // (a block's pixels: a run of the flattened plane)
      EXPECT_EQ(t.threads() % 32, 0);
      EXPECT_LE(t.threads(), 256);
      EXPECT_EQ(t.n_tiles % 2, 0);  // B fragments two n tiles an ldmatrix
      // Staged (NCHW from 32768 input elements an image) runs the wgmma tiling: one warpgroup of
      // 64-pixel tiles, 3 or more buffers; up to 8 channels at column stride 1 its halo form, never
      // staged.
      EXPECT_EQ(t.halo(), v.in_channels <= 8 && v.params.stride_w == 1 && v.out_width() >= 32);
      EXPECT_EQ(cuinline::ops::conv2d_impl::hmma_halo(v), t.halo());
      if (t.halo()) EXPECT_EQ(t.stage_channels, 0);
      EXPECT_EQ(t.wgmma(), t.stage_channels > 0 || t.halo());
      // The launch's cheap test (set_hmma_alignment, every call) agrees with the planner.
      EXPECT_EQ(cuinline::ops::conv2d_impl::hmma_uses_wgmma(v), t.wgmma());
      if (t.wgmma()) {
        EXPECT_TRUE(t.warps_m == 4 || t.warps_m == 8);  // one or two warpgroups
        EXPECT_EQ(t.warps_n, 1);
        EXPECT_GE(t.stages, t.halo() ? 1 : 3);
        EXPECT_TRUE(make_request(v).arch_specific);
      }
      EXPECT_EQ(t.tile_cols, 16 * t.warps_m * t.m_tiles);
      // Blocks of the flattened plane; the halo form's of one output row each.
      const std::int64_t pixels = v.out_height() * v.out_width();
      // (The halo form's tiles run along y, up to 8 a block in turn.)
      EXPECT_EQ(t.pointwise(), cuinline::ops::conv2d_impl::pointwise_applies(v));
      if (t.pointwise()) {
        // 1 x 1 over whole 16-byte runs: pixel tiles x channel blocks along x (channel blocks fastest).
        const std::int64_t bn = t.block_channels();
        EXPECT_EQ(t.tiles_x, (pixels + t.tile_cols - 1) / t.tile_cols * ((v.out_channels + bn - 1) / bn));
        EXPECT_EQ(t.stage_channels, 0);
        EXPECT_EQ(t.tiles_y, 1);
      } else if (t.halo()) {
        const std::int64_t segs = (v.out_width() + t.tile_cols - 1) / t.tile_cols;
        EXPECT_EQ(t.tiles_x, 1);
        EXPECT_EQ(t.tiles_y, v.out_height() * segs);
        EXPECT_LT((segs - 1) * t.tile_cols, v.out_width());
        EXPECT_EQ(t.row_tiles, 8);
      } else {
        EXPECT_GE(std::int64_t{t.tiles_x} * t.tile_cols, pixels);
        EXPECT_LT(std::int64_t{t.tiles_x - 1} * t.tile_cols, pixels);
        EXPECT_EQ(t.tiles_y, 1);
        // (The window form with two or more k chunks: up to 4 tiles a block in turn.)
        const bool tiles_in_turn = t.window() && cuinline::ops::conv2d_impl::hmma_ci_pad(v.in_channels) / t.ci_chunk > 1;
        EXPECT_EQ(t.row_tiles, tiles_in_turn ? 4 : 1);
      }
      // The smallest of 16, 32, 64 that covers Cout; past 64, 128 with wgmma or the pointwise form,
      // else 64 (the register gather of an unstaged NCHW input).
      const int c = v.out_channels;
      EXPECT_EQ(t.block_channels(), c <= 16 ? 16 : c <= 32 ? 32 : c <= 64 || !(t.wgmma() || t.pointwise()) ? 64 : 128);
      // Up to 8 channels: padded to 8, a k step of 16 two filter taps; else padded to 16.
      const int ci_pad = v.in_channels <= 8 ? 16 : (v.in_channels + 15) / 16 * 16;
      EXPECT_EQ(ci_pad % t.ci_chunk, 0);
      EXPECT_TRUE(t.ci_chunk == 16 || t.ci_chunk == 32 || t.ci_chunk == 64);
      EXPECT_LE(t.shared_bytes, 227u * 1024u);
      EXPECT_GT(t.min_blocks, 0);
    }
  }
  // The issue's shapes: the seed's halo form, 128 columns of one output row a block (126 wide: one
  // block a row), 64 channels, 5 blocks a multiprocessor; UNet-like 256 x 128 (two warpgroups).
  const Conv2dLayout nchw = Conv2dLayout::nchw, nhwc = Conv2dLayout::nhwc;
  const HmmaTiling seed = conv2d_tiling(variant(kShapes[0], DType::bf16, nchw, nchw, nchw, false)).as_hmma();
  EXPECT_TRUE(seed.halo());
  EXPECT_EQ(seed.tile_cols, 128);
  EXPECT_EQ(seed.block_channels(), 64);
  EXPECT_EQ(seed.ci_chunk, 16);  // two filter taps of 8 channels a k step
  EXPECT_EQ(seed.tiles_x, 1);
  EXPECT_EQ(seed.tiles_y, 126);
  EXPECT_EQ(seed.min_blocks, 5);
  const HmmaTiling unet = conv2d_tiling(variant(kShapes[2], DType::f16, nhwc, nhwc, nhwc, false)).as_hmma();
  EXPECT_TRUE(unet.wgmma());
  EXPECT_EQ(unet.block_channels(), 128);
  EXPECT_EQ(unet.threads(), 256);  // two warpgroups of two m64 tiles
  EXPECT_EQ(unet.tile_cols, 256);
  EXPECT_EQ(unet.ci_chunk, 64);  // the 128-byte swizzle
}

// The wgmma tilings (channels-last input and weight, Cin % 8 == 0; and every staged call) over the
// channel counts and reduction lengths that pick each of them — one or two warpgroups, 16 to 128
// channels a block, k steps of 16, 32, 64 — compile for sm_90 (built as sm_90a) without spills, and
// their mma.sync form for sm_80. (Two warpgroups with 16 channels once failed a static_assert of
// the register gather, which the cp.async loop does not use; the GPU suite found it.)
TEST(Conv2dHmma, WgmmaTilingsCompileForEveryChannelCount) {
  const std::regex spill(R"((\d+) bytes spill stores)");
  int compiled = 0;
  for (int cin : {8, 16, 24, 40, 64, 136}) {
    for (int cout : {1, 7, 16, 24, 33, 64, 100, 128, 200}) {
      for (int k : {1, 3}) {
        if ((cin * 7 + cout + k) % 3 != 0 && !(cin == 16 && k == 3)) continue;  // a third of the grid, all Cout at Cin 16
        Shape s{"", cin, 12, 13, cout, k, k, Conv2dParams::square(1, k / 2)};
        const Conv2dLayout nhwc = Conv2dLayout::nhwc;
        const Conv2dVariant v = variant(s, cout % 2 ? DType::bf16 : DType::f16, nhwc, nhwc,
                                        cout % 3 ? nhwc : Conv2dLayout::nchw, cout % 4 == 0);
        SCOPED_TRACE(v.name());
        const Conv2dTiling t = conv2d_tiling(v);
        ASSERT_TRUE(t.wgmma());
        EXPECT_TRUE(cuinline::ops::conv2d_impl::hmma_uses_wgmma(v));
        cuinline::CompileRequest request = make_request(v);
        request.options.push_back("-Xptxas=-v");
        request.options.push_back("--no-cache");  // (no compute-cache hit: ptxas runs and reports)
        for (const char* arch : {"sm_90", "sm_80"}) {
          if (std::string(arch) == "sm_80" && compiled % 4 != 0) continue;
          const cuinline::CompiledProgram program = cuinline::compile(request, cuinline::Arch::parse(arch));
          for (auto it = std::sregex_iterator(program.log.begin(), program.log.end(), spill);
               it != std::sregex_iterator(); ++it) {
            EXPECT_EQ((*it)[1], "0") << arch << "\n" << program.log;
          }
        }
        ++compiled;
      }
    }
  }
  EXPECT_GT(compiled, 20);
}

// Planes of 14 x 14 to 28 x 28 with 8 to 36 k steps of 64 channels (ResNet-50's 1024 -> 256 and
// 1024 -> 512 1 x 1 on 14 x 14, 512 -> 128 and 512 -> 256 on 28 x 28, its 3 x 3 over 128 channels on
// 28 x 28 and 256 on 14 x 14, and a stride-2 1 x 1 into 14 x 14) keep the plain kernel's tiles of
// two m64 tiles a warpgroup, and have a split form of their own tiles (few_tiles: a launch of few
// plain tiles runs it, in one slice or more), per-image tiles of one warpgroup of one m64 tile, in
// f16 and bf16; so do planes of 12 x 12 with 16 to 72 k steps where the split form runs in the TMA
// form (sm90); shorter and longer reductions, a larger plane, k steps of 16 and rows the window form
// may take have no such form. Two 1 x 1 and a 3 x 3 split forms compile for sm_90
// (as sm_90a) without spills, with and without a residual.
TEST(Conv2dHmma, MidPlanesOfShortReductionsTakeOneM64TileAnImageWhenTilesAreFew) {
  if (cuinline::ops::conv2d_impl::conv2d_knobs().split_k == 0) GTEST_SKIP() << "CUINLINE_CONV2D_SPLIT_K=0";
  const Conv2dLayout nhwc = Conv2dLayout::nhwc;
  const Shape m64[] = {
      {"1024 -> 256 on 14x14", 1024, 14, 14, 256, 1, 1, {}},
      {"1024 -> 512 on 14x14", 1024, 14, 14, 512, 1, 1, {}},
      {"512 -> 128 on 28x28", 512, 28, 28, 128, 1, 1, {}},
      {"512 -> 256 on 28x28", 512, 28, 28, 256, 1, 1, {}},
      {"3x3 128 on 28x28", 128, 28, 28, 128, 3, 3, Conv2dParams::square(1, 1)},
      {"3x3 256 on 14x14", 256, 14, 14, 256, 3, 3, Conv2dParams::square(1, 1)},
      {"3x3 512 on 12x12 (72 k steps, TMA)", 512, 12, 12, 512, 3, 3, Conv2dParams::square(1, 1)},
      {"3x3 256, stride 2, into 14x14", 256, 28, 28, 256, 3, 3, Conv2dParams::square(2, 1)},
      {"1024 -> 512, stride 2, into 14x14", 1024, 28, 28, 512, 1, 1, Conv2dParams::square(2, 0)}};
  using cuinline::ops::conv2d_impl::conv2d_algo;
  using cuinline::ops::conv2d_impl::split_tiling_of;
  for (DType dt : {DType::f16, DType::bf16}) {
    for (const Shape& s : m64) {
      const Conv2dVariant v = variant(s, dt, nhwc, nhwc, nhwc, false);
      SCOPED_TRACE(v.name());
      const HmmaTiling plain = conv2d_tiling(v).as_hmma();
      EXPECT_TRUE(plain.wgmma());
      EXPECT_FALSE(plain.few_tiles);
      EXPECT_EQ(plain.m_tiles, 2);
      EXPECT_EQ(plain.tile_cols, plain.threads());
      const std::optional<HmmaTiling> split = split_tiling_of(conv2d_algo(v), v);
      ASSERT_TRUE(split.has_value());
      const HmmaTiling& t = *split;
      EXPECT_TRUE(t.few_tiles);
      EXPECT_GE(t.split_k, 1);
      EXPECT_TRUE(t.wgmma());
      EXPECT_FALSE(t.pointwise() || t.window() || t.halo() || t.batch_tiles());
      EXPECT_EQ(t.threads(), 128);
      EXPECT_EQ(t.m_tiles, 1);
      EXPECT_EQ(t.tile_cols, 64);
      EXPECT_EQ(t.block_channels(), 128);
      EXPECT_EQ(t.ci_chunk, 64);
      EXPECT_GE(t.min_blocks, 2);
    }
  }
  const Shape kept[] = {
      {"256 -> 1024 on 14x14 (4 k steps)", 256, 14, 14, 1024, 1, 1, {}},
      {"512 -> 128 on 56x56 (a larger plane)", 512, 56, 56, 128, 1, 1, {}},
      {"3x3 512 on 16x16 (72 k steps)", 512, 16, 16, 1024, 3, 3, Conv2dParams::square(1, 1)},
      {"3x3 1024 on 12x12 (144 k steps)", 1024, 12, 12, 1024, 3, 3, Conv2dParams::square(1, 1)},
      {"520 -> 256 on 14x14 (k steps of 16)", 520, 14, 14, 256, 1, 1, {}},
      {"3x3 128 on 6x64 (rows the window form takes)", 128, 6, 64, 128, 3, 3, Conv2dParams::square(1, 1)}};
  for (const Shape& s : kept) {
    const Conv2dVariant v = variant(s, DType::f16, nhwc, nhwc, nhwc, false);
    SCOPED_TRACE(v.name());
    const HmmaTiling t = conv2d_tiling(v).as_hmma();
    EXPECT_TRUE(t.wgmma());
    EXPECT_EQ(t.m_tiles, 2);
    EXPECT_EQ(t.tile_cols, t.threads());  // two m64 tiles a warpgroup: 128 or 256 pixels
    // (A split form keeps two warpgroups: the plain tiles, or tiles of 128 pixels of its own.)
    const std::optional<HmmaTiling> split = split_tiling_of(conv2d_algo(v), v);
    if (split) {
      EXPECT_EQ(split->warps_m, 8);
      EXPECT_EQ(split->few_tiles, split->tile_cols != t.tile_cols);
    }
  }
  const std::regex spill(R"((\d+) bytes spill stores)");
  for (const int i : {0, 1, 5}) {
    const bool residual = i != 1;
    const Conv2dVariant v = variant(m64[i], i == 0 ? DType::f16 : DType::bf16, nhwc, nhwc,
                                    residual ? nhwc : Conv2dLayout::nchw, residual);
    SCOPED_TRACE(v.name());
    std::optional<cuinline::CompileRequest> request = make_split_request(v);
    ASSERT_TRUE(request.has_value());
    request->options.push_back("-Xptxas=-v");
    request->options.push_back("--no-cache");  // (no compute-cache hit: ptxas runs and reports)
    const cuinline::CompiledProgram program = cuinline::compile(*request, cuinline::Arch::parse("sm_90"));
    int reports = 0;
    for (auto it = std::sregex_iterator(program.log.begin(), program.log.end(), spill); it != std::sregex_iterator();
         ++it, ++reports) {
      EXPECT_EQ((*it)[1], "0") << program.log;
    }
    EXPECT_GT(reports, 0) << program.log;
  }
}

// The split forms (split-K: conv2d_hmma/split.cuh sums every slice's partial with all of a chunk's
// loads in flight) of a one-warpgroup tile (ResNet-50's 512-channel 3 x 3 on 7 x 7), a two-warpgroup
// one in the TMA form (UNet's 1024 channels on 16 x 16, with a residual), the shortest reduction auto
// splits (128 channels: 18 k steps), a TMA-form variant without a residual (a window-form one where
// CUINLINE_CONV2D_TMA=0: the cp.async tiling without the window) and small planes' one-m64 tiles of
// 64 and 32 channels compile for sm_90 (as sm_90a) without spills or warnings.
TEST(Conv2dHmma, SplitFormsCompileWithoutSpills) {
  if (cuinline::ops::conv2d_impl::conv2d_knobs().split_k == 0) GTEST_SKIP() << "CUINLINE_CONV2D_SPLIT_K=0";
  const std::regex spill(R"((\d+) bytes spill stores)");
  const Conv2dLayout nhwc = Conv2dLayout::nhwc;
  struct Case {
    Shape s;
    bool residual;  // (none for the window form, which takes none)
  };
  const Case cases[] = {{{"resnet L4", 512, 7, 7, 512, 3, 3, Conv2dParams::square(1, 1)}, true},
                        {{"unet enc4", 1024, 16, 16, 1024, 3, 3, Conv2dParams::square(1, 1)}, true},
                        {{"resnet L2", 128, 28, 28, 128, 3, 3, Conv2dParams::square(1, 1)}, true},
                        {{"unet dec1", 512, 64, 64, 256, 3, 3, Conv2dParams::square(1, 1)}, false},
                        {{"128 -> 64 on 7x7", 128, 7, 7, 64, 3, 3, Conv2dParams::square(1, 1)}, true},
                        {{"128 -> 32 on 8x8", 128, 8, 8, 32, 3, 3, Conv2dParams::square(1, 1)}, true}};
  for (const Case& c : cases) {
    const Shape& s = c.s;
    const Conv2dVariant v = variant(s, DType::bf16, nhwc, nhwc, nhwc, c.residual);
    SCOPED_TRACE(v.name());
    std::optional<cuinline::CompileRequest> request = make_split_request(v);
    ASSERT_TRUE(request.has_value());
    request->options.push_back("-Xptxas=-v");
    request->options.push_back("--no-cache");  // (no compute-cache hit: ptxas runs and reports)
    const cuinline::CompiledProgram program = cuinline::compile(*request, cuinline::Arch::parse("sm_90"));
    EXPECT_EQ(program.log.find("warning"), std::string::npos) << program.log;
    int reports = 0;
    for (auto it = std::sregex_iterator(program.log.begin(), program.log.end(), spill); it != std::sregex_iterator();
         ++it, ++reports) {
      EXPECT_EQ((*it)[1], "0") << program.log;
    }
    EXPECT_GT(reports, 0) << program.log;
    std::smatch used;
    if (std::regex_search(program.log, used, std::regex(R"(Used (\d+) registers)"))) {
      std::printf("  %-26s %s registers\n", s.what, used[1].str().c_str());
    }
  }
}

// v compiled for sm_90 (as sm_90a where it uses wgmma) and sm_80 (the mma.sync form): no warnings,
// no register spills.
void expect_compiles_for_sm90_and_sm80(const Conv2dVariant& v) {
  const std::regex spill(R"((\d+) bytes spill stores)");
  cuinline::CompileRequest request = make_request(v);
  request.options.push_back("-Xptxas=-v");
  request.options.push_back("--no-cache");  // (no compute-cache hit: ptxas runs and reports)
  for (const char* arch : {"sm_90", "sm_80"}) {
    const cuinline::CompiledProgram program = cuinline::compile(request, cuinline::Arch::parse(arch));
    EXPECT_EQ(program.log.find("warning"), std::string::npos) << program.log;
    for (auto it = std::sregex_iterator(program.log.begin(), program.log.end(), spill); it != std::sregex_iterator();
         ++it) {
      EXPECT_EQ((*it)[1], "0") << arch << "\n" << program.log;
    }
  }
}

// The halo form (up to 8 input channels, column stride 1, no residual, 32 or more output columns)
// over filter sizes, dilation, row stride, channel counts (1 to 8 in, 1 to 200 out: every block
// width) and layouts: planned as halo, compiled for sm_90 (as sm_90a: wgmma) and sm_80 (mma.sync)
// without spills or warnings, within a block's shared memory.
TEST(Conv2dHmma, HaloTilingsCompile) {
  struct Case {
    int cin, h, w, cout, kh, kw;
    Conv2dParams p;
  };
  const Case cases[] = {
      {8, 9, 128, 64, 3, 3, {}},                        // the seed's rows (NCHW: copied, transposed)
      {3, 16, 224, 64, 7, 7, Conv2dParams{2, 1, 3, 3, 1, 1}},  // an RGB stem at row stride 2
      {1, 8, 40, 1, 1, 1, {}},                          // 1 x 1, one channel each side
      {5, 12, 72, 24, 3, 5, Conv2dParams{1, 1, 1, 2, 2, 3}},   // dilated, non-square (NCHW copied)
      {8, 6, 300, 200, 2, 2, {}},                       // 3 blocks a row, 2 blocks of channels
      {7, 11, 33, 128, 11, 1, Conv2dParams{1, 1, 5, 0, 1, 1}},  // 11 x 1
  };
  int i = 0;
  for (const Case& c : cases) {
    Conv2dVariant v = make_conv2d_variant(c.cin, c.h, c.w, c.cout, c.kh, c.kw, c.p, i % 2 == 0,
                                          div_leaky_relu_epilogue(2.0, 0.01));
    v.dtype = i % 2 ? DType::bf16 : DType::f16;
    v.input_layout = i % 3 ? Conv2dLayout::nhwc : Conv2dLayout::nchw;
    v.weight_layout = i % 2 ? Conv2dLayout::nhwc : Conv2dLayout::nchw;
    v.output_layout = i % 4 < 2 ? Conv2dLayout::nchw : Conv2dLayout::nhwc;
    ++i;
    SCOPED_TRACE(v.name());
    const HmmaTiling t = conv2d_tiling(v).as_hmma();
    ASSERT_TRUE(t.halo());
    EXPECT_EQ(t.stage_channels, 0);
    EXPECT_LE(t.shared_bytes, 227u * 1024u);
    expect_compiles_for_sm90_and_sm80(v);
  }
}

// The wgmma tiling's TMA and window forms over filter sizes, dilation, row stride, channel counts and
// layouts: the TMA form wherever a k step is 64 unpadded channels (a residual allowed) — with one box
// of the input a tile where the tile is whole output rows or equal parts of one at stride 1, else
// with im2col copies (row or column stride 2, 56 output columns) — but the window form's shapes of
// one k chunk; the window form where not (column stride 1, rows of a multiple of 64 columns, no
// residual). Planned where they apply, compiled for sm_90 (as sm_90a: wgmma, and TMA) and sm_80
// (mma.sync: neither TMA nor wgmma there) without spills or warnings, within a block's shared memory.
TEST(Conv2dHmma, WindowAndTmaTilingsCompile) {
  enum Form { window, box, im2col };
  struct Case {
    int cin, h, w, cout, kh, kw;
    Conv2dParams p;
    Conv2dLayout in;
    Form form;
  };
  const Conv2dLayout nchw = Conv2dLayout::nchw, nhwc = Conv2dLayout::nhwc;
  const Case cases[] = {
      {128, 128, 128, 128, 3, 3, Conv2dParams{1, 1, 1, 1, 1, 1}, nhwc, box},  // UNet-like: 2 rows a tile
      {128, 32, 128, 128, 3, 3, Conv2dParams{1, 1, 1, 1, 1, 1}, nchw, box},   // staged NCHW
      {64, 16, 64, 64, 3, 3, Conv2dParams{1, 1, 1, 1, 1, 1}, nhwc, window},   // 64 columns, one k chunk
      {40, 9, 256, 40, 5, 5, Conv2dParams{2, 1, 2, 2, 1, 1}, nhwc,
       window},                                                            // half a row a tile, row stride 2
      {256, 8, 64, 200, 3, 3, Conv2dParams{1, 1, 1, 1, 1, 1}, nhwc, box},  // 4 chunks, 2 blocks of channels
      {24, 20, 129, 16, 2, 2, Conv2dParams{1, 1, 0, 0, 2, 1}, nhwc,
       window},  // 2 x 2 dilated rows, 16 channels
      {128, 12, 64, 128, 3, 3, Conv2dParams{2, 1, 1, 1, 1, 1}, nhwc, im2col},  // 2 chunks of 64, row stride 2
      {512, 16, 16, 1024, 3, 3, Conv2dParams{1, 1, 1, 1, 1, 1}, nhwc, box},    // 16 columns, 16 rows a tile
      {64, 4, 512, 64, 3, 3, Conv2dParams{1, 1, 2, 2, 2, 2}, nhwc, window},    // a quarter row, one k chunk
      {128, 4, 512, 64, 3, 3, Conv2dParams{1, 1, 2, 2, 2, 2}, nhwc, box},      // a quarter row, dilated
      {64, 8, 32, 96, 3, 3, Conv2dParams{1, 1, 1, 1, 1, 1}, nhwc, box},        // one k chunk, 8 rows a tile
      {64, 56, 56, 64, 3, 3, Conv2dParams{1, 1, 1, 1, 1, 1}, nhwc, im2col},    // ResNet-50's 56 columns
      {128, 56, 56, 128, 3, 3, Conv2dParams{2, 2, 1, 1, 1, 1}, nhwc, im2col},  // its stride-2 3 x 3
      {192, 30, 40, 64, 5, 3, Conv2dParams{1, 2, 2, 0, 1, 3}, nhwc, im2col},   // uneven padding and dilation
  };
  int i = 0;
  for (const Case& c : cases) {
    Conv2dVariant v = make_conv2d_variant(c.cin, c.h, c.w, c.cout, c.kh, c.kw, c.p, i % 2 == 0,
                                          div_leaky_relu_epilogue(2.0, 0.01));
    v.dtype = i % 2 ? DType::bf16 : DType::f16;
    v.input_layout = c.in;
    v.weight_layout = c.in;
    v.output_layout = i % 3 ? nhwc : nchw;
    ++i;
    SCOPED_TRACE(v.name());
    const HmmaTiling t = conv2d_tiling(v).as_hmma();
    ASSERT_EQ(t.tma(), c.form != window);
    ASSERT_EQ(t.tma_im2col, c.form == im2col);
    ASSERT_EQ(t.window(), c.form == window);
    EXPECT_TRUE(t.wgmma());
    EXPECT_FALSE(t.halo());
    EXPECT_EQ(t.stage_channels > 0, c.in == nchw);
    EXPECT_LE(t.shared_bytes, 227u * 1024u);
    EXPECT_EQ(kernel_name(v),
              t.tma() ? "cuinline_conv2d_hmma_tma<cuinline_conv2d_shape, cuinline_conv2d_epilogue>"
                      : "cuinline_conv2d_hmma<cuinline_conv2d_shape, cuinline_conv2d_epilogue>");
    if (t.tma()) {
      // Two warpgroups of k steps of 64 channels, and the producer warpgroup; a tile a block.
      EXPECT_EQ(t.threads(), 256);
      EXPECT_EQ(t.block_threads(), 384);
      EXPECT_EQ(t.ci_chunk, 64);
      EXPECT_EQ(t.row_tiles, 1);
      EXPECT_EQ(t.tile_cols % v.out_width() == 0 || v.out_width() % t.tile_cols == 0 || c.form == im2col,
                true);
      EXPECT_NE(make_request(v).source.find(c.form == im2col ? "kTma = 2" : "kTma = 1"), std::string::npos);
    } else {
      // Two or more k chunks: tiles in turn (up to 4 a block, the output tile in a place of its own);
      // one chunk (one window buffer): a tile a block.
      EXPECT_EQ(t.row_tiles, cuinline::ops::conv2d_impl::hmma_ci_pad(c.cin) / t.ci_chunk > 1 ? 4 : 1);
      EXPECT_EQ(t.block_threads(), t.threads());
    }
    expect_compiles_for_sm90_and_sm80(v);
    // A residual: the window form does not take it; the TMA form does, wherever a k step is 64
    // unpadded channels (the window form's shapes of one k chunk included).
    Conv2dVariant r = v;
    r.has_residual = true;
    EXPECT_FALSE(conv2d_tiling(r).window());
    EXPECT_EQ(conv2d_tiling(r).tma(), c.cin % 64 == 0);
    // Column stride 2: no window form; the TMA form's im2col copies where a k step is 64 channels.
    Conv2dVariant s2 = make_conv2d_variant(c.cin, c.h, c.w, c.cout, c.kh, c.kw,
                                           Conv2dParams{c.p.stride_h, 2, c.p.pad_h, c.p.pad_w, c.p.dilation_h, c.p.dilation_w},
                                           false, div_leaky_relu_epilogue(2.0, 0.01));
    s2.dtype = v.dtype, s2.input_layout = s2.weight_layout = nhwc;
    EXPECT_FALSE(conv2d_tiling(s2).window());
    EXPECT_EQ(conv2d_tiling(s2).tma(), c.cin % 64 == 0);
    EXPECT_EQ(conv2d_tiling(s2).as_hmma().tma_im2col, c.cin % 64 == 0);
    // Planned for an sm_80 target: neither (the mma.sync tilings).
    Conv2dVariant sm80 = v;
    sm80.target = Conv2dTarget::sm80;
    EXPECT_FALSE(conv2d_tiling(sm80).tma());
  }
}

// Every launch the planner sends to the TMA form (plain and split forms) encodes tensor maps within
// the driver's documented limits (tma_map_shapes / tma_map_problem: strides of 16 bytes, boxes,
// im2col corners), for the variant the launch runs (launched_variant: a staged call's copies, whose
// channels are Cin rounded up to 8): random f16 / bf16 shapes (printed seed) of 1-600 input
// channels — a third of them 1-7 short of a multiple of 64 — either layout, 1-5 x 1-5 filters,
// strides 1-3, padding 0-3, dilation 1-2, batches of 1-4. A staged variant's maps from the caller's
// channel count would break them (the launch's former bug, which the GPU refused at the call).
TEST(Conv2dHmma, TmaLaunchesEncodeWithinTheDriversLimits) {
  const std::uint64_t seed = cuinline::test::fresh_seed();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  const auto pick = [&](int lo, int hi) {
    return lo + static_cast<int>(rng() % static_cast<unsigned>(hi - lo + 1));
  };
  int tma = 0, staged = 0, split = 0;
  for (int draw = 0; draw < 3000; ++draw) {
    const int cin = draw % 3 == 0 ? 64 * pick(1, 8) - pick(1, 7) : pick(1, 600);
    const int kh = pick(1, 5), kw = pick(1, 5);
    Conv2dParams p{pick(1, 3), pick(1, 3), pick(0, 3), pick(0, 3), pick(1, 2), pick(1, 2)};
    const int h = pick(1, 80) + (kh - 1) * p.dilation_h, w = pick(1, 80) + (kw - 1) * p.dilation_w;
    Conv2dVariant v = make_conv2d_variant(cin, h, w, pick(1, 300), kh, kw, p, rng() % 2 == 0,
                                          div_leaky_relu_epilogue(2.0, 0.01));
    v.dtype = rng() % 2 ? DType::bf16 : DType::f16;
    v.input_layout = rng() % 3 ? Conv2dLayout::nhwc : Conv2dLayout::nchw;
    v.weight_layout = rng() % 3 ? Conv2dLayout::nhwc : Conv2dLayout::nchw;
    v.output_layout = rng() % 2 ? Conv2dLayout::nhwc : Conv2dLayout::nchw;
    v.has_residual = rng() % 4 == 0;
    if (v.out_height() < 1 || v.out_width() < 1) continue;
    const std::int64_t n = pick(1, 4);
    const Conv2dTiling t = conv2d_tiling(v);
    std::vector<HmmaTiling> launched;
    if (t.tma()) launched.push_back(t.as_hmma());
    const std::optional<HmmaTiling> s = conv2d_impl::split_tiling_of(conv2d_impl::conv2d_algo(v), v);
    if (s && s->tma()) launched.push_back(*s), ++split;
    for (const HmmaTiling& h16 : launched) {
      SCOPED_TRACE(v.name() + " batch " + std::to_string(n));
      const Conv2dVariant run = conv2d_impl::launched_variant(t, v);
      EXPECT_EQ(conv2d_impl::tma_map_problem(conv2d_impl::tma_map_shapes(h16, run, n)), "");
      EXPECT_EQ(run.in_channels % 64, 0);  // (the form's k steps: 64 unpadded channels)
      ++tma;
      if (t.staged()) {
        ++staged;
        if (v.in_channels % 8 != 0) {
          EXPECT_NE(conv2d_impl::tma_map_problem(conv2d_impl::tma_map_shapes(h16, v, n)), "");
        }
      }
    }
  }
  std::printf("%d TMA launches (%d split forms), %d of them staged\n", tma, split, staged);
  EXPECT_GE(tma, 200);
  EXPECT_GE(staged, 50);
  EXPECT_GE(split, 10);
}

// f16 / bf16 output planes of at most 128 pixels take per-image tiles of one warpgroup of one m64
// tile (one or two an image; on sm90 in the TMA form's im2col copies): ResNet-50's 7 x 7 layers
// (channels-last, and NCHW — staged whatever the image's size when the reduction is long) and 11 x 11 planes
// (two tiles an image); a 12 x 12 plane does not. Batch tiles (a tile of 128 pixels across the batch's
// images; conv2d_hmma.cuh's kBatchTiles) are f32 in TF32 with more than one tap only. They compile for sm_90
// and sm_80 (the same tiling's mma.sync form).
TEST(Conv2dHmma, SmallPlanesTakeOneM64TileAnImage) {
  const Conv2dLayout nchw = Conv2dLayout::nchw, nhwc = Conv2dLayout::nhwc;
  const Shape layer4_3x3{"resnet-50 layer4 3x3", 512, 7, 7, 512, 3, 3, Conv2dParams::square(1, 1)};
  const Shape layer4_1x1{"resnet-50 layer4 1x1", 512, 7, 7, 2048, 1, 1, {}};
  for (DType dt : {DType::f16, DType::bf16}) {
    for (Conv2dLayout l : {nchw, nhwc}) {
      const Conv2dVariant v = variant(layer4_3x3, dt, l, l, l, false);
      SCOPED_TRACE(v.name());
      const HmmaTiling t = conv2d_tiling(v).as_hmma();
      EXPECT_FALSE(t.batch_tiles());
      EXPECT_TRUE(t.wgmma());
      EXPECT_EQ(t.warps_m, 4);
      EXPECT_EQ(t.m_tiles, 1);
      EXPECT_EQ(t.tile_cols, 64);
      EXPECT_EQ(t.tiles_x, 1);
      EXPECT_EQ(t.stage_channels > 0, l == nchw);  // 25088 input elements an image: staged anyway
      EXPECT_EQ(make_request(v).source.find("kBatchTiles = 1"), std::string::npos);
      // On sm90, the TMA form: an im2col copy of an m64 tile's pixels a k step (64 channels), one
      // consumer warpgroup and the producer's.
      EXPECT_TRUE(t.tma());
      EXPECT_TRUE(t.tma_im2col);
      EXPECT_EQ(t.block_threads(), 256);
      // A 1 x 1 filter too; an NCHW input under the staging threshold (512 x 7 x 7) keeps its
      // register gather.
      const Conv2dVariant p = variant(layer4_1x1, dt, l, l, l, false);
      EXPECT_FALSE(conv2d_tiling(p).batch_tiles());
      EXPECT_EQ(conv2d_tiling(p).as_hmma().stage_channels, 0);
      EXPECT_EQ(conv2d_tiling(p).wgmma(), l == nhwc);
      if (l == nhwc) {
        EXPECT_EQ(conv2d_tiling(p).as_hmma().warps_m, 4);
        EXPECT_EQ(conv2d_tiling(p).as_hmma().tile_cols, 64);
      }
    }
    // 11 x 11 = 121 pixels: two m64 tiles an image; 12 x 12 = 144: the larger tiles.
    const Shape s11{"11x11", 512, 11, 11, 512, 3, 3, Conv2dParams::square(1, 1)};
    const HmmaTiling t11 = conv2d_tiling(variant(s11, dt, nhwc, nhwc, nhwc, false)).as_hmma();
    EXPECT_EQ(t11.tile_cols, 64);
    EXPECT_EQ(t11.tiles_x, 2);
    const Shape s12{"12x12", 512, 12, 12, 512, 3, 3, Conv2dParams::square(1, 1)};
    const HmmaTiling t12 = conv2d_tiling(variant(s12, dt, nhwc, nhwc, nhwc, false)).as_hmma();
    EXPECT_GT(t12.tile_cols, 64);
    EXPECT_FALSE(t12.batch_tiles());
  }
  expect_compiles_for_sm90_and_sm80(variant(layer4_3x3, DType::f16, nhwc, nhwc, nchw, true));
  // A 1 x 1 filter's NCHW weight is the same bytes as its channels-last one: the kernel reads it as
  // channels-last, so a channels-last input runs on cp.async with nothing staged, and a staged NCHW
  // input (2048 x 7 x 7) copies the input alone.
  for (DType dt : {DType::f16, DType::bf16}) {
    const Shape layer4_down{"resnet-50 layer4 1x1 2048", 2048, 7, 7, 512, 1, 1, {}};
    const Conv2dVariant cl = variant(layer4_down, dt, nhwc, nchw, nhwc, false);
    SCOPED_TRACE(cl.name());
    const HmmaTiling tc = conv2d_tiling(cl).as_hmma();
    EXPECT_EQ(tc.stage_channels, 0);
    EXPECT_TRUE(tc.wgmma());
    EXPECT_NE(make_request(cl).source.find("kWNhwc = 1"), std::string::npos);
    const HmmaTiling tn = conv2d_tiling(variant(layer4_down, dt, nchw, nchw, nchw, false)).as_hmma();
    EXPECT_GT(tn.stage_channels, 0);
    EXPECT_TRUE(tn.stage_input);
    EXPECT_FALSE(tn.stage_weight);
    // (A 3 x 3 filter's NCHW weight is still copied.)
    EXPECT_TRUE(conv2d_tiling(variant(layer4_3x3, dt, nchw, nchw, nchw, false)).as_hmma().stage_weight);
  }
  // f32 in TF32: the wgmma form with more than one tap.
  Conv2dVariant f = variant(layer4_3x3, DType::f32, nchw, nchw, nchw, false);
  f.precision = Conv2dPrecision::tf32;
  EXPECT_TRUE(conv2d_tiling(f).batch_tiles());
  f = variant(layer4_1x1, DType::f32, nchw, nchw, nchw, false);
  f.precision = Conv2dPrecision::tf32;
  EXPECT_FALSE(conv2d_tiling(f).batch_tiles());
  // A short reduction (8 channels x 3 x 3), a 12 x 12 plane, sm_86: none in TF32 either.
  for (const Shape& shape : {Shape{"short", 8, 7, 7, 64, 3, 3, Conv2dParams::square(1, 1)},
                             Shape{"12x12", 256, 12, 12, 256, 3, 3, Conv2dParams::square(1, 1)}}) {
    f = variant(shape, DType::f32, nchw, nchw, nchw, false);
    f.precision = Conv2dPrecision::tf32;
    EXPECT_FALSE(conv2d_tiling(f).batch_tiles()) << shape.what;
  }
  f = variant(layer4_3x3, DType::f32, nchw, nchw, nchw, false);
  f.precision = Conv2dPrecision::tf32;
  EXPECT_FALSE(conv2d_tiling(conv2d_variant_for_arch(f, cuinline::Arch::parse("sm_86"))).batch_tiles());
}

// Every shape in f16 and bf16, NCHW and channels-last (input, weight and output; once with the
// layouts mixed and a residual), compiled for sm_90: no register spills. The rendered source
// static_asserts that the host's launch figures match the template's.
TEST(Conv2dHmma, ShapesCompileForSm90WithoutSpills) {
  const cuinline::Arch sm90 = cuinline::Arch::parse("sm_90");
  const std::regex regs(R"(Used (\d+) registers)");
  const std::regex spill(R"((\d+) bytes spill stores)");
  int i = 0;
  for (const Shape& s : kShapes) {
    for (int form = 0; form < 3; ++form, ++i) {
      const DType dt = i % 2 ? DType::bf16 : DType::f16;
      const Conv2dLayout nchw = Conv2dLayout::nchw, nhwc = Conv2dLayout::nhwc;
      const Conv2dVariant v =
          form == 0   ? variant(s, dt, nchw, nchw, nchw, false)
          : form == 1 ? variant(s, dt, nhwc, nhwc, nhwc, false)
                      : variant(s, dt, i % 4 ? nhwc : nchw, i % 3 ? nchw : nhwc, i % 4 ? nchw : nhwc, true);
      SCOPED_TRACE(v.name());
      cuinline::CompileRequest request = make_request(v);
      request.options.push_back("-Xptxas=-v");
      request.options.push_back("--no-cache");  // (no compute-cache hit: ptxas runs and reports)
      const auto start = std::chrono::steady_clock::now();
      const cuinline::CompiledProgram program = cuinline::compile(request, sm90);
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      EXPECT_TRUE(program.lowered_name(kernel_name(v)).has_value());
      // The module's one kernel (a staged variant's is the conv of its channels-last copies; the
      // staging copy is a module of its own, test_conv2d_stage_emulated): registers, no spills.
      int most = -1, spill_count = 0, spill_bytes = 0, functions = 0;
      for (auto it = std::sregex_iterator(program.log.begin(), program.log.end(), regs); it != std::sregex_iterator();
           ++it) {
        most = std::max(most, std::stoi((*it)[1]));
        ++functions;
      }
      for (auto it = std::sregex_iterator(program.log.begin(), program.log.end(), spill); it != std::sregex_iterator();
           ++it) {
        EXPECT_EQ((*it)[1], "0") << program.log;
        spill_bytes += std::stoi((*it)[1]);
        ++spill_count;
      }
      EXPECT_EQ(functions, static_cast<int>(request.name_expressions.size())) << program.log;
      EXPECT_EQ(spill_count, functions) << program.log;
      const std::string used = most < 0 ? "?" : std::to_string(most),
                        spilled = spill_count ? std::to_string(spill_bytes) : "?";
      const HmmaTiling t = conv2d_tiling(v).as_hmma();
      // The wgmma tiling: built for sm_90a, wgmma not serialized by ptxas (it says so in -v's log
      // when an accumulator is touched while a wgmma is in flight); its mma.sync form compiles for
      // the other archs (sm_80 here) without spills too.
      EXPECT_EQ(program.arch.name(), t.wgmma() ? "sm_90a" : "sm_90");
      EXPECT_EQ(program.log.find("serialized"), std::string::npos) << program.log;
      EXPECT_EQ(program.log.find("warning"), std::string::npos) << program.log;  // (e.g. unreachable code)
      if (t.wgmma() && i % 3 == 1) {
        const cuinline::CompiledProgram sm80 = cuinline::compile(request, cuinline::Arch::parse("sm_80"));
        EXPECT_EQ(sm80.arch.name(), "sm_80");
        for (auto it = std::sregex_iterator(sm80.log.begin(), sm80.log.end(), spill); it != std::sregex_iterator();
             ++it) {
          EXPECT_EQ((*it)[1], "0") << sm80.log;
        }
      }
      std::printf(
          "  %-12s %-92s NVRTC %5.0f ms  %3s regs  %s B spilled  warps %dx%d tiles %dx%d k %d smem %u\n",
          s.what, v.name().c_str(), ms, used.c_str(), spilled.c_str(), t.warps_m, t.warps_n, t.m_tiles,
          t.n_tiles, t.ci_chunk, t.shared_bytes);
    }
  }
}

}  // namespace

namespace {

// The cp.async form's short reductions (2-5 k steps: a ring over every step) planned for targets of
// less shared memory than sm_90's: sm_86's 99 KiB a block did not hold the 4 buffers of 128 pixels x
// 64 channels at a k step of 64 (110592 bytes: 56 -> 106 channels, 2 x 2; found by the sm86 gpu suite),
// and the plan threw. Fewer buffers now, never fewer than 2; each fits its
// target, and those for sm_86 compile for sm_86.
TEST(Conv2dHmma, ShortAsyncReductionsFitEveryTargetsSharedMemory) {
  const cuinline::Arch archs[] = {cuinline::Arch::parse("sm_86"), cuinline::Arch::parse("sm_80"),
                                  cuinline::Arch::parse("sm_120")};
  const Conv2dLayout nhwc = Conv2dLayout::nhwc;
  int compiled = 0, fewer = 0;
  for (const cuinline::Arch& arch : archs) {
    for (const int cin : {56, 64, 72, 128}) {
      for (const int cout : {65, 106, 128, 200}) {
        for (const auto& [kh, kw] : {std::pair{2, 2}, std::pair{1, 3}, std::pair{1, 5}, std::pair{2, 1}}) {
          const Shape s{"short", cin, 33, 255, cout, kh, kw, Conv2dParams{2, 1, 2, 1, 1, 1}};
          const Conv2dVariant v =
              conv2d_variant_for_arch(variant(s, DType::f16, nhwc, nhwc, nhwc, false), arch);
          SCOPED_TRACE(v.name() + " for " + arch.name());
          HmmaTiling t;
          ASSERT_NO_THROW(t = conv2d_tiling(v).as_hmma());
          EXPECT_LE(t.shared_bytes, conv2d_max_shared_bytes(v.target));
          if (t.stages > 0) {
            EXPECT_GE(t.stages, 2);
            ++fewer;
          }
          if (arch.name() == "sm_86" && cout == 106 && (cin == 56 || cin == 128)) {
            const cuinline::CompiledProgram p = cuinline::compile(make_request(v), arch);
            EXPECT_TRUE(p.lowered_name(kernel_name(v)).has_value());
            ++compiled;
          }
        }
      }
    }
  }
  EXPECT_GT(fewer, 0);  // (the case above takes fewer buffers on sm_86)
  EXPECT_EQ(compiled, 8);
}

}  // namespace
