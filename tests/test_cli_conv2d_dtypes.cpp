// `cuinline warm` for conv2d in f16 / bf16 and channels-last: a spec's "dtype", "layout" and
// "weight_layout" give exactly the variants (and cache keys) the library looks up at run time for
// tensors of those dtypes and strides. Host-only: compiles target --arch sm_90, the run-time variant
// comes from the argument checks on fake pointers (nothing is launched).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cuinline/cache.hpp>
#include <cuinline/conv2d.hpp>
#include <cuinline/kernel_cache.hpp>
#include <cuinline/module.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli_test_support.hpp"
#include "ops/conv2d/tiling.hpp"

namespace {

using cuinline::DType;
using cuinline::test::CliTest;
using cuinline::test::Result;
using cuinline::TensorView;
using namespace cuinline::ops;

void* fake(std::uintptr_t at) {
  return reinterpret_cast<void*>(at);
}

// [n, c, h, w] contiguous or channels-last.
TensorView view(std::uintptr_t at, DType dt, bool nhwc, std::int64_t n, std::int64_t c, std::int64_t h,
                std::int64_t w) {
  if (!nhwc) return TensorView::contiguous(fake(at), dt, {n, c, h, w});
  return TensorView::strided(fake(at), dt, {n, c, h, w}, {h * w * c, 1, w * c, c});
}

TEST_F(CliTest, WarmConv2dDtypesAndLayoutsMatchTheRunTimeKeys) {
  auto spec = write_spec("s.json", R"json({"entries": [{"kind": "conv2d", "input": [8, 32, 32],
                                            "filters": [16, 3, 3], "padding": 1, "bias": true,
                                            "epilogue": "relu", "dtype": ["f16", "bf16"],
                                            "layout": ["nchw", "nhwc"], "weight_layout": ["nchw", "nhwc"]}]})json");
  Result warm = cli({"warm", "--spec", spec.string(), "--arch", "sm_90", "-j", "2"});
  ASSERT_EQ(warm.code, 0) << warm.out << warm.err;
  EXPECT_CONTAINS(warm.out, "warm: 8 compiled, 0 already cached, 0 failed");
  EXPECT_CONTAINS(warm.out, "compiled conv2d<f16,8x32x32,16x3x3,s1x1,p1x1,d1x1,bias>[relu] sm_90");
  EXPECT_CONTAINS(warm.out, "compiled conv2d<bf16,8x32x32,16x3x3,s1x1,p1x1,d1x1,bias,x:nhwc,w:nhwc,y:nhwc>[relu]");

  // What conv2d() asks for with such tensors (f16 / bf16, contiguous or channels-last) is a disk hit.
  for (DType dt : {DType::f16, DType::bf16}) {
    for (bool nhwc : {false, true}) {
      for (bool w_nhwc : {false, true}) {
        const Conv2dVariant v = conv2d_variant_for(
            view(0x100000, dt, nhwc, 4, 8, 32, 32), view(0x200000, dt, w_nhwc, 16, 8, 3, 3),
            TensorView::contiguous(fake(0x300000), dt, {16}), view(0x400000, dt, nhwc, 4, 16, 32, 32),
            Conv2dParams::square(1, 1), Op::relu());
        // Up to 8 channels at column stride 1, 32 columns: the wgmma kernel's halo form in every
        // layout, warmed for sm_90 as sm_90a (CompileRequest::arch_specific), found under the key of
        // the run-time lookup for sm_90.
        EXPECT_TRUE(conv2d_tiling(v).halo()) << v.name();
        EXPECT_TRUE(make_request(v).arch_specific) << v.name();
        EXPECT_EQ(tier_of(make_request(v)), cuinline::CacheTier::disk) << v.name();
      }
    }
  }
  EXPECT_EQ(warmed_cache().stats().compiles, 0u);
  EXPECT_EQ(warmed_cache().stats().wrong_arch_entries, 0u);
  EXPECT_EQ(warmed_cache().stats().disk_hits, 8u);
  Result list = cli({"cache", "list"});
  EXPECT_CONTAINS(list.out, "sm_90a");
}

// Without "weight_layout" the weight takes each "layout" in turn (a channels-last model has
// channels-last weights): two variants, not four, and the channels-last one is what a call with
// every tensor channels-last looks up.
TEST_F(CliTest, WarmConv2dWeightLayoutDefaultsToTheLayout) {
  auto spec = write_spec("s.json", R"json({"entries": [{"kind": "conv2d", "input": [8, 16, 16],
                                            "filters": [8, 3, 3], "dtype": "f16", "layout": ["nchw", "nhwc"]}]})json");
  Result warm = cli({"warm", "--spec", spec.string(), "--arch", "sm_90", "-j", "2"});
  ASSERT_EQ(warm.code, 0) << warm.out << warm.err;
  EXPECT_CONTAINS(warm.out, "warm: 2 compiled, 0 already cached, 0 failed");
  EXPECT_CONTAINS(warm.out, "compiled conv2d<f16,8x16x16,8x3x3,s1x1,p0x0,d1x1>[identity] sm_90");
  EXPECT_CONTAINS(warm.out, "compiled conv2d<f16,8x16x16,8x3x3,s1x1,p0x0,d1x1,x:nhwc,w:nhwc,y:nhwc>[identity] sm_90");
  const Conv2dVariant v = conv2d_variant_for(view(0x100000, DType::f16, true, 2, 8, 16, 16),
                                             view(0x200000, DType::f16, true, 8, 8, 3, 3), TensorView{},
                                             view(0x400000, DType::f16, true, 2, 8, 14, 14), {}, Op::chain({}));
  EXPECT_EQ(tier_of(make_request(v)), cuinline::CacheTier::disk) << v.name();
}

// One input channel: channels-last strides are the contiguous ones, so the library names the input
// NCHW; the spec's "nhwc" variant is that same kernel (listed once, found at run time).
TEST_F(CliTest, WarmConv2dChannelsLastOfOneChannelIsTheNchwKernel) {
  auto spec = write_spec("s.json", R"json({"entries": [{"kind": "conv2d", "input": [1, 20, 20],
                                            "filters": [4, 3, 3], "dtype": "bf16", "layout": "nhwc"}]})json");
  Result warm = cli({"warm", "--spec", spec.string(), "--arch", "sm_90"});
  ASSERT_EQ(warm.code, 0) << warm.out << warm.err;
  EXPECT_CONTAINS(warm.out, "warm: 1 compiled");
  EXPECT_CONTAINS(warm.out, "compiled conv2d<bf16,1x20x20,4x3x3,s1x1,p0x0,d1x1,y:nhwc>[identity] sm_90");
  const Conv2dVariant v = conv2d_variant_for(view(0x100000, DType::bf16, true, 2, 1, 20, 20),
                                             view(0x200000, DType::bf16, false, 4, 1, 3, 3), TensorView{},
                                             view(0x400000, DType::bf16, true, 2, 4, 18, 18), {}, Op::chain({}));
  EXPECT_EQ(tier_of(make_request(v)), cuinline::CacheTier::disk) << v.name();
}

// Staged f16 / bf16 variants (NCHW, or channels-last with Cin % 8 != 0, from stage_min_elements input
// elements an image) launch the staging copy's module before their conv: warm compiles it once, so
// neither module needs NVRTC at run time.
TEST_F(CliTest, WarmConv2dStagedVariantsAlsoCompileTheStagingCopy) {
  if (std::getenv("CUINLINE_CONV2D_STAGE") != nullptr) GTEST_SKIP() << "CUINLINE_CONV2D_STAGE is set";
  auto spec = write_spec("s.json", R"json({"entries": [
      {"kind": "conv2d", "input": [16, 64, 64], "filters": [16, 3, 3], "padding": 1, "dtype": "f16"},
      {"kind": "conv2d", "input": [3, 128, 128], "filters": [16, 3, 3], "stride": 2, "dtype": "bf16",
       "layout": "nhwc"}]})json");
  Result warm = cli({"warm", "--spec", spec.string(), "--arch", "sm_90", "-j", "2"});
  ASSERT_EQ(warm.code, 0) << warm.out << warm.err;
  EXPECT_CONTAINS(warm.out, "warm: 3 compiled, 0 already cached, 0 failed");
  EXPECT_CONTAINS(warm.out, "compiled conv2d staging copy (f16/bf16, f32 tf32) sm_90");
  // (16 channels NCHW; 3 channels channels-last at stride 2: neither is the halo form's.)
  const Conv2dVariant nchw = conv2d_variant_for(
      view(0x100000, DType::f16, false, 4, 16, 64, 64), view(0x200000, DType::f16, false, 16, 16, 3, 3),
      TensorView{}, view(0x400000, DType::f16, false, 4, 16, 64, 64), Conv2dParams::square(1, 1), Op::chain({}));
  const Conv2dVariant rgb = conv2d_variant_for(
      view(0x100000, DType::bf16, true, 2, 3, 128, 128), view(0x200000, DType::bf16, true, 16, 3, 3, 3),
      TensorView{}, view(0x400000, DType::bf16, true, 2, 16, 63, 63), Conv2dParams::square(2), Op::chain({}));
  for (const Conv2dVariant& v : {nchw, rgb}) {
    ASSERT_EQ(conv2d_tiling(v).as_hmma().stage_channels, v.in_channels <= 8 ? 8 : 16) << v.name();
    for (const auto& request : {make_request(v), *make_stage_request(v)}) {
      EXPECT_EQ(tier_of(request), cuinline::CacheTier::disk) << v.name() << " " << request.name;
    }
  }
  EXPECT_EQ(warmed_cache().stats().compiles, 0u);
}

// A variant with a split-K form (f16 / bf16 on the wgmma tiling, few tiles an image, 128+ channels
// on a 3 x 3) launches it at small batches: warm compiles it beside the plain kernel, so neither
// needs NVRTC at run time; a second warm finds everything cached. Channels-last ResNet-50 layer 4,
// and UNet's 1024-channel layer in NCHW (staged: its split form is the channels-last conv's).
TEST_F(CliTest, WarmConv2dAlsoCompilesTheSplitKForm) {
  for (const char* knob : {"CUINLINE_CONV2D_SPLIT_K", "CUINLINE_CONV2D_STAGE", "CUINLINE_CONV2D_WGMMA"}) {
    if (std::getenv(knob) != nullptr) GTEST_SKIP() << knob << " is set";
  }
  auto spec = write_spec("s.json", R"json({"entries": [
      {"kind": "conv2d", "input": [512, 7, 7], "filters": [512, 3, 3], "padding": 1, "bias": true,
       "epilogue": "relu", "dtype": "f16", "layout": "nhwc"},
      {"kind": "conv2d", "input": [1024, 16, 16], "filters": [1024, 3, 3], "padding": 1, "dtype": "bf16"}]})json");
  Result warm = cli({"warm", "--spec", spec.string(), "--arch", "sm_90", "-j", "2"});
  ASSERT_EQ(warm.code, 0) << warm.out << warm.err;
  EXPECT_CONTAINS(warm.out, "warm: 5 compiled, 0 already cached, 0 failed");
  EXPECT_CONTAINS(warm.out, "compiled conv2d<f16,512x7x7,512x3x3,s1x1,p1x1,d1x1,bias,x:nhwc,w:nhwc,y:nhwc>[relu] split-K sm_90");
  EXPECT_CONTAINS(warm.out, "compiled conv2d<bf16,1024x16x16,1024x3x3,s1x1,p1x1,d1x1>[identity] split-K sm_90");
  EXPECT_CONTAINS(warm.out, "compiled conv2d staging copy (f16/bf16, f32 tf32) sm_90");
  const Conv2dVariant resnet = conv2d_variant_for(
      view(0x10000000, DType::f16, true, 1, 512, 7, 7), view(0x20000000, DType::f16, true, 512, 512, 3, 3),
      TensorView::contiguous(fake(0x30000000), DType::f16, {512}), view(0x40000000, DType::f16, true, 1, 512, 7, 7),
      Conv2dParams::square(1, 1), Op::relu());
  const Conv2dVariant unet = conv2d_variant_for(
      view(0x10000000, DType::bf16, false, 1, 1024, 16, 16), view(0x20000000, DType::bf16, false, 1024, 1024, 3, 3),
      TensorView{}, view(0x40000000, DType::bf16, false, 1, 1024, 16, 16), Conv2dParams::square(1, 1), Op::chain({}));
  for (const Conv2dVariant& v : {resnet, unet}) {
    const std::optional<cuinline::CompileRequest> split = make_split_request(v);
    ASSERT_TRUE(split.has_value()) << v.name();
    for (const auto& request : {make_request(v), *split}) {
      EXPECT_EQ(tier_of(request), cuinline::CacheTier::disk) << v.name() << " " << request.name_expressions.at(0);
    }
  }
  EXPECT_EQ(warmed_cache().stats().compiles, 0u);
  Result again = cli({"warm", "--spec", spec.string(), "--arch", "sm_90"});
  ASSERT_EQ(again.code, 0) << again.out << again.err;
  EXPECT_CONTAINS(again.out, "warm: 0 compiled, 5 already cached, 0 failed");
}

// f32 in tf32 on the TF32 wgmma kernel (16+ channels, sm_90): always staged; warm compiles the conv of
// the channels-last copy and the staging module (its TF32 copy), and the NCHW and channels-last calls
// of that shape then find both on disk.
TEST_F(CliTest, WarmConv2dTf32CompilesTheConvOfTheStagedCopyAndTheStagingModule) {
  if (std::getenv("CUINLINE_CONV2D_TF32_WGMMA") != nullptr || std::getenv("CUINLINE_CONV2D_WGMMA") != nullptr) {
    GTEST_SKIP() << "the TF32 wgmma kernel is switched off";
  }
  auto spec = write_spec("tf32.json", R"json({"entries": [
      {"kind": "conv2d", "input": [32, 40, 48], "filters": [64, 5, 7], "padding": [1, 2], "precision": "tf32",
       "epilogue": "relu"}]})json");
  Result warm = cli({"warm", "--spec", spec.string(), "--arch", "sm_90", "-j", "2"});
  ASSERT_EQ(warm.code, 0) << warm.out << warm.err;
  EXPECT_CONTAINS(warm.out, "warm: 2 compiled, 0 already cached, 0 failed");
  EXPECT_CONTAINS(warm.out, "compiled conv2d staging copy (f16/bf16, f32 tf32) sm_90");
  for (bool nhwc : {false, true}) {
    const Conv2dVariant v = conv2d_variant_for(
        view(0x100000, DType::f32, nhwc, 2, 32, 40, 48), view(0x200000, DType::f32, nhwc, 64, 32, 5, 7), TensorView{},
        view(0x400000, DType::f32, false, 2, 64, 38, 46), Conv2dParams{1, 1, 1, 2, 1, 1}, Op::relu(),
        Conv2dPrecision::tf32);
    ASSERT_TRUE(conv2d_tiling(v).tf32_wgmma()) << v.name();
    for (const auto& request : {make_request(v), *make_stage_request(v)}) {
      EXPECT_EQ(tier_of(request), cuinline::CacheTier::disk) << v.name() << " " << request.name;
    }
  }
  EXPECT_EQ(warmed_cache().stats().compiles, 0u);
}

// f32 with channels-last tensors past 2^22 multiply-adds an image runs the f32 NCHW kernel between
// transposing copies (Winograd writing the channels-last output itself: a kernel of its own): warm
// writes those kernels' entries and the transposing copy's module once, so the run-time call finds
// both on disk.
TEST_F(CliTest, WarmConv2dF32ChannelsLastAlsoCompilesTheTransposingCopy) {
  if (std::getenv("CUINLINE_CONV2D_TRANSPOSE") != nullptr) GTEST_SKIP() << "CUINLINE_CONV2D_TRANSPOSE is set";
  auto spec = write_spec("t.json", R"json({"entries": [
      {"kind": "conv2d", "input": [8, 64, 64], "filters": [32, 3, 3], "padding": 1, "layout": ["nhwc", "nchw"]},
      {"kind": "conv2d", "input": [16, 40, 40], "filters": [32, 3, 3], "layout": "nhwc", "weight_layout": "nchw"}]})json");
  Result warm = cli({"warm", "--spec", spec.string(), "--arch", "sm_90", "-j", "2"});
  ASSERT_EQ(warm.code, 0) << warm.out << warm.err;
  EXPECT_CONTAINS(warm.out, "compiled conv2d transposing copy (f32 channels-last) sm_90");
  // Winograd NCHW, Winograd with a channels-last output, the direct kernel, the copy.
  EXPECT_CONTAINS(warm.out, "warm: 4 compiled");
  const Conv2dVariant a = conv2d_variant_for(
      view(0x100000, DType::f32, true, 2, 8, 64, 64), view(0x200000, DType::f32, true, 32, 8, 3, 3),
      TensorView{}, view(0x400000, DType::f32, true, 2, 32, 64, 64), Conv2dParams::square(1, 1), Op::chain({}));
  const Conv2dVariant b = conv2d_variant_for(
      view(0x100000, DType::f32, true, 2, 16, 40, 40), view(0x200000, DType::f32, false, 32, 16, 3, 3),
      TensorView{}, view(0x400000, DType::f32, true, 2, 32, 38, 38), Conv2dParams{}, Op::chain({}));
  for (const Conv2dVariant& v : {a, b}) {
    ASSERT_TRUE(conv2d_tiling(v).transposes()) << v.name();
    for (const auto& request : {make_request(v), *make_stage_request(v)}) {
      EXPECT_EQ(tier_of(request), cuinline::CacheTier::disk) << v.name() << " " << request.name;
    }
  }
  EXPECT_EQ(warmed_cache().stats().compiles, 0u);
}

// f64 entries warm the general kernel's double variants (both layouts, grouped too): the calls on
// float64 tensors then find them on disk.
TEST_F(CliTest, WarmConv2dF64) {
  auto spec = write_spec("f64.json", R"json({"entries": [
      {"kind": "conv2d", "input": [16, 20, 20], "filters": [8, 3, 3], "padding": 1, "dtype": "f64",
       "layout": ["nchw", "nhwc"], "bias": true, "epilogue": "gelu"},
      {"kind": "conv2d", "input": [16, 20, 20], "filters": [16, 3, 3], "groups": 16, "dtype": "f64"}]})json");
  Result warm = cli({"warm", "--spec", spec.string(), "--arch", "sm_90", "-j", "2"});
  ASSERT_EQ(warm.code, 0) << warm.out << warm.err;
  EXPECT_CONTAINS(warm.out, "conv2d<f64,16x20x20,8x3x3,s1x1,p1x1,d1x1,bias>[gelu]");
  EXPECT_CONTAINS(warm.out, "warm: 3 compiled");
  for (bool nhwc : {false, true}) {
    const Conv2dVariant v = conv2d_variant_for(
        view(0x100000, DType::f64, nhwc, 2, 16, 20, 20), view(0x200000, DType::f64, nhwc, 8, 16, 3, 3),
        TensorView::contiguous(fake(0x300000), DType::f64, {8}), view(0x400000, DType::f64, nhwc, 2, 8, 20, 20),
        Conv2dParams::square(1, 1), parse_op("gelu"));
    EXPECT_TRUE(conv2d_tiling(v).generic()) << v.name();
    EXPECT_EQ(tier_of(make_request(v)), cuinline::CacheTier::disk) << v.name();
  }
  EXPECT_EQ(warmed_cache().stats().compiles, 0u);
}

TEST_F(CliTest, WarmConv2dRejectsUnknownDtypesAndLayouts) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"entries": [{"kind": "conv2d", "input": [8, 32, 32], "filters": [16, 3, 3], "dtype": "f128"}]})",
       R"(entries[0].dtype: expected one of f32,f16,bf16,f64, got "f128")"},
      {R"({"entries": [{"kind": "conv2d", "input": [8, 32, 32], "filters": [16, 3, 3], "layout": "NHWC"}]})",
       R"(entries[0].layout: expected one of nchw,nhwc, got "NHWC")"},
      {R"({"entries": [{"kind": "conv2d", "input": [8, 32, 32], "filters": [16, 3, 3],
                        "weight_layout": ["nchw", "ohwi"]}]})",
       R"(entries[0].weight_layout[1]: expected one of nchw,nhwc, got "ohwi")"},
  };
  for (const auto& [json, message] : cases) {
    auto spec = write_spec("bad.json", json);
    Result r = cli({"warm", "--spec", spec.string(), "--arch", "sm_90"});
    EXPECT_EQ(r.code, 2) << json << "\n" << r.err;
    EXPECT_CONTAINS(r.err, "cuinline: error: " + message);
  }
  EXPECT_TRUE(entry_files().empty());
}

}  // namespace
