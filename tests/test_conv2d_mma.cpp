// Host tests of the tensor-core conv2d modes (Conv2dPrecision::tf32 / ::tf32x3): variants, tiling,
// rendering, and offline compiles for sm_90 with ptxas's register and spill report.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cuinline/compiler.hpp>
#include <cuinline/conv2d.hpp>
#include <cuinline/error.hpp>
#include <regex>
#include <string>

#include "ops/conv2d/conv2d_internal.hpp"

namespace {

using namespace cuinline::ops;

Conv2dVariant with_precision(Conv2dVariant v, Conv2dPrecision precision) {
  v.precision = precision;
  v.validate();
  return v;
}

Conv2dVariant seed(Conv2dPrecision precision) {
  return with_precision(
      make_conv2d_variant(8, 128, 128, 64, 3, 3, Conv2dParams{}, true, div_leaky_relu_epilogue(2.0, 0.01)),
      precision);
}

TEST(Conv2dMma, PrecisionIsPartOfTheVariantNameAndRequest) {
  const Conv2dVariant fp32 = seed(Conv2dPrecision::fp32);
  const Conv2dVariant tf32 = seed(Conv2dPrecision::tf32);
  const Conv2dVariant x3 = seed(Conv2dPrecision::tf32x3);
  EXPECT_NE(fp32, tf32);
  EXPECT_NE(tf32, x3);
  EXPECT_EQ(fp32.name().find("tf32"), std::string::npos);
  EXPECT_NE(tf32.name().find(",tf32>"), std::string::npos) << tf32.name();
  EXPECT_NE(x3.name().find(",tf32x3>"), std::string::npos) << x3.name();
  EXPECT_STREQ(to_string(Conv2dPrecision::tf32x3), "tf32x3");
  const cuinline::CompileRequest r1 = make_request(tf32);
  const cuinline::CompileRequest r3 = make_request(x3);
  EXPECT_NE(r1.source, make_request(fp32).source);
  EXPECT_NE(r1.source.find("kSplit = 1;"), std::string::npos);
  EXPECT_NE(r3.source.find("kSplit = 3;"), std::string::npos);
  EXPECT_EQ(r1.name_expressions, std::vector<std::string>{kernel_name(tf32)});
  EXPECT_NE(kernel_name(tf32).find("cuinline_conv2d_mma<"), std::string::npos);
  // The same variant renders the same request (one cache entry).
  EXPECT_EQ(make_request(x3).source, r3.source);
}

TEST(Conv2dMma, UnknownPrecisionIsRejected) {
  Conv2dVariant v = seed(Conv2dPrecision::fp32);
  v.precision = static_cast<Conv2dPrecision>(7);
  EXPECT_THROW(v.validate(), cuinline::InvalidArgument);
  EXPECT_THROW(make_request(v), cuinline::InvalidArgument);
}

TEST(Conv2dMma, SeedTiling) {
  const Conv2dTiling tiling = conv2d_tiling(seed(Conv2dPrecision::tf32));
  EXPECT_TRUE(tiling.tensor_cores());
  const MmaTiling& t = tiling.as_mma();
  // Row streaming: two output rows of 128 columns (126 used) a step (a channel's two rows leave as
  // one run); four warps, each the whole row (8 pixel tiles) x 32 channels; the output through shared
  // memory in 4 passes.
  EXPECT_EQ(t.pipeline, 3);
  EXPECT_EQ(t.tile_cols, 128);
  EXPECT_EQ(t.tile_rows, 2);
  EXPECT_EQ(t.tiles_x, 1);
  EXPECT_EQ(t.tiles_y, 63);
  EXPECT_EQ(t.row_tiles, 63);  // an upper bound; the launch picks the steps a block
  EXPECT_EQ(t.warps_m, 2);
  EXPECT_EQ(t.m_tiles, 8);
  EXPECT_EQ(t.warps_n, 2);
  EXPECT_EQ(t.n_tiles, 4);
  EXPECT_EQ(t.out_stage, 4);
  EXPECT_EQ(t.block_channels(), 64);
  EXPECT_EQ(t.threads(), 128);
  EXPECT_EQ(t.ci_chunk, 8);
  EXPECT_EQ(t.min_blocks, 2);               // registers up to 255
  EXPECT_LE(t.shared_bytes, 113u * 1024);  // 2 blocks a multiprocessor
  const MmaTiling x3 = conv2d_tiling(seed(Conv2dPrecision::tf32x3)).as_mma();
  EXPECT_EQ(x3.min_blocks, 3);
  EXPECT_EQ(x3.pipeline, 1);  // 3xTF32 keeps the 8 x 16 block tiles (row streaming is TF32 only)
  EXPECT_EQ(x3.tile_rows * x3.tile_cols, 128);
  EXPECT_EQ(x3.threads(), 128);
  // Filter columns unroll while the body stays within 144 mma (TF32 3 x 32); 3xTF32's roll (one
  // column an iteration: its step sums from zero spilled 128-156 bytes unrolled, 12-20 rolled).
  EXPECT_EQ(t.kw_unroll, 3);
  EXPECT_EQ(x3.kw_unroll, 1);
}

// The unrolled filter-column loop is bounded (NVRTC's time grows with it, and 3xTF32's 7 x 7 body
// spilled): a 7 x 7 stem's columns unroll in TF32 (7 x 16 mma) but not in 3xTF32 (7 x 48), nor do
// 3xTF32's 5 x 5 ones (5 x 48); 1 x 1 filters always unroll.
TEST(Conv2dMma, FilterColumnUnrollIsBounded) {
  Conv2dVariant stem = seed(Conv2dPrecision::tf32);
  stem.in_channels = 3;
  stem.height = stem.width = 224;
  stem.kernel_h = stem.kernel_w = 7;
  stem.params = Conv2dParams::square(2, 3);
  const MmaTiling t = conv2d_tiling(stem).as_mma();
  ASSERT_EQ(t.m_tiles * t.n_tiles, 16);
  EXPECT_EQ(t.kw_unroll, 7);
  stem.precision = Conv2dPrecision::tf32x3;
  EXPECT_EQ(conv2d_tiling(stem).as_mma().kw_unroll, 1);
  EXPECT_EQ(conv2d_tiling(stem).as_mma().kh_unroll, 1);
  EXPECT_EQ(conv2d_tiling(stem).as_mma().ci_unroll, 1);
  Conv2dVariant k5 = seed(Conv2dPrecision::tf32x3);
  k5.kernel_h = k5.kernel_w = 5;
  EXPECT_EQ(conv2d_tiling(k5).as_mma().kw_unroll, 1);
  Conv2dVariant pointwise = seed(Conv2dPrecision::tf32x3);
  pointwise.in_channels = 64;
  pointwise.kernel_h = pointwise.kernel_w = 1;
  // (The mma.sync kernel's tiling of a 1 x 1: such a call now runs the pointwise form where its
  // pointers are aligned, and this tiling where they are not.)
  const MmaTiling p = cuinline::ops::conv2d_impl::mma_tiling(pointwise);
  EXPECT_EQ(p.kw_unroll, 1);  // kernel_w itself
  EXPECT_EQ(p.ci_unroll, 2);  // channel steps instead: 3 x 48 mma fit, 3 does not divide 8 steps
  pointwise.precision = Conv2dPrecision::tf32;
  EXPECT_EQ(cuinline::ops::conv2d_impl::mma_tiling(pointwise).ci_unroll, 4);
  EXPECT_TRUE(conv2d_tiling(pointwise).pointwise());
  pointwise.inputs_aligned = false;
  EXPECT_EQ(conv2d_tiling(pointwise).as_mma().ci_unroll, 4);
}

// Where the input-row ring, the weights and the output tiles do not fit, the 128-pixel block
// tiles and pipelines 0-2 remain (here: 64 input channels of 3 x 3 filters, 128 output channels).
TEST(Conv2dMma, LargeChannelCountsKeepBlockTiles) {
  Conv2dVariant v = seed(Conv2dPrecision::tf32);
  v.in_channels = 64;
  v.out_channels = 128;
  // (Planned for sm80: on sm90 a tf32 variant of 16+ input channels runs the TF32 wgmma kernel.)
  v.target = Conv2dTarget::sm80;
  const MmaTiling t = conv2d_tiling(v).as_mma();
  EXPECT_NE(t.pipeline, 3);
  EXPECT_EQ(t.out_stage, 0);
  EXPECT_EQ(t.tile_rows * t.tile_cols, 128);
  // A narrow image keeps them too (a 32-column row would leave a block with 2 warps), and so
  // does a wide one whose filter and ring do not fit (7 x 7, stride 2).
  Conv2dVariant narrow = seed(Conv2dPrecision::tf32);
  narrow.width = 34;
  EXPECT_NE(conv2d_tiling(narrow).as_mma().pipeline, 3);
  Conv2dVariant stem = seed(Conv2dPrecision::tf32);
  stem.in_channels = 3;
  stem.height = stem.width = 224;
  stem.kernel_h = stem.kernel_w = 7;
  stem.params.stride_h = stem.params.stride_w = 2;
  EXPECT_NE(conv2d_tiling(stem).as_mma().pipeline, 3);
  // A 5 x 5 filter at stride 2 on 64-column tiles would fit only 2 blocks a multiprocessor.
  Conv2dVariant k5 = seed(Conv2dPrecision::tf32);
  k5.kernel_h = k5.kernel_w = 5;
  k5.params.stride_h = k5.params.stride_w = 2;
  EXPECT_NE(conv2d_tiling(k5).as_mma().pipeline, 3);
  // 64 columns stream (2 warps along the row).
  Conv2dVariant mid = seed(Conv2dPrecision::tf32);
  mid.width = 66;
  const MmaTiling tm = conv2d_tiling(mid).as_mma();
  EXPECT_EQ(tm.pipeline, 3);
  EXPECT_EQ(tm.tile_cols, 64);
  EXPECT_EQ(tm.tile_rows, 2);
  EXPECT_EQ(tm.threads(), 128);  // 2 rows x 2 channel warps of 4 pixel tiles
}

// Two rows a step while they fit; an odd height leaves the last step one row; a single output row,
// or a ring of two rows' window that does not fit, streams one row a step.
TEST(Conv2dMma, StreamingRowsAStep) {
  Conv2dVariant odd = seed(Conv2dPrecision::tf32);
  odd.height = 129;  // 127 output rows
  const MmaTiling t = conv2d_tiling(odd).as_mma();
  EXPECT_EQ(t.pipeline, 3);
  EXPECT_EQ(t.tile_rows, 2);
  EXPECT_EQ(t.tiles_y, 64);
  Conv2dVariant one = seed(Conv2dPrecision::tf32);
  one.height = 3;  // 1 output row
  const MmaTiling t1 = conv2d_tiling(one).as_mma();
  EXPECT_EQ(t1.pipeline, 3);
  EXPECT_EQ(t1.tile_rows, 1);
  EXPECT_EQ(t1.threads(), 64);
  EXPECT_EQ(t1.min_blocks, 4);
  // 16 input channels of 3 x 3 filters: two rows' ring and output tiles pass 100 KiB, one row fits.
  Conv2dVariant wide = seed(Conv2dPrecision::tf32);
  wide.in_channels = 16;
  wide.target = Conv2dTarget::sm80;  // (sm90: the TF32 wgmma kernel)
  const MmaTiling tw = conv2d_tiling(wide).as_mma();
  EXPECT_EQ(tw.pipeline, 3);
  EXPECT_EQ(tw.tile_rows, 1);
}

struct Shape {
  int cin, h, w, cout, kh, kw;
  Conv2dParams p;
  bool bias;
  Op epilogue;
};

// Offline compiles for sm_90 of every tiling regime in both tensor-core modes. The rendered
// source static_asserts that the host's launch figures match the template's.
TEST(Conv2dMma, ShapesCompileForSm90) {
  const cuinline::Arch sm90 = cuinline::Arch::parse("sm_90");
  const Shape shapes[] = {
      {8, 128, 128, 64, 3, 3, {}, true, div_leaky_relu_epilogue(2.0, 0.01)},   // the seed (pipeline 1)
      {3, 224, 224, 64, 7, 7, Conv2dParams::square(2, 3), false, Op::relu()},  // Cin padded to 8
      {64, 56, 56, 128, 3, 3, Conv2dParams::square(1, 1), true, Op::relu()},   // channel chunks
      {16, 33, 17, 32, 3, 3, Conv2dParams{2, 1, 1, 0, 2, 1}, true, Op::chain({Step::clamp(-1.0, 1.0)})},
      {5, 6, 3, 4, 3, 5, Conv2dParams::square(1, 2), false, Op::chain({})},  // W smaller than the filter
      {64, 32, 32, 64, 7, 7, Conv2dParams::square(1, 3), true, Op::leaky_relu(0.2)},
      {5, 150, 140, 12, 3, 3, Conv2dParams::square(2, 1), true, Op::relu()},    // row streaming, stride 2
      {16, 120, 140, 24, 1, 1, Conv2dParams::square(2, 0), false, Op::relu()},  // streaming, rows apart
  };
  const std::regex regs(R"(Used (\d+) registers)");
  const std::regex spill(R"((\d+) bytes spill stores)");
  for (const Conv2dPrecision precision : {Conv2dPrecision::tf32, Conv2dPrecision::tf32x3}) {
    for (const Shape& s : shapes) {
      const Conv2dVariant v = with_precision(
          make_conv2d_variant(s.cin, s.h, s.w, s.cout, s.kh, s.kw, s.p, s.bias, s.epilogue), precision);
      SCOPED_TRACE(v.name());
      cuinline::CompileRequest request = make_request(v);
      request.options.push_back("-Xptxas=-v");
      request.options.push_back("--no-cache");  // (no compute-cache hit: ptxas runs and reports)
      const auto start = std::chrono::steady_clock::now();
      const cuinline::CompiledProgram program = cuinline::compile(request, sm90);
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      EXPECT_EQ(program.kind, cuinline::BinaryKind::cubin);
      EXPECT_TRUE(program.lowered_name(kernel_name(v)).has_value());
      std::smatch m;
      std::string used = "?";
      if (std::regex_search(program.log, m, regs)) used = m[1];
      std::string spilled = "0";
      if (std::regex_search(program.log, m, spill)) spilled = m[1];
      // The seed's tf32 variant must not spill (its inner loop is the measured one); the rest
      // report (3xTF32 spills a few bytes: its split fragments triple the operand registers).
      if (&s == &shapes[0] && precision == Conv2dPrecision::tf32) EXPECT_EQ(spilled, "0") << program.log;
      // (On sm90 the tf32 variants of 16+ input channels run the TF32 wgmma kernel, conv2d_hmma.cuh.)
      const Conv2dTiling t = conv2d_tiling(v);
      char block[96];
      if (t.kernel() == Conv2dKernel::mma) {
        const MmaTiling& m = t.as_mma();
        std::snprintf(block, sizeof block, "warps %dx%d tiles %dx%d pixels %dx%d pipe %d", m.warps_m,
                      m.warps_n, m.m_tiles, m.n_tiles, m.tile_rows, m.tile_cols, m.pipeline);
      } else if (t.kernel() == Conv2dKernel::hmma) {
        const HmmaTiling& h = t.as_hmma();
        std::snprintf(block, sizeof block, "warps %dx%d tiles %dx%d pixels %d (hmma)", h.warps_m, h.warps_n,
                      h.m_tiles, h.n_tiles, h.tile_cols);
      } else {
        std::snprintf(block, sizeof block, "%d threads", t.threads());
      }
      std::printf("  %-82s NVRTC %5.0f ms  %s regs  %s B spilled  %s ch %d smem %u\n", v.name().c_str(), ms,
                  used.c_str(), spilled.c_str(), block, t.block_channels(), t.grid().shared_bytes);
    }
  }
}

// TF32 on wgmma: which tf32 variants run the implicit GEMM of conv2d_hmma.cuh with float storage
// (16+ input channels, groups 1, an sm90-class target), its always-staged plan, and that its request
// compiles for sm_90a (wgmma m64nNk8) and for sm_100a (the same tiling on mma.sync m16n8k8) without
// spills; NCHW and channels-last calls staged to the same shape share one module.
TEST(Conv2dMma, Tf32WgmmaPlansAndCompiles) {
  namespace impl = cuinline::ops::conv2d_impl;
  const auto tf32 = [](int cin, int h, int w, int cout, int kh, int kw, Conv2dParams p) {
    return with_precision(make_conv2d_variant(cin, h, w, cout, kh, kw, p, true, div_leaky_relu_epilogue(2.0, 0.01)),
                          Conv2dPrecision::tf32);
  };
  // KernelBench's 5 x 9 layer (32 -> 64 channels) and a 3 x 3 of 64 -> 128.
  const Conv2dVariant k59 = tf32(32, 512, 512, 64, 5, 9, Conv2dParams{1, 1, 2, 4, 2, 3});
  const Conv2dVariant k33 = tf32(64, 128, 128, 128, 3, 3, Conv2dParams{});
  for (const Conv2dVariant& v : {k59, k33}) {
    SCOPED_TRACE(v.name());
    ASSERT_TRUE(impl::tf32_wgmma_applies(v));
    const Conv2dTiling tiling = conv2d_tiling(v);
    EXPECT_TRUE(tiling.tf32_wgmma() && tiling.tensor_cores());
    const HmmaTiling& t = tiling.as_hmma();
    EXPECT_TRUE(t.tf32_wgmma() && t.wgmma() && !t.half_mma() && !t.window() && !t.halo());
    EXPECT_EQ(t.stage_channels, v.in_channels);
    EXPECT_TRUE(t.stage_input && t.stage_weight);
    EXPECT_EQ(t.ci_chunk, 32);  // 128-byte rows
    // A long reduction: two warpgroups of two m64 tiles for 128 channels a block; one of two tiles
    // for up to 64 channels (each B tile read for twice the pixels).
    EXPECT_EQ(t.warps_m, v.out_channels <= 64 ? 4 : 8);
    EXPECT_EQ(t.m_tiles, 2);
    EXPECT_EQ(t.block_channels(), v.out_channels);
    EXPECT_LE(t.shared_bytes, conv2d_max_shared_bytes(v.target));
    EXPECT_EQ(kernel_name(v), "cuinline_conv2d_hmma<cuinline_conv2d_shape, cuinline_conv2d_epilogue>");
    ASSERT_TRUE(make_stage_request(v).has_value());
    const cuinline::CompileRequest r = make_request(v);
    EXPECT_NE(r.source.find("typedef float storage;"), std::string::npos);
    EXPECT_NE(r.source.find("kWgmma = 1;"), std::string::npos);
    // The channels-last call staged to the same copy: the same module.
    Conv2dVariant cl = v;
    cl.input_layout = cl.weight_layout = Conv2dLayout::nhwc;
    EXPECT_EQ(make_request(cl).source, r.source);
    for (const char* arch : {"sm_90", "sm_100"}) {
      SCOPED_TRACE(arch);
      cuinline::CompileRequest req = r;
      req.options.push_back("-Xptxas=-v");
      req.options.push_back("--no-cache");  // (no compute-cache hit: ptxas runs and reports)
      const cuinline::CompiledProgram program = cuinline::compile(req, cuinline::Arch::parse(arch));
      EXPECT_TRUE(program.lowered_name(kernel_name(v)).has_value());
      std::smatch m;
      const std::regex spill(R"((\d+) bytes spill stores)");
      ASSERT_TRUE(std::regex_search(program.log, m, spill)) << program.log;
      EXPECT_EQ(m[1], "0") << program.log;
    }
  }
  // Not on the wgmma kernel: fewer than 16 channels, tf32x3, fp32, grouped, other targets.
  EXPECT_FALSE(impl::tf32_wgmma_applies(tf32(8, 128, 128, 64, 3, 3, {})));
  EXPECT_FALSE(impl::tf32_wgmma_applies(tf32(15, 64, 64, 64, 3, 3, {})));
  EXPECT_TRUE(impl::tf32_wgmma_applies(tf32(16, 64, 64, 64, 3, 3, {})));
  // Too little work a staged value (Cout x taps / strides < 512): 32 x 9, and 128 x 9 / 4 at stride 2.
  EXPECT_FALSE(impl::tf32_wgmma_applies(tf32(16, 32, 32, 32, 3, 3, {})));
  EXPECT_FALSE(impl::tf32_wgmma_applies(tf32(64, 56, 56, 128, 3, 3, Conv2dParams::square(2, 1))));
  EXPECT_TRUE(impl::tf32_wgmma_applies(tf32(64, 56, 56, 256, 3, 3, Conv2dParams::square(2, 1))));
  EXPECT_FALSE(impl::tf32_wgmma_applies(tf32(64, 64, 64, 1024, 1, 1, {})));  // 1 x 1: never
  EXPECT_FALSE(impl::tf32_wgmma_applies(with_precision(k33, Conv2dPrecision::tf32x3)));
  EXPECT_FALSE(impl::tf32_wgmma_applies(with_precision(k33, Conv2dPrecision::fp32)));
  Conv2dVariant grouped = k33;
  grouped.params.groups = 2;
  EXPECT_FALSE(impl::tf32_wgmma_applies(grouped));
  for (const char* arch : {"sm_80", "sm_86", "sm_120", "sm_75"}) {
    const Conv2dVariant other = conv2d_variant_for_arch(k33, cuinline::Arch::parse(arch));
    EXPECT_FALSE(impl::tf32_wgmma_applies(other)) << arch;
    EXPECT_FALSE(conv2d_tiling(other).tf32_wgmma()) << arch;
  }
  // 20 channels: staged to 24 (k steps of 8 floats: the 32-byte swizzle).
  const HmmaTiling t20 = conv2d_tiling(tf32(20, 40, 40, 64, 3, 3, Conv2dParams::square(1, 1))).as_hmma();
  EXPECT_TRUE(t20.tf32_wgmma());
  EXPECT_EQ(t20.stage_channels, 24);
  EXPECT_EQ(t20.ci_chunk, 8);
}

}  // namespace
