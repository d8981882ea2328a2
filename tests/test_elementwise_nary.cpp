// Host tests of the N-ary elementwise ops (no GPU): broadcasting and its errors, the checks that run
// before anything is compiled (too many inputs, unknown names, mixed dtypes, partial overlap), the
// text form of N-ary ops, and NVRTC compiles for sm_90 of representative variants (every dtype,
// 1/2/3/8 inputs, 2 outputs, each broadcast pattern, misaligned and strided operands).
#include <gtest/gtest.h>

#include <cuinline/compiler.hpp>
#include <cuinline/error.hpp>
#include <cuinline/ops.hpp>
#include <cmath>
#include <string>

namespace {

using cuinline::DType;
using cuinline::InvalidArgument;
using cuinline::TensorView;
using namespace cuinline::ops;

void* fake(std::uintptr_t at) {
  return reinterpret_cast<void*>(at);
}
TensorView t(std::uintptr_t at, std::initializer_list<std::int64_t> shape, DType dt = DType::f32) {
  return TensorView::contiguous(fake(at), dt, shape);
}

const Op kSwiglu = Op::exprs({"a", "b"}, {"a / (1.0f + expf(-a)) * b"});

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(no InvalidArgument)";
}

TEST(ElementwiseNary, ShapesThatDoNotBroadcastNameBothShapes) {
  const std::string m = message_of([] { make_request(kSwiglu, {t(0x10000, {3, 4}), t(0x20000, {5})}, {t(0x30000, {3, 4})}); });
  EXPECT_NE(m.find("f32[3, 4]"), std::string::npos) << m;
  EXPECT_NE(m.find("f32[5]"), std::string::npos) << m;
  // The output must have the broadcast shape.
  const std::string o = message_of([] { make_request(kSwiglu, {t(0x10000, {3, 4}), t(0x20000, {4})}, {t(0x30000, {4})}); });
  EXPECT_NE(o.find("broadcast shape f32[3, 4]"), std::string::npos) << o;
}

TEST(ElementwiseNary, BadCallsAreRejectedBeforeAnythingIsCompiled) {
  const OpsStats before = nary_stats();
  std::vector<TensorView> nine;
  for (int i = 0; i < 9; ++i) nine.push_back(t(0x100000 * (i + 1), {16}));
  EXPECT_THROW(apply(Op::chain({Step::add_input(1)}), nine, {t(0x2000000, {16})}), InvalidArgument);
  EXPECT_THROW(apply(Op::chain({Step::add_input(1)}), {t(0x10000, {16})}, {t(0x20000, {16})}), InvalidArgument)
      << "the chain uses input 1, only one given";
  EXPECT_THROW(apply(kSwiglu, {t(0x10000, {16}), t(0x20000, {16}), t(0x30000, {16})}, {t(0x40000, {16})}),
               InvalidArgument)
      << "two names, three inputs";
  EXPECT_THROW(apply(kSwiglu, {t(0x10000, {16}), t(0x20000, {16}, DType::bf16)}, {t(0x40000, {16})}),
               InvalidArgument)
      << "mixed dtypes";
  EXPECT_THROW(apply(kSwiglu, {t(0x10000, {16}), t(0x20000, {16})}, {t(0x10008, {16})}), InvalidArgument)
      << "partial overlap of the output with input 0";
  EXPECT_THROW(apply(Op::exprs({"a", "b"}, {"a + b", "y0 * 2"}), {t(0x10000, {16}), t(0x20000, {16})},
                     {t(0x40000, {16}), t(0x40020, {16})}),
               InvalidArgument)
      << "overlapping outputs";
  EXPECT_THROW(apply(Op::exprs({"a", "b"}, {"a + b"}), {t(0x10000, {16}), t(0x20000, {16})},
                     {t(0x40000, {16}), t(0x50000, {16})}),
               InvalidArgument)
      << "one output expression, two outputs";
  const std::string unknown = message_of([] {
    make_request(Op::exprs({"a", "b"}, {"a * c"}), {t(0x10000, {16}), t(0x20000, {16})}, {t(0x40000, {16})});
  });
  EXPECT_NE(unknown.find("'c'"), std::string::npos) << unknown;
  const OpsStats after = nary_stats();
  EXPECT_EQ(after.cache_lookups, before.cache_lookups);
  EXPECT_EQ(after.launches, before.launches);
}

TEST(ElementwiseNary, InPlaceIsAllowed) {
  // The same view as input 0: planned (and compiled for sm_90), no overlap error.
  EXPECT_NO_THROW(make_request(kSwiglu, {t(0x10000, {64}), t(0x20000, {64})}, {t(0x10000, {64})}));
}

TEST(ElementwiseNary, TextForm) {
  const Op chain = parse_op("add(in1)|mul(in2)|relu");
  ASSERT_EQ(chain.steps.size(), 3u);
  EXPECT_EQ(chain.steps[0].kind, StepKind::add_tensor);
  EXPECT_EQ(chain.steps[1].operand, 2);
  EXPECT_EQ(chain.min_inputs(), 3);
  EXPECT_EQ(chain.describe(), "add(in1)|mul(in2)|relu");
  EXPECT_EQ(parse_op(chain.describe()), chain);
  const Op two = parse_op("expr([a, b] a + b | y0 > 0 ? y0 : 0.0f || a < 0; s=1)");
  EXPECT_EQ(two.input_names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(two.outputs(), 2);
  EXPECT_EQ(two.more_outputs[0], "y0 > 0 ? y0 : 0.0f || a < 0");
  EXPECT_EQ(parse_op(two.describe()), two);
  EXPECT_THROW(parse_op("relu(in1)"), InvalidArgument);
  EXPECT_THROW(Op::chain({Step::add_input(9)}).validate(), InvalidArgument);
  EXPECT_THROW(Op::exprs({"a", "a"}, {"a"}).validate(), InvalidArgument);
}

TEST(ElementwiseNary, WhereTextFormRoundTrips) {
  const Op op = parse_op("mul(in1)| where( in2 , in3 )|add(1)|where(in1, 0.1)");
  ASSERT_EQ(op.steps.size(), 4u);
  EXPECT_EQ(op.steps[1], Step::where_input(2, 3));
  EXPECT_EQ(op.steps[1].kind, StepKind::where_tensor);
  EXPECT_EQ(op.steps[1].cond, 2);
  EXPECT_EQ(op.steps[1].operand, 3);
  EXPECT_EQ(op.steps[3], Step::where_scalar(1, 0.1));
  EXPECT_EQ(op.min_inputs(), 4);
  EXPECT_EQ(op.describe(), "mul(in1)|where(in2,in3)|add(1)|where(in1,0.1)");
  EXPECT_EQ(parse_op(op.describe()), op);
  // Special scalars keep their bits through the text form.
  for (const char* text : {"where(in7,-0)", "where(in1,nan)", "where(in1,-inf)", "where(in1,1e-300)"}) {
    const Op special = parse_op(text);
    EXPECT_EQ(parse_op(special.describe()), special) << text;
  }
  EXPECT_EQ(parse_op("where(in5, in1)").min_inputs(), 6);
  // Operands are part of equality: the condition and the other input are not interchangeable.
  EXPECT_NE(Step::where_input(1, 2), Step::where_input(2, 1));
  EXPECT_NE(Step::where_scalar(1, 0.0), Step::where_scalar(1, -0.0));
  EXPECT_NE(Step::where_scalar(1, 2.0), Step::where_scalar(2, 2.0));
}

TEST(ElementwiseNary, WhereWithBadOperandsIsRejected) {
  auto message = [](const char* text) { return message_of([&] { parse_op(text); }); };
  EXPECT_NE(message("where(in0, in1)").find("input 0 is the chain's start"), std::string::npos) << message("where(in0, in1)");
  EXPECT_NE(message("where(in1, in0)").find("other value"), std::string::npos);
  EXPECT_NE(message("where(in8, 0)").find("input 8"), std::string::npos);
  EXPECT_NE(message("where(in1)").find("where takes 2 arguments"), std::string::npos) << message("where(in1)");
  EXPECT_NE(message("where(in1, in2, in3)").find("where takes 2 arguments"), std::string::npos);
  EXPECT_NE(message("where").find("where takes 2 arguments"), std::string::npos);
  EXPECT_NE(message("where(0.5, in1)").find("condition '0.5'"), std::string::npos) << message("where(0.5, in1)");
  EXPECT_NE(message("where(in1, x)").find("'x' is not a number"), std::string::npos) << message("where(in1, x)");
  EXPECT_THROW(Op::chain({Step::where_input(1, 8)}).validate(), InvalidArgument);
  EXPECT_THROW(Op::chain({Step::where_scalar(-1, 0)}).validate(), InvalidArgument);
  Step stray = Step::relu();
  stray.cond = 1;
  EXPECT_THROW(Op::chain({stray}).validate(), InvalidArgument) << "a condition on a step that takes none";
  Step stray_operand = Step::where_scalar(1, 0);
  stray_operand.operand = 2;
  EXPECT_THROW(Op::chain({stray_operand}).validate(), InvalidArgument) << "where_scalar takes no other input";
  // The call must give every input the op names, and a where op is not a one-tensor op.
  const OpsStats before = nary_stats();
  const std::string few = message_of([] {
    make_request(Op::chain({Step::where_input(1, 2)}), {t(0x10000, {16}), t(0x20000, {16})}, {t(0x30000, {16})});
  });
  EXPECT_NE(few.find("it uses 3 inputs, 2 given"), std::string::npos) << few;
  EXPECT_THROW(apply(Op::chain({Step::where_scalar(1, 0)}), t(0x10000, {16}), t(0x20000, {16})), InvalidArgument);
  EXPECT_EQ(nary_stats().cache_lookups, before.cache_lookups);
}

TEST(ElementwiseNary, WhereScalarIsRenderedInTheDtype) {
  const Op op = Op::chain({Step::relu(), Step::where_scalar(1, 0.1)});
  const std::uintptr_t A = 0x100000, B = 0x200000, O = 0x400000;
  struct Case {
    DType dt;
    const char* literal;  // 0.1 → float 0x3dcccccd → the dtype, round to nearest even
  } cases[] = {{DType::f32, "__int_as_float(0x3dcccccd)"},
               {DType::f16, "ew_half{0x2e66}"},
               {DType::bf16, "ew_bf16{0x3dcd}"},
               {DType::f64, "__longlong_as_double(0x3fb999999999999all)"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(cuinline::to_string(c.dt));
    const cuinline::CompileRequest req =
        make_request(op, {t(A, {64, 256}, c.dt), t(B, {256}, c.dt)}, {t(O, {64, 256}, c.dt)});
    EXPECT_NE(req.source.find("x = ew_where(xs[1], x, " + std::string(c.literal) + ");"), std::string::npos)
        << req.source;
  }
  // Two scalars that round to the same f16 value are one program (one cache entry).
  const auto f16_source = [&](double s) {
    return make_request(Op::chain({Step::where_scalar(1, s)}), {t(A, {64}, DType::f16), t(B, {64}, DType::f16)},
                        {t(O, {64}, DType::f16)})
        .source;
  };
  EXPECT_EQ(f16_source(0.1), f16_source(0.10000001));
  EXPECT_NE(f16_source(0.1), f16_source(0.2));
  // A NaN scalar is the dtype's quiet NaN; -0.0 keeps its sign.
  EXPECT_NE(f16_source(std::nan("")).find("ew_half{0x7e00}"), std::string::npos);
  EXPECT_NE(f16_source(-0.0).find("ew_half{0x8000}"), std::string::npos);
}

// Representative variants compile for sm_90; the kernel names show the path each takes.
TEST(ElementwiseNary, RepresentativeVariantsCompileForSm90) {
  const cuinline::Arch sm90 = cuinline::Arch::parse("sm_90");
  struct Case {
    const char* what;
    Op op;
    std::vector<TensorView> in, out;
    const char* kernel_has;
  };
  const std::uintptr_t A = 0x100000, B = 0x200000, C = 0x300000, O = 0x400000, O2 = 0x500000;
  std::vector<Case> cases = {
      {"swiglu f32", kSwiglu, {t(A, {64, 256}), t(B, {64, 256})}, {t(O, {64, 256})}, "float, 4, unsigned int"},
      {"swiglu bf16", kSwiglu, {t(A, {64, 256}, DType::bf16), t(B, {64, 256}, DType::bf16)},
       {t(O, {64, 256}, DType::bf16)}, "ew_bf16, 8"},
      {"bias row f16", Op::chain({Step::add_input(1), Step::relu()}), {t(A, {64, 256}, DType::f16), t(B, {256}, DType::f16)},
       {t(O, {64, 256}, DType::f16)}, "ew_half, 8"},
      {"column f64", Op::chain({Step::mul_input(1)}), {t(A, {64, 256}, DType::f64), t(B, {64, 1}, DType::f64)},
       {t(O, {64, 256}, DType::f64)}, "double, 2"},
      {"scalar + 3 inputs", Op::exprs({"a", "b", "c"}, {"a * b + c"}), {t(A, {1000}), t(B, {}), t(C, {1000})},
       {t(O, {1000})}, "ew_nary<"},
      {"misaligned", Op::chain({Step::add_input(1)}), {t(A + 4, {1000}), t(B, {1000})}, {t(O, {1000})}, "float, 1,"},
      {"middle broadcast (strided)", Op::chain({Step::add_input(1)}), {t(A, {8, 16, 32}), t(B, {8, 1, 32})},
       {t(O, {8, 16, 32})}, "ew_nary_strided"},
      {"two outputs", Op::exprs({"a", "b"}, {"a + b", "y0 > 0.0f ? y0 : 0.0f"}), {t(A, {4096}), t(B, {4096})},
       {t(O, {4096}), t(O2, {4096})}, "ew_nary<"},
  };
  cases.push_back({"where (tensor, row condition) f16", Op::chain({Step::mul_input(1), Step::where_input(2, 3), Step::relu()}),
                   {t(A, {64, 256}, DType::f16), t(B, {64, 256}, DType::f16), t(C, {256}, DType::f16),
                    t(0x600000, {64, 1}, DType::f16)},
                   {t(O, {64, 256}, DType::f16)}, "ew_half, 8"});
  cases.push_back({"where (scalar) bf16 strided", parse_op("where(in1, 0.5)|add(in2)"),
                   {t(A, {8, 16, 32}, DType::bf16), t(B, {8, 1, 32}, DType::bf16), t(C, {32}, DType::bf16)},
                   {t(O, {8, 16, 32}, DType::bf16)}, "ew_nary_strided"});
  cases.push_back({"where f64 and f32", parse_op("where(in1, in2)|where(in2, -0)"),
                   {t(A, {1000}, DType::f64), t(B, {}, DType::f64), t(C, {1000}, DType::f64)},
                   {t(O, {1000}, DType::f64)}, "double, 2"});
  cases.push_back({"where f32 misaligned", parse_op("where(in1, nan)"), {t(A + 4, {1000}), t(B, {1000})},
                   {t(O, {1000})}, "float, 1,"});
  std::vector<TensorView> eight;
  for (int i = 0; i < 8; ++i) eight.push_back(t(A + 0x100000 * i, {2048}));
  cases.push_back({"8 inputs", Op::exprs({}, {"a + b + c + d + e + f + g + h"}), eight, {t(0x2000000, {2048})}, "ew_nary<"});
  TensorView strided_out = TensorView::strided(fake(O), DType::f32, {64, 64}, {128, 1});
  cases.push_back({"non-contiguous output", kSwiglu, {t(A, {64, 64}), t(B, {64, 64})}, {strided_out}, "ew_nary_strided"});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const cuinline::CompileRequest req = make_request(c.op, c.in, c.out);
    ASSERT_EQ(req.name_expressions.size(), 1u);
    EXPECT_NE(req.name_expressions[0].find(c.kernel_has), std::string::npos) << req.name_expressions[0];
    EXPECT_NO_THROW(cuinline::compile(req, sm90));
  }
}

}  // namespace
