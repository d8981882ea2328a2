// The pointwise form of conv2d (1 x 1 filter, stride 1, no padding, NCHW input: a GEMM per image whose
// tiles cp.async copies from the tensors as they are; conv2d_hmma.cuh's kPointwise; f16, bf16, and
// f32 in precision tf32):
// which variants take it, its plan, and NVRTC compiles of its kernels for sm_90 and sm_80 without
// spills (no GPU needed). The kernel's arithmetic is checked on the host by the emulated test
// (tests/test_conv2d_hmma_emulated.cpp, the Pw* cases) and on the GPU by test_conv2d_dtypes_gpu.
#include <gtest/gtest.h>

#include <cuinline/compiler.hpp>
#include <cuinline/conv2d.hpp>
#include <regex>
#include <string>

#include "ops/conv2d/conv2d_internal.hpp"

namespace {

using namespace cuinline::ops;
using cuinline::DType;
namespace impl = cuinline::ops::conv2d_impl;

Conv2dVariant pointwise(DType dtype, Conv2dPrecision precision, int cin, int h, int w, int cout) {
  Conv2dVariant v = make_conv2d_variant(cin, h, w, cout, 1, 1, Conv2dParams{}, true, div_leaky_relu_epilogue(2.0, 0.01));
  v.dtype = dtype;
  v.precision = precision;
  return v;
}

// ptxas's spill stores for the kernel of `r` compiled for `arch` (-Xptxas=-v).
std::string spill_stores(cuinline::CompileRequest r, const char* arch, const std::string& name) {
  r.options.push_back("-Xptxas=-v");
  r.options.push_back("--no-cache");  // (no compute-cache hit: ptxas runs and reports)
  const cuinline::CompiledProgram program = cuinline::compile(r, cuinline::Arch::parse(arch));
  EXPECT_TRUE(program.lowered_name(name).has_value());
  std::smatch m;
  const std::regex spill(R"((\d+) bytes spill stores)");
  if (!std::regex_search(program.log, m, spill)) {
    ADD_FAILURE() << program.log;
    return "?";
  }
  return m[1];
}

TEST(Conv2dPointwise, WhichVariantsTakeIt) {
  const Conv2dVariant f16 = pointwise(DType::f16, Conv2dPrecision::fp32, 64, 32, 32, 128);
  EXPECT_TRUE(impl::pointwise_applies(f16));
  EXPECT_TRUE(impl::pointwise_applies(pointwise(DType::bf16, Conv2dPrecision::fp32, 16, 4, 2, 3)));
  // f32 in tf32 only (3xTF32 on this form was slower than the fp32 FMA kernels).
  EXPECT_TRUE(impl::pointwise_applies(pointwise(DType::f32, Conv2dPrecision::tf32, 8, 2, 2, 1)));
  EXPECT_FALSE(impl::pointwise_applies(pointwise(DType::f32, Conv2dPrecision::fp32, 8, 2, 2, 1)));
  EXPECT_FALSE(impl::pointwise_applies(pointwise(DType::f32, Conv2dPrecision::tf32x3, 8, 2, 2, 1)));
  // (f16 / bf16 take it whatever precision is named: they have one.)
  EXPECT_TRUE(impl::pointwise_applies(pointwise(DType::f16, Conv2dPrecision::tf32x3, 16, 2, 4, 1)));
  // Any output layout, a channels-last (= NCHW for 1 x 1) weight, a residual.
  Conv2dVariant v = f16;
  v.output_layout = Conv2dLayout::nhwc;
  v.weight_layout = Conv2dLayout::nhwc;
  v.has_residual = true;
  EXPECT_TRUE(impl::pointwise_applies(v));
  // Not: other filters, strides, padding, groups, a channels-last input, channels or planes that are
  // not whole 16-byte runs, too few channels, unaligned pointers, sm_75.
  auto without = [&](auto change) {
    Conv2dVariant u = f16;
    change(u);
    return !impl::pointwise_applies(u);
  };
  EXPECT_TRUE(without([](Conv2dVariant& u) { u.kernel_h = 3, u.kernel_w = 3; }));
  EXPECT_TRUE(without([](Conv2dVariant& u) { u.kernel_w = 3; }));
  EXPECT_TRUE(without([](Conv2dVariant& u) { u.params.stride_h = 2; }));
  EXPECT_TRUE(without([](Conv2dVariant& u) { u.params.pad_w = 1; }));
  EXPECT_TRUE(without([](Conv2dVariant& u) { u.params.groups = 2; }));
  EXPECT_TRUE(without([](Conv2dVariant& u) { u.input_layout = Conv2dLayout::nhwc; }));
  EXPECT_TRUE(without([](Conv2dVariant& u) { u.in_channels = 60; }));
  EXPECT_TRUE(without([](Conv2dVariant& u) { u.in_channels = 8; }));
  EXPECT_TRUE(without([](Conv2dVariant& u) { u.height = 5, u.width = 5; }));  // a plane of 25: not whole runs of 8
  EXPECT_TRUE(without([](Conv2dVariant& u) { u.inputs_aligned = false; }));
  EXPECT_TRUE(without([](Conv2dVariant& u) { u = conv2d_variant_for_arch(u, cuinline::Arch::parse("sm_75")); }));
  EXPECT_FALSE(impl::pointwise_applies(pointwise(DType::f32, Conv2dPrecision::tf32, 4, 8, 8, 16)));  // 4 channels
  EXPECT_FALSE(impl::pointwise_applies(pointwise(DType::f32, Conv2dPrecision::tf32, 12, 3, 3, 16)));  // plane 9
  EXPECT_TRUE(impl::pointwise_applies(pointwise(DType::f32, Conv2dPrecision::tf32, 12, 2, 6, 16)));
  // Every other arch the pointwise form compiles for (mma.sync: sm_80 on).
  for (const char* arch : {"sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"}) {
    EXPECT_TRUE(impl::pointwise_applies(conv2d_variant_for_arch(f16, cuinline::Arch::parse(arch)))) << arch;
  }
}

// Alignment is read from the pointers: input and weight 16-byte aligned (f32 too).
TEST(Conv2dPointwise, AlignmentFromThePointers) {
  alignas(16) static unsigned char buf[64];
  for (DType dt : {DType::f16, DType::f32}) {
    Conv2dVariant v = pointwise(dt, Conv2dPrecision::tf32, 64, 16, 16, 64);
    impl::set_hmma_alignment(v, buf, buf + 16, buf, nullptr);
    EXPECT_TRUE(v.inputs_aligned);
    EXPECT_TRUE(impl::pointwise_applies(v));
    impl::set_hmma_alignment(v, buf + 4, buf, buf, nullptr);
    EXPECT_FALSE(v.inputs_aligned);
    EXPECT_FALSE(impl::pointwise_applies(v));
    impl::set_hmma_alignment(v, buf, buf + 8, buf, nullptr);
    EXPECT_FALSE(v.inputs_aligned);
  }
  // An f32 variant of another shape keeps one key whatever its pointers.
  Conv2dVariant other = pointwise(DType::f32, Conv2dPrecision::tf32, 64, 16, 16, 64);
  other.kernel_h = other.kernel_w = 3;
  impl::set_hmma_alignment(other, buf + 4, buf + 4, buf, nullptr);
  EXPECT_TRUE(other.inputs_aligned);
}

TEST(Conv2dPointwise, PlansAndCompilesWithoutSpills) {
  struct Case {
    DType dtype;
    Conv2dPrecision precision;
    int cin, h, w, cout;
    bool nhwc_out, residual;
    int bn, threads, bk;
  };
  const Case cases[] = {
      // KernelBench's 16 x 64 x 1024^2 -> 128 in each dtype and precision.
      {DType::f16, Conv2dPrecision::fp32, 64, 1024, 1024, 128, false, false, 128, 256, 32},
      {DType::bf16, Conv2dPrecision::fp32, 64, 1024, 1024, 128, false, true, 128, 256, 32},
      {DType::f32, Conv2dPrecision::tf32, 64, 1024, 1024, 128, false, false, 128, 256, 16},
      {DType::f32, Conv2dPrecision::tf32, 64, 1024, 1024, 128, true, true, 128, 256, 16},
      // ResNet-50's bottleneck 1 x 1s: 256 -> 64 and 64 -> 256 (two channel blocks).
      {DType::f16, Conv2dPrecision::fp32, 256, 56, 56, 64, true, false, 64, 256, 32},
      {DType::f32, Conv2dPrecision::tf32, 64, 56, 56, 256, false, true, 128, 256, 16},
      // Few channels: 16 or 32 a block, 4 warps; k steps of 16 (f16) or 8 (f32) channels.
      {DType::bf16, Conv2dPrecision::fp32, 48, 10, 12, 24, false, false, 32, 128, 16},
      {DType::f32, Conv2dPrecision::tf32, 24, 6, 6, 12, true, false, 16, 128, 8},
  };
  for (const Case& c : cases) {
    Conv2dVariant v = pointwise(c.dtype, c.precision, c.cin, c.h, c.w, c.cout);
    if (c.nhwc_out) v.output_layout = Conv2dLayout::nhwc;
    v.has_residual = c.residual;
    SCOPED_TRACE(v.name());
    ASSERT_TRUE(impl::pointwise_applies(v));
    const Conv2dTiling tiling = conv2d_tiling(v);
    EXPECT_TRUE(tiling.pointwise() && tiling.tensor_cores());
    EXPECT_FALSE(tiling.transposes());
    const HmmaTiling& t = tiling.as_hmma();
    EXPECT_TRUE(t.pointwise() && !t.wgmma() && !t.halo() && !t.window() && !t.tf32_wgmma());
    EXPECT_EQ(t.half_mma(), c.dtype != DType::f32);
    EXPECT_EQ(t.stage_channels, 0);
    EXPECT_EQ(t.block_channels(), c.bn);
    EXPECT_EQ(t.threads(), c.threads);
    EXPECT_EQ(t.ci_chunk, c.bk);
    EXPECT_EQ(t.tile_cols, 128);
    // Pixel tiles x channel blocks (channel blocks fastest: one block column).
    EXPECT_EQ(t.tiles_x, (std::int64_t{c.h} * c.w + 127) / 128 * ((c.cout + c.bn - 1) / c.bn));
    EXPECT_EQ(t.stages, 4);
    EXPECT_LE(t.shared_bytes, 100u * 1024);  // (two blocks a multiprocessor)
    EXPECT_FALSE(make_stage_request(v).has_value());
    const std::string name = kernel_name(v);
    EXPECT_EQ(name, "cuinline_conv2d_hmma<cuinline_conv2d_shape, cuinline_conv2d_epilogue>");
    const cuinline::CompileRequest r = make_request(v);
    EXPECT_NE(r.source.find("kPointwise = 1;"), std::string::npos);
    EXPECT_FALSE(r.arch_specific);  // (mma.sync: the same code on every arch)
    for (const char* arch : {"sm_90", "sm_80"}) {
      SCOPED_TRACE(arch);
      EXPECT_EQ(spill_stores(r, arch, name), "0");
    }
  }
}

}  // namespace
