// Host tests of the elementwise planner as the one-input ops use it (they are the one-input case of
// the N-ary kernel): the scalar head that keeps 16-byte vectors for misaligned whole tensors, reps,
// rows' and columns' multiply-shift divisors, dimension merging on the strided path, and that a
// one-input call, an N-ary call with one input and `cuinline warm`'s variant all ask for the same
// program.
#include <gtest/gtest.h>

#include <cstdint>
#include <cuinline/cache.hpp>
#include <cuinline/compiler.hpp>
#include <cuinline/error.hpp>
#include <cuinline/ops.hpp>

#include "ops/elementwise/plan.hpp"
#include "ops/elementwise/table.hpp"
#include "ops/elementwise/variant.hpp"

namespace {

using cuinline::DType;
using cuinline::TensorView;
using namespace cuinline::ops;

void* fake(std::uintptr_t address) {
  return reinterpret_cast<void*>(address);
}
constexpr std::uintptr_t kA = 0x7f0000000000;  // 256-byte aligned, like cudaMalloc
constexpr std::uintptr_t kB = 0x7f1000000000;
constexpr std::uintptr_t kC = 0x7f2000000000;

TensorView flat(std::uintptr_t at, std::int64_t n, DType dt = DType::f32) {
  return TensorView::contiguous(fake(at), dt, {n});
}

TEST(ElementwisePlan, MisalignedOneInputCallKeeps16ByteVectorsWithAHead) {
  struct Case {
    DType dtype;
    std::uintptr_t offset;  // bytes, the same for the input and the output
    int width;
    std::int64_t head;
  };
  for (const Case& c : {Case{DType::f32, 4, 4, 3}, Case{DType::f32, 12, 4, 1}, Case{DType::f16, 2, 8, 7},
                        Case{DType::bf16, 6, 8, 5}, Case{DType::f64, 8, 2, 1}}) {
    for (bool in_place : {false, true}) {
      SCOPED_TRACE(std::string(cuinline::to_string(c.dtype)) + " +" + std::to_string(c.offset) +
                   (in_place ? " in place" : ""));
      const TensorView in = flat(kA + c.offset, 1001, c.dtype);
      const TensorView out = in_place ? in : flat(kB + c.offset, 1001, c.dtype);
      const LaunchPlan p = plan(Op::relu(), in, out);
      EXPECT_EQ(p.variant.layout, Layout::contiguous);
      EXPECT_EQ(p.variant.vector_width, c.width);
      EXPECT_EQ(static_cast<std::size_t>(c.width) * cuinline::dtype_size(c.dtype), 16u);
      EXPECT_EQ(p.head, c.head);
      EXPECT_EQ(p.grid, static_cast<std::uint32_t>(((1001 - c.head) / c.width + 255) / 256));
    }
  }
}

TEST(ElementwisePlan, NaryHeadOnlyWhenEveryWholeTensorSharesTheMisalignment) {
  const Op add = Op::chain({Step::add_input(1)});
  // Every whole tensor 4 bytes past a 16-byte boundary: float4 with a head of 3.
  auto p = detail::plan_nary(add, {flat(kA + 4, 1000), flat(kB + 4, 1000)}, {flat(kC + 4, 1000)});
  EXPECT_EQ(p.key.vector_width, 4);
  EXPECT_EQ(p.head, 3);
  // A scalar operand needs no alignment: still float4 with the head.
  p = detail::plan_nary(add, {flat(kA + 4, 1000), flat(kB + 8, 1)}, {flat(kC + 4, 1000)});
  EXPECT_EQ(p.key.patterns[1], detail::kScalar);
  EXPECT_EQ(p.key.vector_width, 4);
  EXPECT_EQ(p.head, 3);
  // Different misalignments: the widest vector both reach (8 and 4 bytes past: float2, head 0).
  p = detail::plan_nary(add, {flat(kA + 8, 1000), flat(kB + 8, 1000)}, {flat(kC + 0, 1000)});
  EXPECT_EQ(p.key.vector_width, 2);
  EXPECT_EQ(p.head, 0);
  // A row (bias) keeps today's rule: no head, a narrower vector instead.
  const TensorView x = TensorView::contiguous(fake(kA + 4), DType::f32, {16, 64});
  const TensorView bias = TensorView::contiguous(fake(kB), DType::f32, {64});
  const TensorView y = TensorView::contiguous(fake(kC + 4), DType::f32, {16, 64});
  p = detail::plan_nary(add, {x, bias}, {y});
  EXPECT_EQ(p.key.patterns[1], detail::kRow);
  EXPECT_EQ(p.key.vector_width, 1);
  EXPECT_EQ(p.head, 0);
  // Too few elements for the head and one vector: the next narrower vector.
  p = detail::plan_nary(Op::relu(), {flat(kA + 4, 6)}, {flat(kB + 4, 6)});
  EXPECT_EQ(p.key.vector_width, 2);
  EXPECT_EQ(p.head, 1);
}

// A row's and a column's period go to the kernel with its multiply-shift divisor (32-bit plans; the
// kernel's e / period is umulhi(e, div_mul) >> div_shift), which gives every quotient of the launch;
// whole tensors and scalars have none, and a 64-bit plan keeps the division.
TEST(ElementwisePlan, RowsAndColumnsDivideByAMultiplyAndAShift) {
  const Op chain = Op::chain({Step::add_input(1), Step::mul_input(2)});
  const TensorView x = TensorView::contiguous(fake(kA), DType::bf16, {96, 28672});
  const TensorView row = TensorView::contiguous(fake(kB), DType::bf16, {28672});
  const TensorView col = TensorView::contiguous(fake(kC), DType::bf16, {96, 1});
  const TensorView y = TensorView::contiguous(fake(kA + 0x100000000), DType::bf16, {96, 28672});
  const detail::NaryPlan p = detail::plan_nary(chain, {x, row, col}, {y});
  ASSERT_EQ(p.key.patterns[1], detail::kRow);
  ASSERT_EQ(p.key.patterns[2], detail::kCol);
  EXPECT_FALSE(p.key.index64);
  EXPECT_EQ(p.args.div_mul[0], 0u);  // the whole tensor
  for (int k : {1, 2}) {
    SCOPED_TRACE("input " + std::to_string(k));
    EXPECT_EQ(p.args.period[k], 28672);
    EXPECT_NE(p.args.div_mul[k], 0u);
    const std::uint64_t mul = p.args.div_mul[k], shift = p.args.div_shift[k];
    const std::uint64_t n = 96 * 28672;
    for (std::uint64_t e = 0; e < n; e += 997) EXPECT_EQ(((e * mul) >> 32) >> shift, e / 28672) << e;
    EXPECT_EQ((((n - 1) * mul) >> 32) >> shift, (n - 1) / 28672);
  }
  // Past 2^31 elements: 64-bit indices, a division.
  const TensorView big = TensorView::contiguous(fake(kA), DType::bf16, {65536, 32768});
  const TensorView big_row = TensorView::contiguous(fake(kB), DType::bf16, {32768});
  const TensorView big_y = TensorView::contiguous(fake(kA + 0x800000000), DType::bf16, {65536, 32768});
  const detail::NaryPlan q = detail::plan_nary(Op::chain({Step::add_input(1)}), {big, big_row}, {big_y});
  EXPECT_TRUE(q.key.index64);
  EXPECT_EQ(q.args.div_mul[1], 0u);
}

TEST(ElementwisePlan, RepsWhenTheGridNeedsOneToTwoWaves) {
  // 132 SMs x 8 resident blocks = 1056 blocks a wave.
  EXPECT_EQ(detail::reps_for(1, 132), 1);
  EXPECT_EQ(detail::reps_for(1056, 132), 1);
  EXPECT_EQ(detail::reps_for(1057, 132), 2);
  EXPECT_EQ(detail::reps_for(2048, 132), 2);  // 2^21 float32: 1.94 waves
  EXPECT_EQ(detail::reps_for(2112, 132), 2);
  EXPECT_EQ(detail::reps_for(2113, 132), 1);
  EXPECT_EQ(detail::reps_for(2048, 0), 1);  // unknown device: one pass
}

TEST(ElementwisePlan, StridedPathMergesDimensionsOfEveryOperand) {
  // Rows 0..7 of a [16, 4, 8] tensor (a slice along dim 0): the last two dims merge in both.
  const TensorView in = TensorView::strided(fake(kA), DType::f32, {8, 4, 8}, {64, 8, 1});
  const TensorView out = TensorView::strided(fake(kB), DType::f32, {8, 4, 8}, {64, 8, 1});
  auto p = detail::plan_nary(Op::relu(), {in}, {out});
  ASSERT_TRUE(p.key.strided);
  ASSERT_EQ(p.strided.ndim, 2);
  EXPECT_EQ(p.strided.shape[1], 32);
  EXPECT_EQ(p.strided.in_strides[0][0], 64);
  // A broadcast column (stride 0 along the trailing dims) merges with its neighbours too.
  const TensorView col = TensorView::strided(fake(kC), DType::f32, {8, 4, 8}, {1, 0, 0});
  p = detail::plan_nary(Op::chain({Step::add_input(1)}), {in, col}, {out});
  ASSERT_TRUE(p.key.strided);
  EXPECT_EQ(p.strided.ndim, 2);
  EXPECT_EQ(p.strided.in_strides[1][1], 0);
  // The one-input ops read a broadcast input through the strided path (their variants know the
  // whole-tensor pattern only).
  const TensorView row = TensorView::strided(fake(kA), DType::f32, {4, 5}, {0, 1});
  EXPECT_EQ(plan(Op::relu(), row, TensorView::contiguous(fake(kB), DType::f32, {4, 5})).variant.layout,
            Layout::strided);
}

TEST(ElementwisePlan, OneInputCallNaryCallAndWarmVariantAreOneProgram) {
  const auto arch = cuinline::Arch::parse("sm_90");
  struct Case {
    const char* what;
    TensorView in, out;
  };
  const Case cases[] = {
      {"aligned", flat(kA, 4096), flat(kB, 4096)},
      {"misaligned alike (head)", flat(kA + 4, 4096), flat(kB + 4, 4096)},
      {"in place, misaligned", flat(kA + 8, 999), flat(kA + 8, 999)},
      {"misaligned differently", flat(kA + 4, 4096), flat(kB, 4096)},
      {"strided", TensorView::strided(fake(kA), DType::f32, {64, 32}, {64, 1}), flat(kB, 2048)},
  };
  for (const Op& op : {Op::relu(), Op::div_leaky_relu(2, 0.01), Op::expr("x > 0 ? x : x * s", {{"s", 0.25}})}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(op.describe() + " " + c.what);
      TensorView out = c.out;
      if (c.what == std::string("strided")) out = TensorView::contiguous(fake(kB), DType::f32, {64, 32});
      const LaunchPlan p = plan(op, c.in, out);
      const cuinline::CompileRequest warm = make_request(p.variant);
      const cuinline::CompileRequest nary = make_request(op, {c.in}, {out});
      EXPECT_EQ(warm.source, nary.source);
      EXPECT_EQ(warm.name_expressions, nary.name_expressions);
      EXPECT_EQ(cuinline::make_cache_key(warm, arch), cuinline::make_cache_key(nary, arch));
      EXPECT_EQ(warm.name_expressions.at(0), kernel_name(p.variant));
    }
  }
}

TEST(ElementwisePlan, OneInputVariantCompilesForSm90) {
  const auto arch = cuinline::Arch::parse("sm_90");
  for (const Variant& v : {Variant{Op::relu(), DType::f32, 4, IndexWidth::i32, Layout::contiguous},
                           Variant{Op::leaky_relu(0.01), DType::bf16, 8, IndexWidth::i64, Layout::contiguous},
                           Variant{Op::relu(), DType::f16, 2, IndexWidth::i32, Layout::contiguous},
                           Variant{Op::relu(), DType::f64, 1, IndexWidth::i64, Layout::strided}}) {
    SCOPED_TRACE(v.name());
    const cuinline::CompiledProgram program = cuinline::compile(make_request(v), arch);
    EXPECT_TRUE(program.lowered_name(kernel_name(v)).has_value());
  }
  // An op over several tensors is not a one-input variant.
  EXPECT_THROW(make_request(Variant{Op::chain({Step::add_input(1)}), DType::f32, 4, IndexWidth::i32,
                                    Layout::contiguous}),
               cuinline::InvalidArgument);
}

}  // namespace

// An expression over one whole tensor and broadcast operands (bias + GELU) moves two vectors a
// thread (Sh::kWide); two whole inputs, a chain, a 2-byte dtype or one input
// keep one. The wide kernel compiles for sm_90 with its own launch bounds.
TEST(ElementwisePlan, OneWholeTensorWithBroadcastOperandsTakesTwoVectorsAThread) {
  const Op gelu = Op::exprs({"x", "b"}, {"(x + b) * 0.5f * (1.0f + erff((x + b) * 0.70710678f))"});
  const auto matrix = [](std::uintptr_t at, DType dt) { return TensorView::contiguous(fake(at), dt, {64, 1024}); };
  const auto row = [](std::uintptr_t at, DType dt) { return TensorView::contiguous(fake(at), dt, {1024}); };
  auto p = detail::plan_nary(gelu, {matrix(kA, DType::f32), row(kB, DType::f32)}, {matrix(kC, DType::f32)});
  EXPECT_TRUE(p.key.wide);
  EXPECT_EQ(p.key.vector_width, 4);
  EXPECT_EQ(p.grid, static_cast<std::uint32_t>((64 * 1024 / 4 + 511) / 512));
  EXPECT_FALSE(detail::plan_nary(gelu, {matrix(kA, DType::bf16), row(kB, DType::bf16)}, {matrix(kC, DType::bf16)}).key.wide);
  const Op swiglu = Op::exprs({"a", "b"}, {"a / (1.0f + expf(-a)) * b"});
  EXPECT_FALSE(detail::plan_nary(swiglu, {matrix(kA, DType::f32), matrix(kB, DType::f32)}, {matrix(kC, DType::f32)}).key.wide);
  EXPECT_FALSE(detail::plan_nary(Op::chain({Step::add_input(1), Step::relu()}),
                                 {matrix(kA, DType::f32), row(kB, DType::f32)}, {matrix(kC, DType::f32)})
                   .key.wide);
  EXPECT_FALSE(detail::plan_nary(Op::expr("x * 2.0f"), {matrix(kA, DType::f32)}, {matrix(kC, DType::f32)}).key.wide);

  const cuinline::CompileRequest request =
      make_request(gelu, {matrix(kA, DType::f32), row(kB, DType::f32)}, {matrix(kC, DType::f32)});
  EXPECT_NE(request.source.find("kWide = 1"), std::string::npos);
  const cuinline::CompiledProgram program = cuinline::compile(request, cuinline::Arch::parse("sm_90"));
  EXPECT_FALSE(program.binary.empty());
}

// The bf16 table form (kernel_templates/ew_table.cuh, ops/elementwise/table.hpp): which chains
// have it and where their table run starts (in steps and in lowered steps), which keys refuse it,
// the size from which a call takes it, and the module that holds both kernels, compiled for sm_90.
TEST(ElementwisePlan, Bf16ChainsEndingInACostlyRunHaveATableForm) {
  detail::NaryKey key;
  key.dtype = DType::bf16;
  key.inputs = 2;
  key.outputs = 1;
  key.vector_width = 8;
  struct Expect {
    const char* op;
    int start, lowered;
  };
  const Expect cases[] = {
      {"gelu", 0, 0},
      {"mul(0.5)|gelu|mul(2)", 0, 0},
      {"relu|mish", 0, 0},
      {"add(in1)|gelu", 1, 1},
      {"div_leaky_relu(2, 0.1)|add(in1)|log", 2, 3},
      {"add(in1)|mul(in1)|exp|log", 2, 2},
      {"silu|tanh", 0, 0},  // two transcendental steps
      {"silu", -1, -1},     // one that a lookup does not pay for
      {"add(in1)|exp", -1, -1},
      {"gelu|add(in1)", -1, -1},          // the run after the tensor step has no activation
      {"sigmoid|add(in1)|gelu", -1, -1},  // an activation before the run
      {"relu|clamp(0, 6)", -1, -1},
  };
  for (const Expect& e : cases) {
    const Op op = parse_op(e.op);
    EXPECT_EQ(detail::table_run_start(op, key), e.start) << e.op;
    EXPECT_EQ(detail::table_run_start_lowered(op, key), e.lowered) << e.op;
  }
  const Op gelu = parse_op("gelu");
  EXPECT_TRUE(detail::table_applies(gelu, key, detail::kTableMinElements));
  EXPECT_FALSE(detail::table_applies(gelu, key, detail::kTableMinElements - 1));
  detail::NaryKey planned = key;
  planned.table = true;
  EXPECT_FALSE(detail::generic_table_applies(planned));  // two inputs
  planned.inputs = 1;
  EXPECT_TRUE(detail::generic_table_applies(planned));
  for (auto refuse :
       {+[](detail::NaryKey& k) { k.dtype = DType::f16; }, +[](detail::NaryKey& k) { k.dtype = DType::f32; },
        +[](detail::NaryKey& k) { k.vector_width = 4; }, +[](detail::NaryKey& k) { k.index64 = true; },
        +[](detail::NaryKey& k) { k.strided = true; }, +[](detail::NaryKey& k) { k.outputs = 2; }}) {
    detail::NaryKey k = key;
    refuse(k);
    EXPECT_EQ(detail::table_run_start(gelu, k), -1);
  }
  EXPECT_EQ(detail::table_run_start(Op::expr("x * 2.0f"), key), -1);

  // The planner takes it from kTableMinElements on: its own module (the run's functor, ew_table.cuh,
  // the table kernel), compiled for sm_90; below, and in f16, the plain kernel.
  const Op add_gelu = parse_op("add(in1)|gelu");
  const std::int64_t cols = 4096, rows = detail::kTableMinElements / cols;
  const TensorView row = TensorView::contiguous(fake(kB), DType::bf16, {cols});
  const TensorView x = TensorView::contiguous(fake(kA), DType::bf16, {rows, cols});
  const TensorView y = TensorView::contiguous(fake(kC), DType::bf16, {rows, cols});
  const TensorView x1 = TensorView::contiguous(fake(kA), DType::bf16, {rows - 1, cols});
  const TensorView y1 = TensorView::contiguous(fake(kC), DType::bf16, {rows - 1, cols});
  EXPECT_TRUE(detail::plan_nary(add_gelu, {x, row}, {y}).key.table);
  EXPECT_FALSE(detail::plan_nary(add_gelu, {x1, row}, {y1}).key.table);
  EXPECT_FALSE(detail::plan_nary(parse_op("add(in1)|relu"), {x, row}, {y}).key.table);
  EXPECT_TRUE(plan(parse_op("gelu"), x, y).table);
  const cuinline::CompileRequest request = make_request(add_gelu, {x, row}, {y});
  ASSERT_EQ(request.name_expressions.size(), 1u);
  EXPECT_EQ(request.name_expressions[0], detail::kernel_name(detail::plan_nary(add_gelu, {x, row}, {y}).key));
  EXPECT_NE(request.name_expressions[0].find("ew_nary_table<"), std::string::npos);
  EXPECT_NE(request.source.find("struct cuinline_ewn_run"), std::string::npos);
  bool table_header = false;
  for (const auto& h : request.headers) table_header = table_header || h.name == "ew_table.cuh";
  EXPECT_TRUE(table_header);
  const cuinline::CompiledProgram program = cuinline::compile(request, cuinline::Arch::parse("sm_90"));
  EXPECT_FALSE(program.binary.empty());
  EXPECT_EQ(make_request(add_gelu, {x1, row}, {y1}).source.find("cuinline_ewn_run"), std::string::npos);
  const TensorView xh = TensorView::contiguous(fake(kA), DType::f16, {rows, cols});
  const TensorView rowh = TensorView::contiguous(fake(kB), DType::f16, {cols});
  const TensorView yh = TensorView::contiguous(fake(kC), DType::f16, {rows, cols});
  EXPECT_FALSE(detail::plan_nary(add_gelu, {xh, rowh}, {yh}).key.table);
}
