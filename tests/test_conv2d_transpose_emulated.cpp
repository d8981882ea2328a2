// The transposing copy of the f32 channels-last conv (kernel_templates/conv2d_transpose.cuh) run on
// the host: each block's 256 threads are lanes (fibers, tests/emulated_lanes.hpp: a barrier for
// __syncthreads, the kernel's __shared__ array shared by them), blocks one after another over the
// grid the library launches (conv2d_impl::transpose_grid). Every case checks the whole destination
// word for word against the transpose, bit patterns included (NaN payloads, -0.0, subnormals), and
// that nothing past it was written; the source is an exact-size allocation (ASan catches a read
// past it). Shapes: every column count 1-40 (the narrow tiles), the three copies of the issue's
// layers and ragged edges. Also: which f32 variants transpose (the multiply-add threshold,
// CUINLINE_CONV2D_TRANSPOSE), that their conv module is the NCHW variant's, and that the copy's
// module compiles for sm_90 with no spills and is one request for every transposing variant.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <cuinline/arch.hpp>
#include <cuinline/compiler.hpp>
#include <cuinline/conv2d.hpp>
#include <random>
#include <string>
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
}  // namespace

inline void __syncthreads() {
  g_barrier->arrive_and_wait();
}

#include "../kernel_templates/conv2d_transpose.cuh"

namespace {

using namespace cuinline::ops;
namespace impl = cuinline::ops::conv2d_impl;

// batch x [rows][cols] at src -> batch x [cols][rows] at dst, on the grid the launch uses.
void run_transpose(const std::vector<unsigned>& src, std::vector<unsigned>& dst, std::int64_t batch, std::int64_t rows,
                   std::int64_t cols, int lt) {
  const impl::TransposeGrid g = impl::transpose_grid(rows, cols, lt);
  ASSERT_GT(g.blocks, 0);
  ASSERT_LE(g.lc, 5);
  cuinline::test::lanes::LaneBarrier barrier(256);
  g_barrier = &barrier;
  for (unsigned by = 0; by < batch; ++by) {
    for (unsigned bx = 0; bx < g.blocks; ++bx) {
      blockIdx = {bx, by, 0};
      cuinline::test::lanes::run_lanes(256, [&] {
        cuinline_conv2d_transpose(src.data(), dst.data(), rows, cols, g.col_tiles, g.lc, g.lt);
      });
    }
  }
  g_barrier = nullptr;
}

void check_case(std::int64_t batch, std::int64_t rows, std::int64_t cols, std::mt19937& rng,
                int lt = impl::kTransposeLogTile) {
  SCOPED_TRACE(std::to_string(batch) + " x [" + std::to_string(rows) + "][" + std::to_string(cols) + "], tiles of 2^" +
               std::to_string(lt));
  const std::size_t n = static_cast<std::size_t>(batch * rows * cols);
  std::vector<unsigned> src(n);
  // Random words, with NaN payloads, -0.0, subnormals and infinities among them (moved as bits).
  const unsigned specials[] = {0x7fc00001u, 0xffc12345u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x7f800000u, 0xff800000u};
  for (std::size_t i = 0; i < n; ++i) src[i] = i % 11 == 3 ? specials[i % 7] : static_cast<unsigned>(rng());
  const std::size_t guard = 64;
  std::vector<unsigned> dst(n + guard, 0xdeadbeefu);  // poisoned, with words past the end
  run_transpose(src, dst, batch, rows, cols, lt);
  std::size_t wrong = 0;
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < cols; ++c) {
        const unsigned want = src[static_cast<std::size_t>((b * rows + r) * cols + c)];
        const unsigned got = dst[static_cast<std::size_t>((b * cols + c) * rows + r)];
        if (got != want && ++wrong <= 5) ADD_FAILURE() << "b " << b << " r " << r << " c " << c << ": " << got << " != " << want;
      }
    }
  }
  EXPECT_EQ(wrong, 0u);
  for (std::size_t i = n; i < n + guard; ++i) ASSERT_EQ(dst[i], 0xdeadbeefu) << "a write past the destination";
}

TEST(Conv2dTransposeEmulated, EveryNarrowColumnCount) {
  std::mt19937 rng(1);
  for (std::int64_t cols = 1; cols <= 40; ++cols) check_case(2, 37, cols, rng);
}

TEST(Conv2dTransposeEmulated, TheCopiesOfAConvAndRaggedEdges) {
  std::mt19937 rng(2);
  check_case(2, 11 * 13, 8, rng);   // an input: [N][H*W][Cin = 8]
  check_case(3, 9, 64, rng);        // a weight: [Cout][KH*KW][Cin]
  check_case(2, 64, 6 * 7, rng);    // an output: [N][Cout][OH*OW]
  check_case(1, 33, 65, rng);       // one past whole tiles both ways
  check_case(1, 1, 1, rng);
  check_case(1, 1, 300, rng);
  check_case(1, 300, 1, rng);
  check_case(2, 1100, 3, rng);      // several tiles of 512 rows x 4
  // The other tile sizes (CUINLINE_CONV2D_TRANSPOSE_TILE).
  for (int lt : {10, 12}) {
    for (std::int64_t cols : {1, 2, 3, 8, 31, 33}) check_case(2, 70, cols, rng, lt);
    check_case(1, 4100, 8, rng, lt);
  }
}

TEST(Conv2dTransposeEmulated, GridCoversTheMatrix) {
  for (std::int64_t rows : {1, 31, 32, 33, 1000, 15876}) {
    for (std::int64_t cols : {1, 2, 3, 8, 16, 17, 32, 33, 64, 15876}) {
      const impl::TransposeGrid g = impl::transpose_grid(rows, cols);
      const std::int64_t tc = std::int64_t{1} << g.lc, tr = (std::int64_t{1} << g.lt) / tc;
      EXPECT_EQ(g.lt, impl::transpose_log_tile());
      EXPECT_TRUE(tc == 32 || (tc >= cols && (tc == 1 || tc / 2 < cols))) << rows << " x " << cols;
      EXPECT_EQ(g.col_tiles, static_cast<std::uint32_t>((cols + tc - 1) / tc));
      EXPECT_EQ(g.blocks, (rows + tr - 1) / tr * g.col_tiles);
    }
  }
}

Conv2dVariant f32_variant(int cin, int hw, int cout, int k, int pad) {
  return make_conv2d_variant(cin, hw, hw, cout, k, k, Conv2dParams::square(1, pad), true,
                             div_leaky_relu_epilogue(2.0, 0.01));
}

TEST(Conv2dTransposeEmulated, WhichVariantsTransposeAndWhatTheyCompile) {
  // The seed in f32 with channels-last tensors: past the threshold; the NCHW variant's Winograd
  // kernel and module, copies for exactly the channels-last tensors.
  Conv2dVariant v = f32_variant(8, 128, 64, 3, 0);
  const Conv2dVariant nchw = v;
  const Conv2dTiling base = conv2d_tiling(nchw);
  EXPECT_FALSE(base.transposes());
  EXPECT_FALSE(make_stage_request(nchw).has_value());
  for (int mask = 1; mask < 8; ++mask) {
    v.input_layout = mask & 1 ? Conv2dLayout::nhwc : Conv2dLayout::nchw;
    v.weight_layout = mask & 2 ? Conv2dLayout::nhwc : Conv2dLayout::nchw;
    v.output_layout = mask & 4 ? Conv2dLayout::nhwc : Conv2dLayout::nchw;
    SCOPED_TRACE(v.name());
    ASSERT_TRUE(impl::f32_transposes(v));
    const Conv2dTiling t = conv2d_tiling(v);
    EXPECT_EQ(t.transpose.input, (mask & 1) != 0);
    EXPECT_EQ(t.transpose.weight, (mask & 2) != 0);
    // Winograd writes a channels-last output itself: no output copy, a kernel of its own.
    EXPECT_FALSE(t.transpose.output);
    EXPECT_FALSE(t.generic());
    EXPECT_TRUE(t.winograd());
    // (A channels-last output: blocks of 1 x 4 warps, 16 tiles, where the NCHW output has 2 x 4.)
    Conv2dVariant same_output = nchw;
    same_output.output_layout = v.output_layout;
    const Conv2dTiling out_base = conv2d_tiling(same_output);
    EXPECT_EQ(t.grid().shared_bytes, out_base.grid().shared_bytes);
    EXPECT_EQ(t.grid().tiles_x, out_base.grid().tiles_x);
    EXPECT_EQ(t.threads(), (mask & 4) != 0 ? 128 : base.threads());
    EXPECT_EQ(kernel_name(v), kernel_name(nchw));
    const std::string source = make_request(v).source;
    if (mask & 4) {
      EXPECT_NE(source.find("kOutNhwc = 1;"), std::string::npos);
      // The same kernel for every input / weight layout: one cache entry.
      Conv2dVariant y_only = nchw;
      y_only.output_layout = Conv2dLayout::nhwc;
      EXPECT_EQ(source, make_request(y_only).source);
    } else {
      EXPECT_EQ(source, make_request(nchw).source);  // one cache entry with the NCHW call
    }
    const std::optional<cuinline::CompileRequest> copy = make_stage_request(v);
    ASSERT_TRUE(copy.has_value());
    EXPECT_EQ(copy->source, impl::make_transpose_request().source);
    EXPECT_EQ(copy->name_expressions.at(0), impl::kTransposeKernel);
  }
  EXPECT_NE(make_request(nchw).source.find("kOutNhwc = 0;"), std::string::npos);  // an NCHW output
  // Precisions keep their kernels: TF32 on tensor cores, its NCHW output copied to channels-last.
  v.precision = Conv2dPrecision::tf32;
  Conv2dVariant v_nchw = impl::f32_nchw_variant(v);
  EXPECT_EQ(conv2d_tiling(v).tensor_cores(), conv2d_tiling(v_nchw).tensor_cores());
  EXPECT_TRUE(conv2d_tiling(v).tensor_cores());
  EXPECT_TRUE(conv2d_tiling(v).transpose.output);
  EXPECT_EQ(make_request(v).source, make_request(v_nchw).source);
  // The direct kernel (16 input channels: not Winograd's) too.
  Conv2dVariant direct = f32_variant(16, 64, 64, 3, 1);
  direct.output_layout = Conv2dLayout::nhwc;
  EXPECT_FALSE(conv2d_tiling(direct).winograd());
  EXPECT_TRUE(conv2d_tiling(direct).transpose.output);
  EXPECT_EQ(make_request(direct).source, make_request(impl::f32_nchw_variant(direct)).source);
  // Below 2^22 multiply-adds an image: the general kernel (one launch, no scratch memory).
  Conv2dVariant small = f32_variant(8, 16, 4, 3, 0);
  small.input_layout = small.output_layout = Conv2dLayout::nhwc;
  EXPECT_FALSE(impl::f32_transposes(small));
  EXPECT_TRUE(conv2d_tiling(small).generic());
  EXPECT_FALSE(conv2d_tiling(small).transposes());
  EXPECT_FALSE(make_stage_request(small).has_value());
  // f16 / bf16 never transpose (the tensor-core kernel reads either layout).
  Conv2dVariant half = f32_variant(8, 128, 64, 3, 0);
  half.dtype = cuinline::DType::f16;
  half.input_layout = half.output_layout = Conv2dLayout::nhwc;
  EXPECT_FALSE(impl::f32_transposes(half));
  EXPECT_FALSE(conv2d_tiling(half).transposes());
}

TEST(Conv2dTransposeEmulated, TheCopyAndWinogradsChannelsLastOutputCompileForSm90WithoutSpills) {
  // The copy; the seed's Winograd kernel writing a channels-last output, with a residual and with
  // Cout % 4 != 0 (one store a channel).
  std::vector<cuinline::CompileRequest> requests = {impl::make_transpose_request()};
  for (int cout : {64, 18}) {
    Conv2dVariant v = f32_variant(8, 128, cout, 3, 1);
    v.input_layout = v.output_layout = Conv2dLayout::nhwc;
    v.has_residual = cout == 18;
    ASSERT_TRUE(conv2d_tiling(v).winograd());
    requests.push_back(make_request(v));
  }
  for (cuinline::CompileRequest& req : requests) {
    req.options.push_back("--ptxas-options=-v");
    req.options.push_back("--no-cache");  // (no compute-cache hit: ptxas runs and reports)
    const cuinline::CompiledProgram prog = cuinline::compile(req, cuinline::Arch::parse("sm_90"));
    EXPECT_NE(prog.log.find("0 bytes spill stores"), std::string::npos) << prog.log;
    EXPECT_EQ(prog.log.find("warning"), std::string::npos) << prog.log;
  }
}

}  // namespace
