// Host tests of the conv2d op: variants, tiling, rendering, offline compiles for sm_90 and the
// argument checks (which run before anything touches a GPU).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <cuinline/compiler.hpp>
#include <cuinline/conv2d.hpp>
#include <cuinline/error.hpp>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "ops/conv2d/conv2d_internal.hpp"
#include "ops/conv2d/select.hpp"
#include "ops/conv2d/tiling.hpp"
#include "ops/conv2d/tuning.hpp"

namespace {

using cuinline::DType;
using cuinline::InvalidArgument;
using cuinline::TensorView;
using namespace cuinline::ops;

Conv2dVariant seed_variant() {
  return make_conv2d_variant(8, 128, 128, 64, 3, 3, Conv2dParams{}, true, div_leaky_relu_epilogue(2.0, 0.01));
}

// Fake device pointers: the checks never dereference them.
void* fake(std::uintptr_t at) {
  return reinterpret_cast<void*>(at);
}

TEST(Conv2dVariant, OutputExtentFollowsPyTorch) {
  EXPECT_EQ(conv2d_out_extent(128, 3, 1, 0, 1), 126);
  EXPECT_EQ(conv2d_out_extent(224, 7, 2, 3, 1), 112);
  EXPECT_EQ(conv2d_out_extent(32, 3, 2, 1, 1), 16);
  EXPECT_EQ(conv2d_out_extent(33, 3, 2, 0, 2), 15);  // (33 - 4 - 1) / 2 + 1
  EXPECT_EQ(conv2d_out_extent(2, 3, 1, 0, 1), 0);    // the filter does not fit
  EXPECT_EQ(conv2d_out_extent(2, 3, 1, 1, 1), 2);
  const Conv2dVariant v = seed_variant();
  EXPECT_EQ(v.out_height(), 126);
  EXPECT_EQ(v.out_width(), 126);
}

TEST(Conv2dVariant, NameAndEquality) {
  const Conv2dVariant a = seed_variant();
  EXPECT_EQ(a.name(), "conv2d<f32,8x128x128,64x3x3,s1x1,p0x0,d1x1,bias>[div(2)|leaky_relu(0.01)]");
  Conv2dVariant b = a;
  EXPECT_EQ(a, b);
  b.epilogue = div_leaky_relu_epilogue(2.0, 0.02);
  EXPECT_NE(a, b);
  b = a;
  b.params.pad_w = 1;
  EXPECT_NE(a, b);
  Conv2dVariant plain =
      make_conv2d_variant(3, 32, 32, 16, 3, 3, Conv2dParams::square(2, 1), false, Op::chain({}));
  EXPECT_NE(plain.name().find("[identity]"), std::string::npos);
}

TEST(Conv2dVariant, RejectsBadVariants) {
  Conv2dVariant v = seed_variant();
  v.dtype = static_cast<DType>(9);  // f32, f16, bf16 and f64 only
  EXPECT_THROW(v.validate(), InvalidArgument);
  v = seed_variant();
  v.input_layout = static_cast<Conv2dLayout>(7);
  EXPECT_THROW(v.validate(), InvalidArgument);
  EXPECT_THROW(make_conv2d_variant(0, 8, 8, 4, 3, 3, {}, false, Op::relu()), InvalidArgument);
  EXPECT_THROW(make_conv2d_variant(4, 2, 2, 4, 3, 3, {}, false, Op::relu()),
               InvalidArgument);  // empty output
  EXPECT_THROW(make_conv2d_variant(4, 8, 8, 4, 3, 3, Conv2dParams::square(0), false, Op::relu()),
               InvalidArgument);
  EXPECT_THROW(make_conv2d_variant(4, 8, 8, 4, 3, 3, Conv2dParams::square(1, -1), false, Op::relu()),
               InvalidArgument);
  const Op both{{Step::relu()}, "x", {}};  // steps and an expression: not an op
  EXPECT_THROW(make_conv2d_variant(4, 8, 8, 4, 3, 3, {}, false, both), InvalidArgument);
}

TEST(Conv2dRequest, EqualVariantsGiveEqualRequestsAndConstantsAreBakedIn) {
  const cuinline::CompileRequest a = make_request(seed_variant());
  const cuinline::CompileRequest b = make_request(seed_variant());
  EXPECT_EQ(a.source, b.source);
  EXPECT_EQ(a.options, b.options);
  // The seed is a Winograd variant: no contraction outside the explicit FMAs, ptxas at -O1.
  EXPECT_EQ(a.options, (std::vector<std::string>{"--fmad=false", "--ptxas-options=-O1", "-minimal"}));
  ASSERT_EQ(a.name_expressions.size(), 1u);
  EXPECT_EQ(a.name_expressions[0], kernel_name(seed_variant()));
  EXPECT_NE(a.source.find("kCin = 8;"), std::string::npos);
  EXPECT_NE(a.source.find("kOW = 126;"), std::string::npos);
  EXPECT_NE(a.source.find("0x1.47ae14p-7f"), std::string::npos) << a.source;  // 0.01f, exact
  EXPECT_NE(a.source.find("0x1p-1f"), std::string::npos) << a.source;         // 1 / 2
  Conv2dVariant other = seed_variant();
  other.epilogue = div_leaky_relu_epilogue(3.0, 0.01);
  EXPECT_NE(make_request(other).source, a.source);
}

TEST(Conv2dTiling, SeedShapeUsesTheTunedTile) {
  // fp32 3 x 3 stride 1 with 8 input channels: Winograd, the block's 64 channels at once, up to 8
  // tile rows a block. F(2x2, 3x3): 2 x 4 warps of 16 tiles x 16 channels (an NCHW output).
  const Conv2dTiling tiling = conv2d_tiling(seed_variant());
  ASSERT_TRUE(tiling.winograd());
  EXPECT_FALSE(tiling.tensor_cores());
  const WinogradTiling& t = tiling.as_winograd();
  EXPECT_EQ(t.m, 2);
  EXPECT_TRUE(t.tc_products);  // the products on tensor cores (3xTF32)
  EXPECT_EQ(t.threads(), 256);
  EXPECT_EQ(t.block_channels(), 64);
  EXPECT_EQ(t.tile_lanes, 8);         // tile lanes of a warp
  EXPECT_EQ(t.warps_x, 2);            // warps along the tiles
  EXPECT_EQ(t.pixels_per_thread, 4);  // 2 tiles of 2 columns
  EXPECT_EQ(t.channels_per_thread, 4);
  EXPECT_EQ(t.ci_chunk, 8);
  EXPECT_EQ(t.tiles_x, 2);   // 63 tiles across, 32 a block
  EXPECT_EQ(t.tiles_y, 63);  // 126 output rows, 2 a tile row
  EXPECT_EQ(t.row_tiles, 8);
  EXPECT_EQ(t.ci_unroll, 1);   // the channel loop rolled (NVRTC time)
  EXPECT_EQ(t.min_blocks, 2);           // 16 warps a multiprocessor
  // U (8 x a^2 x 64) + V (8 x a^2 x block tiles) + one raw stage (8 x a x pitch) floats.
  EXPECT_EQ(t.shared_bytes, (8 * 16 * 64 + 8 * 16 * 32 + 8 * 4 * 68) * 4u);
  // A channels-last output: 1 x 4 warps (16 tiles a block).
  Conv2dVariant nhwc = seed_variant();
  nhwc.output_layout = Conv2dLayout::nhwc;
  const Conv2dTiling tn_tiling = conv2d_tiling(nhwc);
  ASSERT_TRUE(tn_tiling.winograd());
  const WinogradTiling& tn = tn_tiling.as_winograd();
  EXPECT_TRUE(tn.tc_products);
  EXPECT_EQ(tn.threads(), 128);
  EXPECT_EQ(tn.tiles_x, 4);
  EXPECT_EQ(tn.min_blocks, 4);
  EXPECT_EQ(tn.shared_bytes, (8 * 16 * 64 + 8 * 16 * 16 + 8 * 4 * 36) * 4u);
  const cuinline::CompileRequest r = make_request(seed_variant());
  EXPECT_NE(r.source.find("kWinoTC = 1;"), std::string::npos) << r.source;
  // sm75 has no TF32 tensor cores: the products in fp32 FMA there, the only target that has them.
  Conv2dVariant sm75 = seed_variant();
  sm75.target = Conv2dTarget::sm75;
  const Conv2dTiling t75 = conv2d_tiling(sm75);
  ASSERT_TRUE(t75.winograd());
  EXPECT_FALSE(t75.as_winograd().tc_products);
  EXPECT_NE(make_request(sm75).source.find("kWinoTC = 0;"), std::string::npos);
  for (const Conv2dTarget target : {Conv2dTarget::sm80, Conv2dTarget::sm86}) {
    Conv2dVariant v = seed_variant();
    v.target = target;
    EXPECT_TRUE(conv2d_tiling(v).as_winograd().tc_products) << to_string(target);
  }
}

TEST(Conv2dTiling, WinogradOnlyWhereItApplies) {
  const Op e = div_leaky_relu_epilogue(2.0, 0.01);
  auto tiling = [&](int cin, int cout, int k, Conv2dParams p, Conv2dPrecision prec = Conv2dPrecision::fp32) {
    Conv2dVariant v = make_conv2d_variant(cin, 40, 40, cout, k, k, p, true, e);
    v.precision = prec;
    return conv2d_tiling(v);
  };
  EXPECT_TRUE(tiling(8, 16, 3, Conv2dParams::square(1, 1)).winograd());
  EXPECT_TRUE(tiling(8, 128, 3, {}).winograd());
  EXPECT_FALSE(tiling(4, 64, 3, {}).winograd());     // few input channels: the transforms would dominate
  EXPECT_FALSE(tiling(16, 64, 3, {}).winograd());    // several channel stages: measured slower than direct
  EXPECT_FALSE(tiling(64, 64, 3, {}).winograd());
  EXPECT_FALSE(tiling(8, 8, 3, {}).winograd());      // fewer than 16 output channels
  EXPECT_FALSE(tiling(8, 64, 5, {}).winograd());     // not 3 x 3
  EXPECT_FALSE(tiling(8, 64, 3, Conv2dParams::square(2)).winograd());
  EXPECT_FALSE(tiling(8, 64, 3, Conv2dParams::square(1, 2, 2)).winograd());  // dilation 2
  EXPECT_FALSE(tiling(8, 64, 3, {}, Conv2dPrecision::tf32).winograd());
  EXPECT_FALSE(tiling(8, 64, 3, {}, Conv2dPrecision::tf32x3).winograd());
  const Conv2dVariant rect = make_conv2d_variant(8, 40, 40, 64, 3, 1, {}, true, e);
  EXPECT_FALSE(conv2d_tiling(rect).winograd());

  // Warps: along the channels as Cout needs (up to 4 of 16 channels), the rest of the block's
  // along the tiles (4 warps in all), fewer where the row is narrow (38 output columns: 19 tiles,
  // 2 warps of 16).
  const WinogradTiling a = tiling(8, 32, 3, {}).as_winograd();
  EXPECT_EQ(a.warps_c, 2);
  EXPECT_EQ(a.warps_x, 2);
  EXPECT_EQ(a.block_channels(), 32);
  const WinogradTiling b = tiling(8, 16, 3, {}).as_winograd();
  EXPECT_EQ(b.warps_c, 1);
  EXPECT_EQ(b.warps_x, 2);
  EXPECT_EQ(b.block_channels(), 16);
  EXPECT_EQ(b.ci_chunk, 8);
}

// The direct FMA kernel's tiles: 7 pixels a thread where the output width is a multiple of 7 and
// an image has enough work, column phases on strided non-compact column axes.
TEST(Conv2dTiling, SevenPixelTilesAndColumnPhases) {
  const Op e = div_leaky_relu_epilogue(2.0, 0.01);
  auto variant = [&](int cin, int hw, int cout, int k, Conv2dParams p) {
    return make_conv2d_variant(cin, hw, hw, cout, k, k, p, true, e);
  };
  // 8x32x112^2 -> 64 k5 p2: 112 = 16 threads x 7 pixels, 128-thread blocks, 3 resident asked.
  const DirectTiling b = conv2d_tiling(variant(32, 112, 64, 5, Conv2dParams::square(1, 2))).as_direct();
  EXPECT_EQ(b.pixels_per_thread, 7);
  EXPECT_EQ(b.channels_per_thread, 8);
  EXPECT_EQ(b.threads_x, 16);
  EXPECT_EQ(b.threads(), 128);
  EXPECT_EQ(b.min_blocks, 3);
  EXPECT_EQ(b.tiles_x, 1);
  EXPECT_LE(b.shared_bytes, 75u * 1024);
  const DirectTiling c = conv2d_tiling(variant(64, 56, 64, 3, Conv2dParams::square(1, 1))).as_direct();
  EXPECT_EQ(c.pixels_per_thread, 7);
  EXPECT_EQ(c.threads_x, 8);
  // Too little work an image (58 M multiply-adds): 4-pixel tiles.
  const auto pixels = [](const Conv2dVariant& v) { return conv2d_tiling(v).as_direct().pixels_per_thread; };
  EXPECT_EQ(pixels(variant(64, 56, 128, 3, Conv2dParams::square(2, 1))), 4);
  EXPECT_EQ(pixels(variant(16, 224, 32, 3, Conv2dParams::square(2, 1))), 4);
  // Widths that 4-pixel tiles cover exactly.
  EXPECT_EQ(pixels(variant(32, 64, 128, 3, {})), 4);

  auto phases = [&](const Conv2dVariant& v) {
    const std::string src = make_request(v).source;
    const auto at = src.find("kColPhases = ");
    return at == std::string::npos ? -1 : std::stoi(src.substr(at + 13));
  };
  EXPECT_EQ(phases(variant(64, 56, 128, 3, Conv2dParams::square(2, 1))), 2);
  EXPECT_EQ(phases(variant(3, 224, 64, 7, Conv2dParams::square(2, 3))), 2);
  EXPECT_EQ(phases(make_conv2d_variant(8, 60, 61, 16, 5, 5, Conv2dParams{1, 3, 0, 2, 1, 1}, true, e)), 3);
  EXPECT_EQ(phases(variant(32, 112, 64, 5, Conv2dParams::square(1, 2))), 1);  // stride 1
  EXPECT_EQ(phases(variant(64, 224, 16, 1, Conv2dParams::square(2))), 1);     // 1x1 s2: compact
  EXPECT_EQ(phases(make_conv2d_variant(8, 60, 61, 16, 5, 5, Conv2dParams{1, 5, 0, 2, 1, 1}, true, e)), 1);
}

struct Shape {
  int cin, h, w, cout, kh, kw;
  Conv2dParams p;
  bool bias;
  Op epilogue;
};

void compile_and_report(const Conv2dVariant& v) {
  const cuinline::Arch sm90 = cuinline::Arch::parse("sm_90");
  SCOPED_TRACE(v.name());
  const auto start = std::chrono::steady_clock::now();
  const cuinline::CompiledProgram program = cuinline::compile(make_request(v), sm90);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(program.kind, cuinline::BinaryKind::cubin);
  EXPECT_FALSE(program.binary.empty());
  EXPECT_TRUE(program.lowered_name(kernel_name(v)).has_value());
  const Conv2dTiling t = conv2d_tiling(v);
  char block[160];
  if (t.kernel() == Conv2dKernel::direct) {
    const DirectTiling& d = t.as_direct();
    std::snprintf(block, sizeof block,
                  "block %dx%dx%d (threads_y incl. k-split) tile %dpx x %dch chunk %d unroll %d pipe %d",
                  d.threads_x, d.threads_y, d.channel_groups, d.pixels_per_thread, d.channels_per_thread,
                  d.ci_chunk, d.ci_unroll, d.pipeline);
  } else if (t.winograd()) {
    const WinogradTiling& w = t.as_winograd();
    std::snprintf(block, sizeof block, "Winograd %d lanes x %dx%d warps tile %dpx x %dch chunk %d unroll %d",
                  w.tile_lanes, w.warps_x, w.warps_c, w.pixels_per_thread, w.channels_per_thread, w.ci_chunk,
                  w.ci_unroll);
  } else {
    std::snprintf(block, sizeof block, "%d threads x %d channels", t.threads(), t.block_channels());
  }
  // Compile time is reported, never asserted (it depends on the machine).
  std::printf("  %-78s NVRTC %6.0f ms  %s smem %u\n", v.name().c_str(), ms, block, t.grid().shared_bytes);
}

// Offline compiles for sm_90 (no GPU needed): every tiling regime, and the host's launch figures
// are checked against the template's own by static_asserts in the rendered source.
TEST(Conv2dCompile, SeveralShapesCompileForSm90) {
  const Shape shapes[] = {
      {8, 128, 128, 64, 3, 3, {}, true, div_leaky_relu_epilogue(2.0, 0.01)},   // the seed
      {3, 224, 224, 64, 7, 7, Conv2dParams::square(2, 3), false, Op::relu()},  // a ResNet stem
      {64, 56, 56, 128, 1, 1, {}, true, Op::chain({Step::mul(0.5), Step::add(1.0)})},
      {16, 33, 17, 32, 3, 3, Conv2dParams{2, 1, 1, 0, 2, 1}, true, Op::chain({Step::clamp(-1.0, 1.0)})},
      {64, 32, 32, 128, 5, 5, Conv2dParams::square(1, 2), true, Op::leaky_relu(0.2)},
      {5, 6, 3, 4, 3, 5, Conv2dParams::square(1, 2), false, Op::chain({})},  // W smaller than the filter
      {7, 9, 9, 12, 3, 3, Conv2dParams::square(1, 1, 3), true, Op::relu()},
      {6, 20, 40, 8, 1, 2, Conv2dParams{3, 3, 0, 1, 1, 1}, true, Op::relu()},  // filter reach < stride
      // Winograd: odd sizes and padding 1, channels not a multiple of the block's, 2 rows of 2
      // columns (one tile), 16-byte staging (W and padding multiples of 4).
      {8, 37, 23, 24, 3, 3, Conv2dParams::square(1, 1), true, Op::relu()},
      {8, 4, 4, 16, 3, 3, {}, true, div_leaky_relu_epilogue(2.0, 0.01)},
      {8, 20, 36, 128, 3, 3, Conv2dParams::square(1, 4), true, Op::relu()},
      // Column phases (strides 3 and 4 with dilation), 7-pixel tiles with channels past Cout.
      {8, 60, 61, 16, 5, 5, Conv2dParams{1, 3, 0, 2, 1, 1}, true, Op::relu()},
      {8, 30, 75, 16, 3, 3, Conv2dParams{2, 4, 1, 1, 1, 2}, true, Op::relu()},
      {32, 112, 112, 36, 3, 3, Conv2dParams::square(1, 1), false, Op::leaky_relu(0.1)},
  };
  for (const Shape& s : shapes) {
    compile_and_report(make_conv2d_variant(s.cin, s.h, s.w, s.cout, s.kh, s.kw, s.p, s.bias, s.epilogue));
  }
}

// The shapes of bench/conv2d_peers.py's sweep (Cin, H = W, Cout, K, stride, padding; /2, LeakyReLU
// 0.01, bias): their NVRTC times are what the issue's compile-time target is about.
TEST(Conv2dCompile, BenchSweepShapesCompileForSm90) {
  const int sweep[][6] = {
      {8, 128, 64, 3, 1, 0},  {3, 224, 64, 7, 2, 3},  {3, 224, 64, 7, 2, 3}, {3, 32, 16, 3, 1, 1},
      {16, 32, 32, 3, 1, 1},  {3, 64, 32, 5, 1, 2},   {8, 128, 64, 5, 2, 0}, {16, 224, 32, 3, 2, 1},
      {32, 112, 64, 5, 1, 2}, {32, 64, 128, 3, 1, 0}, {64, 56, 64, 3, 1, 1}, {64, 56, 128, 3, 2, 1},
      {64, 56, 128, 1, 1, 0}, {64, 224, 16, 1, 2, 0}, {64, 32, 64, 7, 1, 3}, {8, 64, 16, 3, 1, 1}};
  for (const auto& s : sweep) {
    compile_and_report(make_conv2d_variant(s[0], s[1], s[1], s[2], s[3], s[3],
                                           Conv2dParams::square(s[4], s[5]), true,
                                           div_leaky_relu_epilogue(2.0, 0.01)));
  }
}

class Conv2dArgs : public ::testing::Test {
 protected:
  TensorView input = TensorView::contiguous(fake(0x100000), DType::f32, {2, 8, 16, 16});
  TensorView weight = TensorView::contiguous(fake(0x200000), DType::f32, {4, 8, 3, 3});
  TensorView bias = TensorView::contiguous(fake(0x300000), DType::f32, {4});
  TensorView output = TensorView::contiguous(fake(0x400000), DType::f32, {2, 4, 14, 14});
  Op epi = div_leaky_relu_epilogue(2.0, 0.01);
};

TEST_F(Conv2dArgs, AcceptsMatchingShapes) {
  const Conv2dVariant v = conv2d_variant_for(input, weight, bias, output, {}, epi);
  EXPECT_EQ(v.in_channels, 8);
  EXPECT_EQ(v.out_channels, 4);
  EXPECT_TRUE(v.has_bias);
  EXPECT_FALSE(conv2d_variant_for(input, weight, TensorView{}, output, {}, epi).has_bias);
}

TEST_F(Conv2dArgs, RejectsBadInputBeforeAnyLaunch) {
  const TensorView mismatched = TensorView::contiguous(fake(0x200000), DType::f32, {4, 7, 3, 3});
  EXPECT_THROW(conv2d(input, mismatched, bias, output, {}, epi), InvalidArgument);
  const TensorView small = TensorView::contiguous(fake(0x400000), DType::f32, {2, 4, 13, 14});
  EXPECT_THROW(conv2d(input, weight, bias, small, {}, epi), InvalidArgument);
  const TensorView padded_needed = TensorView::contiguous(fake(0x400000), DType::f32, {2, 4, 16, 16});
  EXPECT_THROW(conv2d(input, weight, bias, padded_needed, {}, epi),
               InvalidArgument);  // params say no padding
  EXPECT_NO_THROW(conv2d_variant_for(input, weight, bias, padded_needed, Conv2dParams::square(1, 1), epi));
  const TensorView half = TensorView::contiguous(fake(0x100000), DType::f16, {2, 8, 16, 16});
  EXPECT_THROW(conv2d(half, weight, bias, output, {}, epi), InvalidArgument);
  const TensorView bad_bias = TensorView::contiguous(fake(0x300000), DType::f32, {5});
  EXPECT_THROW(conv2d(input, weight, bad_bias, output, {}, epi), InvalidArgument);
  const TensorView weight3 = TensorView::contiguous(fake(0x200000), DType::f32, {4, 8, 9});
  EXPECT_THROW(conv2d(input, weight3, bias, output, {}, epi), InvalidArgument);
  const TensorView huge_filter = TensorView::contiguous(fake(0x200000), DType::f32, {4, 8, 17, 17});
  EXPECT_THROW(conv2d(input, huge_filter, bias, output, {}, epi), InvalidArgument);
  const TensorView strided =
      TensorView::strided(fake(0x100000), DType::f32, {2, 8, 16, 16}, {4096, 256, 16, 1});
  // (Valid, as in F.conv2d: read through a compact NCHW copy, the variant of a contiguous input.)
  EXPECT_TRUE(conv2d_variant_for(strided, weight, bias, output, {}, epi) ==
              conv2d_variant_for(input, weight, bias, output, {}, epi));
  const TensorView shared_output = TensorView::strided(fake(0x400000), DType::f32, {2, 4, 14, 14}, {0, 196, 14, 1});
  EXPECT_THROW(conv2d(input, weight, bias, shared_output, {}, epi), InvalidArgument);
  const TensorView aliased = TensorView::contiguous(fake(0x100000), DType::f32, {2, 4, 14, 14});
  EXPECT_THROW(conv2d(input, weight, bias, aliased, {}, epi), InvalidArgument);
  const TensorView null_in = TensorView::contiguous(nullptr, DType::f32, {2, 8, 16, 16});
  EXPECT_THROW(conv2d(null_in, weight, bias, output, {}, epi), InvalidArgument);
  EXPECT_THROW(conv2d(input, weight, bias, output, Conv2dParams::square(0), epi), InvalidArgument);
  EXPECT_EQ(conv2d_stats().launches, 0u);
}

// The selector's contract: select_conv2d(v) is what conv2d_tiling, make_request, make_stage_request
// and kernel_name give, its algorithm agrees with the tiling, and the grid reaches every algorithm.
TEST(Conv2dSelect, SelectionIsThePublicPartsForEveryAlgorithm) {
  using conv2d_impl::Conv2dAlgo;
  struct Shape {
    int ci, h, w, co, k, stride, pad, groups;
  };
  const Shape shapes[] = {{8, 64, 64, 32, 3, 1, 1, 1},      {64, 56, 56, 64, 3, 1, 1, 1},
                          {64, 28, 28, 256, 1, 1, 0, 1},    {3, 64, 64, 16, 7, 2, 3, 1},
                          {512, 7, 7, 512, 3, 1, 1, 1},     {32, 28, 28, 32, 3, 1, 1, 32},
                          {16, 100, 100, 16, 31, 1, 15, 1}, {4, 16, 16, 8, 3, 2, 1, 1}};
  const Conv2dLayout N = Conv2dLayout::nchw, C = Conv2dLayout::nhwc;
  std::set<Conv2dAlgo> seen;
  for (const Shape& s : shapes) {
    for (DType dtype : {DType::f32, DType::f16, DType::f64}) {
      for (Conv2dPrecision precision : {Conv2dPrecision::fp32, Conv2dPrecision::tf32}) {
        for (Conv2dLayout layout : {N, C}) {
          for (Conv2dTarget target : {Conv2dTarget::sm90, Conv2dTarget::sm86}) {
            if (dtype != DType::f32 && precision != Conv2dPrecision::fp32) continue;
            Conv2dParams params = Conv2dParams::square(s.stride, s.pad);
            params.groups = s.groups;
            Conv2dVariant v =
                make_conv2d_variant(s.ci, s.h, s.w, s.co, s.k, s.k, params, true, Op::chain({}));
            v.dtype = dtype;
            v.precision = precision;
            v.input_layout = v.weight_layout = v.output_layout = layout;
            v.target = target;
            const conv2d_impl::Conv2dSelection sel = conv2d_impl::select_conv2d(v);
            seen.insert(sel.algo);
            SCOPED_TRACE(v.name() + " " + conv2d_impl::to_string(sel.algo));
            EXPECT_EQ(sel.kernel_name, kernel_name(v));
            const cuinline::CompileRequest request = make_request(v);
            EXPECT_EQ(sel.request.source, request.source);
            EXPECT_EQ(sel.request.options, request.options);
            EXPECT_EQ(sel.request.name_expressions, std::vector<std::string>{sel.kernel_name});
            const std::optional<cuinline::CompileRequest> stage = make_stage_request(v);
            ASSERT_EQ(sel.stage_request.has_value(), stage.has_value());
            if (stage) {
              EXPECT_EQ(sel.stage_request->source, stage->source);
            }
            const Conv2dTiling t = conv2d_tiling(v);
            EXPECT_EQ(sel.tiling.grid().shared_bytes, t.grid().shared_bytes);
            EXPECT_EQ(sel.tiling.threads(), t.threads());
            EXPECT_EQ(sel.tiling.block_channels(), t.block_channels());
            // The algorithm is the tiling's form.
            const Conv2dTiling& st = sel.tiling;
            switch (sel.algo) {
              case Conv2dAlgo::hmma_halo:
                EXPECT_TRUE(st.halo() && st.wgmma() && !st.staged());
                break;
              case Conv2dAlgo::hmma_wgmma:
                EXPECT_TRUE(st.half_mma() && st.wgmma() && !st.halo() && !st.staged());
                break;
              case Conv2dAlgo::hmma_staged:
                EXPECT_TRUE(st.half_mma() && st.staged() && sel.stage_request);
                break;
              case Conv2dAlgo::hmma_mma:
                EXPECT_TRUE(st.half_mma() && !st.wgmma() && !st.pointwise() && !st.staged());
                break;
              case Conv2dAlgo::pointwise:
                EXPECT_TRUE(st.pointwise() && !sel.stage_request);
                break;
              case Conv2dAlgo::tf32_wgmma:
                EXPECT_TRUE(st.tf32_wgmma() && st.staged() && sel.stage_request);
                break;
              case Conv2dAlgo::fp32_transposed:
                EXPECT_TRUE(st.transposes() && sel.stage_request);
                EXPECT_NE(sel.kernel_algo, Conv2dAlgo::fp32_transposed);
                break;
              case Conv2dAlgo::generic:
                EXPECT_TRUE(st.generic() && !sel.stage_request);
                break;
              case Conv2dAlgo::fp32_mma:
                EXPECT_TRUE(st.tensor_cores() && !st.half_mma() && !st.wgmma());
                break;
              case Conv2dAlgo::fp32_winograd:
                EXPECT_TRUE(st.winograd());
                break;
              case Conv2dAlgo::fp32_direct:
                EXPECT_TRUE(!st.tensor_cores() && !st.winograd() && !st.generic() && !st.transposes());
                break;
            }
          }
        }
      }
    }
  }
  // (Every form is reached where no knob switches one off.)
  for (const conv2d_impl::Conv2dKnobInfo& k : conv2d_impl::conv2d_knob_table()) {
    if (std::getenv(k.name) != nullptr) return;
  }
  EXPECT_EQ(seen.size(), 11u);
}

// Each knob's parsing: accepted values are taken, anything else is the default.
// The tuning table covers every figure of Conv2dTuning once, each with a provenance and a positive
// value on every target, and conv2d_tuning(target) is that column; no shared-memory budget passes its
// target's limit.
TEST(Conv2dTuning, EveryFigureHasAValueAndAProvenanceOnEveryTarget) {
  const auto& table = conv2d_impl::conv2d_tuning_table();
  EXPECT_EQ(table.size() * sizeof(std::int64_t), sizeof(conv2d_impl::Conv2dTuning));
  const Conv2dTarget targets[4] = {Conv2dTarget::sm90, Conv2dTarget::sm80, Conv2dTarget::sm86, Conv2dTarget::sm75};
  std::set<std::string> names;
  for (const auto& row : table) {
    SCOPED_TRACE(row.name);
    EXPECT_TRUE(names.insert(row.name).second);
    EXPECT_GT(std::strlen(row.provenance), 20u);
    for (int i = 0; i < 4; ++i) {
      EXPECT_GT(row.value[i], 0);
      EXPECT_EQ(conv2d_impl::conv2d_tuning(targets[i]).*row.field, row.value[i]);
      if (std::string(row.name).find("bytes") != std::string::npos && std::string(row.name) != "winograd_max_weight_bytes") {
        EXPECT_LE(row.value[i], static_cast<std::int64_t>(conv2d_max_shared_bytes(targets[i])));
      }
    }
  }
}

TEST(Conv2dKnobs, ParsedValuesAndDefaults) {
  const auto with = [](std::map<std::string, std::string> env) {
    static std::map<std::string, std::string> current;
    current = std::move(env);
    return conv2d_impl::read_conv2d_knobs([](const char* name) -> const char* {
      const auto it = current.find(name);
      return it == current.end() ? nullptr : it->second.c_str();
    });
  };
  const conv2d_impl::Conv2dKnobs d = with({});
  EXPECT_TRUE(d.hmma && d.wgmma && d.halo && d.window && d.window_tiles && d.batch_tiles && d.tf32_wgmma &&
              d.pointwise && d.halo_weight_batch && d.winograd && !d.hmma_tile_set && !d.hmma_pipe_set &&
              !d.tf32x3_chained_sums && !d.target && d.tma && !d.tma_im2col);
  EXPECT_EQ(d.store_batch, -1);
  EXPECT_EQ(d.stage, 2);
  EXPECT_EQ(d.transpose, 2);
  EXPECT_EQ(d.transpose_log_tile, 11);
  EXPECT_EQ(d.tf32x3_kw, 1);
  EXPECT_EQ(d.winograd_warps + d.winograd_rows + d.window_rows + d.halo_rows, 0);
  EXPECT_EQ(d.split_k, -1);  // (split-K auto)
  EXPECT_TRUE(d.split_k_error.empty());
  // Every variable of the table is read: its accepted values are taken, any other is the default.
  using K = conv2d_impl::Conv2dKnobs;
  const std::pair<std::map<std::string, std::string>, bool (*)(const K&)> cases[] = {
      {{{"CUINLINE_CONV2D_HMMA", "0"}}, [](const K& k) { return !k.hmma; }},
      {{{"CUINLINE_CONV2D_HMMA", "off"}}, [](const K& k) { return k.hmma; }},  // (only "0" switches off)
      {{{"CUINLINE_CONV2D_WGMMA", "0"}}, [](const K& k) { return !k.wgmma; }},
      {{{"CUINLINE_CONV2D_HALO", "0"}}, [](const K& k) { return !k.halo; }},
      {{{"CUINLINE_CONV2D_WINDOW", "0"}}, [](const K& k) { return !k.window; }},
      {{{"CUINLINE_CONV2D_TMA", "0"}}, [](const K& k) { return !k.tma; }},
      {{{"CUINLINE_CONV2D_TMA", "1"}}, [](const K& k) { return k.tma && !k.tma_im2col; }},
      {{{"CUINLINE_CONV2D_TMA", "im2col"}}, [](const K& k) { return k.tma && k.tma_im2col; }},
      {{{"CUINLINE_CONV2D_BATCH_TILES", "0"}}, [](const K& k) { return !k.batch_tiles; }},
      {{{"CUINLINE_CONV2D_TF32_WGMMA", "0"}}, [](const K& k) { return !k.tf32_wgmma; }},
      {{{"CUINLINE_CONV2D_POINTWISE", "0"}}, [](const K& k) { return !k.pointwise; }},
      {{{"CUINLINE_CONV2D_HALO_WBATCH", "0"}}, [](const K& k) { return !k.halo_weight_batch; }},
      {{{"CUINLINE_CONV2D_STORE_BATCH", "1"}}, [](const K& k) { return k.store_batch == 1; }},
      {{{"CUINLINE_CONV2D_STORE_BATCH", "2"}}, [](const K& k) { return k.store_batch == -1; }},
      {{{"CUINLINE_CONV2D_STAGE", "0"}}, [](const K& k) { return k.stage == 0; }},
      {{{"CUINLINE_CONV2D_STAGE", "yes"}}, [](const K& k) { return k.stage == 2; }},
      {{{"CUINLINE_CONV2D_TRANSPOSE", "1"}}, [](const K& k) { return k.transpose == 1; }},
      {{{"CUINLINE_CONV2D_TRANSPOSE_TILE", "12"}}, [](const K& k) { return k.transpose_log_tile == 12; }},
      {{{"CUINLINE_CONV2D_TRANSPOSE_TILE", "13"}}, [](const K& k) { return k.transpose_log_tile == 11; }},
      {{{"CUINLINE_CONV2D_WINOGRAD", "0"}}, [](const K& k) { return !k.winograd; }},
      // (F(4x4)'s former value: Winograd F(2x2), as any value but "0".)
      {{{"CUINLINE_CONV2D_WINOGRAD", "4"}}, [](const K& k) { return k.winograd; }},
      {{{"CUINLINE_CONV2D_WINOGRAD_WARPS", "8"}}, [](const K& k) { return k.winograd_warps == 8; }},
      {{{"CUINLINE_CONV2D_WINOGRAD_WARPS", "6"}}, [](const K& k) { return k.winograd_warps == 0; }},
      {{{"CUINLINE_CONV2D_WINOGRAD_ROWS", "4"}}, [](const K& k) { return k.winograd_rows == 4; }},
      {{{"CUINLINE_CONV2D_HALO_ROWS", "3"}}, [](const K& k) { return k.halo_rows == 0; }},
      {{{"CUINLINE_CONV2D_TF32X3_KW", "3"}}, [](const K& k) { return k.tf32x3_kw == 3; }},
      {{{"CUINLINE_CONV2D_TF32X3_KW", "32"}}, [](const K& k) { return k.tf32x3_kw == 1; }},
      {{{"CUINLINE_CONV2D_TF32X3_SUMS", "chained"}}, [](const K& k) { return k.tf32x3_chained_sums; }},
      {{{"CUINLINE_CONV2D_WINDOW_ROWS", "0"}},
       [](const K& k) { return !k.window_tiles && k.window_rows == 0; }},
      {{{"CUINLINE_CONV2D_WINDOW_ROWS", "2"}},
       [](const K& k) { return k.window_tiles && k.window_rows == 2; }},
      {{{"CUINLINE_CONV2D_HMMA_TILE", "4,1,2,4,32,1"}},
       [](const K& k) { return k.hmma_tile_set && k.hmma_tile[4] == 32; }},
      {{{"CUINLINE_CONV2D_HMMA_TILE", "4,1,2"}}, [](const K& k) { return !k.hmma_tile_set; }},
      {{{"CUINLINE_CONV2D_HMMA_PIPE", "3,1"}},
       [](const K& k) { return k.hmma_pipe_set && k.hmma_pipe_depth == 3 && k.hmma_pipe_l2 == 1; }},
      {{{"CUINLINE_CONV2D_HMMA_PIPE", "3"}}, [](const K& k) { return !k.hmma_pipe_set; }},
      {{{"CUINLINE_CONV2D_SPLIT_K", "auto"}},
       [](const K& k) { return k.split_k == -1 && k.split_k_error.empty(); }},
      {{{"CUINLINE_CONV2D_SPLIT_K", "0"}},
       [](const K& k) { return k.split_k == 0 && k.split_k_error.empty(); }},
      {{{"CUINLINE_CONV2D_SPLIT_K", "2"}},
       [](const K& k) { return k.split_k == 2 && k.split_k_error.empty(); }},
      {{{"CUINLINE_CONV2D_SPLIT_K", "8"}},
       [](const K& k) { return k.split_k == 8 && k.split_k_error.empty(); }},
      // Any other value: auto, and the warning that says what was refused and what is accepted.
      {{{"CUINLINE_CONV2D_SPLIT_K", "1"}},
       [](const K& k) {
         return k.split_k == -1 && k.split_k_error.find("'1' is not 0 (off), auto or a number of slices from 2 to 8") !=
                                       std::string::npos;
       }},
      {{{"CUINLINE_CONV2D_SPLIT_K", "9"}},
       [](const K& k) { return k.split_k == -1 && !k.split_k_error.empty(); }},
      {{{"CUINLINE_CONV2D_SPLIT_K", "4x"}},
       [](const K& k) { return k.split_k == -1 && !k.split_k_error.empty(); }},
      {{{"CUINLINE_CONV2D_SPLIT_K", "on"}},
       [](const K& k) { return k.split_k == -1 && !k.split_k_error.empty(); }},
      {{{"CUINLINE_CONV2D_SPLIT_K", ""}},
       [](const K& k) { return k.split_k == -1 && k.split_k_error.empty(); }},
      {{{"CUINLINE_CONV2D_GENERIC_SPLIT_K", "64"}}, [](const K& k) { return k.generic_split_k_min == 64; }},
      {{{"CUINLINE_CONV2D_GENERIC_SPLIT_K", "0"}}, [](const K& k) { return k.generic_split_k_min == 0; }},
      {{{"CUINLINE_CONV2D_GENERIC_SPLIT_K", "8"}}, [](const K& k) { return k.generic_split_k_min == -1; }},
      {{{"CUINLINE_CONV2D_GENERIC_SPLIT_K", "x"}}, [](const K& k) { return k.generic_split_k_min == -1; }},
      {{{"CUINLINE_CONV2D_GENERIC_WIDE", "0"}}, [](const K& k) { return k.generic_wide == 0; }},
      {{{"CUINLINE_CONV2D_GENERIC_WIDE", "1"}}, [](const K& k) { return k.generic_wide == 1; }},
      {{{"CUINLINE_CONV2D_GENERIC_WIDE", "2"}}, [](const K& k) { return k.generic_wide == -1; }},
      {{{"CUINLINE_CONV2D_TARGET", "sm_75"}},
       [](const K& k) { return k.target == cuinline::Arch::parse("sm_75"); }},
      {{{"CUINLINE_CONV2D_TARGET", "gpu"}}, [](const K& k) { return !k.target && !k.target_error.empty(); }},
  };
  for (const auto& [env, holds] : cases)
    EXPECT_TRUE(holds(with(env))) << env.begin()->first << "=" << env.begin()->second;
  // The table names every variable once.
  std::set<std::string> names;
  for (const conv2d_impl::Conv2dKnobInfo& k : conv2d_impl::conv2d_knob_table()) {
    EXPECT_EQ(std::strncmp(k.name, "CUINLINE_CONV2D_", 16), 0) << k.name;
    EXPECT_TRUE(names.insert(k.name).second) << k.name;
  }
  EXPECT_EQ(names.size(), 26u);
}

// The knobs are read from the environment once, in the process's first plan: each case a fresh
// process whose selections follow its variables.
TEST(Conv2dKnobsDeathTest, TheEnvironmentSteersTheSelection) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  using conv2d_impl::Conv2dAlgo;
  const auto variant = [](DType dtype, Conv2dPrecision precision, int ci, int hw, int co, int k,
                          Conv2dLayout layout) {
    Conv2dVariant v =
        make_conv2d_variant(ci, hw, hw, co, k, k, Conv2dParams::square(1, k / 2), false, Op::chain({}));
    v.dtype = dtype;
    v.precision = precision;
    v.input_layout = v.weight_layout = v.output_layout = layout;
    return v;
  };
  EXPECT_EXIT(
      {
        setenv("CUINLINE_CONV2D_HMMA", "0", 1);
        setenv("CUINLINE_CONV2D_WINOGRAD", "0", 1);
        setenv("CUINLINE_CONV2D_TF32_WGMMA", "0", 1);
        setenv("CUINLINE_CONV2D_TRANSPOSE", "1", 1);
        const bool ok = conv2d_impl::conv2d_algo(variant(DType::f16, Conv2dPrecision::fp32, 64, 56, 64, 3,
                                                         Conv2dLayout::nhwc)) == Conv2dAlgo::generic &&
                        conv2d_impl::conv2d_algo(variant(DType::f32, Conv2dPrecision::fp32, 8, 64, 32, 3,
                                                         Conv2dLayout::nchw)) == Conv2dAlgo::fp32_direct &&
                        conv2d_impl::conv2d_algo(variant(DType::f32, Conv2dPrecision::tf32, 64, 56, 64, 3,
                                                         Conv2dLayout::nchw)) == Conv2dAlgo::fp32_mma &&
                        conv2d_impl::conv2d_algo(variant(DType::f32, Conv2dPrecision::fp32, 4, 8, 4, 3,
                                                         Conv2dLayout::nhwc)) == Conv2dAlgo::fp32_transposed;
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        setenv("CUINLINE_CONV2D_STAGE", "0", 1);
        setenv("CUINLINE_CONV2D_WGMMA", "0", 1);
        setenv("CUINLINE_CONV2D_TRANSPOSE", "0", 1);
        setenv("CUINLINE_CONV2D_POINTWISE", "0", 1);
        const bool ok = conv2d_impl::conv2d_algo(variant(DType::f16, Conv2dPrecision::fp32, 64, 56, 64, 3,
                                                         Conv2dLayout::nchw)) == Conv2dAlgo::hmma_mma &&
                        conv2d_impl::conv2d_algo(variant(DType::f16, Conv2dPrecision::fp32, 64, 56, 64, 3,
                                                         Conv2dLayout::nhwc)) == Conv2dAlgo::hmma_mma &&
                        conv2d_impl::conv2d_algo(variant(DType::f16, Conv2dPrecision::fp32, 64, 56, 64, 1,
                                                         Conv2dLayout::nchw)) == Conv2dAlgo::hmma_mma &&
                        conv2d_impl::conv2d_algo(variant(DType::f32, Conv2dPrecision::fp32, 64, 56, 64, 3,
                                                         Conv2dLayout::nhwc)) == Conv2dAlgo::generic;
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

// CUINLINE_CONV2D_TMA=0: the UNet-like layer (128 channels on 128 x 128, rows of 128 columns) plans the
// window form in place of the TMA form it plans by default.
TEST(Conv2dKnobsDeathTest, TheTmaKnobLeavesTheWindowForm) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto unet = [] {
    Conv2dVariant v = make_conv2d_variant(128, 128, 128, 128, 3, 3, Conv2dParams::square(1, 1), true, Op::relu());
    v.dtype = DType::bf16;
    v.input_layout = v.weight_layout = v.output_layout = Conv2dLayout::nhwc;
    return v;
  };
  // (The child runs the test from its start: nothing may plan, reading the knobs, before this.)
  EXPECT_EXIT(
      {
        setenv("CUINLINE_CONV2D_TMA", "0", 1);
        const Conv2dTiling t = conv2d_tiling(unet());
        std::exit(t.window() && !t.tma() ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  if (std::getenv("CUINLINE_CONV2D_TMA") == nullptr) EXPECT_TRUE(conv2d_tiling(unet()).tma());
}

// Split-K's launch rule: no split where the tiles fill more than half of the multiprocessors;
// else as many slices as keep one block a multiprocessor, at most the variant's; forced: the
// variant's always.
TEST(Conv2dSplitK, SlicesFollowTheGridAndTheDevice) {
  using conv2d_impl::split_k_slices;
  EXPECT_EQ(split_k_slices(4, 8, 132, false), 8);    // ResNet-50's 512-channel 3 x 3 on 7 x 7, batch 1
  EXPECT_EQ(split_k_slices(32, 8, 132, false), 4);   // 132 / 32
  EXPECT_EQ(split_k_slices(66, 8, 132, false), 2);   // half the multiprocessors
  EXPECT_EQ(split_k_slices(67, 8, 132, false), 1);   // more than half: whole tiles
  EXPECT_EQ(split_k_slices(128, 8, 132, false), 1);  // batch 32 of the same layer
  EXPECT_EQ(split_k_slices(4, 3, 132, false), 3);    // the variant's most (its k steps)
  EXPECT_EQ(split_k_slices(200, 5, 132, true), 5);   // forced
  EXPECT_EQ(split_k_slices(4, 0, 132, true), 1);     // not the split form
  EXPECT_EQ(split_k_slices(4, 8, 0, false), 1);      // the device unknown
}

// Which variants are compiled in the split form (the knob's value given): the f16 / bf16 wgmma
// tiling with few tiles an image and at least 2 x kSplitKMinSteps k steps; not f32, 1 x 1 layers of
// few channels, large planes, the halo form.
TEST(Conv2dSplitK, TheFormAppliesToLongReductionsOnFewTiles) {
  const auto variant = [](DType dtype, int ci, int hw, int co, int k, int stride) {
    Conv2dVariant v = make_conv2d_variant(ci, hw, hw, co, k, k, Conv2dParams::square(stride, k / 2), true,
                                          Op::relu());
    v.dtype = dtype;
    v.has_residual = true;
    v.input_layout = v.weight_layout = v.output_layout = Conv2dLayout::nhwc;
    return v;
  };
  const auto most = [](const Conv2dVariant& v, int knob) {
    const Conv2dTiling tiling = conv2d_tiling(v);
    EXPECT_FALSE(tiling.split()) << v.name();  // (the plain tiling: the split form is a second kernel)
    if (tiling.kernel() != Conv2dKernel::hmma) return 0;  // (the split form is the hmma kernel's)
    const HmmaTiling& t = tiling.as_hmma();
    const int steps = v.kernel_h * v.kernel_w * ((v.in_channels + 15) / 16 * 16 / t.ci_chunk);
    return conv2d_impl::split_k_most(v, t, steps, knob);
  };
  // ResNet-50's 512-channel 3 x 3 on 7 x 7 (72 k steps) and its stride-2 twin on 14 x 14; UNet's
  // 1024-channel 3 x 3 on 16 x 16.
  for (DType dt : {DType::f16, DType::bf16}) {
    EXPECT_EQ(most(variant(dt, 512, 7, 512, 3, 1), -1), conv2d_impl::kSplitKMaxSlices);
    EXPECT_EQ(most(variant(dt, 512, 14, 512, 3, 2), -1), conv2d_impl::kSplitKMaxSlices);
    EXPECT_EQ(most(variant(dt, 1024, 16, 1024, 3, 1), -1), conv2d_impl::kSplitKMaxSlices);
    EXPECT_EQ(most(variant(dt, 512, 7, 512, 3, 1), 3), 3);  // forced
    EXPECT_EQ(most(variant(dt, 512, 7, 512, 3, 1), 0), 0);  // off
  }
  EXPECT_EQ(most(variant(DType::f16, 128, 7, 64, 3, 1), 8), 4);  // 18 k steps: 4 slices of 4-5
  EXPECT_EQ(most(variant(DType::f16, 64, 7, 64, 3, 1), 8), 2);   // 9: 2 slices of 4-5
  // auto: only reductions of kSplitKAutoMinSteps steps (64 channels: 9, not split; 128: 18; 256: 36).
  EXPECT_EQ(most(variant(DType::f16, 64, 7, 64, 3, 1), -1), 0);
  EXPECT_EQ(most(variant(DType::f16, 128, 7, 64, 3, 1), -1), 4);
  EXPECT_EQ(most(variant(DType::f16, 256, 14, 256, 3, 1), -1), conv2d_impl::kSplitKMaxSlices);
  EXPECT_EQ(most(variant(DType::f16, 256, 14, 256, 3, 1), 4), 4);
  EXPECT_EQ(most(variant(DType::f16, 32, 7, 64, 1, 1), -1), 0);  // 1 k step
  EXPECT_EQ(most(variant(DType::f16, 256, 112, 256, 3, 1), -1), 0);  // a large plane: many tiles
  Conv2dVariant f32 = variant(DType::f32, 512, 7, 512, 3, 1);
  f32.precision = Conv2dPrecision::tf32;
  EXPECT_EQ(most(f32, -1), 0);
  // The split form follows the process's knob (auto unless CUINLINE_CONV2D_SPLIT_K says otherwise);
  // only the variants that have one get a split request.
  const bool on = conv2d_impl::conv2d_knobs().split_k != 0;
  EXPECT_EQ(make_split_request(variant(DType::f16, 512, 7, 512, 3, 1)).has_value(), on);
  EXPECT_EQ(make_split_request(variant(DType::bf16, 1024, 16, 1024, 3, 1)).has_value(), on);
  EXPECT_EQ(make_split_request(variant(DType::f16, 256, 14, 256, 3, 1)).has_value(), on);
  EXPECT_FALSE(make_split_request(variant(DType::f16, 64, 7, 64, 3, 1)).has_value());
  EXPECT_FALSE(make_split_request(variant(DType::f16, 256, 112, 256, 3, 1)).has_value());
  EXPECT_FALSE(make_split_request(f32).has_value());
  // A TMA-form variant: its split form is the TMA form's too; a window-form one (where
  // CUINLINE_CONV2D_TMA=0): its cp.async tiling without the window. Either way over tiles of its own,
  // half the plain tiles' 256 pixels (few_tiles). UNet's 512 -> 256 on 64 x 64.
  Conv2dVariant window = make_conv2d_variant(512, 64, 64, 256, 3, 3, Conv2dParams::square(1, 1), true, Op::relu());
  window.dtype = DType::bf16;
  window.input_layout = window.weight_layout = window.output_layout = Conv2dLayout::nhwc;
  const HmmaTiling window_plain = conv2d_tiling(window).as_hmma();
  ASSERT_EQ(window_plain.tma(), conv2d_impl::conv2d_knobs().tma);
  ASSERT_EQ(window_plain.window(), !conv2d_impl::conv2d_knobs().tma);
  const std::optional<HmmaTiling> window_split =
      conv2d_impl::split_tiling_of(conv2d_impl::conv2d_algo(window), window);
  ASSERT_EQ(window_split.has_value(), on);
  if (window_split) {
    EXPECT_FALSE(window_split->window());
    EXPECT_EQ(window_split->tma(), window_plain.tma());
    EXPECT_EQ(window_split->split_k, conv2d_impl::kSplitKMaxSlices);
    EXPECT_TRUE(window_split->few_tiles);
    EXPECT_EQ(conv2d_impl::split_k_tiles(*window_split, 256, 1),
              2 * conv2d_impl::split_k_tiles(window_plain, 256, 1));
    EXPECT_EQ(window_split->tile_cols, 128);
    EXPECT_EQ(window_plain.tile_cols, 256);
    EXPECT_EQ(window_split->block_channels(), window_plain.block_channels());
  }
  Conv2dVariant sm80 = variant(DType::f16, 512, 7, 512, 3, 1);
  sm80.target = Conv2dTarget::sm80;  // (no wgmma: no split form)
  EXPECT_FALSE(make_split_request(sm80).has_value());
}

// The launch's choice between a variant's two kernels, on an H200's 132 multiprocessors: the split
// form where the plain tiles fill at most half of them and it is loaded, else the plain kernel —
// never the split kernel over the plain kernel's whole tiles. ResNet-50's 512-channel 3 x 3 on 7 x 7
// (the split form over the same tiles) and UNet's 1024-channel 3 x 3 on 16 x 16 (over tiles of its
// own, half the plain ones: in one slice where they fill more than half of the multiprocessors) (f16
// and bf16, channels-last, bias, residual, ReLU), batches 1, 8 and 32.
TEST(Conv2dSplitK, TheLaunchChoosesTheSplitFormForFewTilesOnly) {
  const auto variant = [](DType dtype, int ci, int hw, int co) {
    Conv2dVariant v = make_conv2d_variant(ci, hw, hw, co, 3, 3, Conv2dParams::square(1, 1), true, Op::relu());
    v.dtype = dtype;
    v.has_residual = true;
    v.input_layout = v.weight_layout = v.output_layout = Conv2dLayout::nhwc;
    return v;
  };
  struct Case {
    int ci, hw, co;
    std::int64_t batch;
    std::int64_t tiles, own_tiles;
    bool split;  // the split form runs (else the plain kernel)
    int slices;
  };
  // ResNet-50's layer: 4 tiles an image (64 pixels x 128 channels); UNet's: 8 (256 x 128), and 16 of
  // its split form's own (128 x 128).
  const Case cases[] = {
      {512, 7, 512, 1, 4, 4, true, 8},       {512, 7, 512, 8, 32, 32, true, 4},
      {512, 7, 512, 32, 128, 128, false, 1}, {1024, 16, 1024, 1, 8, 16, true, 8},
      {1024, 16, 1024, 8, 64, 128, true, 1}, {1024, 16, 1024, 32, 256, 512, false, 1},
  };
  for (DType dt : {DType::f16, DType::bf16}) {
    for (const Case& c : cases) {
      const Conv2dVariant v = variant(dt, c.ci, c.hw, c.co);
      const HmmaTiling plain = conv2d_tiling(v).as_hmma();
      const std::optional<HmmaTiling> split = conv2d_impl::split_tiling_of(conv2d_impl::conv2d_algo(v), v);
      ASSERT_TRUE(split.has_value()) << v.name();
      EXPECT_EQ(split->split_k, conv2d_impl::kSplitKMaxSlices) << v.name();
      const std::int64_t tiles = conv2d_impl::split_k_tiles(plain, v.out_channels, c.batch);
      EXPECT_EQ(tiles, c.tiles) << v.name() << " batch " << c.batch;
      const std::int64_t own = conv2d_impl::split_k_tiles(*split, v.out_channels, c.batch);
      EXPECT_EQ(own, c.own_tiles);
      EXPECT_EQ(split->few_tiles, own != tiles);
      const bool few = split->few_tiles;
      const conv2d_impl::SplitKChoice loaded =
          conv2d_impl::split_k_choice(tiles, c.batch, split->split_k, 132, false, true, few, own);
      EXPECT_EQ(loaded.split, c.split) << v.name() << " batch " << c.batch;
      EXPECT_EQ(loaded.wanted, c.split);
      EXPECT_EQ(loaded.slices, c.slices) << v.name() << " batch " << c.batch;
      // Not loaded yet (async: compiling in the background; generic: never): the plain kernel.
      const conv2d_impl::SplitKChoice absent =
          conv2d_impl::split_k_choice(tiles, c.batch, split->split_k, 132, false, false, few, own);
      EXPECT_EQ(absent.wanted, c.split);
      EXPECT_FALSE(absent.split);
      EXPECT_EQ(absent.slices, 1);
      // Forced (CUINLINE_CONV2D_SPLIT_K=N, the variant's most being N): split at every batch.
      const conv2d_impl::SplitKChoice forced =
          conv2d_impl::split_k_choice(tiles, c.batch, 3, 132, true, true, few, own);
      EXPECT_TRUE(forced.split && forced.slices == 3);
    }
  }
  // A variant without a split form, the device unknown, and a grid past its z extent: plain.
  EXPECT_FALSE(conv2d_impl::split_k_choice(4, 1, 0, 132, false, true).wanted);
  EXPECT_FALSE(conv2d_impl::split_k_choice(4, 1, 8, 0, false, true).wanted);
  EXPECT_FALSE(conv2d_impl::split_k_choice(40000, 20000, 8, 132, true, true).split);
}

// A mid plane's split form has tiles of its own (few_tiles: per-image m64 tiles), which the launch
// runs where the plain kernel's tiles fill at most half of the multiprocessors, in one slice or
// more over its own tiles; else the plain kernel. ResNet-50's 1 x 1 1024 -> 512 on 14 x 14 (plain: 4
// tiles an image; its own: 16, 16 k steps) and its 3 x 3 over 128 channels on 28 x 28 (plain: 4; its
// own: 13, 18 k steps) at batches 1, 8 and 32, on an H200's 132 multiprocessors.
TEST(Conv2dSplitK, MidPlanesRunTheirOwnTilesWhereThePlainTilesAreFew) {
  if (conv2d_impl::conv2d_knobs().split_k == 0) GTEST_SKIP() << "CUINLINE_CONV2D_SPLIT_K=0";
  struct Case {
    int ci, hw, co, k;
    std::int64_t batch;
    std::int64_t plain_tiles, own_tiles;
    bool few;    // the split form runs
    int slices;  // over its own tiles
  };
  const Case cases[] = {
      {1024, 14, 512, 1, 1, 4, 16, true, 4},   {1024, 14, 512, 1, 8, 32, 128, true, 1},
      {1024, 14, 512, 1, 32, 128, 512, false, 1}, {128, 28, 128, 3, 1, 4, 13, true, 4},
      {128, 28, 128, 3, 8, 32, 104, true, 1},  {128, 28, 128, 3, 32, 128, 416, false, 1},
  };
  for (DType dt : {DType::f16, DType::bf16}) {
    for (const Case& c : cases) {
      Conv2dVariant v = make_conv2d_variant(c.ci, c.hw, c.hw, c.co, c.k, c.k, Conv2dParams::square(1, c.k / 2), true,
                                            Op::relu());
      v.dtype = dt;
      v.input_layout = v.weight_layout = v.output_layout = Conv2dLayout::nhwc;
      SCOPED_TRACE(v.name() + " batch " + std::to_string(c.batch));
      const HmmaTiling plain = conv2d_tiling(v).as_hmma();
      const std::optional<HmmaTiling> split = conv2d_impl::split_tiling_of(conv2d_impl::conv2d_algo(v), v);
      ASSERT_TRUE(split.has_value());
      EXPECT_TRUE(split->few_tiles);
      EXPECT_EQ(split->split_k, 4);
      // (On sm90 the TMA form's: im2col copies of an m64 tile.)
      EXPECT_EQ(split->tma() && split->tma_im2col, conv2d_impl::conv2d_knobs().tma);
      const std::int64_t tiles = conv2d_impl::split_k_tiles(plain, v.out_channels, c.batch);
      const std::int64_t own = conv2d_impl::split_k_tiles(*split, v.out_channels, c.batch);
      EXPECT_EQ(tiles, c.plain_tiles);
      EXPECT_EQ(own, c.own_tiles);
      const conv2d_impl::SplitKChoice loaded =
          conv2d_impl::split_k_choice(tiles, c.batch, split->split_k, 132, false, true, true, own);
      EXPECT_EQ(loaded.wanted, c.few);
      EXPECT_EQ(loaded.split, c.few);
      EXPECT_EQ(loaded.slices, c.slices);
      const conv2d_impl::SplitKChoice absent =
          conv2d_impl::split_k_choice(tiles, c.batch, split->split_k, 132, false, false, true, own);
      EXPECT_EQ(absent.wanted, c.few);
      EXPECT_FALSE(absent.split);
      // Forced: the split form at every batch, its most slices.
      const conv2d_impl::SplitKChoice forced =
          conv2d_impl::split_k_choice(tiles, c.batch, split->split_k, 132, true, true, true, own);
      EXPECT_TRUE(forced.split);
      EXPECT_EQ(forced.slices, 4);
    }
  }
  // A form of its own tiles with one slice at most (a 1 x 1 from 512 channels to 1024 on 28 x 28: 8 k
  // steps, 104 tiles an image; plain: 32): whole tiles where the plain ones are few.
  const conv2d_impl::SplitKChoice whole = conv2d_impl::split_k_choice(32, 1, 1, 132, false, true, true, 104);
  EXPECT_TRUE(whole.split);
  EXPECT_EQ(whole.slices, 1);
  EXPECT_FALSE(conv2d_impl::split_k_choice(32, 1, 0, 132, false, true, true, 104).wanted);  // no split form
  EXPECT_FALSE(conv2d_impl::split_k_choice(32, 1, 1, 0, false, true, true, 104).wanted);   // the device unknown
}

// The split form is a second kernel of its own: by default (CUINLINE_CONV2D_SPLIT_K unset, or
// auto) a variant that has one gets a split request, the plain one's with kSplitK added and the
// split kernel's name; every variant's plain request is the same byte for byte as with split-K off
// (=0: the same module, cache key and kernel), and the split request compiles for sm_90a. (The
// knobs are read once a process: each setting's requests come from a child process, through a file.)
TEST(Conv2dSplitKDeathTest, TheSplitFormIsASecondRequest) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto variant = [](int ci, int hw, int co, int k) {
    Conv2dVariant v = make_conv2d_variant(ci, hw, hw, co, k, k, Conv2dParams::square(1, k / 2), true, Op::relu());
    v.dtype = DType::f16;
    v.has_residual = true;
    v.input_layout = v.weight_layout = v.output_layout = Conv2dLayout::nhwc;
    return v;
  };
  const std::string file = ::testing::TempDir() + "cuinline_split_k_requests_";
  const auto text = [](const cuinline::CompileRequest& r) { return r.source + "\n@@ " + r.name_expressions.at(0) + "\n@@@\n"; };
  // The plain requests of a split variant and of two others (9 k steps; a 1 x 1 of one), then the
  // split variant's split request, under `knob` (nullptr: unset).
  const auto requests = [&](const char* knob, const char* tag) {
    if (knob == nullptr) {
      unsetenv("CUINLINE_CONV2D_SPLIT_K");
    } else {
      setenv("CUINLINE_CONV2D_SPLIT_K", knob, 1);
    }
    const Conv2dVariant split = variant(512, 7, 512, 3);
    std::ofstream out(file + tag);
    out << text(make_request(split)) << text(make_request(variant(64, 56, 64, 3)))
        << text(make_request(variant(32, 7, 64, 1)));
    const bool on = knob == nullptr || std::strcmp(knob, "0") != 0;
    const std::optional<cuinline::CompileRequest> s = make_split_request(split);
    // (The 7 x 7 plane's per-image m64 tiles: the TMA form on sm90.)
    const bool tma = conv2d_tiling(split).tma();
    bool ok = s.has_value() == on &&
              kernel_name(split) == (tma ? conv2d_impl::kHmmaTmaKernel : conv2d_impl::kHmmaKernel) &&
              !conv2d_tiling(split).split() && !make_split_request(variant(64, 56, 64, 3)) &&
              !make_split_request(variant(32, 7, 64, 1));
    if (s) {
      out << "####\n" << text(*s);
      if (knob == nullptr) {  // (one compile: auto's request is the same)
        const cuinline::CompiledProgram program = cuinline::compile(*s, cuinline::Arch::parse("sm_90"));
        ok =
            ok && program.lowered_name(tma ? conv2d_impl::kHmmaTmaSplitKernel : conv2d_impl::kHmmaSplitKernel)
                      .has_value();
      }
    }
    // (std::exit destroys no local: the file is closed here, or its buffered tail is lost.)
    out.close();
    ok = ok && !out.fail();
    std::exit(ok ? 0 : 1);
  };
  EXPECT_EXIT(requests("0", "off"), ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(requests(nullptr, "unset"), ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(requests("auto", "auto"), ::testing::ExitedWithCode(0), "");
  const auto read = [&](const char* tag) {
    std::ifstream in(file + tag);
    std::string t((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::remove((file + tag).c_str());
    return t;
  };
  const std::string off = read("off"), unset = read("unset"), on = read("auto");
  ASSERT_FALSE(off.empty());
  EXPECT_EQ(off.find("kSplitK"), std::string::npos);
  EXPECT_EQ(off.find("####"), std::string::npos);
  EXPECT_EQ(unset, on);
  // The plain requests: the same bytes with split-K on by default as off.
  const std::size_t mark = on.find("####\n");
  ASSERT_NE(mark, std::string::npos);
  EXPECT_EQ(on.substr(0, mark), off);
  // The split request: the split variant's plain one with kSplitK the shape struct's last member
  // and the split kernel's name.
  std::string expected = off.substr(0, off.find("@@@\n") + 4);
  const std::size_t at = expected.find("};\n", expected.find("struct cuinline_conv2d_shape"));
  ASSERT_NE(at, std::string::npos);
  expected.insert(at, "  static constexpr int kSplitK = 1;\n");
  const bool tma = conv2d_tiling(variant(512, 7, 512, 3)).tma();
  const std::string plain_name =
      std::string("@@ ") + (tma ? conv2d_impl::kHmmaTmaKernel : conv2d_impl::kHmmaKernel);
  expected.replace(
      expected.find(plain_name), plain_name.size(),
      std::string("@@ ") + (tma ? conv2d_impl::kHmmaTmaSplitKernel : conv2d_impl::kHmmaSplitKernel));
  EXPECT_EQ(on.substr(mark + 5), expected);
}

}  // namespace
