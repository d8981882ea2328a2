// The staging copy of the f16 / bf16 conv (kernel_templates/conv2d_stage.cuh) run on the host: each
// block's 256 threads are std::threads (a barrier for __syncthreads, the kernel's __shared__ array
// shared by them), blocks one after another over the grid the library launches
// (conv2d_impl::hmma_stage_tiles). Every case checks the whole workspace element by element — the
// input's and the weight's channels-last copies with zeros past the real channels — and that nothing
// before or after them was written, that every read falls inside the source tensor; for NCHW and
// channels-last sources, the 16-byte load path and the 16-bit one (a source misaligned by one
// element, pixel counts that are not a multiple of 8), channel counts from 1 to 136. Also: which
// variants the planner stages, and that staged variants compile for sm_90 as one module of two
// kernels whose tile counts the rendered static_asserts tie to the launch's.
#include <gtest/gtest.h>

#include <barrier>
#include <cstdlib>
#include <tuple>
#include <cstdint>
#include <cstring>
#include <cuinline/arch.hpp>
#include <cuinline/compiler.hpp>
#include <cuinline/conv2d.hpp>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "ops/conv2d/conv2d_internal.hpp"

#define __device__
#define __global__
#define __forceinline__ inline
#define __restrict__
#define __launch_bounds__(...)
#define __shared__ static  // one block runs at a time; its threads share the array

namespace {
struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};
thread_local Dim3 threadIdx, blockIdx;
std::barrier<>* g_barrier = nullptr;

// The source tensors of the running case: every read must fall inside one of them.
struct Extent {
  const void* begin;
  std::size_t bytes;
};
std::vector<Extent> g_sources;
bool in_a_source(const void* p, std::size_t bytes) {
  for (const Extent& e : g_sources) {
    const auto* b = static_cast<const unsigned char*>(e.begin);
    const auto* q = static_cast<const unsigned char*>(p);
    if (q >= b && q + bytes <= b + e.bytes) return true;
  }
  return false;
}
}  // namespace

struct uint4 {
  unsigned x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) {
  return {x, y, z, w};
}
inline unsigned short __ldg(const unsigned short* p) {
  EXPECT_TRUE(in_a_source(p, 2)) << "a read outside the source";
  return *p;
}
inline uint4 __ldg(const uint4* p) {
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 16, 0u) << "a 16-byte load must be aligned";
  EXPECT_TRUE(in_a_source(p, 16)) << "a 16-byte read outside the source";
  uint4 v;
  std::memcpy(&v, p, 16);
  return v;
}
inline void __syncthreads() {
  g_barrier->arrive_and_wait();
}

#include "../kernel_templates/conv2d_stage.cuh"

namespace {

using namespace cuinline::ops;
namespace impl = cuinline::ops::conv2d_impl;

template <int cin, int h, int w, int kh, int kw, int in_nhwc, int w_nhwc, int stage_in, int stage_w>
struct Shape {
  static constexpr int kCin = cin, kH = h, kW = w, kKH = kh, kKW = kw, kCp = (cin + 7) / 8 * 8, kInNhwc = in_nhwc,
                       kWNhwc = w_nhwc, kStageInput = stage_in, kStageWeight = stage_w;
};

constexpr unsigned short kPoison = 0xDEAD;

// One tensor's expected copy: images x [pixels][cp], channel c of pixel p = the source's, zeros past cin.
std::vector<unsigned short> expected_copy(const std::vector<unsigned short>& src, const unsigned short* begin,
                                          int images, int cin, std::int64_t pixels, int cp, bool nhwc) {
  (void)src;
  std::vector<unsigned short> out(static_cast<std::size_t>(images) * pixels * cp, 0);
  for (int n = 0; n < images; ++n)
    for (std::int64_t p = 0; p < pixels; ++p)
      for (int c = 0; c < cin; ++c) {
        const std::int64_t at = nhwc ? (n * pixels + p) * cin + c : (std::int64_t{n} * cin + c) * pixels + p;
        out[(n * pixels + p) * cp + c] = begin[at];
      }
  return out;
}

template <class S>
void check_case(int images, int cout, bool misaligned, std::uint64_t seed) {
  using St = cuinline_conv2d_stage_detail::Stage<S>;
  const std::int64_t pixels = std::int64_t{S::kH} * S::kW, taps = S::kKH * S::kKW;
  SCOPED_TRACE("cin " + std::to_string(S::kCin) + " " + std::to_string(S::kH) + "x" + std::to_string(S::kW) +
               " filter " + std::to_string(S::kKH) + "x" + std::to_string(S::kKW) + (S::kInNhwc ? " x:nhwc" : "") +
               (S::kWNhwc ? " w:nhwc" : "") + (misaligned ? " misaligned" : ""));
  // The kernel's tiles are the launch's.
  EXPECT_EQ(St::In::kTiles, impl::hmma_stage_tiles(S::kCp, pixels));
  EXPECT_EQ(St::W::kTiles, impl::hmma_stage_tiles(S::kCp, taps));
  std::mt19937_64 rng(seed);
  const int shift = misaligned ? 1 : 0;
  std::vector<unsigned short> x(static_cast<std::size_t>(images) * S::kCin * pixels + 1);
  std::vector<unsigned short> wt(static_cast<std::size_t>(cout) * S::kCin * taps + 1);
  for (auto& e : x) e = static_cast<unsigned short>(rng() | 1);  // never 0: a copied zero is a padding zero
  for (auto& e : wt) e = static_cast<unsigned short>(rng() | 1);
  const unsigned short* xs = x.data() + shift;
  const unsigned short* ws = wt.data() + shift;
  g_sources = {{xs, (x.size() - 1) * 2}, {ws, (wt.size() - 1) * 2}};
  // Workspaces with 64 poisoned guard elements each side.
  const std::size_t in_elems = static_cast<std::size_t>(images) * pixels * S::kCp;
  const std::size_t w_elems = static_cast<std::size_t>(cout) * taps * S::kCp;
  std::vector<unsigned short> in_ws(in_elems + 128, kPoison), w_ws(w_elems + 128, kPoison);
  // (16-byte aligned destinations, as the workspace is.)
  ASSERT_EQ(reinterpret_cast<std::uintptr_t>(in_ws.data() + 64) % 16, 0u);
  const std::int64_t blocks =
      (S::kStageInput ? images * St::In::kTiles : 0) + (S::kStageWeight ? cout * St::W::kTiles : 0);
  std::barrier<> barrier(256);
  g_barrier = &barrier;
  for (std::int64_t b = 0; b < blocks; ++b) {
    std::vector<std::thread> threads;
    for (unsigned tid = 0; tid < 256; ++tid) {
      threads.emplace_back([&, tid] {
        threadIdx = {tid, 0, 0};
        blockIdx = {static_cast<unsigned>(b), 0, 0};
        cuinline_conv2d_stage<S>(xs, S::kStageInput ? in_ws.data() + 64 : nullptr, ws,
                                 S::kStageWeight ? w_ws.data() + 64 : nullptr, images);
      });
    }
    for (std::thread& t : threads) t.join();
  }
  auto check = [&](const std::vector<unsigned short>& got, const std::vector<unsigned short>& want, bool staged,
                   const char* what) {
    SCOPED_TRACE(what);
    for (std::size_t i = 0; i < 64; ++i) ASSERT_EQ(got[i], kPoison) << "written before the workspace";
    for (std::size_t i = 64 + want.size(); i < got.size(); ++i) ASSERT_EQ(got[i], kPoison) << "written past it";
    std::size_t wrong = 0, first = want.size();
    for (std::size_t i = 0; i < want.size(); ++i) {
      const unsigned short expect = staged ? want[i] : kPoison;
      if (got[64 + i] != expect) {
        ++wrong;
        if (first == want.size()) first = i;
      }
    }
    EXPECT_EQ(wrong, 0u) << "first wrong element " << first << " of " << want.size();
  };
  check(in_ws, expected_copy(x, xs, images, S::kCin, pixels, S::kCp, S::kInNhwc), S::kStageInput, "input");
  check(w_ws, expected_copy(wt, ws, cout, S::kCin, taps, S::kCp, S::kWNhwc), S::kStageWeight, "weight");
}

TEST(Conv2dStageEmulated, CopiesAreExactAndStayInBounds) {
  std::uint64_t seed = 7;
  for (bool mis : {false, true}) {
    // The seed's 8 channels (a tile of 512 pixels), NCHW input and weight: the 16-byte path.
    check_case<Shape<8, 24, 24, 3, 3, 0, 0, 1, 1>>(2, 16, mis, seed++);
    // 3 channels (an RGB stem): zeros in channels 3-7; a 7x7 filter; pixels not a multiple of 8.
    check_case<Shape<3, 13, 11, 7, 7, 0, 0, 1, 1>>(2, 8, mis, seed++);
    // Channels-last input with 3 channels and an NCHW weight; channels-last weight only.
    check_case<Shape<3, 9, 9, 3, 3, 1, 0, 1, 1>>(1, 4, mis, seed++);
    check_case<Shape<20, 6, 10, 3, 5, 1, 1, 1, 1>>(2, 24, mis, seed++);  // 24 channels: tiles of 8
    // 64 and 128 channels (tiles of 64), 136 (tiles of 8): several channel tiles an image.
    check_case<Shape<64, 8, 8, 3, 3, 0, 0, 1, 1>>(2, 8, mis, seed++);
    check_case<Shape<128, 5, 7, 1, 1, 0, 0, 1, 1>>(1, 4, mis, seed++);
    check_case<Shape<133, 4, 4, 2, 2, 0, 0, 1, 1>>(1, 3, mis, seed++);
    // Only the weight (input channels-last, 16 channels) or only the input (weight channels-last).
    check_case<Shape<16, 8, 8, 3, 3, 1, 0, 0, 1>>(2, 8, mis, seed++);
    check_case<Shape<16, 8, 8, 3, 3, 0, 1, 1, 0>>(2, 8, mis, seed++);
    // One channel, one pixel.
    check_case<Shape<1, 1, 1, 1, 1, 0, 0, 1, 1>>(3, 2, mis, seed++);
  }
}

Conv2dVariant half_variant(int cin, int hw, int cout, Conv2dLayout in, Conv2dLayout w) {
  Conv2dVariant v = make_conv2d_variant(cin, hw, hw, cout, 3, 3, Conv2dParams::square(1, 1), true,
                                        div_leaky_relu_epilogue(2.0, 0.01));
  v.dtype = cuinline::DType::f16;
  v.input_layout = in;
  v.weight_layout = w;
  return v;
}

// Which variants are staged (CUINLINE_CONV2D_STAGE unset in ctest): those not already channels-last
// with a multiple of 8 channels, from kStageMinElements input elements an image; the tiling then is
// the staged variant's, and the request one module of two kernels that compiles for sm_90.
TEST(Conv2dStage, PlannerStagesLargeNonChannelsLastCalls) {
  if (std::getenv("CUINLINE_CONV2D_STAGE") != nullptr) GTEST_SKIP() << "CUINLINE_CONV2D_STAGE is set";
  const auto nchw = Conv2dLayout::nchw, nhwc = Conv2dLayout::nhwc;
  // The shapes, NCHW: staged (input and weight).
  for (auto [cin, hw, cout] : {std::tuple{8, 128, 64}, std::tuple{64, 56, 64}, std::tuple{128, 128, 128}}) {
    const Conv2dVariant v = half_variant(cin, hw, cout, nchw, nchw);
    ASSERT_TRUE(impl::hmma_stages(v)) << v.name();
    const Conv2dTiling t = conv2d_tiling(v);
    EXPECT_EQ(t.stage_channels, (cin + 7) / 8 * 8);
    EXPECT_TRUE(t.stage_input && t.stage_weight);
    const Conv2dTiling direct = conv2d_tiling(impl::hmma_staged_variant(v));
    EXPECT_EQ(t.shared_bytes, direct.shared_bytes);
    EXPECT_EQ(t.warps_m, direct.warps_m);
    EXPECT_EQ(t.tiles_x, direct.tiles_x);
  }
  // Already in the cp.async form: not staged. Channels-last with 3 channels: staged (input and weight).
  EXPECT_FALSE(impl::hmma_stages(half_variant(64, 56, 64, nhwc, nhwc)));
  EXPECT_TRUE(impl::hmma_stages(half_variant(3, 224, 64, nhwc, nhwc)));
  // Channels-last input, NCHW weight: the weight only.
  const Conv2dTiling wonly = conv2d_tiling(half_variant(64, 56, 64, nhwc, nchw));
  EXPECT_FALSE(wonly.stage_input);
  EXPECT_TRUE(wonly.stage_weight);
  // Small images stay on the direct kernel; f32 is never staged.
  EXPECT_FALSE(impl::hmma_stages(half_variant(4, 8, 8, nchw, nchw)));
  Conv2dVariant f32 = half_variant(64, 56, 64, nchw, nchw);
  f32.dtype = cuinline::DType::f32;
  EXPECT_FALSE(impl::hmma_stages(f32));
  EXPECT_EQ(conv2d_tiling(f32).stage_channels, 0);
}

TEST(Conv2dStage, StagedVariantsCompileAsOneModuleOfTwoKernels) {
  const auto nchw = Conv2dLayout::nchw, nhwc = Conv2dLayout::nhwc;
  for (const Conv2dVariant& v : {half_variant(8, 128, 64, nchw, nchw), half_variant(3, 64, 16, nhwc, nhwc),
                                 half_variant(20, 40, 24, nchw, nhwc), half_variant(64, 56, 64, nhwc, nchw)}) {
    SCOPED_TRACE(v.name());
    if (!impl::hmma_stages(v)) continue;  // (CUINLINE_CONV2D_STAGE=0)
    const cuinline::CompileRequest r = make_request(v);
    ASSERT_EQ(r.name_expressions.size(), 2u);
    EXPECT_EQ(r.name_expressions[1], impl::kHmmaStageKernel);
    // The staged variant's conv source is part of it; the direct request is a different module.
    EXPECT_NE(r.source, impl::make_hmma_direct_request(v).source);
    const cuinline::CompiledProgram c = cuinline::compile(r, cuinline::Arch::parse("sm_90"));  // throws on error
    EXPECT_EQ(c.lowered_names.size(), 2u);
    EXPECT_TRUE(c.lowered_name(impl::kHmmaStageKernel).has_value());
  }
}

}  // namespace
