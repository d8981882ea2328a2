// Host tests of the N-ary elementwise ops (no GPU): broadcasting and its errors, the checks that run
// before anything is compiled (too many inputs, unknown names, mixed dtypes, partial overlap), the
// text form of N-ary ops, and NVRTC compiles for sm_90 of representative variants (every dtype,
// 1/2/3/8 inputs, 2 outputs, each broadcast pattern, misaligned and strided operands).
#include <gtest/gtest.h>

#include <cuinline/compiler.hpp>
#include <cuinline/error.hpp>
#include <cuinline/ops.hpp>
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
