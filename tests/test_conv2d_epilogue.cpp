// Host tests of conv2d epilogues that read per-output-channel operands (conv2d's channel_operands:
// PyTorch's (Cout, 1, 1) parameters, as KernelBench's conv + bias / multiplier / scale chains use
// them): how many an epilogue reads, the checks of the operands before anything is compiled or
// launched, the names and keys, and offline compiles (NVRTC, sm_90 and the other targets) of every
// conv2d kernel with such an epilogue.
#include <gtest/gtest.h>

#include <cstdint>
#include <cuinline/compiler.hpp>
#include <cuinline/conv2d.hpp>
#include <cuinline/error.hpp>
#include <functional>
#include <string>
#include <vector>

namespace {

using cuinline::DType;
using cuinline::InvalidArgument;
using cuinline::TensorView;
using namespace cuinline::ops;

void* fake(std::uintptr_t at) {
  return reinterpret_cast<void*>(at);
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(no InvalidArgument)";
}

TEST(Conv2dEpilogue, OperandsAreCountedFromTheEpilogue) {
  EXPECT_EQ(conv2d_epilogue_operands(Op::chain({})), 0);
  EXPECT_EQ(conv2d_epilogue_operands(Op::relu()), 0);
  EXPECT_EQ(conv2d_epilogue_operands(parse_op("div(2)|leaky_relu(0.01)")), 0);
  EXPECT_EQ(conv2d_epilogue_operands(parse_op("relu|add(in1)")), 1);
  EXPECT_EQ(conv2d_epilogue_operands(parse_op("mul(in1)|add(in3)")), 3);
  EXPECT_EQ(conv2d_epilogue_operands(parse_op("where(in2, 0.5)")), 2);
  EXPECT_EQ(conv2d_epilogue_operands(parse_op("expr(x * s; s=2)")), 0);
  EXPECT_EQ(conv2d_epilogue_operands(parse_op("expr([x, m, b] x * m + b)")), 2);
  // At most kMaxConv2dChannelOperands, one output: refused by the variant, naming the epilogue.
  Conv2dVariant v = make_conv2d_variant(8, 16, 16, 4, 3, 3, Conv2dParams{}, true, parse_op("add(in4)"));
  EXPECT_NO_THROW(v.validate());
  v.epilogue = parse_op("add(in5)");
  std::string m = message_of([&] { v.validate(); });
  EXPECT_NE(m.find("reads 5 per-channel operands; at most 4"), std::string::npos) << m;
  v.epilogue = Op::exprs({"x", "m"}, {"x * m", "x + m"});
  m = message_of([&] { v.validate(); });
  EXPECT_NE(m.find("has 2 outputs"), std::string::npos) << m;
}

TEST(Conv2dEpilogue, TheEpilogueNamesTheVariantNotTheOperands) {
  const Conv2dVariant a = make_conv2d_variant(8, 16, 16, 4, 3, 3, Conv2dParams{}, true, parse_op("relu|add(in1)"));
  const Conv2dVariant b = make_conv2d_variant(8, 16, 16, 4, 3, 3, Conv2dParams{}, true, parse_op("relu|add(1)"));
  EXPECT_NE(a.name(), b.name());
  EXPECT_NE(a.name().find("add(in1)"), std::string::npos) << a.name();
  EXPECT_NE(make_request(a).source, make_request(b).source);
  // The source reads the operand at run time: the kernel takes cuinline_conv2d_chan.
  EXPECT_NE(make_request(a).source.find("ew_channel_value<float>(chan.p[0], c)"), std::string::npos);
  // (read at a channel clamped to the last: 4 channels)
  EXPECT_NE(make_request(a).source.find("const int c = co < 3 ? co : 3;"), std::string::npos);
}

// The tensors of one small call (f32, 4 output channels) and its per-channel operands.
struct Conv2dChannelArgs : ::testing::Test {
  TensorView input = TensorView::contiguous(fake(0x100000), DType::f32, {2, 8, 16, 16});
  TensorView weight = TensorView::contiguous(fake(0x200000), DType::f32, {4, 8, 3, 3});
  TensorView bias = TensorView::contiguous(fake(0x300000), DType::f32, {4});
  TensorView output = TensorView::contiguous(fake(0x400000), DType::f32, {2, 4, 14, 14});
  Op epi = parse_op("mul(in1)|leaky_relu(0.01)|add(in2)");
  TensorView m = TensorView::contiguous(fake(0x600000), DType::f32, {4, 1, 1});
  TensorView b2 = TensorView::contiguous(fake(0x700000), DType::f32, {4});

  std::string refusal(const std::vector<TensorView>& operands) {
    return message_of([&] { conv2d_variant_for(input, weight, bias, output, {}, epi, Conv2dPrecision::fp32, {}, operands); });
  }
};

TEST_F(Conv2dChannelArgs, PerChannelShapesAreAccepted) {
  const TensorView m4 = TensorView::contiguous(fake(0x600000), DType::f32, {1, 4, 1, 1});
  for (const TensorView& first : {m, m4, b2}) {
    const Conv2dVariant v = conv2d_variant_for(input, weight, bias, output, {}, epi, Conv2dPrecision::fp32, {}, {first, b2});
    EXPECT_EQ(v.epilogue, epi);
  }
  // One output channel: any stride of its one element.
  const TensorView w1 = TensorView::contiguous(fake(0x200000), DType::f32, {1, 8, 3, 3});
  const TensorView y1 = TensorView::contiguous(fake(0x400000), DType::f32, {2, 1, 14, 14});
  const TensorView s1 = TensorView::strided(fake(0x600000), DType::f32, {1, 1, 1}, {7, 7, 7});
  EXPECT_NO_THROW(conv2d_variant_for(input, w1, TensorView{}, y1, {}, epi, Conv2dPrecision::fp32, {}, {s1, s1}));
}

TEST_F(Conv2dChannelArgs, OperandsAreCheckedBeforeAnyLaunch) {
  std::string msg = refusal({m});
  EXPECT_NE(msg.find("reads 2 per-channel operand(s) but 1 were given"), std::string::npos) << msg;
  msg = refusal({m, b2, b2});
  EXPECT_NE(msg.find("but 3 were given"), std::string::npos) << msg;
  // An epilogue of constants takes none.
  msg = message_of([&] { conv2d_variant_for(input, weight, bias, output, {}, Op::relu(), Conv2dPrecision::fp32, {}, {m}); });
  EXPECT_NE(msg.find("reads 0 per-channel operand(s) but 1 were given"), std::string::npos) << msg;

  TensorView half = b2;
  half.dtype = DType::f16;
  msg = refusal({m, half});
  EXPECT_NE(msg.find("channel operand 2 (in2) is f16 but the conv's tensors are f32"), std::string::npos) << msg;
  // Shapes that broadcast otherwise (PyTorch: [Cout] against [N, C, H, W] would be along W; these
  // are not per-channel vectors either).
  for (const TensorView& bad : {TensorView::contiguous(fake(0x600000), DType::f32, {5}),
                                 TensorView::contiguous(fake(0x600000), DType::f32, {4, 1}),
                                 TensorView::contiguous(fake(0x600000), DType::f32, {1, 4}),
                                 TensorView::contiguous(fake(0x600000), DType::f32, {4, 2, 1}),
                                 TensorView::contiguous(fake(0x600000), DType::f32, {4, 1, 1, 1}),
                                 TensorView::contiguous(fake(0x600000), DType::f32, {1, 1, 4, 1}),
                                 TensorView::contiguous(fake(0x600000), DType::f32, {2, 4, 1, 1})}) {
    msg = refusal({bad, b2});
    EXPECT_NE(msg.find("channel operand 1 (in1)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("is not a per-channel vector of the 4 output channels"), std::string::npos) << msg;
  }
  // Channels that are not contiguous (every other element, or one value expanded): read through a
  // compact copy, the variant that of a contiguous operand.
  EXPECT_TRUE(conv2d_variant_for(input, weight, bias, output, {}, epi, Conv2dPrecision::fp32, {},
                                 {TensorView::strided(fake(0x600000), DType::f32, {4, 1, 1}, {2, 1, 1}), b2}) ==
              conv2d_variant_for(input, weight, bias, output, {}, epi, Conv2dPrecision::fp32, {}, {m, b2}));
  EXPECT_NO_THROW(conv2d_variant_for(input, weight, bias, output, {}, epi, Conv2dPrecision::fp32, {},
                                     {m, TensorView::strided(fake(0x700000), DType::f32, {1, 4, 1, 1}, {4, 0, 1, 1})}));
  msg = refusal({m, TensorView::contiguous(nullptr, DType::f32, {4})});
  EXPECT_NE(msg.find("channel operand 2 (in2) is a null pointer"), std::string::npos) << msg;
  msg = refusal({m, TensorView::contiguous(fake(0x700002), DType::f32, {4})});
  EXPECT_NE(msg.find("not aligned to its 4-byte elements"), std::string::npos) << msg;
  msg = refusal({m, TensorView::contiguous(fake(0x400000 + 64), DType::f32, {4})});
  EXPECT_NE(msg.find("channel operand 2 (in2) overlaps the output"), std::string::npos) << msg;
}

// Every conv2d kernel with an epilogue over two channel operands, compiled for its target's arch: the
// fp32 direct and Winograd kernels, TF32 / 3xTF32 tensor cores, f16 / bf16 tensor cores (halo,
// wgmma, mma.sync), the general kernel (grouped, depthwise channel-fast), the f32 channels-last
// transposed path; sm_90 and the sm_86 / sm_75 plans.
TEST(Conv2dEpilogue, EveryKernelCompilesChannelOperands) {
  // KernelBench-like chains: conv * multiplier -> LeakyReLU -> GELU; min(conv, 0.5) + bias, * 2;
  // mish(mish(conv + b)).
  const Op gelu_chain =
      parse_op("expr([x, m, b] (x * m > 0.0f ? x * m : x * m * 0.01f) * 0.5f * (1.0f + erff((x * m > 0.0f ? x * m : "
               "x * m * 0.01f) * 0.70710678118654752f)) + b)");
  const Op min_chain = parse_op("expr([x, b, s] (fminf(x, 0.5f) + b) * s)");
  const Op relu_bias = parse_op("relu|add(in1)|mul(in2)");
  struct Case {
    int cin, h, w, cout, k;
    Conv2dParams p;
    DType dtype;
    Conv2dLayout in, out;
    Conv2dPrecision precision;
    const char* arch;
    const Op* epi;
  };
  Conv2dParams g8;
  g8.groups = 8;
  Conv2dParams dw = Conv2dParams::square(1, 1);
  dw.groups = 32;
  const auto nchw = Conv2dLayout::nchw, nhwc = Conv2dLayout::nhwc;
  const auto fp32 = Conv2dPrecision::fp32;
  const std::vector<Case> cases = {
      {8, 64, 64, 64, 3, {}, DType::f32, nchw, nchw, fp32, "sm_90", &gelu_chain},                  // Winograd
      {16, 40, 40, 32, 5, {}, DType::f32, nchw, nchw, fp32, "sm_90", &min_chain},                  // direct
      {64, 28, 28, 64, 3, Conv2dParams::square(1, 1), DType::f32, nchw, nchw, Conv2dPrecision::tf32, "sm_90", &relu_bias},
      {64, 28, 28, 64, 3, Conv2dParams::square(1, 1), DType::f32, nchw, nchw, Conv2dPrecision::tf32x3, "sm_90", &min_chain},
      {8, 128, 128, 64, 3, {}, DType::f16, nchw, nchw, fp32, "sm_90", &gelu_chain},                // halo
      {8, 128, 128, 64, 3, {}, DType::bf16, nhwc, nhwc, fp32, "sm_90", &relu_bias},
      {64, 56, 56, 64, 3, Conv2dParams::square(1, 1), DType::f16, nhwc, nhwc, fp32, "sm_90", &min_chain},  // wgmma
      {64, 56, 56, 64, 3, Conv2dParams::square(1, 1), DType::bf16, nchw, nchw, fp32, "sm_86", &gelu_chain}, // mma.sync
      {64, 14, 14, 64, 3, g8, DType::f16, nhwc, nchw, fp32, "sm_90", &relu_bias},                  // general
      {32, 28, 28, 32, 3, dw, DType::f32, nhwc, nhwc, fp32, "sm_90", &gelu_chain},                 // channel-fast
      {8, 64, 64, 64, 3, {}, DType::f32, nhwc, nhwc, fp32, "sm_90", &min_chain},                   // transposed
      {16, 40, 40, 32, 3, {}, DType::f32, nchw, nchw, fp32, "sm_75", &relu_bias},                  // sm75 FMA
      {8, 64, 64, 64, 3, {}, DType::f16, nchw, nchw, fp32, "sm_75", &min_chain},                   // sm75 general
  };
  for (const Case& c : cases) {
    Conv2dVariant v = make_conv2d_variant(c.cin, c.h, c.w, c.cout, c.k, c.k, c.p, true, *c.epi);
    v.dtype = c.dtype;
    v.input_layout = c.in;
    v.weight_layout = c.in;
    v.output_layout = c.out;
    v.precision = c.precision;
    const cuinline::Arch arch = cuinline::Arch::parse(c.arch);
    v = conv2d_variant_for_arch(v, arch);
    SCOPED_TRACE(v.name());
    EXPECT_EQ(conv2d_epilogue_operands(v.epilogue), c.epi == &min_chain || c.epi == &gelu_chain || c.epi == &relu_bias ? 2 : 0);
    const cuinline::CompileRequest r = make_request(v);
    std::printf("  %-60s %s\n", kernel_name(v).c_str(), v.name().c_str());
    cuinline::CompiledProgram out;
    ASSERT_NO_THROW(out = cuinline::compile(r, arch)) << kernel_name(v);
    EXPECT_FALSE(out.binary.empty());
  }
}

}  // namespace
