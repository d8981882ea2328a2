// Host tests of the elementwise ops: op parsing and validation, TensorView, and the launch plan
// (vector width, prologue, grid, index width, dimension merging, bad input) on fake pointers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cuinline/error.hpp>
#include <cuinline/ops.hpp>
#include <cuinline/tensor.hpp>

#include "ops/elementwise/plan.hpp"

namespace {

using cuinline::DType;
using cuinline::InvalidArgument;
using cuinline::TensorView;
using cuinline::ops::IndexWidth;
using cuinline::ops::Layout;
using cuinline::ops::Op;
using cuinline::ops::plan;
using cuinline::ops::Step;

void* fake(std::uintptr_t address) {
  return reinterpret_cast<void*>(address);
}
constexpr std::uintptr_t kIn = 0x7f0000000000;  // 256-byte aligned, like cudaMalloc
constexpr std::uintptr_t kOut = 0x7f1000000000;

TEST(TensorView, ContiguousAndStrided) {
  const TensorView t = TensorView::contiguous(fake(kIn), DType::f16, {4, 3, 2});
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.nbytes(), 48u);
  EXPECT_EQ(t.strides[0], 6);
  EXPECT_EQ(t.strides[2], 1);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.describe(), "f16[4, 3, 2]");
  const TensorView s = TensorView::strided(fake(kIn), DType::f32, {3, 4}, {1, 3});
  EXPECT_FALSE(s.is_contiguous());
  EXPECT_EQ(s.describe(), "f32[3, 4] strides (1, 3)");
  EXPECT_THROW(TensorView::strided(fake(kIn), DType::f32, {3, 4}, {1}), InvalidArgument);
  EXPECT_THROW(TensorView::contiguous(fake(kIn), DType::f32, {1, 2, 3, 4, 5, 6, 7, 8, 9}), InvalidArgument);
  EXPECT_THROW(TensorView::contiguous(fake(kIn), DType::f32, {-1}), InvalidArgument);
  EXPECT_EQ(TensorView::contiguous(fake(kIn), DType::f64, {}).numel(), 1);
  EXPECT_EQ(cuinline::parse_dtype("bfloat16"), DType::bf16);
  EXPECT_EQ(cuinline::parse_dtype("half"), DType::f16);
  EXPECT_FALSE(cuinline::parse_dtype("int8").has_value());
  EXPECT_EQ(cuinline::dtype_size(DType::f64), 8u);
}

TEST(OpText, ParsesAndDescribes) {
  EXPECT_EQ(cuinline::ops::parse_op("relu"), Op::relu());
  EXPECT_EQ(cuinline::ops::parse_op(" leaky_relu( 0.01 ) "), Op::leaky_relu(0.01));
  EXPECT_EQ(cuinline::ops::parse_op("div_leaky_relu(2,0.01)"), Op::div_leaky_relu(2, 0.01));
  const Op chain = Op::chain({Step::add(1), Step::sub(2), Step::mul(0.5), Step::div(3), Step::relu(),
                              Step::leaky_relu(0.2), Step::clamp(-1, 6)});
  EXPECT_EQ(chain.describe(), "add(1)|sub(2)|mul(0.5)|div(3)|relu|leaky_relu(0.2)|clamp(-1,6)");
  EXPECT_EQ(cuinline::ops::parse_op(chain.describe()), chain);
  const Op ex = Op::expr("x > 0 ? x : x * s", {{"s", 0.01}, {"t", -2}});
  EXPECT_EQ(ex.describe(), "expr(x > 0 ? x : x * s; s=0.01, t=-2)");
  EXPECT_EQ(cuinline::ops::parse_op(ex.describe()), ex);
  EXPECT_EQ(cuinline::ops::parse_op("expr(x * x)"), Op::expr("x * x"));
  // Describe round-trips every double exactly.
  const Op odd = Op::leaky_relu(0.1 + 0.2);
  EXPECT_EQ(cuinline::ops::parse_op(odd.describe()), odd);
  // F.leaky_relu's default slope when none is given.
  EXPECT_EQ(cuinline::ops::parse_op("leaky_relu"), Op::leaky_relu(0.01));
  for (const char* bad : {"", "relux", "relu(1)", "leaky_relu(0.1, 2)", "leaky_relu(a)", "clamp(1)", "relu|",
                          "expr()", "expr(x; s)", "leaky_relu(0.1"}) {
    EXPECT_THROW(cuinline::ops::parse_op(bad), InvalidArgument) << bad;
  }
}

TEST(OpText, ValidatesOps) {
  EXPECT_THROW(Op{}.validate(), InvalidArgument);
  EXPECT_THROW((Op{{Step::relu()}, "x", {}}).validate(), InvalidArgument);
  EXPECT_THROW(Op::expr("x; return 0").validate(), InvalidArgument);
  EXPECT_THROW(Op::expr("x * x_", {{"x", 1}}).validate(), InvalidArgument);
  EXPECT_THROW(Op::expr("x * s", {{"s", 1}, {"s", 2}}).validate(), InvalidArgument);
  EXPECT_THROW(Op::expr("x * ew_a", {{"ew_a", 1}}).validate(), InvalidArgument);
  EXPECT_THROW(Op::expr("x * s", {{"1s", 1}}).validate(), InvalidArgument);
  EXPECT_NO_THROW(Op::expr("x * slope_2", {{"slope_2", 1}}).validate());
  EXPECT_NO_THROW(Op::div_leaky_relu(0, 0.01).validate());  // PyTorch allows x / 0 (gives ±inf / nan)
}

TEST(Plan, PicksTheWidestAlignedVector) {
  struct Case {
    DType dtype;
    std::uintptr_t in_off, out_off;  // bytes
    std::int64_t n;
    int width;
    std::int64_t head;
  };
  const Case cases[] = {
      {DType::f32, 0, 0, 1000, 4, 0}, {DType::f32, 4, 4, 1000, 4, 3}, {DType::f32, 8, 8, 1000, 4, 2},
      {DType::f32, 4, 0, 1000, 1, 0}, {DType::f32, 8, 0, 1000, 2, 0}, {DType::f32, 0, 0, 3, 2, 0},
      {DType::f32, 0, 0, 1, 1, 0},    {DType::f32, 4, 4, 4, 2, 1},    {DType::f32, 4, 4, 7, 4, 3},
      {DType::f16, 0, 0, 1000, 8, 0}, {DType::f16, 2, 2, 1000, 8, 7}, {DType::f16, 2, 0, 1000, 1, 0},
      {DType::f16, 4, 0, 1000, 2, 0}, {DType::f16, 8, 0, 1000, 4, 0}, {DType::bf16, 6, 6, 1001, 8, 5},
      {DType::f64, 0, 0, 1000, 2, 0}, {DType::f64, 8, 8, 1000, 2, 1}, {DType::f64, 8, 0, 1000, 1, 0},
  };
  for (const Case& c : cases) {
    const auto in = TensorView::contiguous(fake(kIn + c.in_off), c.dtype, {c.n});
    const auto out = TensorView::contiguous(fake(kOut + c.out_off), c.dtype, {c.n});
    const auto p = plan(Op::relu(), in, out);
    SCOPED_TRACE(std::string(cuinline::to_string(c.dtype)) + " in+" + std::to_string(c.in_off) + " out+" +
                 std::to_string(c.out_off) + " n=" + std::to_string(c.n));
    EXPECT_EQ(p.variant.layout, Layout::contiguous);
    EXPECT_EQ(p.variant.vector_width, c.width);
    EXPECT_EQ(p.head, c.head);
    EXPECT_EQ(p.variant.index, IndexWidth::i32);
    EXPECT_EQ(p.block, 256u);
    // The grid covers every vector exactly once; head and tail are fewer than 2 vectors.
    const std::int64_t vectors = (c.n - p.head) / p.variant.vector_width;
    // 16 bytes per thread: one 16-byte vector, or several narrower ones.
    const std::int64_t vector_bytes =
        static_cast<std::int64_t>(cuinline::dtype_size(c.dtype)) * p.variant.vector_width;
    const std::int64_t per_block = 256 * std::max<std::int64_t>(1, 16 / vector_bytes);
    EXPECT_EQ(p.grid, std::max<std::int64_t>(1, (vectors + per_block - 1) / per_block));
    EXPECT_LT(c.n - vectors * p.variant.vector_width, 2 * p.variant.vector_width);
    // In + head and out + head are aligned to the vector.
    const std::size_t vb = cuinline::dtype_size(c.dtype) * p.variant.vector_width;
    EXPECT_EQ((kIn + c.in_off + p.head * cuinline::dtype_size(c.dtype)) % vb, 0u);
    EXPECT_EQ((kOut + c.out_off + p.head * cuinline::dtype_size(c.dtype)) % vb, 0u);
  }
}

TEST(Plan, LargeTensorsUse64BitIndices) {
  const std::int64_t n = (std::int64_t{1} << 31) + 3;
  const auto p = plan(Op::leaky_relu(0.01), TensorView::contiguous(fake(kIn), DType::f32, {n}),
                      TensorView::contiguous(fake(kIn), DType::f32, {n}));  // in place
  EXPECT_EQ(p.variant.index, IndexWidth::i64);
  EXPECT_EQ(p.variant.vector_width, 4);
  EXPECT_EQ(p.grid, static_cast<std::uint32_t>((n / 4 + 255) / 256));  // one float4 per thread
  const std::int64_t limit = (std::int64_t{1} << 31) - 1;
  EXPECT_EQ(plan(Op::relu(), TensorView::contiguous(fake(kIn), DType::f32, {limit}),
                 TensorView::contiguous(fake(kOut), DType::f32, {limit}))
                .variant.index,
            IndexWidth::i32);
  EXPECT_EQ(plan(Op::relu(), TensorView::contiguous(fake(kIn), DType::f32, {limit + 1}),
                 TensorView::contiguous(fake(kOut), DType::f32, {limit + 1}))
                .variant.index,
            IndexWidth::i64);
}

TEST(Plan, MergesDimensionsAndFallsBackToStrided) {
  // Contiguous views of any rank are flat.
  auto p = plan(Op::relu(), TensorView::contiguous(fake(kIn), DType::f32, {4, 1, 5, 6}),
                TensorView::contiguous(fake(kOut), DType::f32, {4, 1, 5, 6}));
  EXPECT_EQ(p.variant.layout, Layout::contiguous);
  EXPECT_EQ(p.numel, 120);
  // A column slice of a row-major matrix: strided, dims kept.
  p = plan(Op::relu(), TensorView::strided(fake(kIn), DType::f32, {10, 3}, {8, 1}),
           TensorView::contiguous(fake(kOut), DType::f32, {10, 3}));
  EXPECT_EQ(p.variant.layout, Layout::strided);
  EXPECT_EQ(p.variant.index, IndexWidth::i64);
  EXPECT_EQ(p.variant.vector_width, 1);
  ASSERT_EQ(p.ndim, 2);
  EXPECT_EQ(p.in_strides[0], 8);
  EXPECT_EQ(p.out_strides[0], 3);
  // Transposed input: strided, size-1 dims dropped.
  p = plan(Op::relu(), TensorView::strided(fake(kIn), DType::f32, {3, 1, 4}, {1, 99, 3}),
           TensorView::contiguous(fake(kOut), DType::f32, {3, 1, 4}));
  EXPECT_EQ(p.variant.layout, Layout::strided);
  EXPECT_EQ(p.ndim, 2);
  // Broadcast input (stride 0) is fine.
  p = plan(Op::relu(), TensorView::strided(fake(kIn), DType::f32, {4, 5}, {0, 1}),
           TensorView::contiguous(fake(kOut), DType::f32, {4, 5}));
  EXPECT_EQ(p.variant.layout, Layout::strided);
  // Zero elements: nothing to launch, even with null pointers.
  p = plan(Op::relu(), TensorView::contiguous(nullptr, DType::f32, {0, 5}),
           TensorView::contiguous(nullptr, DType::f32, {0, 5}));
  EXPECT_EQ(p.numel, 0);
  EXPECT_EQ(p.grid, 0u);
}

TEST(Plan, RejectsBadInputBeforeLaunch) {
  const auto in = TensorView::contiguous(fake(kIn), DType::f32, {100});
  const auto out = TensorView::contiguous(fake(kOut), DType::f32, {100});
  EXPECT_NO_THROW(plan(Op::relu(), in, out));
  EXPECT_NO_THROW(plan(Op::relu(), in, in));  // in place
  EXPECT_THROW(plan(Op::relu(), TensorView::contiguous(nullptr, DType::f32, {100}), out), InvalidArgument);
  EXPECT_THROW(plan(Op::relu(), in, TensorView::contiguous(nullptr, DType::f32, {100})), InvalidArgument);
  EXPECT_THROW(plan(Op::relu(), in, TensorView::contiguous(fake(kOut), DType::f16, {100})), InvalidArgument);
  EXPECT_THROW(plan(Op::relu(), in, TensorView::contiguous(fake(kOut), DType::f32, {101})), InvalidArgument);
  EXPECT_THROW(plan(Op::relu(), in, TensorView::contiguous(fake(kOut), DType::f32, {10, 10})),
               InvalidArgument);
  // Overlap without being identical: shifted by one element, or a different view of the same memory.
  EXPECT_THROW(plan(Op::relu(), in, TensorView::contiguous(fake(kIn + 4), DType::f32, {100})),
               InvalidArgument);
  EXPECT_THROW(plan(Op::relu(), TensorView::contiguous(fake(kIn), DType::f32, {10, 10}),
                    TensorView::strided(fake(kIn), DType::f32, {10, 10}, {1, 10})),
               InvalidArgument);
  // Adjacent but disjoint is fine.
  EXPECT_NO_THROW(plan(Op::relu(), in, TensorView::contiguous(fake(kIn + 400), DType::f32, {100})));
  // An output with several elements at one address.
  EXPECT_THROW(plan(Op::relu(), TensorView::contiguous(fake(kIn), DType::f32, {4, 5}),
                    TensorView::strided(fake(kOut), DType::f32, {4, 5}, {0, 1})),
               InvalidArgument);
  // Unsupported dtype, misaligned pointer, bad op.
  auto weird = in;
  weird.dtype = static_cast<DType>(9);
  auto weird_out = out;
  weird_out.dtype = weird.dtype;
  EXPECT_THROW(plan(Op::relu(), weird, weird_out), InvalidArgument);
  EXPECT_THROW(plan(Op::relu(), TensorView::contiguous(fake(kIn + 2), DType::f32, {100}), out),
               InvalidArgument);
  EXPECT_THROW(plan(Op{}, in, out), InvalidArgument);
  // The ops reject the same input (before touching the driver).
  EXPECT_THROW(cuinline::ops::relu(in, TensorView::contiguous(nullptr, DType::f32, {100})), InvalidArgument);
  EXPECT_THROW(cuinline::ops::leaky_relu(in, TensorView::contiguous(fake(kOut), DType::f16, {100}), 0.01),
               InvalidArgument);
  EXPECT_THROW(
      cuinline::ops::div_leaky_relu(in, TensorView::contiguous(fake(kIn + 8), DType::f32, {100}), 2, 0.01),
      InvalidArgument);
  // Zero elements: no launch, no error, no driver needed.
  EXPECT_NO_THROW(cuinline::ops::relu(TensorView::contiguous(nullptr, DType::f32, {0}),
                                      TensorView::contiguous(nullptr, DType::f32, {0})));
}

TEST(Plan, VariantNamesAndValidation) {
  cuinline::ops::Variant v{Op::leaky_relu(0.01), DType::bf16, 8, IndexWidth::i64, Layout::contiguous};
  EXPECT_EQ(v.name(), "leaky_relu(0.01)<bf16,v8,i64>");
  EXPECT_NO_THROW(v.validate());
  v.vector_width = 16;
  EXPECT_THROW(v.validate(), InvalidArgument);
  v.dtype = DType::f32;
  v.vector_width = 8;  // 32 bytes
  EXPECT_THROW(v.validate(), InvalidArgument);
  v.vector_width = 3;
  EXPECT_THROW(cuinline::ops::make_request(v), InvalidArgument);
  EXPECT_EQ(cuinline::ops::kernel_name({Op::relu(), DType::f16, 8, IndexWidth::i32, Layout::contiguous}),
            "ew_nary<cuinline_ewn_shape, cuinline_ewn_op, ew_half, 8, unsigned int>");
  EXPECT_EQ(cuinline::ops::kernel_name({Op::relu(), DType::f32, 1, IndexWidth::i64, Layout::strided}),
            "ew_nary_strided<cuinline_ewn_shape, cuinline_ewn_op, float>");
}

}  // namespace
