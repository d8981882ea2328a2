// Every valid conv2d shape plans and compiles: random valid variants (channels 1-1024, images up to
// 512 and not square, filters 1-11 in each dimension, stride 1-4, padding 0-5, dilation 1-4, bias or
// not, an epilogue, each precision) from a printed seed; each one's tiling keeps the plan's
// invariants (whole warps, at most 1024 threads, shared memory within sm_90's 227 KiB) and NVRTC
// compiles it for sm_90; the fp32 kernels with no register spills reported by ptxas (the tensor-core
// kernel's spills are counted and printed).
//   CUINLINE_CONV2D_SHAPES=N        variants to try (default 60: CI)
//   CUINLINE_CONV2D_SHAPES_SEED=S   seed (default: a fixed one in CI; "random" draws one)
// scripts/conv2d-shapes runs a longer randomized sweep before a conv change.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cuinline/compiler.hpp>
#include <cuinline/conv2d.hpp>
#include <cuinline/error.hpp>
#include <random>
#include <regex>
#include <algorithm>
#include <cmath>
#include <string>

#include "test_support.hpp"

namespace {

using namespace cuinline::ops;

int log_uniform(std::mt19937_64& rng, int lo, int hi) {
  std::uniform_real_distribution<double> u(std::log(lo), std::log(hi + 1.0));
  return std::clamp(static_cast<int>(std::exp(u(rng))), lo, hi);
}

// A random valid variant (the filter fits the padded image).
Conv2dVariant random_variant(std::mt19937_64& rng) {
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
    const Op epilogues[] = {Op::chain({}), Op::relu(), div_leaky_relu_epilogue(2.0, 0.01),
                            Op::chain({Step::mul(0.5), Step::clamp(-1, 1)})};
    Conv2dVariant v = make_conv2d_variant(cin, h, w, cout, kh, kw, params, coin(rng) == 1, epilogues[epi(rng)]);
    v.precision = static_cast<Conv2dPrecision>(prec(rng));
    return v;
  }
}

std::uint64_t seed_from_env() {
  const char* s = std::getenv("CUINLINE_CONV2D_SHAPES_SEED");
  if (s == nullptr) return 20261123;
  if (std::string(s) == "random") return cuinline::test::fresh_seed();
  return std::strtoull(s, nullptr, 10);
}

TEST(Conv2dShapes, RandomValidVariantsPlanAndCompile) {
  const std::uint64_t seed = seed_from_env();
  const char* count_env = std::getenv("CUINLINE_CONV2D_SHAPES");
  const int count = count_env ? std::atoi(count_env) : 60;
  std::printf("conv2d shapes: %d variants, seed %llu (CUINLINE_CONV2D_SHAPES_SEED=%llu to repeat)\n", count,
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  const cuinline::Arch sm90 = cuinline::Arch::parse("sm_90");
  int failures = 0;
  int tensor_core_spills = 0;
  for (int i = 0; i < count; ++i) {
    const Conv2dVariant v = random_variant(rng);
    SCOPED_TRACE(v.name() + " " + to_string(v.precision));
    try {
      const Conv2dTiling t = conv2d_tiling(v);
      EXPECT_EQ(t.threads() % 32, 0) << "whole warps";
      EXPECT_LE(t.threads(), 1024);
      EXPECT_GT(t.threads(), 0);
      EXPECT_LE(t.shared_bytes, 227u * 1024u);
      EXPECT_GT(t.block_channels(), 0);
      cuinline::CompileRequest req = make_request(v);
      req.options.push_back("--ptxas-options=-v");
      const cuinline::CompiledProgram prog = cuinline::compile(req, sm90);
      const std::regex spills("([0-9]+) bytes spill (stores|loads)");
      int reports = 0;
      bool spilled = false;
      for (auto it = std::sregex_iterator(prog.log.begin(), prog.log.end(), spills); it != std::sregex_iterator();
           ++it, ++reports) {
        spilled = spilled || (*it)[1].str() != "0";
      }
      // The fp32 kernels (direct, Winograd) never spill. The tensor-core kernel does for some tiles
      // (mostly 3xTF32, three products per operand pair): counted and printed, a known cost.
      if (t.tensor_cores) {
        tensor_core_spills += spilled;
      } else {
        EXPECT_FALSE(spilled) << "register spills:\n" << prog.log;
      }
      EXPECT_GT(reports, 0) << "no ptxas report in the log:\n" << prog.log;
    } catch (const std::exception& e) {
      ++failures;
      ADD_FAILURE() << "variant " << i << " failed: " << e.what();
    }
    if (failures >= 5) break;  // enough to fix; keep the log readable
  }
  std::printf("conv2d shapes: %d tensor-core variants spill registers\n", tensor_core_spills);
}

// The shape issue 19 found (a valid F.conv2d call that failed with "whole warps": 3 x 5 filter,
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
