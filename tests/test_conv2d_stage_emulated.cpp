// The staging copy of the f16 / bf16 conv (kernel_templates/conv2d_stage.cuh) run on the host: each
// block's 256 threads are lanes (fibers, tests/emulated_lanes.hpp: a barrier for __syncthreads, the
// kernel's __shared__ array shared by them), blocks one after another over the grid the library
// launches, with the arguments the launch passes (conv2d_impl::hmma_stage_tensor: run-time shapes,
// the host's load path and reciprocals). Every case checks the whole workspace element by element —
// the input's and the weight's channels-last copies with zeros past the real channels — and that
// nothing before or after them was written, that every read falls inside the source tensor; for
// NCHW and channels-last sources, the 16-byte load path and the 16-bit one (a source misaligned by
// one element, pixel counts that are not a multiple of 8), every channel count from 1 to 136. Also:
// the fast division, which variants the planner stages, that a staged variant's conv module is the
// channels-last variant's (one kernel) and that the staging module is one request for every staged
// shape, both compiling for sm_90 without spills.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <cuinline/arch.hpp>
#include <cuinline/cache.hpp>
#include <cuinline/compiler.hpp>
#include <cuinline/conv2d.hpp>
#include <memory>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <tuple>
#include <vector>

#include "emulated_lanes.hpp"
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
Dim3 blockIdx;
// (Lane i of a block is its thread i.)
#define threadIdx (Dim3{static_cast<unsigned>(cuinline::test::lanes::lane_index()), 0, 0})
cuinline::test::lanes::LaneBarrier* g_barrier = nullptr;

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
inline unsigned __ldg(const unsigned* p) {
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 4, 0u) << "a 4-byte load must be aligned";
  EXPECT_TRUE(in_a_source(p, 4)) << "a read outside the source";
  return *p;
}
inline int __ffs(int x) {
  return x == 0 ? 0 : __builtin_ctz(static_cast<unsigned>(x)) + 1;
}
inline unsigned __umulhi(unsigned a, unsigned b) {
  return static_cast<unsigned>((std::uint64_t{a} * b) >> 32);
}
inline void __syncthreads() {
  g_barrier->arrive_and_wait();
}

#include "../kernel_templates/conv2d_stage.cuh"

namespace {

using namespace cuinline::ops;
namespace impl = cuinline::ops::conv2d_impl;

// The host's mirror of the kernel's argument, member for member.
using DeviceTensor = cuinline_conv2d_stage_tensor;
static_assert(sizeof(DeviceTensor) == sizeof(impl::StageTensor));
static_assert(offsetof(DeviceTensor, pixels) == offsetof(impl::StageTensor, pixels));
static_assert(offsetof(DeviceTensor, channels) == offsetof(impl::StageTensor, channels));
static_assert(offsetof(DeviceTensor, vec) == offsetof(impl::StageTensor, vec));
static_assert(offsetof(DeviceTensor, blocks) == offsetof(impl::StageTensor, blocks));
static_assert(offsetof(DeviceTensor, tiles_c) == offsetof(impl::StageTensor, tiles_c));
static_assert(offsetof(DeviceTensor, by_tiles) == offsetof(impl::StageTensor, by_tiles));
static_assert(offsetof(DeviceTensor, by_tiles_c) == offsetof(impl::StageTensor, by_tiles_c));

DeviceTensor to_device(const impl::StageTensor& t) {
  DeviceTensor d;
  std::memcpy(&d, &t, sizeof d);
  return d;
}

unsigned divide(unsigned n, unsigned d) {
  const impl::StageFastDiv f = impl::fast_div_of(d);
  return cuinline_conv2d_stage_detail::divide(n, {f.mul, f.shift});
}

TEST(Conv2dStageEmulated, FastDivisionIsExactBelow2To31) {
  std::mt19937_64 rng(11);
  std::vector<unsigned> divisors;
  for (unsigned d = 1; d <= 600; ++d) divisors.push_back(d);
  for (int k = 10; k <= 31; ++k) {
    for (long long e : {-1ll, 0ll, 1ll}) divisors.push_back(static_cast<unsigned>((1ll << k) + e));
  }
  for (int i = 0; i < 200; ++i) divisors.push_back(static_cast<unsigned>(rng() % 0x7fffffffu) + 1);
  for (unsigned d : divisors) {
    if (d > 0x7fffffffu) continue;
    std::vector<unsigned> ns = {0,
                                1,
                                d - 1,
                                d,
                                d + 1,
                                2 * d - 1,
                                2 * d,
                                0x7fffffffu,
                                0x7ffffffeu,
                                0x7fffffffu / d * d,
                                0x7fffffffu / d * d - 1};
    for (int i = 0; i < 64; ++i) ns.push_back(static_cast<unsigned>(rng() % 0x80000000u));
    for (unsigned n : ns) {
      if (n > 0x7fffffffu) continue;
      ASSERT_EQ(divide(n, d), n / d) << n << " / " << d;
    }
  }
}

struct Case {
  int images, cout, cin, h, w, kh, kw;
  bool in_nhwc, w_nhwc, stage_in, stage_w;
};

std::string describe(const Case& c, bool misaligned) {
  return "cin " + std::to_string(c.cin) + " " + std::to_string(c.h) + "x" + std::to_string(c.w) + " filter " +
         std::to_string(c.kh) + "x" + std::to_string(c.kw) + (c.in_nhwc ? " x:nhwc" : "") +
         (c.w_nhwc ? " w:nhwc" : "") + (c.stage_in ? "" : " weight only") + (c.stage_w ? "" : " input only") +
         (misaligned ? " misaligned" : "");
}

constexpr unsigned short kPoison = 0xDEAD;

// One tensor's expected copy: images x [pixels][cp], channel c of pixel p = the source's, zeros past cin.
std::vector<unsigned short> expected_copy(const unsigned short* begin, int images, int cin,
                                          std::int64_t pixels, int cp, bool nhwc) {
  std::vector<unsigned short> out(static_cast<std::size_t>(images) * pixels * cp, 0);
  for (int n = 0; n < images; ++n)
    for (std::int64_t p = 0; p < pixels; ++p)
      for (int c = 0; c < cin; ++c) {
        const std::int64_t at = nhwc ? (n * pixels + p) * cin + c : (std::int64_t{n} * cin + c) * pixels + p;
        out[(n * pixels + p) * cp + c] = begin[at];
      }
  return out;
}

// The grid's blocks one after another, a block's 256 threads as lanes (the next block reuses the
// __shared__ array).
void run_grid(unsigned blocks, const DeviceTensor& in, const DeviceTensor& w, int cp, int tc, bool tf32 = false) {
  cuinline::test::lanes::LaneBarrier barrier(256);
  g_barrier = &barrier;
  for (unsigned b = 0; b < blocks; ++b) {
    blockIdx = {b, 0, 0};
    cuinline::test::lanes::run_lanes(256, [&] {
      if (tf32) {
        cuinline_conv2d_stage_tf32(in, w, cp, tc);
      } else {
        cuinline_conv2d_stage(in, w, cp, tc);
      }
    });
  }
  g_barrier = nullptr;
}

// Which load paths the cases took: [nhwc][vec].
int g_paths[2][2] = {};

void check_case(const Case& c, bool misaligned, std::uint64_t seed) {
  const std::int64_t pixels = std::int64_t{c.h} * c.w, taps = std::int64_t{c.kh} * c.kw;
  const int cp = (c.cin + 7) / 8 * 8;
  SCOPED_TRACE(describe(c, misaligned));
  std::mt19937_64 rng(seed);
  const int shift = misaligned ? 1 : 0;
  std::vector<unsigned short> x(static_cast<std::size_t>(c.images) * c.cin * pixels + 8);
  std::vector<unsigned short> wt(static_cast<std::size_t>(c.cout) * c.cin * taps + 8);
  for (auto& e : x) e = static_cast<unsigned short>(rng() | 1);  // never 0: a copied zero is a padding zero
  for (auto& e : wt) e = static_cast<unsigned short>(rng() | 1);
  // (std::vector's storage is 16-byte aligned: the aligned case is.)
  ASSERT_EQ(reinterpret_cast<std::uintptr_t>(x.data()) % 16, 0u);
  const unsigned short* xs = x.data() + shift;
  const unsigned short* ws = wt.data() + shift;
  g_sources = {{xs, static_cast<std::size_t>(c.images) * c.cin * pixels * 2},
               {ws, static_cast<std::size_t>(c.cout) * c.cin * taps * 2}};
  // Workspaces with 64 poisoned guard elements each side (16-byte aligned copies, as the workspace is).
  const std::size_t in_elems = static_cast<std::size_t>(c.images) * pixels * cp;
  const std::size_t w_elems = static_cast<std::size_t>(c.cout) * taps * cp;
  std::vector<unsigned short> in_ws(in_elems + 128, kPoison), w_ws(w_elems + 128, kPoison);
  ASSERT_EQ(reinterpret_cast<std::uintptr_t>(in_ws.data() + 64) % 16, 0u);
  ASSERT_EQ(reinterpret_cast<std::uintptr_t>(w_ws.data() + 64) % 16, 0u);
  // The launch's arguments.
  impl::StageTensor in_args, w_args;
  if (c.stage_in)
    in_args = impl::hmma_stage_tensor(xs, in_ws.data() + 64, c.images, c.cin, pixels, c.in_nhwc, cp);
  if (c.stage_w) w_args = impl::hmma_stage_tensor(ws, w_ws.data() + 64, c.cout, c.cin, taps, c.w_nhwc, cp);
  EXPECT_EQ(in_args.blocks, c.stage_in ? c.images * impl::hmma_stage_tiles(cp, pixels) : 0);
  EXPECT_EQ(w_args.blocks, c.stage_w ? c.cout * impl::hmma_stage_tiles(cp, taps) : 0);
  for (const auto& [args, staged, nhwc, p] :
       {std::tuple{in_args, c.stage_in, c.in_nhwc, pixels}, std::tuple{w_args, c.stage_w, c.w_nhwc, taps}}) {
    if (!staged) continue;
    EXPECT_EQ(args.vec, !nhwc && p % 8 == 0 && !misaligned ? 1 : 0);
    ++g_paths[nhwc ? 1 : 0][args.vec];
  }
  run_grid(in_args.blocks + w_args.blocks, to_device(in_args), to_device(w_args), cp,
           impl::hmma_stage_tile_channels(cp));
  auto check = [&](const std::vector<unsigned short>& got, const std::vector<unsigned short>& want,
                   bool staged, const char* what) {
    SCOPED_TRACE(what);
    for (std::size_t i = 0; i < 64; ++i) ASSERT_EQ(got[i], kPoison) << "written before the workspace";
    for (std::size_t i = 64 + want.size(); i < got.size(); ++i)
      ASSERT_EQ(got[i], kPoison) << "written past it";
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
  check(in_ws, expected_copy(xs, c.images, c.cin, pixels, cp, c.in_nhwc), c.stage_in, "input");
  check(w_ws, expected_copy(ws, c.cout, c.cin, taps, cp, c.w_nhwc), c.stage_w, "weight");
}

// Every channel count from 1 to 136 (tiles of 8 to 64 channels, 1 to 17 channel tiles an image),
// aligned and misaligned by one element: two images of an NCHW input whose plane is a multiple of 8
// pixels (the 16-byte path when aligned, else the 16-bit one) with a channels-last weight; every
// third count also a channels-last input of 15 pixels with an NCHW weight of 8 taps (its 16-byte
// path). (Each block costs two barriers of 256 threads: the sweep keeps the tensors small.)
TEST(Conv2dStageEmulated, EveryChannelCountBothLayoutsBothLoadPaths) {
  std::uint64_t seed = 100;
  for (int cin = 1; cin <= 136; ++cin) {
    for (bool mis : {false, true}) {
      check_case({2, 1, cin, 4, 6, 3, 3, false, true, true, true}, mis, seed++);
      if (cin % 3 == 0) check_case({1, 1, cin, 3, 5, 2, 4, true, false, true, true}, mis, seed++);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
  // Both load paths were taken for NCHW sources, the 16-bit one for channels-last.
  EXPECT_GT(g_paths[0][1], 0);
  EXPECT_GT(g_paths[0][0], 0);
  EXPECT_GT(g_paths[1][0], 0);
  EXPECT_EQ(g_paths[1][1], 0);
}

// Larger planes: several pixel tiles an image (tiles of 64 to 512 pixels), a partial last tile.
TEST(Conv2dStageEmulated, CopiesAreExactAndStayInBounds) {
  std::uint64_t seed = 7;
  for (bool mis : {false, true}) {
    // The seed's 8 channels (a tile of 512 pixels), NCHW input and weight: the 16-byte path.
    check_case({2, 16, 8, 24, 24, 3, 3, false, false, true, true}, mis, seed++);
    // 3 channels (an RGB stem): zeros in channels 3-7; a 7x7 filter; pixels not a multiple of 8.
    check_case({2, 8, 3, 13, 11, 7, 7, false, false, true, true}, mis, seed++);
    // Channels-last input with 3 channels and an NCHW weight; channels-last weight only.
    check_case({1, 4, 3, 9, 9, 3, 3, true, false, true, true}, mis, seed++);
    check_case({2, 24, 20, 6, 10, 3, 5, true, true, true, true}, mis, seed++);  // 24 channels: tiles of 8
    // 64 and 128 channels (tiles of 64), 133 (tiles of 8): several channel and pixel tiles an image.
    check_case({2, 8, 64, 12, 16, 3, 3, false, false, true, true}, mis, seed++);
    check_case({1, 4, 128, 9, 17, 1, 1, false, false, true, true}, mis, seed++);
    check_case({1, 3, 133, 23, 24, 2, 2, false, false, true, true}, mis, seed++);
    check_case({2, 2, 32, 20, 20, 3, 3, true, false, true, true}, mis, seed++);  // 400 pixels, tiles of 128
    // Only the weight (input channels-last, 16 channels) or only the input (weight channels-last).
    check_case({2, 8, 16, 8, 8, 3, 3, true, false, false, true}, mis, seed++);
    check_case({2, 8, 16, 8, 8, 3, 3, false, true, true, false}, mis, seed++);
    // One channel, one pixel.
    check_case({3, 2, 1, 1, 1, 1, 1, false, false, true, true}, mis, seed++);
  }
}

// x rounded to TF32 as cvt.rna.tf32.f32 does: to nearest, ties away from zero (the magnitude's
// low 13 bits decide), a carry rounding up into the exponent (to Inf past the largest finite TF32
// value); Inf stays Inf, NaN stays NaN.
unsigned expected_tf32(unsigned x) {
  const unsigned mag = x & 0x7fffffffu;
  if (mag > 0x7f800000u) return 0x7fffffffu;
  if (mag == 0x7f800000u) return x;
  const unsigned low = mag & 0x1fffu;
  unsigned r = mag & ~0x1fffu;
  if (low >= 0x1000u) r += 0x2000u;
  return (x & 0x80000000u) | r;
}

// The TF32 staging copy (cuinline_conv2d_stage_tf32): the same tiles and launch arguments over
// 32-bit values, each rounded to TF32; zeros past the channels; nothing written outside the
// workspace, nothing read outside the sources. Values: random normals and uniforms over many
// exponents, ties (low 13 bits exactly 0x1000), values that round up into the next binade and to
// Inf, subnormals, -0.0, +-Inf and NaN.
void check_case_tf32(const Case& c, bool misaligned, std::uint64_t seed) {
  const std::int64_t pixels = std::int64_t{c.h} * c.w, taps = std::int64_t{c.kh} * c.kw;
  const int cp = (c.cin + 7) / 8 * 8;
  SCOPED_TRACE(describe(c, misaligned) + " tf32");
  std::mt19937_64 rng(seed);
  const int shift = misaligned ? 1 : 0;
  std::vector<unsigned> x(static_cast<std::size_t>(c.images) * c.cin * pixels + 4);
  std::vector<unsigned> wt(static_cast<std::size_t>(c.cout) * c.cin * taps + 4);
  const unsigned specials[] = {0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x00000001u, 0x807fffffu,
                               0x3f801000u, 0xbf801000u, 0x3f803000u, 0x3f7ff000u, 0x7f7ff000u, 0x7f7fffffu,
                               0x00001000u, 0x3f800fffu};
  auto fill = [&](std::vector<unsigned>& v) {
    for (auto& e : v) {
      const unsigned r = static_cast<unsigned>(rng());
      e = r % 8 == 0 ? specials[(r >> 3) % std::size(specials)] : r;  // (random bit patterns: every exponent)
      if (e == 0) e = 0x3f800001u;  // a copied zero is a padding zero
    }
  };
  fill(x);
  fill(wt);
  const unsigned* xs = x.data() + shift;
  const unsigned* ws = wt.data() + shift;
  g_sources = {{xs, static_cast<std::size_t>(c.images) * c.cin * pixels * 4},
               {ws, static_cast<std::size_t>(c.cout) * c.cin * taps * 4}};
  constexpr unsigned kPoison32 = 0xDEADBEEFu;
  const std::size_t in_elems = static_cast<std::size_t>(c.images) * pixels * cp;
  const std::size_t w_elems = static_cast<std::size_t>(c.cout) * taps * cp;
  std::vector<unsigned> in_ws(in_elems + 64, kPoison32), w_ws(w_elems + 64, kPoison32);
  ASSERT_EQ(reinterpret_cast<std::uintptr_t>(in_ws.data() + 32) % 16, 0u);
  impl::StageTensor in_args = impl::hmma_stage_tensor(xs, in_ws.data() + 32, c.images, c.cin, pixels, c.in_nhwc, cp);
  impl::StageTensor w_args = impl::hmma_stage_tensor(ws, w_ws.data() + 32, c.cout, c.cin, taps, c.w_nhwc, cp);
  run_grid(in_args.blocks + w_args.blocks, to_device(in_args), to_device(w_args), cp,
           impl::hmma_stage_tile_channels(cp), true);
  auto check = [&](const std::vector<unsigned>& got, const unsigned* src, int images, std::int64_t px, bool nhwc,
                   const char* what) {
    SCOPED_TRACE(what);
    for (std::size_t i = 0; i < 32; ++i) ASSERT_EQ(got[i], kPoison32) << "written before the workspace";
    const std::size_t n = static_cast<std::size_t>(images) * px * cp;
    for (std::size_t i = 32 + n; i < got.size(); ++i) ASSERT_EQ(got[i], kPoison32) << "written past it";
    std::size_t wrong = 0, first = n;
    for (int im = 0; im < images; ++im)
      for (std::int64_t p = 0; p < px; ++p)
        for (int ch = 0; ch < cp; ++ch) {
          unsigned want = 0u;
          if (ch < c.cin) {
            want = expected_tf32(src[nhwc ? (im * px + p) * c.cin + ch : (std::int64_t{im} * c.cin + ch) * px + p]);
          }
          const std::size_t at = (static_cast<std::size_t>(im) * px + p) * cp + ch;
          if (got[32 + at] != want) {
            ++wrong;
            if (first == n) first = at;
          }
        }
    EXPECT_EQ(wrong, 0u) << "first wrong element " << first << " of " << n;
  };
  check(in_ws, xs, c.images, pixels, c.in_nhwc, "input");
  check(w_ws, ws, c.cout, taps, c.w_nhwc, "weight");
}

TEST(Conv2dStageEmulated, Tf32CopiesRoundEveryValueAndStayInBounds) {
  // The software rounding the host emulation of the kernel uses, against this file's reference on
  // the special patterns and a sweep of random ones.
  std::mt19937_64 rng(3);
  for (unsigned x : {0x3f801000u, 0xbf801000u, 0x3f803000u, 0x7f7ff000u, 0x7fc00001u, 0xff800000u, 0u, 0x80000000u}) {
    EXPECT_EQ(cuinline_conv2d_stage_detail::round_tf32(x), expected_tf32(x)) << std::hex << x;
  }
  for (int i = 0; i < 100000; ++i) {
    const unsigned x = static_cast<unsigned>(rng());
    ASSERT_EQ(cuinline_conv2d_stage_detail::round_tf32(x), expected_tf32(x)) << std::hex << x;
  }
  EXPECT_EQ(expected_tf32(0x3f801000u), 0x3f802000u);  // a tie: away from zero
  EXPECT_EQ(expected_tf32(0x3f800fffu), 0x3f800000u);
  EXPECT_EQ(expected_tf32(0x7f7ff000u), 0x7f800000u);  // past the largest TF32 value: Inf
  std::uint64_t seed = 300;
  for (bool mis : {false, true}) {
    // NCHW input and weight (the KernelBench layout), 16 .. 64 channels, several pixel tiles.
    check_case_tf32({2, 8, 16, 12, 40, 3, 3, false, false, true, true}, mis, seed++);
    check_case_tf32({1, 6, 64, 9, 17, 5, 7, false, false, true, true}, mis, seed++);
    check_case_tf32({2, 4, 20, 7, 9, 3, 3, false, false, true, true}, mis, seed++);  // 20 channels: 4 of zeros
    check_case_tf32({1, 3, 133, 6, 11, 1, 1, false, false, true, true}, mis, seed++);
    // Channels-last input and weight.
    check_case_tf32({2, 5, 24, 8, 10, 3, 2, true, true, true, true}, mis, seed++);
    check_case_tf32({1, 9, 130, 5, 5, 2, 2, true, false, true, true}, mis, seed++);
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
// with a multiple of 8 channels, from stage_min_elements (conv2d_tuning) input elements an image; the tiling then is
// the staged variant's.
TEST(Conv2dStage, PlannerStagesLargeNonChannelsLastCalls) {
  if (std::getenv("CUINLINE_CONV2D_STAGE") != nullptr) GTEST_SKIP() << "CUINLINE_CONV2D_STAGE is set";
  const auto nchw = Conv2dLayout::nchw, nhwc = Conv2dLayout::nhwc;
  // The issue's shapes, NCHW: staged (input and weight), except the seed's 8 channels: the halo form,
  // which reads any layout (and a channels-last RGB input likewise).
  EXPECT_FALSE(impl::hmma_stages(half_variant(8, 128, 64, nchw, nchw)));
  EXPECT_TRUE(conv2d_tiling(half_variant(8, 128, 64, nchw, nchw)).halo());
  EXPECT_FALSE(impl::hmma_stages(half_variant(3, 224, 64, nhwc, nhwc)));
  for (auto [cin, hw, cout] : {std::tuple{16, 128, 64}, std::tuple{64, 56, 64}, std::tuple{128, 128, 128}}) {
    const Conv2dVariant v = half_variant(cin, hw, cout, nchw, nchw);
    ASSERT_TRUE(impl::hmma_stages(v)) << v.name();
    const HmmaTiling t = conv2d_tiling(v).as_hmma();
    EXPECT_EQ(t.stage_channels, (cin + 7) / 8 * 8);
    EXPECT_TRUE(t.stage_input && t.stage_weight);
    const HmmaTiling direct = conv2d_tiling(impl::hmma_staged_variant(v)).as_hmma();
    EXPECT_EQ(t.shared_bytes, direct.shared_bytes);
    EXPECT_EQ(t.warps_m, direct.warps_m);
    EXPECT_EQ(t.tiles_x, direct.tiles_x);
  }
  // Already in the cp.async form: not staged. Channels-last with 12 channels: staged (input and
  // weight).
  EXPECT_FALSE(impl::hmma_stages(half_variant(64, 56, 64, nhwc, nhwc)));
  EXPECT_TRUE(impl::hmma_stages(half_variant(12, 224, 64, nhwc, nhwc)));
  // Channels-last input, NCHW weight: the weight only.
  const HmmaTiling wonly = conv2d_tiling(half_variant(64, 56, 64, nhwc, nchw)).as_hmma();
  EXPECT_FALSE(wonly.stage_input);
  EXPECT_TRUE(wonly.stage_weight);
  // Small images stay on the direct kernel; f32 is never staged.
  EXPECT_FALSE(impl::hmma_stages(half_variant(4, 8, 8, nchw, nchw)));
  Conv2dVariant f32 = half_variant(64, 56, 64, nchw, nchw);
  f32.dtype = cuinline::DType::f32;
  EXPECT_FALSE(impl::hmma_stages(f32));
  EXPECT_FALSE(conv2d_tiling(f32).staged());
}

// One kernel in each module: ptxas's report for it, no spills.
void expect_kernels_without_spills(cuinline::CompileRequest request, const std::vector<std::string>& names) {
  request.options.push_back("-Xptxas=-v");
  request.options.push_back("--no-cache");  // (no compute-cache hit: ptxas runs and reports)
  const cuinline::CompiledProgram c =
      cuinline::compile(request, cuinline::Arch::parse("sm_90"));  // throws on error
  EXPECT_EQ(c.lowered_names.size(), names.size());
  for (const std::string& name : names) EXPECT_TRUE(c.lowered_name(name).has_value()) << name;
  const std::regex regs(R"(Used (\d+) registers)"), spill(R"((\d+) bytes spill stores)");
  const auto kernels = static_cast<std::ptrdiff_t>(names.size());
  EXPECT_EQ(std::distance(std::sregex_iterator(c.log.begin(), c.log.end(), regs), std::sregex_iterator()), kernels)
      << c.log;
  int spills = 0;
  for (auto it = std::sregex_iterator(c.log.begin(), c.log.end(), spill); it != std::sregex_iterator();
       ++it) {
    EXPECT_EQ((*it)[1], "0") << c.log;
    ++spills;
  }
  EXPECT_EQ(spills, kernels) << c.log;
}

// A staged variant's module is its conv only — exactly the request of the channels-last variant it
// runs as (so NCHW variants staging to one shape share that entry) — and the staging copy one
// shape-generic module: the same request (the same cache key) for every staged variant, none for a
// variant that is not staged. Both compile for sm_90 as one kernel without spills.
TEST(Conv2dStage, StagedVariantsCompileAsTheConvAndOneSharedStagingModule) {
  const auto nchw = Conv2dLayout::nchw, nhwc = Conv2dLayout::nhwc;
  const cuinline::Arch sm90 = cuinline::Arch::parse("sm_90");
  std::optional<cuinline::CompileRequest> stage;
  int staged = 0;
  for (const Conv2dVariant& v : {half_variant(8, 128, 64, nchw, nchw), half_variant(3, 64, 16, nhwc, nhwc),
                                 half_variant(20, 40, 24, nchw, nhwc), half_variant(64, 56, 64, nhwc, nchw),
                                 half_variant(128, 128, 128, nchw, nchw)}) {
    SCOPED_TRACE(v.name());
    if (!impl::hmma_stages(v)) continue;  // (CUINLINE_CONV2D_STAGE=0)
    ++staged;
    const cuinline::CompileRequest r = make_request(v);
    ASSERT_EQ(r.name_expressions.size(), 1u);
    EXPECT_EQ(r.name_expressions[0], kernel_name(v));
    const cuinline::CompileRequest channels_last = make_request(impl::hmma_staged_variant(v));
    EXPECT_EQ(r.source, channels_last.source);
    EXPECT_EQ(cuinline::make_cache_key(r, sm90), cuinline::make_cache_key(channels_last, sm90));
    EXPECT_EQ(r.source.find("conv2d_stage"), std::string::npos);
    // The direct kernel (no workspace) is a different module.
    EXPECT_NE(r.source, impl::make_hmma_direct_request(v).source);
    const std::optional<cuinline::CompileRequest> s = make_stage_request(v);
    ASSERT_TRUE(s.has_value());
    if (stage) {
      EXPECT_EQ(s->source, stage->source);
      EXPECT_EQ(s->name_expressions, stage->name_expressions);
      EXPECT_EQ(cuinline::make_cache_key(*s, sm90), cuinline::make_cache_key(*stage, sm90));
    }
    stage = s;
    expect_kernels_without_spills(r, {kernel_name(v)});
  }
  if (staged == 0) GTEST_SKIP() << "CUINLINE_CONV2D_STAGE=0: nothing staged";
  // One module, both copies: 16-bit values, and the TF32 wgmma variants' 32-bit ones.
  const std::vector<std::string> kernels{impl::kHmmaStageKernel, impl::kTf32StageKernel};
  EXPECT_EQ(stage->name_expressions, kernels);
  expect_kernels_without_spills(*stage, kernels);
  Conv2dVariant tf32 = make_conv2d_variant(32, 64, 64, 64, 5, 5, Conv2dParams::square(1, 2), false, div_leaky_relu_epilogue(2.0, 0.01));
  tf32.precision = Conv2dPrecision::tf32;
  tf32 = conv2d_variant_for_arch(tf32, sm90);
  if (impl::tf32_wgmma_applies(tf32)) {
    const std::optional<cuinline::CompileRequest> s = make_stage_request(tf32);
    ASSERT_TRUE(s.has_value());
    EXPECT_EQ(cuinline::make_cache_key(*s, sm90), cuinline::make_cache_key(*stage, sm90));
  }
  // Not staged: no staging module.
  EXPECT_FALSE(make_stage_request(half_variant(64, 56, 64, nhwc, nhwc)).has_value());
  EXPECT_FALSE(make_stage_request(half_variant(4, 8, 8, nchw, nchw)).has_value());
}

}  // namespace
