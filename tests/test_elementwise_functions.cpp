// Host tests of the activation / math steps (sigmoid ... neg): their text form (names, optional
// arguments with PyTorch's defaults, aliases, refusals), the constants rendered as PyTorch holds
// them, the compile options (contraction on only for chains with these steps, so every other
// variant keeps its request and cache key), NVRTC compiles of every step in every dtype for sm_90,
// as elementwise kernels and as a conv2d epilogue, and the CPU reference at known values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cuinline/compiler.hpp>
#include <cuinline/conv2d.hpp>
#include <cuinline/error.hpp>
#include <cuinline/ops.hpp>

#include "elementwise_reference.hpp"
#include "ops/elementwise/render.hpp"
#include "reference/host_reference.hpp"
#include "templates/template_source.hpp"

namespace cuinline {
namespace {

using ops::Op;
using ops::Step;
using ops::StepKind;

bool has_option(const CompileRequest& r, const std::string& o) {
  return std::find(r.options.begin(), r.options.end(), o) != r.options.end();
}

TEST(FunctionSteps, ParseWithPyTorchsDefaultsAndDescribeBack) {
  struct Case {
    const char* text;
    StepKind kind;
    double a, b;
    const char* described;
  };
  const Case cases[] = {
      {"sigmoid", StepKind::sigmoid, 0, 0, "sigmoid"},
      {"tanh", StepKind::tanh, 0, 0, "tanh"},
      {"silu", StepKind::silu, 0, 0, "silu"},
      {"swish", StepKind::silu, 0, 0, "silu"},
      {"gelu", StepKind::gelu, 0, 0, "gelu"},
      {"gelu_tanh", StepKind::gelu_tanh, 0, 0, "gelu_tanh"},
      {"mish", StepKind::mish, 0, 0, "mish"},
      {"softplus", StepKind::softplus, 1, 20, "softplus"},
      {"softplus(2)", StepKind::softplus, 2, 20, "softplus(2,20)"},
      {"softplus(0.5, 10)", StepKind::softplus, 0.5, 10, "softplus(0.5,10)"},
      {"elu", StepKind::elu, 1, 0, "elu"},
      {"elu(0.25)", StepKind::elu, 0.25, 0, "elu(0.25)"},
      {"selu", StepKind::selu, 0, 0, "selu"},
      {"celu", StepKind::celu, 1, 0, "celu"},
      {"celu(2)", StepKind::celu, 2, 0, "celu(2)"},
      {"hardswish", StepKind::hardswish, 0, 0, "hardswish"},
      {"hardsigmoid", StepKind::hardsigmoid, 0, 0, "hardsigmoid"},
      {"hardtanh", StepKind::clamp, -1, 1, "clamp(-1,1)"},
      {"hardtanh(-2, 3)", StepKind::clamp, -2, 3, "clamp(-2,3)"},
      {"relu6", StepKind::clamp, 0, 6, "clamp(0,6)"},
      {"exp", StepKind::exp, 0, 0, "exp"},
      {"log", StepKind::log, 0, 0, "log"},
      {"sqrt", StepKind::sqrt, 0, 0, "sqrt"},
      {"abs", StepKind::abs, 0, 0, "abs"},
      {"neg", StepKind::neg, 0, 0, "neg"},
      {"softsign", StepKind::softsign, 0, 0, "softsign"},
      {"tanhshrink", StepKind::tanhshrink, 0, 0, "tanhshrink"},
      {"logsigmoid", StepKind::logsigmoid, 0, 0, "logsigmoid"},
      {"hardshrink", StepKind::hardshrink, 0.5, 0, "hardshrink"},
      {"hardshrink(1.5)", StepKind::hardshrink, 1.5, 0, "hardshrink(1.5)"},
      {"softshrink", StepKind::softshrink, 0.5, 0, "softshrink"},
      {"softshrink(0)", StepKind::softshrink, 0, 0, "softshrink(0)"},
      {"threshold(0.1, 20)", StepKind::threshold, 0.1, 20, "threshold(0.1,20)"},
      {"rrelu", StepKind::leaky_relu, (1.0 / 8 + 1.0 / 3) / 2, 0, nullptr},  // eval mode: leaky_relu
      {"rrelu(0.1, 0.3)", StepKind::leaky_relu, (0.1 + 0.3) / 2, 0, nullptr},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    const Op op = ops::parse_op(c.text);
    ASSERT_EQ(op.steps.size(), 1u);
    EXPECT_EQ(op.steps[0].kind, c.kind);
    EXPECT_EQ(op.steps[0].a, c.a);
    EXPECT_EQ(op.steps[0].b, c.b);
    if (c.described != nullptr) EXPECT_EQ(op.describe(), c.described);
    EXPECT_EQ(ops::parse_op(op.describe()), op);  // the description reads back as the same op
    EXPECT_EQ(ops::is_function_step(c.kind), c.kind != StepKind::clamp && c.kind != StepKind::leaky_relu);
  }
  // Chains mix them with the arithmetic and tensor steps.
  const Op chain = ops::parse_op("add(in1) | gelu | mul(2) | mish | softplus(2, 5)");
  EXPECT_EQ(chain.describe(), "add(in1)|gelu|mul(2)|mish|softplus(2,5)");
  EXPECT_EQ(chain.min_inputs(), 2);
  EXPECT_EQ(Op::chain({Step::function(StepKind::gelu), Step::softplus(2, 5), Step::celu(3)}).describe(),
            "gelu|softplus(2,5)|celu(3)");
  // The C++ factories are the parsed steps.
  EXPECT_EQ(Op::chain({Step::sigmoid(), Step::tanh(), Step::silu(), Step::gelu(), Step::gelu_tanh(), Step::mish(),
                       Step::softplus(), Step::elu(), Step::selu(), Step::celu(), Step::hardswish(), Step::hardsigmoid(),
                       Step::hardtanh(), Step::relu6(), Step::exp(), Step::log(), Step::sqrt(), Step::abs(), Step::neg()}),
            ops::parse_op("sigmoid|tanh|silu|gelu|gelu_tanh|mish|softplus|elu|selu|celu|hardswish|hardsigmoid|hardtanh|"
                          "relu6|exp|log|sqrt|abs|neg"));
  EXPECT_EQ(Op::chain({Step::softsign(), Step::tanhshrink(), Step::logsigmoid(), Step::hardshrink(), Step::softshrink(0.25),
                       Step::threshold(-1, 2), Step::rrelu(), Step::rrelu(0.2, 0.4)}),
            ops::parse_op("softsign|tanhshrink|logsigmoid|hardshrink(0.5)|softshrink(0.25)|threshold(-1,2)|rrelu|"
                          "rrelu(0.2,0.4)"));
  for (StepKind k : {StepKind::add, StepKind::relu, StepKind::clamp, StepKind::where_scalar}) {
    EXPECT_FALSE(ops::is_function_step(k));
  }
}

TEST(FunctionSteps, BadTextSaysWhatWasWrong) {
  auto message = [](const char* text) {
    try {
      ops::parse_op(text);
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(message("sigmoid(1)").find("sigmoid takes 0 argument(s), got 1"), std::string::npos) << message("sigmoid(1)");
  EXPECT_NE(message("softplus(1,2,3)").find("softplus takes 0 to 2 argument(s), got 3"), std::string::npos);
  EXPECT_NE(message("hardtanh(1)").find("hardtanh takes 0 or 2 arguments (min_val, max_val), got 1"), std::string::npos)
      << message("hardtanh(1)");
  EXPECT_NE(message("gelu(tanh)").find("'tanh' is not a number"), std::string::npos) << message("gelu(tanh)");
  EXPECT_NE(message("celu(0)").find("celu's alpha is 0"), std::string::npos) << message("celu(0)");
  EXPECT_NE(message("threshold(1)").find("threshold takes 2 argument(s), got 1"), std::string::npos)
      << message("threshold(1)");
  EXPECT_NE(message("softshrink(-0.5)").find("softshrink's lambd is -0.5; it must be at least 0"), std::string::npos)
      << message("softshrink(-0.5)");
  EXPECT_NE(message("rrelu(0.1)").find("rrelu takes 0 or 2 arguments (lower, upper), got 1"), std::string::npos)
      << message("rrelu(0.1)");
  EXPECT_NE(message("rrelu(0.4, 0.2)").find("rrelu's lower bound 0.4 is above its upper bound 0.2"), std::string::npos)
      << message("rrelu(0.4, 0.2)");
  EXPECT_NE(message("hardshrink(1, 2)").find("hardshrink takes 0 to 1 argument(s), got 2"), std::string::npos);
  EXPECT_NE(message("gelu_erf").find("unknown step 'gelu_erf'"), std::string::npos);
  EXPECT_NE(message("gelu_erf").find("gelu_tanh"), std::string::npos);  // the message lists the names
  EXPECT_THROW(Op::chain({Step::celu(0)}).validate(), InvalidArgument);
  Step bad = Step::function(StepKind::neg);
  bad.kind = static_cast<StepKind>(static_cast<int>(StepKind::threshold) + 1);
  EXPECT_THROW(Op::chain({bad}).validate(), InvalidArgument);
}

// The rendered constants are PyTorch's opmath values: float for f32 / f16 / bf16 (at::elu's
// alpha * scale multiplied in float), double for f64.
TEST(FunctionSteps, ConstantsAreRenderedAsPyTorchHoldsThem) {
  auto render = [](const char* text, DType dt) { return detail::render_op_functor(ops::parse_op(text), dt, "E"); };
  EXPECT_NE(render("gelu", DType::f32).find("ew_gelu(x, 0x1.6a09e6p-1f)"), std::string::npos) << render("gelu", DType::f32);
  EXPECT_NE(render("gelu", DType::f64).find("ew_gelu(x, 0x1.6a09e667f3bcdp-1)"), std::string::npos);
  // kBeta = M_SQRT2 * M_2_SQRTPI * 0.5 = sqrt(2 / pi), kKappa = 0.044715.
  EXPECT_NE(render("gelu_tanh", DType::bf16).find("ew_gelu_tanh(x, " + detail::opmath_literal(std::sqrt(2 / M_PI), DType::bf16) +
                                                  ", " + detail::opmath_literal(0.044715, DType::bf16) + ")"),
            std::string::npos)
      << render("gelu_tanh", DType::bf16);
  const float selu_neg = static_cast<float>(1.6732632423543772848170429916717) * static_cast<float>(1.0507009873554804934193349852946);
  EXPECT_NE(render("selu", DType::f16).find("ew_elu(x, " + detail::opmath_literal(selu_neg, DType::f16) + ", " +
                                            detail::opmath_literal(1.0507009873554804934193349852946, DType::f16)),
            std::string::npos)
      << render("selu", DType::f16);
  EXPECT_NE(render("selu", DType::f64).find(detail::opmath_literal(1.6732632423543772848170429916717 * 1.0507009873554804934193349852946, DType::f64)),
            std::string::npos);
  EXPECT_NE(render("celu(3)", DType::f32).find(detail::opmath_literal(1.0 / 3.0, DType::f32)), std::string::npos);
  EXPECT_NE(render("hardswish", DType::f64).find(detail::opmath_literal(static_cast<double>(1.0f / 6.0f), DType::f64)),
            std::string::npos);  // one_sixth(1.0f / 6.0f): a float constant even in double
  EXPECT_NE(render("softplus(2,5)", DType::f32).find("ew_softplus(x, 0x1p+1f, 0x1.4p+2f)"), std::string::npos);
  // hardshrink / softshrink / threshold take their scalars in the dtype (value.to<scalar_t>()):
  // 0.1 as f16 is 0x1.998p-4, as bf16 0x1.9ap-4, as f32 0x1.99999ap-4; threshold's value as the
  // dtype's bits.
  EXPECT_NE(render("hardshrink(0.1)", DType::f16).find("ew_hardshrink(x, 0x1.998p-4f)"), std::string::npos)
      << render("hardshrink(0.1)", DType::f16);
  EXPECT_NE(render("softshrink(0.1)", DType::bf16).find("ew_softshrink(x, 0x1.9ap-4f)"), std::string::npos)
      << render("softshrink(0.1)", DType::bf16);
  EXPECT_NE(render("softshrink(0.1)", DType::f32).find("ew_softshrink(x, 0x1.99999ap-4f)"), std::string::npos);
  EXPECT_NE(render("hardshrink(0.1)", DType::f64).find("ew_hardshrink(x, 0x1.999999999999ap-4)"), std::string::npos);
  EXPECT_NE(render("threshold(0.1, 0.1)", DType::f16).find("ew_threshold(x, 0x1.998p-4f, ew_half{0x2e66})"),
            std::string::npos)
      << render("threshold(0.1, 0.1)", DType::f16);
  EXPECT_NE(render("rrelu", DType::f32).find("ew_leaky_relu(x, " +
                                             detail::opmath_literal((1.0 / 8 + 1.0 / 3) / 2, DType::f32) + ")"),
            std::string::npos);
}

// Contraction (FMA) is on only for chains with these steps: PyTorch's kernels are built with it
// (sigmoid's 1 + exp(-x) is an FFMA there). Every other variant keeps --fmad=false and its key.
TEST(FunctionSteps, ChainsWithThemCompileWithContractionOthersDoNot) {
  auto request = [](const char* text) {
    ops::Variant v;
    v.op = ops::parse_op(text);
    v.dtype = DType::f32;
    v.vector_width = 4;
    return ops::make_request(v);
  };
  EXPECT_TRUE(has_option(request("sigmoid"), "--fmad=true"));
  EXPECT_TRUE(has_option(request("sigmoid"), "-DCUINLINE_EW_FMAD"));
  EXPECT_FALSE(has_option(request("relu"), "-DCUINLINE_EW_FMAD"));
  EXPECT_TRUE(has_option(request("add(1)|gelu"), "--fmad=true"));
  EXPECT_TRUE(has_option(request("abs"), "--fmad=true"));
  EXPECT_TRUE(has_option(request("relu"), "--fmad=false"));
  EXPECT_TRUE(has_option(request("div(2)|leaky_relu(0.01)"), "--fmad=false"));
  EXPECT_TRUE(has_option(request("relu6"), "--fmad=false"));  // clamp
  EXPECT_TRUE(has_option(request("expr(x / (1.0f + expf(-x)))"), "--fmad=false"));
  // The arithmetic steps round explicitly, so they stay uncontracted beside the functions.
  const std::string src = detail::template_text("ew_ops.cuh");
  EXPECT_NE(src.find("__fadd_rn"), std::string::npos);
  EXPECT_NE(src.find("add.rn.f32 %0, %0, 0f80000000"), std::string::npos);
}

// Every step compiles in every dtype for sm_90 (NVRTC; no GPU needed), as an elementwise kernel
// and as the epilogue of conv2d variants in f32 and f16.
TEST(FunctionSteps, EveryStepCompilesInEveryDtype) {
  const Op all = ops::parse_op(
      "sigmoid|tanh|silu|gelu|gelu_tanh|mish|softplus|softplus(2,5)|elu|elu(0.5)|selu|celu(2)|hardswish|"
      "hardsigmoid|hardtanh|relu6|exp|log|sqrt|abs|neg|softsign|tanhshrink|logsigmoid|hardshrink|softshrink(0.25)|"
      "threshold(0.1,-3)");
  ASSERT_EQ(all.steps.size(), 27u);
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
    SCOPED_TRACE(to_string(dt));
    ops::Variant v;
    v.op = all;
    v.dtype = dt;
    v.vector_width = 16 / static_cast<int>(dtype_size(dt));
    const CompiledProgram p = compile(ops::make_request(v), Arch::parse("sm_90"));
    EXPECT_EQ(p.kind, BinaryKind::cubin);
    EXPECT_GT(p.binary.size(), 1000u);
  }
  // Each conv2d kernel family with every step in its epilogue: f32 direct (16 channels), the
  // Winograd kernel (8 channels, 3 x 3), the general kernel (groups), f16 on tensor cores, f16 1 x 1
  // (the pointwise form), f32 in precision tf32.
  struct ConvCase {
    const char* what;
    DType dt;
    int cin, cout, k, groups;
    ops::Conv2dPrecision precision;
  };
  const ConvCase convs[] = {
      {"f32 direct", DType::f32, 16, 32, 3, 1, ops::Conv2dPrecision::fp32},
      {"f32 Winograd", DType::f32, 8, 64, 3, 1, ops::Conv2dPrecision::fp32},
      {"f32 grouped", DType::f32, 16, 32, 3, 4, ops::Conv2dPrecision::fp32},
      {"f16 tensor cores", DType::f16, 16, 32, 3, 1, ops::Conv2dPrecision::fp32},
      {"bf16 1x1", DType::bf16, 64, 128, 1, 1, ops::Conv2dPrecision::fp32},
      {"f32 tf32", DType::f32, 32, 64, 3, 1, ops::Conv2dPrecision::tf32},
  };
  for (const ConvCase& c : convs) {
    SCOPED_TRACE(std::string("conv2d epilogue, ") + c.what);
    ops::Conv2dVariant cv;
    cv.dtype = c.dt;
    cv.in_channels = c.cin;
    cv.height = cv.width = 32;
    cv.out_channels = c.cout;
    cv.kernel_h = cv.kernel_w = c.k;
    cv.params.groups = c.groups;
    cv.precision = c.precision;
    cv.has_bias = true;
    cv.epilogue = all;
    const CompiledProgram p = compile(ops::make_request(ops::conv2d_variant_for_arch(cv, Arch::parse("sm_90"))),
                                      Arch::parse("sm_90"));
    EXPECT_EQ(p.kind, BinaryKind::cubin);
  }
}

TEST(FunctionSteps, CpuReferenceAtKnownValues) {
  auto f = [](const char* text, double x) {
    return cli::reference_function<double>(ops::parse_op(text).steps[0], x);
  };
  EXPECT_EQ(f("sigmoid", 0), 0.5);
  EXPECT_EQ(f("silu", 0), 0.0);
  EXPECT_EQ(f("gelu", 0), 0.0);
  EXPECT_NEAR(f("gelu", 1), 0.8413447460685429, 1e-15);
  EXPECT_NEAR(f("gelu_tanh", 1), 0.8411919906082768, 1e-7);  // kBeta / kKappa as PyTorch (tanh form)
  EXPECT_NEAR(f("mish", 1), 0.8650983882673103, 1e-15);
  EXPECT_NEAR(f("softplus", 0), std::log(2.0), 1e-15);
  EXPECT_EQ(f("softplus", 25), 25.0);  // above the threshold: x
  EXPECT_NEAR(f("elu", -1), std::expm1(-1.0), 1e-15);
  EXPECT_NEAR(f("selu", -1), 1.0507009873554805 * 1.6732632423543772 * std::expm1(-1.0), 1e-14);
  EXPECT_NEAR(f("celu(2)", -1), 2 * std::expm1(-0.5), 1e-15);
  EXPECT_EQ(f("hardswish", 4), 4.0 * 6 * static_cast<double>(1.0f / 6.0f));
  EXPECT_EQ(f("hardswish", -4), -0.0);
  EXPECT_EQ(f("hardsigmoid", 0), 3 * static_cast<double>(1.0f / 6.0f));
  EXPECT_TRUE(std::isnan(f("hardsigmoid", NAN)));  // std::max(NaN, 0) keeps the NaN
  EXPECT_TRUE(std::isnan(f("log", -1)));
  EXPECT_EQ(f("log", 0), -INFINITY);
  EXPECT_EQ(f("neg", 0), -0.0);
  EXPECT_TRUE(std::signbit(f("neg", 0)));
  EXPECT_EQ(f("abs", -2), 2.0);
  EXPECT_EQ(f("softsign", 3), 0.75);
  EXPECT_EQ(f("softsign", -1), -0.5);
  EXPECT_NEAR(f("tanhshrink", 1), 1 - std::tanh(1.0), 1e-15);
  EXPECT_NEAR(f("logsigmoid", 0), -std::log(2.0), 1e-15);
  EXPECT_NEAR(f("logsigmoid", -30), -30 - std::log1p(std::exp(-30.0)), 1e-12);
  EXPECT_EQ(f("hardshrink", 0.5), 0.0);
  EXPECT_EQ(f("hardshrink", -0.75), -0.75);
  EXPECT_EQ(f("softshrink", 0.75), 0.25);
  EXPECT_EQ(f("softshrink", -0.75), -0.25);
  EXPECT_FALSE(std::signbit(f("softshrink", -0.25)));  // scalar_t(0): +0
  EXPECT_TRUE(std::isnan(f("softshrink", NAN)));
  EXPECT_EQ(f("threshold(1, 7)", 1), 7.0);
  EXPECT_EQ(f("threshold(1, 7)", 1.5), 1.5);
  EXPECT_TRUE(std::isnan(f("threshold(1, 7)", NAN)));
  // softsign rounds |x| + 1 to the dtype before dividing (two PyTorch ops): in f16, 2048 + 1 -> 2048.
  const auto round_f16 = [](float v) {
    return static_cast<float>(test::value_of(DType::f16, test::bits_of(DType::f16, v)));
  };
  EXPECT_EQ(cli::reference_function<float>(ops::parse_op("softsign").steps[0], 2048.0f, round_f16), 1.0f);
  EXPECT_EQ(cli::reference_function<float>(ops::parse_op("softsign").steps[0], 2048.0f), 2048.0f / 2049.0f);
  EXPECT_TRUE(cli::close_to_reference(1.0, 1.0 + 1e-7, DType::f32));
  EXPECT_FALSE(cli::close_to_reference(1.0, 1.001, DType::f32));
  EXPECT_FALSE(cli::close_to_reference(NAN, 1.0, DType::f16));
  EXPECT_FALSE(cli::close_to_reference(INFINITY, 1e30, DType::f32));
  // NaN against -inf: only where an operand enters after a step (a libm's zero times an inf operand).
  EXPECT_FALSE(cli::close_to_reference(-INFINITY, NAN, DType::f32));
  EXPECT_TRUE(cli::close_to_reference(-INFINITY, NAN, DType::f32, true));
  EXPECT_TRUE(cli::close_to_reference(NAN, INFINITY, DType::f64, true));
  EXPECT_FALSE(cli::close_to_reference(INFINITY, -INFINITY, DType::f32, true));
  EXPECT_FALSE(cli::close_to_reference(NAN, 1e30, DType::f32, true));
  EXPECT_FALSE(cli::close_to_reference(-INFINITY, -3.0, DType::f32, true));
  EXPECT_TRUE(cli::has_operand_after_function_step(ops::parse_op("add(in1)|gelu|mul(in2)")));
  EXPECT_FALSE(cli::has_operand_after_function_step(ops::parse_op("add(in1)|gelu|mul(2)")));
  EXPECT_FALSE(cli::has_operand_after_function_step(ops::parse_op("mish|softplus(2,5)")));
}

}  // namespace
}  // namespace cuinline
