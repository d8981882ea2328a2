// Every valid conv2d shape plans and compiles: random valid variants (channels 1-1024, images up to
// 512 and not square, filters 1-11 in each dimension, stride 1-4, padding 0-5, dilation 1-4, bias or
// not, a residual or not, an epilogue, each precision, one in eight grouped; each shape also in f16, bf16 or f32 with
// channels-last tensors on the general kernel) from a printed seed; each one's tiling keeps the plan's
// invariants (whole warps, at most 1024 threads, shared memory within sm_90's 227 KiB) and NVRTC
// compiles it for sm_90 (register spills counted and printed); each shape is also planned for one of
// the other targets (sm_75, sm_80, sm_86, sm_120: their shared memory and instructions) and compiled
// for that arch; the tuned shapes compile without spills. Five times as many random variants are
// planned and rendered without compiling (the planner under the sanitizers, where the compiling
// sweeps do not run: tests/CMakeLists.txt).
//   CUINLINE_CONV2D_SHAPES=N        variants to compile (default 60: CI; 5N planned and rendered)
//   CUINLINE_CONV2D_SHAPES_SEED=S   seed (default: a fixed one in CI; "random" draws one)
// scripts/conv2d-shapes runs a longer randomized sweep before a conv change.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cuinline/compiler.hpp>
#include <cuinline/conv2d.hpp>
#include <cuinline/error.hpp>
#include <random>
#include <cctype>
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "conv2d_past_limits.hpp"
#include "ops/conv2d/conv2d_internal.hpp"
#include "test_support.hpp"

namespace {

using cuinline::DType;
using namespace cuinline::ops;

int log_uniform(std::mt19937_64& rng, int lo, int hi) {
  std::uniform_real_distribution<double> u(std::log(lo), std::log(hi + 1.0));
  return std::clamp(static_cast<int>(std::exp(u(rng))), lo, hi);
}

// A random valid variant (the filter fits the padded image).
// `group_rng` draws the grouped ones (its own generator: the other shapes stay those of the seed).
Conv2dVariant random_variant(std::mt19937_64& rng, std::mt19937_64& group_rng) {
  std::uniform_int_distribution<int> k(1, 11), s(1, 4), p(0, 5), d(1, 4), coin(0, 1), prec(0, 2), epi(0, 3);
  for (;;) {
    Conv2dParams params;
    params.stride_h = s(rng);
    params.stride_w = s(rng);
    params.pad_h = p(rng);
    params.pad_w = p(rng);
    params.dilation_h = coin(rng) ? 1 : d(rng);
    params.dilation_w = coin(rng) ? 1 : d(rng);
    const int kh = k(rng), kw = k(rng);
    const int h = log_uniform(rng, 1, 512), w = log_uniform(rng, 1, 512);
    const int cin = log_uniform(rng, 1, 1024), cout = log_uniform(rng, 1, 1024);
    if (conv2d_out_extent(h, kh, params.stride_h, params.pad_h, params.dilation_h) <= 0 ||
        conv2d_out_extent(w, kw, params.stride_w, params.pad_w, params.dilation_w) <= 0) {
      continue;
    }
    // One in eight grouped (F.conv2d's groups: the largest common divisor of the channel counts, or
    // depthwise where Cout is a multiple of Cin).
    if (group_rng() % 8 == 0) params.groups = cout % cin == 0 ? cin : std::gcd(cin, cout);
    const Op epilogues[] = {Op::chain({}), Op::relu(), div_leaky_relu_epilogue(2.0, 0.01),
                            Op::chain({Step::mul(0.5), Step::clamp(-1, 1)})};
    Conv2dVariant v = make_conv2d_variant(cin, h, w, cout, kh, kw, params, coin(rng) == 1, epilogues[epi(rng)]);
    v.precision = static_cast<Conv2dPrecision>(prec(rng));
    v.has_residual = coin(rng) == 1;
    return v;
  }
}

std::uint64_t seed_from_env() {
  const char* s = std::getenv("CUINLINE_CONV2D_SHAPES_SEED");
  if (s == nullptr) return 20261123;
  if (std::string(s) == "random") return cuinline::test::fresh_seed();
  return std::strtoull(s, nullptr, 10);
}

// `count` random variants from the seed, each planned, its invariants checked and its source
// rendered (with its no-workspace kernel's); `compile`: NVRTC compiles each too.
void random_valid_variants(int count, bool compile) {
  const std::uint64_t seed = seed_from_env();
  std::printf("conv2d shapes: %d variants, seed %llu (CUINLINE_CONV2D_SHAPES_SEED=%llu to repeat)%s\n", count,
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed),
              compile ? "" : ", planned and rendered");
  std::mt19937_64 rng(seed);
  const cuinline::Arch sm90 = cuinline::Arch::parse("sm_90");
  int failures = 0;
  int tensor_core_spills = 0, fp32_spills = 0;
  int generic_variants = 0, transposing_variants = 0, fallback_variants = 0;
  int target_variants = 0;
  auto check = [&](const Conv2dVariant& v, int i, const cuinline::Arch& arch) {
    SCOPED_TRACE(v.name() + " " + to_string(v.precision) + " for " + arch.name());
    try {
      ASSERT_EQ(v.target, conv2d_target_for(arch));
      const Conv2dTiling t = conv2d_tiling(v);
      EXPECT_EQ(t.threads() % 32, 0) << "whole warps";
      EXPECT_LE(t.threads(), 1024);
      EXPECT_GT(t.threads(), 0);
      EXPECT_LE(t.grid().shared_bytes, conv2d_max_shared_bytes(v.target))
          << "shared memory within the target's";
      EXPECT_GT(t.block_channels(), 0);
      if (t.tf32_wgmma()) {
        // f32 in tf32 with 16+ input channels on sm90: the wgmma kernel on a staged channels-last copy.
        EXPECT_TRUE(v.dtype == DType::f32 && v.precision == Conv2dPrecision::tf32 && v.target == Conv2dTarget::sm90);
        EXPECT_GE(v.in_channels, 16);
        EXPECT_TRUE(t.wgmma() && t.tensor_cores() && t.as_hmma().stage_input && t.as_hmma().stage_weight);
        EXPECT_FALSE(t.half_mma() || t.halo() || t.window() || t.generic() || t.transposes());
        EXPECT_EQ(t.as_hmma().stage_channels, (v.in_channels + 7) / 8 * 8);
        EXPECT_TRUE(make_stage_request(v).has_value());
      } else {
        EXPECT_EQ(t.generic() || t.half_mma() || t.transposes(),
                  v.uses_generic_kernel() || cuinline::ops::conv2d_impl::f32_direct_too_large(v));
      }
      // What each target's GPUs have: wgmma only for sm90; no tensor cores, bf16 mma or cp.async on
      // sm75 (the fp32 FMA kernels with plain copies, and the general kernel).
      if (v.target != Conv2dTarget::sm90) EXPECT_FALSE(t.wgmma() || t.halo() || t.window());
      if (v.target == Conv2dTarget::sm75) {
        EXPECT_FALSE(t.tensor_cores() || t.half_mma() || (t.winograd() && t.as_winograd().tc_products) ||
                     t.staged());
        ++target_variants;
      }
      if (t.transposes()) {
        // f32 channels-last on the NCHW kernels: the NCHW variant's tiling and module, copies for
        // exactly the channels-last tensors, and the shape-generic copy's module beside it.
        const Conv2dVariant nchw = cuinline::ops::conv2d_impl::f32_nchw_variant(v);
        const bool own_output = cuinline::ops::conv2d_impl::f32_kernel_variant(v).output_layout == Conv2dLayout::nhwc;
        EXPECT_EQ(v.dtype, DType::f32);
        EXPECT_EQ(t.transpose.input, v.input_layout == Conv2dLayout::nhwc);
        EXPECT_EQ(t.transpose.weight, v.weight_layout == Conv2dLayout::nhwc);
        EXPECT_EQ(t.transpose.output, v.output_layout == Conv2dLayout::nhwc && !own_output);
        EXPECT_EQ(own_output, t.winograd() && v.output_layout == Conv2dLayout::nhwc);
        EXPECT_EQ(t.grid().shared_bytes, conv2d_tiling(nchw).grid().shared_bytes);
        if (!own_output) EXPECT_EQ(make_request(v).source, make_request(nchw).source);
        EXPECT_TRUE(make_stage_request(v).has_value());
        ++transposing_variants;
      }
      if (t.generic()) {
        // The general kernel: blocks of whole warps over the flattened output plane, every
        // output channel covered by a block column.
        // (Channel-fast — grouped, channels-last input: a thread a pixel and channel.)
        // (Row-fast — depthwise, up to 49 taps: a thread a column's rows and a channel.)
        const GenericTiling& g = t.as_generic();
        const std::int64_t items =
            g.channel_fast()
                ? v.out_height() * ((v.out_width() + g.pixels_per_thread - 1) / g.pixels_per_thread) *
                      v.out_channels
            : g.row_fast()
                ? v.out_channels / g.channels_per_thread *
                      ((v.out_height() + g.pixels_per_thread - 1) / g.pixels_per_thread) * v.out_width()
                : v.out_height() * v.out_width();
        const bool depthwise = v.params.groups > 1 && v.params.groups == v.in_channels;
        EXPECT_EQ(t.row_fast(), depthwise && v.kernel_h * v.kernel_w <= 49);
        EXPECT_EQ(t.channel_fast(), depthwise && !t.row_fast() && v.input_layout == Conv2dLayout::nhwc);
        EXPECT_GE(std::int64_t{g.tiles_x} * t.threads(), items);
        EXPECT_LT(std::int64_t{g.tiles_x - 1} * t.threads(), items);
        EXPECT_FALSE(t.tensor_cores() || t.winograd());
        ++generic_variants;
      }
      cuinline::CompileRequest req = make_request(v);
      EXPECT_FALSE(req.source.empty());
      if (compile) {
        req.options.push_back("--ptxas-options=-v");
        req.options.push_back("--no-cache");  // (no compute-cache hit: ptxas runs and reports)
        const cuinline::CompiledProgram prog = cuinline::compile(req, arch);
        // ptxas's "N bytes spill stores, M bytes spill loads" lines.
        int reports = 0;
        bool spilled = false;
        for (std::size_t at = prog.log.find(" bytes spill "); at != std::string::npos;
             at = prog.log.find(" bytes spill ", at + 1), ++reports) {
          std::size_t start = at;
          while (start > 0 && std::isdigit(static_cast<unsigned char>(prog.log[start - 1]))) --start;
          spilled = spilled || prog.log.substr(start, at - start) != "0";
        }
        // Spills cost speed, not correctness: counted and printed (the tensor-core kernel spills on
        // some tiles, mostly 3xTF32's three products per operand pair; the fp32 direct kernel on a
        // few odd shapes). The tuned shapes are checked for none in NoSpillsOnTheTunedShapes.
        (t.tensor_cores() ? tensor_core_spills : fp32_spills) += spilled;
        if (spilled) std::printf("  spills: %s %s\n", v.name().c_str(), to_string(v.precision));
        EXPECT_GT(reports, 0) << "no ptxas report in the log:\n" << prog.log;
      }
      // Where no workspace can be had (the device's memory used up, no pool support), a staged or
      // transposing call runs a direct kernel on the tensors as they are: it compiles too.
      if (t.staged() || t.transposes()) {
        SCOPED_TRACE("the no-workspace kernel");
        const bool f32 = v.dtype == DType::f32;
        EXPECT_EQ(t.staged(), !f32 || t.tf32_wgmma());
        const Conv2dTiling dt = f32 ? Conv2dTiling(conv2d_impl::generic_tiling(v))
                                    : Conv2dTiling(conv2d_impl::hmma_direct_tiling(v));
        EXPECT_FALSE(dt.staged());
        EXPECT_FALSE(dt.transposes());
        EXPECT_EQ(dt.threads() % 32, 0) << "whole warps";
        EXPECT_LE(dt.grid().shared_bytes, conv2d_max_shared_bytes(v.target));
        const cuinline::CompileRequest direct =
            f32 ? conv2d_impl::make_generic_request(v) : conv2d_impl::make_hmma_direct_request(v);
        EXPECT_FALSE(direct.source.empty());
        if (compile) cuinline::compile(direct, arch);
        ++fallback_variants;
      }
    } catch (const std::exception& e) {
      ++failures;
      ADD_FAILURE() << "variant " << i << " failed: " << e.what();
    }
  };
  // Each shape also in one of the other dtype x layout combinations (f16, bf16, channels-last:
  // the general kernel), cycling through all five so that every combination is covered; the
  // weight's layout drawn too. A separate generator keeps the shapes those of the seed.
  std::mt19937_64 layout_rng(seed ^ 0x9e3779b97f4a7c15ull), group_rng(seed ^ 0x2545f4914f6cdd1dull);
  const DType dtypes[] = {DType::f16, DType::bf16, DType::f32, DType::f16, DType::bf16};
  // Each shape also planned for one of the other targets, cycling (sm75, sm80, sm86, and sm_120 for
  // sm86 again), and compiled for that arch: the plans every other GPU runs.
  const cuinline::Arch others[] = {cuinline::Arch::parse("sm_75"), cuinline::Arch::parse("sm_80"),
                                   cuinline::Arch::parse("sm_86"), cuinline::Arch::parse("sm_120")};
  for (int i = 0; i < count; ++i) {
    const Conv2dVariant v = random_variant(rng, group_rng);
    check(v, i, sm90);
    Conv2dVariant g = v;
    g.dtype = dtypes[i % 5];
    const bool nhwc_in = i % 5 >= 2, nhwc_out = i % 5 >= 2 ? layout_rng() % 4 != 0 : layout_rng() % 4 == 0;
    g.input_layout = nhwc_in ? Conv2dLayout::nhwc : Conv2dLayout::nchw;
    g.output_layout = nhwc_out ? Conv2dLayout::nhwc : Conv2dLayout::nchw;
    g.weight_layout = layout_rng() % 2 ? Conv2dLayout::nhwc : Conv2dLayout::nchw;
    check(g, i, sm90);
    const cuinline::Arch& other = others[i % 4];
    check(conv2d_variant_for_arch(i % 8 < 4 ? v : g, other), i, other);
    if (failures >= 5) break;  // enough to fix; keep the log readable
  }
  std::printf("conv2d shapes: register spills in %d tensor-core and %d direct-kernel variants of %d (%d on the "
              "general kernel, %d f32 channels-last between transposing copies; %d no-workspace kernels "
              "%s; %d planned for sm75)\n",
              tensor_core_spills, fp32_spills, 3 * count, generic_variants, transposing_variants, fallback_variants,
              compile ? "compiled" : "rendered", target_variants);
}

int shapes_from_env(int fallback) {
  const char* count_env = std::getenv("CUINLINE_CONV2D_SHAPES");
  return count_env ? std::atoi(count_env) : fallback;
}

// An NVRTC sweep (tests/CMakeLists.txt): its time is the compiles.
TEST(Conv2dShapes, RandomValidVariantsPlanAndCompile) {
  random_valid_variants(shapes_from_env(60), true);
}

// Five times as many variants (the first 60 those of the compiled sweep), planned and rendered only:
// the planner over many shapes in every tree, the sanitized ones included.
TEST(Conv2dShapes, RandomValidVariantsPlanAndRender) {
  random_valid_variants(5 * shapes_from_env(60), false);
}

// The no-workspace kernel of a staged f16 NCHW call whose staged copy runs on wgmma: the direct
// kernel is not a wgmma one, so its stores are at most 4 wide where the staged variant's are 8
// (a 1 x 1 conv 64 -> 8 channels at 128 x 128; its source once asserted the wgmma width and did not
// compile: found by test_conv2d_workspace_gpu). That conv now runs the
// pointwise form (no staging); the same 128 x 128 output from a stride-2 1 x 1 is still staged.
TEST(Conv2dShapes, NoWorkspaceKernelOfAStagedCallCompiles) {
  const cuinline::Arch sm90 = cuinline::Arch::parse("sm_90");
  for (DType dt : {DType::f16, DType::bf16}) {
    for (bool residual : {false, true}) {
      Conv2dVariant v = make_conv2d_variant(64, 256, 256, 8, 1, 1, Conv2dParams::square(2, 0), true,
                                            div_leaky_relu_epilogue(1.0, 0.125));
      v.dtype = dt;
      v.has_residual = residual;
      SCOPED_TRACE(v.name());
      ASSERT_TRUE(conv2d_tiling(v).staged());
      EXPECT_EQ(conv2d_impl::hmma_direct_tiling(v).stage_channels, 0);
      EXPECT_NO_THROW(cuinline::compile(conv2d_impl::make_hmma_direct_request(v), sm90));
    }
  }
}

// The shapes the kernels were tuned on (the seed and the sweep of docs/conv2d.md) compile without
// register spills in fp32 (the tensor-core kernel spills 32 bytes on 64x224^2 k1 s2 in tf32: known,
// left for a later tuning pass).
TEST(Conv2dShapes, NoSpillsOnTheTunedShapes) {
  struct S {
    int cin, hw, cout, k, stride, pad;
  };
  const S shapes[] = {{8, 128, 64, 3, 1, 0},  {64, 56, 64, 3, 1, 1},  {64, 56, 128, 3, 2, 1}, {32, 112, 32, 5, 1, 2},
                      {3, 224, 64, 7, 2, 3},  {64, 56, 64, 1, 1, 0},  {16, 224, 16, 3, 2, 1}, {8, 128, 8, 5, 2, 2},
                      {128, 28, 128, 3, 1, 1}, {64, 224, 64, 1, 2, 0}};
  for (const S& sh : shapes) {
    for (Conv2dPrecision prec : {Conv2dPrecision::fp32}) {
      Conv2dVariant v = make_conv2d_variant(sh.cin, sh.hw, sh.hw, sh.cout, sh.k, sh.k,
                                            Conv2dParams::square(sh.stride, sh.pad), true,
                                            div_leaky_relu_epilogue(2.0, 0.01));
      v.precision = prec;
      SCOPED_TRACE(v.name());
      cuinline::CompileRequest req = make_request(v);
      req.options.push_back("--ptxas-options=-v");
      req.options.push_back("--no-cache");  // (no compute-cache hit: ptxas runs and reports)
      const std::string log = cuinline::compile(req, cuinline::Arch::parse("sm_90")).log;
      EXPECT_NE(log.find(" 0 bytes spill stores"), std::string::npos) << log;
    }
  }
}

// A shape once refused (a valid F.conv2d call that failed with "whole warps": 3 x 5 filter,
// padding (1, 2), 4 x 16 x 40 x 40 input, 48 output channels), in each precision.
TEST(Conv2dShapes, NonSquareFilterWithThreeChannelGroups) {
  Conv2dParams p;
  p.pad_h = 1;
  p.pad_w = 2;
  for (Conv2dPrecision prec : {Conv2dPrecision::fp32, Conv2dPrecision::tf32, Conv2dPrecision::tf32x3}) {
    Conv2dVariant v = make_conv2d_variant(16, 40, 40, 48, 3, 5, p, true, Op::relu());
    v.precision = prec;
    SCOPED_TRACE(to_string(prec));
    const Conv2dTiling t = conv2d_tiling(v);
    EXPECT_EQ(t.threads() % 32, 0);
    EXPECT_NO_THROW(cuinline::compile(make_request(v), cuinline::Arch::parse("sm_90")));
  }
}

}  // namespace

namespace {

// Layers past the limits conv2d once had (conv2d_past_limits.hpp: a ViT-B/32 patch embedding, ASPP
// dilations, FCN's padding of 100, 4100+ channels, 41- and 51-tap filters, a 1-D audio filter) plan
// within the plan's invariants and compile for sm_90 in every dtype and layout (and f32 in each
// precision), and for sm_80 and sm_75 in f16 / f32.
TEST(Conv2dShapes, PastTheFormerLimitsPlanAndCompile) {
  const cuinline::Arch sm90 = cuinline::Arch::parse("sm_90");
  for (const cuinline::test::PastLimitsShape& s : cuinline::test::past_limits_shapes()) {
    SCOPED_TRACE(s.what);
    const Conv2dVariant base =
        make_conv2d_variant(s.cin, s.h, s.w, s.cout, s.kh, s.kw, s.p, true, div_leaky_relu_epilogue(1.0, 0.125));
    struct Form {
      DType dtype;
      Conv2dPrecision precision;
      bool nhwc;
      const char* arch;
    };
    const Form forms[] = {{DType::f32, Conv2dPrecision::fp32, false, "sm_90"},
                          {DType::f32, Conv2dPrecision::tf32, true, "sm_90"},
                          {DType::f32, Conv2dPrecision::tf32x3, false, "sm_90"},
                          {DType::f16, Conv2dPrecision::fp32, false, "sm_90"},
                          {DType::bf16, Conv2dPrecision::fp32, true, "sm_90"},
                          {DType::f16, Conv2dPrecision::fp32, true, "sm_80"},
                          {DType::f32, Conv2dPrecision::fp32, false, "sm_75"}};
    for (const Form& f : forms) {
      Conv2dVariant v = base;
      v.dtype = f.dtype;
      v.precision = f.precision;
      v.input_layout = v.weight_layout = v.output_layout = f.nhwc ? Conv2dLayout::nhwc : Conv2dLayout::nchw;
      const cuinline::Arch arch = cuinline::Arch::parse(f.arch);
      v = conv2d_variant_for_arch(v, arch);
      SCOPED_TRACE(v.name() + " " + to_string(v.precision) + " for " + arch.name());
      const Conv2dTiling t = conv2d_tiling(v);
      EXPECT_EQ(t.threads() % 32, 0) << "whole warps";
      EXPECT_GT(t.threads(), 0);
      EXPECT_LE(t.threads(), 1024);
      EXPECT_LE(t.grid().shared_bytes, conv2d_max_shared_bytes(v.target));
      // The grid's channel blocks (y) within 65535.
      EXPECT_LE((v.out_channels + t.block_channels() - 1) / t.block_channels(), 65535);
      EXPECT_EQ(t.half_mma(), v.dtype != DType::f32 && v.params.groups == 1);
      EXPECT_NO_THROW(cuinline::compile(make_request(v), arch));
      if (t.staged() || t.transposes()) EXPECT_TRUE(make_stage_request(v).has_value());
    }
  }
  // A filter row past 4 x 576 unrolled multiply-adds (a 1 x 80 audio filter) is the general kernel's:
  // the direct kernel took NVRTC 2.3 s on it.
  Conv2dParams audio;
  audio.stride_w = 4, audio.pad_w = 40;
  const Conv2dVariant wide = make_conv2d_variant(1, 1, 20000, 16, 1, 80, audio, true, Op::relu());
  EXPECT_TRUE(conv2d_impl::f32_direct_too_large(wide));
  EXPECT_TRUE(conv2d_tiling(wide).generic());
}

// What is still refused, each naming what was wrong: sizes past kMaxConv2dChannels /
// kMaxConv2dExtent, a filter whose reach overflows 32 bits, a weight or an output image of 2^31
// elements or more.
TEST(Conv2dShapes, PastTheIndexLimitsIsAClearError) {
  const auto message = [](auto&& make) {
    try {
      make();
    } catch (const cuinline::InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  using cuinline::ops::kMaxConv2dChannels;
  using cuinline::ops::kMaxConv2dExtent;
  EXPECT_NE(message([] { make_conv2d_variant(kMaxConv2dChannels + 1, 4, 4, 8, 1, 1, {}, false, Op::relu()); })
                .find("Cin, Cout <= 65535"),
            std::string::npos);
  EXPECT_NE(message([] { make_conv2d_variant(1, 1, kMaxConv2dExtent + 1, 8, 1, 1, {}, false, Op::relu()); })
                .find("H, W, KH, KW <= 1048576"),
            std::string::npos);
  Conv2dParams far;
  far.dilation_h = kMaxConv2dExtent;
  EXPECT_NE(message([&] { make_conv2d_variant(1, 16, 16, 1, 4096, 1, far, false, Op::relu()); })
                .find("the filter's reach (4293918721x1) exceeds the padded input (16x16)"),
            std::string::npos);
  far.dilation_h = kMaxConv2dExtent + 1;
  EXPECT_NE(message([&] { make_conv2d_variant(1, 16, 16, 1, 1, 1, far, false, Op::relu()); })
                .find("stride, dilation and padding must be at most 1048576"),
            std::string::npos);
  EXPECT_NE(message([] { make_conv2d_variant(4096, 64, 64, 4096, 12, 12, Conv2dParams::square(1, 6), false,
                                             Op::relu()); })
                .find("the weight has more than 2^31 - 1 elements"),
            std::string::npos);
  Conv2dParams pad;
  pad.pad_h = pad.pad_w = 30000;
  EXPECT_NE(message([&] { make_conv2d_variant(1, 8, 8, 4, 1, 1, pad, false, Op::relu()); })
                .find("one output image has more than 2^31 - 1 elements"),
            std::string::npos);
}

}  // namespace
