// Host tests of conv2d in f16 and bf16 and with channels-last (NHWC) tensors: variant names and
// keys, the layouts read from strides, the general kernel's tiling and offline compiles for sm_90,
// and the argument checks (dtype mixes, strides that are neither layout) that run before anything
// is compiled or launched.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <regex>
#include <cuinline/compiler.hpp>
#include <cuinline/conv2d.hpp>
#include <cuinline/error.hpp>
#include <string>

#include "ops/conv2d/tiling.hpp"

namespace {

using cuinline::DType;
using cuinline::InvalidArgument;
using cuinline::TensorView;
using namespace cuinline::ops;

void* fake(std::uintptr_t at) {
  return reinterpret_cast<void*>(at);
}

// A channels-last view of shape [n, c, h, w] (PyTorch's memory_format=torch.channels_last).
TensorView channels_last(void* data, DType dtype, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) {
  return TensorView::strided(data, dtype, {n, c, h, w}, {h * w * c, 1, w * c, c});
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(no InvalidArgument)";
}

Conv2dVariant base() {
  return make_conv2d_variant(8, 16, 16, 4, 3, 3, Conv2dParams{}, true, Op::relu());
}

TEST(Conv2dDtypes, DtypeAndLayoutArePartOfTheVariant) {
  const Conv2dVariant f32 = base();
  EXPECT_FALSE(f32.uses_generic_kernel());
  Conv2dVariant half = f32;
  half.dtype = DType::f16;
  EXPECT_TRUE(half.uses_generic_kernel());
  EXPECT_NE(half, f32);
  EXPECT_EQ(half.name(), "conv2d<f16,8x16x16,4x3x3,s1x1,p0x0,d1x1,bias>[relu]");
  Conv2dVariant nhwc = f32;
  nhwc.input_layout = Conv2dLayout::nhwc;
  nhwc.output_layout = Conv2dLayout::nhwc;
  EXPECT_TRUE(nhwc.uses_generic_kernel());
  EXPECT_EQ(nhwc.name(), "conv2d<f32,8x16x16,4x3x3,s1x1,p0x0,d1x1,bias,x:nhwc,y:nhwc>[relu]");
  Conv2dVariant w_nhwc = f32;
  w_nhwc.weight_layout = Conv2dLayout::nhwc;
  EXPECT_NE(w_nhwc, f32);
  EXPECT_NE(w_nhwc.name(), f32.name());
  // Each a different kernel: different sources, so different cache keys.
  const std::string a = make_request(f32).source, b = make_request(half).source;
  Conv2dVariant bf = half;
  bf.dtype = DType::bf16;
  const std::string c = make_request(bf).source, d = make_request(nhwc).source, e = make_request(w_nhwc).source;
  for (const std::string* x : {&a, &b, &c, &d, &e}) {
    for (const std::string* y : {&a, &b, &c, &d, &e}) {
      if (x != y) EXPECT_NE(*x, *y);
    }
  }
  EXPECT_NE(b.find("typedef ew_half storage;"), std::string::npos) << b;
  EXPECT_NE(c.find("typedef ew_bf16 storage;"), std::string::npos) << c;
  EXPECT_NE(d.find("kInNhwc = 1;"), std::string::npos) << d;
  EXPECT_NE(e.find("kWNhwc = 1;"), std::string::npos) << e;
  EXPECT_EQ(make_request(half).name_expressions.at(0), kernel_name(half));
  EXPECT_EQ(parse_conv2d_layout("nhwc"), Conv2dLayout::nhwc);
  EXPECT_STREQ(to_string(Conv2dLayout::nchw), "nchw");
  EXPECT_THROW(parse_conv2d_layout("NHWC"), InvalidArgument);
}

TEST(Conv2dDtypes, GenericTilingCoversTheOutput) {
  Conv2dVariant v = make_conv2d_variant(5, 9, 7, 3, 2, 4, Conv2dParams::square(2, 1), false, Op::chain({}));
  v.input_layout = Conv2dLayout::nhwc;  // f32 channels-last (f16 and bf16 run on tensor cores)
  const Conv2dTiling t = conv2d_tiling(v);
  EXPECT_TRUE(t.generic());
  EXPECT_FALSE(t.tensor_cores());
  EXPECT_FALSE(t.winograd());
  EXPECT_EQ(t.threads() % 32, 0);
  EXPECT_EQ(t.block_channels(), 3);  // Cout < 8: one block covers the channels
  EXPECT_GE(std::int64_t{t.grid().tiles_x} * t.threads(), v.out_height() * v.out_width());
  EXPECT_EQ(t.grid().shared_bytes, 0u);
  // Winograd and the TF32 tensor cores are f32 NCHW only: the same shape in f32 NHWC stays on the
  // general kernel, in f16 it goes to the f16 / bf16 tensor-core kernel.
  Conv2dVariant w = make_conv2d_variant(8, 34, 34, 32, 3, 3, Conv2dParams::square(1, 1), true, Op::relu());
  EXPECT_TRUE(conv2d_tiling(w).winograd());
  w.input_layout = Conv2dLayout::nhwc;
  EXPECT_TRUE(conv2d_tiling(w).generic());
  w = make_conv2d_variant(64, 56, 56, 64, 3, 3, Conv2dParams::square(1, 1), true, Op::relu());
  w.precision = Conv2dPrecision::tf32;
  EXPECT_TRUE(conv2d_tiling(w).tensor_cores());
  w.dtype = DType::f16;
  EXPECT_TRUE(conv2d_tiling(w).half_mma());
  EXPECT_FALSE(conv2d_tiling(w).generic());
}

TEST(Conv2dDtypes, EveryDtypeAndLayoutCompilesForSm90) {
  const cuinline::Arch sm90 = cuinline::Arch::parse("sm_90");
  int i = 0;
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
    for (Conv2dLayout in : {Conv2dLayout::nchw, Conv2dLayout::nhwc}) {
      for (Conv2dLayout out : {Conv2dLayout::nchw, Conv2dLayout::nhwc}) {
        Conv2dParams p = Conv2dParams::square(1 + i % 2, i % 3, 1 + i % 2);
        Conv2dVariant v = make_conv2d_variant(3 + i, 20, 13, 5 + 3 * i, 3, 1 + i % 3, p, i % 2 == 0,
                                              div_leaky_relu_epilogue(2.0, 0.01));
        v.dtype = dt;
        v.input_layout = in;
        v.output_layout = out;
        v.weight_layout = i % 4 == 1 ? Conv2dLayout::nhwc : Conv2dLayout::nchw;
        v.has_residual = i % 3 == 0;
        ++i;
        SCOPED_TRACE(v.name());
        EXPECT_NO_THROW(cuinline::compile(make_request(v), sm90));
      }
    }
  }
}

// f64 (PyTorch's float64 conv): the general kernel in double — loads, fused multiply-adds, bias,
// residual and epilogue (its per-channel operands too) — whatever the shape, layout or precision
// argument (TF32 is an f32 mode: the shapes below take the tensor-core, Winograd and pointwise paths
// in f32), compiled for sm_90 without spills.
TEST(Conv2dDtypes, F64RunsTheGeneralKernelInDouble) {
  const cuinline::Arch sm90 = cuinline::Arch::parse("sm_90");
  struct C {
    int cin, h, w, cout, kh, kw, stride, pad;
    Conv2dLayout in, out;
    Conv2dPrecision precision;
    const char* epilogue;
  };
  const C cases[] = {
      {8, 128, 128, 64, 3, 3, 1, 0, Conv2dLayout::nchw, Conv2dLayout::nchw, Conv2dPrecision::fp32, "div(2)|leaky_relu(0.01)"},
      {64, 56, 56, 64, 3, 3, 1, 1, Conv2dLayout::nhwc, Conv2dLayout::nhwc, Conv2dPrecision::tf32, "gelu"},
      {64, 32, 32, 128, 1, 1, 1, 0, Conv2dLayout::nchw, Conv2dLayout::nchw, Conv2dPrecision::tf32, "mul(in1)|silu"},
      {3, 31, 17, 5, 3, 5, 2, 2, Conv2dLayout::nhwc, Conv2dLayout::nchw, Conv2dPrecision::tf32x3, "expr([x, m] x * m + exp(-x))"},
  };
  for (const C& c : cases) {
    const Op epi = parse_op(c.epilogue);
    Conv2dVariant v = make_conv2d_variant(c.cin, c.h, c.w, c.cout, c.kh, c.kw, Conv2dParams::square(c.stride, c.pad),
                                          true, epi);
    v.input_layout = v.weight_layout = c.in;
    v.output_layout = c.out;
    v.precision = c.precision;
    Conv2dVariant f32 = v;
    v.dtype = DType::f64;
    SCOPED_TRACE(v.name());
    EXPECT_NE(v.name().find("conv2d<f64,"), std::string::npos);
    EXPECT_NE(v, f32);
    EXPECT_TRUE(v.uses_generic_kernel());
    EXPECT_TRUE(conv2d_tiling(v).generic());
    EXPECT_NE(kernel_name(v).find("cuinline_conv2d_generic<"), std::string::npos) << kernel_name(v);
    EXPECT_FALSE(make_stage_request(v).has_value());  // no workspace copies
    cuinline::CompileRequest r = make_request(v);
    EXPECT_NE(r.source.find("typedef double storage;"), std::string::npos) << r.source;
    EXPECT_NE(r.source.find("__device__ __forceinline__ double operator()(double x, int co) const"), std::string::npos)
        << r.source;
    if (conv2d_epilogue_operands(epi) > 0) {
      EXPECT_NE(r.source.find("ew_channel_value<double>"), std::string::npos) << r.source;
    }
    EXPECT_EQ(r.source.find("float"), std::string::npos) << "no fp32 arithmetic in an f64 variant:\n" << r.source;
    r.options.push_back("-Xptxas=-v");
    r.options.push_back("--no-cache");  // (no compute-cache hit: ptxas runs and reports)
    const cuinline::CompiledProgram out = cuinline::compile(r, sm90);
    const std::regex spill(R"((\d+) bytes spill stores)");
    int reports = 0;
    for (auto it = std::sregex_iterator(out.log.begin(), out.log.end(), spill); it != std::sregex_iterator(); ++it) {
      EXPECT_EQ((*it)[1], "0") << out.log;
      ++reports;
    }
    EXPECT_GT(reports, 0) << out.log;
  }
}

// Grouped and depthwise convolutions (F.conv2d's groups) run on the general kernel in every dtype and
// layout: named (",g4"), a thread's channels within one group, compiled for sm_90 and sm_75.
TEST(Conv2dDtypes, GroupedAndDepthwiseVariantsPlanAndCompile) {
  struct G {
    int cin, cout, k, groups, stride;
  };
  const G cases[] = {{32, 32, 3, 32, 1}, {24, 48, 5, 24, 2}, {64, 128, 3, 8, 1}, {6, 9, 3, 3, 1}, {16, 8, 1, 2, 1}, {16, 16, 7, 16, 1}, {8, 8, 9, 8, 1}};
  int i = 0;
  for (const G& g : cases) {
    for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
      Conv2dParams p = Conv2dParams::square(g.stride, g.k / 2);
      p.groups = g.groups;
      Conv2dVariant v = make_conv2d_variant(g.cin, 17, 23, g.cout, g.k, g.k, p, i % 2 == 0, Op::relu());
      v.dtype = dt;
      v.input_layout = v.output_layout = i % 3 == 1 ? Conv2dLayout::nhwc : Conv2dLayout::nchw;
      v.weight_layout = i % 4 == 2 ? Conv2dLayout::nhwc : Conv2dLayout::nchw;
      v.has_residual = i % 5 == 0;
      ++i;
      SCOPED_TRACE(v.name());
      EXPECT_NE(v.name().find(",d1x1,g" + std::to_string(g.groups)), std::string::npos);
      EXPECT_TRUE(v.uses_generic_kernel());
      const Conv2dTiling tiling = conv2d_tiling(v);
      ASSERT_TRUE(tiling.generic());
      const GenericTiling& t = tiling.as_generic();
      // A thread's channels lie in one group, except a depthwise thread's channel pair (row-fast, a
      // channels-last f16 / bf16 input, one output channel a group: two groups of one channel each).
      const bool pair = t.row_fast() && v.input_layout == Conv2dLayout::nhwc && dtype_size(dt) == 2 && g.cout == g.cin &&
                        g.cin % 2 == 0 && g.k * g.k <= 9;
      EXPECT_EQ(t.channels_per_thread == 2 && t.row_fast(), pair);
      if (!pair) EXPECT_EQ((g.cout / g.groups) % t.channels_per_thread, 0) << "a thread's channels in one group";
      // (Depthwise channels-last: consecutive channels a warp.)
      EXPECT_EQ(t.row_fast(), g.groups == g.cin && g.k * g.k <= 49);
      EXPECT_EQ(t.channel_fast(), v.input_layout == Conv2dLayout::nhwc && g.groups == g.cin && g.k * g.k > 49);
      Conv2dVariant ungrouped = v;
      ungrouped.params.groups = 1;
      EXPECT_NE(v, ungrouped);
      EXPECT_NE(make_request(v).source, make_request(ungrouped).source);
      EXPECT_NO_THROW(cuinline::compile(make_request(v), cuinline::Arch::parse("sm_90")));
      if (i % 3 == 0) EXPECT_NO_THROW(cuinline::compile(make_request(conv2d_variant_for_arch(v, cuinline::Arch::parse("sm_75"))),
                                                         cuinline::Arch::parse("sm_75")));
    }
  }
  // groups must divide both channel counts and be positive.
  Conv2dParams p;
  p.groups = 3;
  EXPECT_THROW(make_conv2d_variant(8, 16, 16, 6, 3, 3, p, false, Op::relu()), InvalidArgument);
  p.groups = 0;
  EXPECT_THROW(make_conv2d_variant(8, 16, 16, 8, 3, 3, p, false, Op::relu()), InvalidArgument);
}

// The tensors of one small call, f16 unless a test changes them.
struct Conv2dDtypeArgs : ::testing::Test {
  TensorView input = TensorView::contiguous(fake(0x100000), DType::f16, {2, 8, 16, 16});
  TensorView weight = TensorView::contiguous(fake(0x200000), DType::f16, {4, 8, 3, 3});
  TensorView bias = TensorView::contiguous(fake(0x300000), DType::f16, {4});
  TensorView output = TensorView::contiguous(fake(0x400000), DType::f16, {2, 4, 14, 14});
  TensorView residual = TensorView::contiguous(fake(0x500000), DType::f16, {2, 4, 14, 14});
  Op epi = Op::relu();
};

TEST_F(Conv2dDtypeArgs, DtypeAndLayoutsComeFromTheTensors) {
  Conv2dVariant v = conv2d_variant_for(input, weight, bias, output, {}, epi, Conv2dPrecision::fp32, residual);
  EXPECT_EQ(v.dtype, DType::f16);
  EXPECT_EQ(v.input_layout, Conv2dLayout::nchw);
  EXPECT_EQ(v.output_layout, Conv2dLayout::nchw);
  for (TensorView* t : {&input, &weight, &bias, &output, &residual}) t->dtype = DType::bf16;
  EXPECT_EQ(conv2d_variant_for(input, weight, bias, output, {}, epi).dtype, DType::bf16);
  const TensorView x = channels_last(fake(0x100000), DType::bf16, 2, 8, 16, 16);
  const TensorView y = channels_last(fake(0x400000), DType::bf16, 2, 4, 14, 14);
  const TensorView r = channels_last(fake(0x500000), DType::bf16, 2, 4, 14, 14);
  const TensorView wl = channels_last(fake(0x200000), DType::bf16, 4, 8, 3, 3);
  v = conv2d_variant_for(x, weight, bias, output, {}, epi);
  EXPECT_EQ(v.input_layout, Conv2dLayout::nhwc);
  EXPECT_EQ(v.output_layout, Conv2dLayout::nchw);
  v = conv2d_variant_for(input, wl, bias, y, {}, epi, Conv2dPrecision::fp32, r);
  EXPECT_EQ(v.input_layout, Conv2dLayout::nchw);
  EXPECT_EQ(v.weight_layout, Conv2dLayout::nhwc);
  EXPECT_EQ(v.output_layout, Conv2dLayout::nhwc);
  EXPECT_TRUE(v.has_residual);
  // One channel: the channels-last strides are the contiguous ones too (NCHW is named).
  const TensorView one = channels_last(fake(0x100000), DType::bf16, 2, 1, 16, 16);
  const TensorView w1 = TensorView::contiguous(fake(0x200000), DType::bf16, {4, 1, 3, 3});
  EXPECT_EQ(conv2d_variant_for(one, w1, bias, output, {}, epi).input_layout, Conv2dLayout::nchw);
  // f32 channels-last too (on the general kernel).
  const TensorView x32 = channels_last(fake(0x100000), DType::f32, 2, 8, 16, 16);
  const TensorView w32 = TensorView::contiguous(fake(0x200000), DType::f32, {4, 8, 3, 3});
  const TensorView y32 = TensorView::contiguous(fake(0x400000), DType::f32, {2, 4, 14, 14});
  EXPECT_TRUE(conv2d_variant_for(x32, w32, TensorView{}, y32, {}, epi).uses_generic_kernel());
}

// The f16 / bf16 tensor-core kernel is compiled for its pointers' alignment where that changes it:
// input and weight 16-byte aligned (cp.async: channels-last input and weight, Cin % 8 == 0), the
// output aligned to its vector stores (14 x 14 = 196 outputs an NCHW plane: 4 a store, 8 bytes; 4
// channels channels-last: 8 bytes). Elsewhere (and in f32) both stay true: one key a kernel.
TEST_F(Conv2dDtypeArgs, AlignmentIsPartOfTheKeyWhereItChangesTheKernel) {
  const TensorView x = channels_last(fake(0x100000), DType::f16, 2, 8, 16, 16);
  const TensorView wl = channels_last(fake(0x200000), DType::f16, 4, 8, 3, 3);
  const TensorView y = channels_last(fake(0x400000), DType::f16, 2, 4, 14, 14);
  Conv2dVariant v = conv2d_variant_for(x, wl, bias, y, {}, epi);
  EXPECT_TRUE(v.inputs_aligned && v.output_aligned);
  EXPECT_EQ(v, [&] {
    Conv2dVariant w = make_conv2d_variant(8, 16, 16, 4, 3, 3, Conv2dParams{}, true, epi);  // what warm gives
    w.dtype = DType::f16;
    w.input_layout = w.weight_layout = w.output_layout = Conv2dLayout::nhwc;
    return w;
  }());
  const TensorView x2 = channels_last(fake(0x100008), DType::f16, 2, 8, 16, 16);
  const TensorView w2 = channels_last(fake(0x200002), DType::f16, 4, 8, 3, 3);
  const TensorView y4 = channels_last(fake(0x400004), DType::f16, 2, 4, 14, 14);
  const TensorView y8 = channels_last(fake(0x400008), DType::f16, 2, 4, 14, 14);
  EXPECT_FALSE(conv2d_variant_for(x2, wl, bias, y, {}, epi).inputs_aligned);
  EXPECT_FALSE(conv2d_variant_for(x, w2, bias, y, {}, epi).inputs_aligned);
  v = conv2d_variant_for(x, wl, bias, y4, {}, epi);
  EXPECT_TRUE(v.inputs_aligned);
  EXPECT_FALSE(v.output_aligned);
  EXPECT_NE(v.name().find(",y:unaligned"), std::string::npos) << v.name();
  EXPECT_TRUE(conv2d_variant_for(x, wl, bias, y8, {}, epi).output_aligned);  // 4 halves a store: 8 bytes
  // The variants differ in their kernels and keys.
  const Conv2dVariant a = conv2d_variant_for(x, wl, bias, y, {}, epi);
  const Conv2dVariant b = conv2d_variant_for(x2, wl, bias, y, {}, epi);
  EXPECT_NE(a, b);
  EXPECT_NE(b.name().find(",xw:unaligned"), std::string::npos) << b.name();
  EXPECT_NE(make_request(a).source, make_request(b).source);
  EXPECT_NE(make_request(b).source.find("kInAligned = 0"), std::string::npos);
  // NCHW input: no cp.async, so the input's alignment is not part of the key.
  const TensorView xc = TensorView::contiguous(fake(0x100002), DType::f16, {2, 8, 16, 16});
  EXPECT_TRUE(conv2d_variant_for(xc, wl, bias, y, {}, epi).inputs_aligned);
  // An output whose run allows no vector (3 channels, channels-last): not part of the key.
  const TensorView w3 = channels_last(fake(0x200000), DType::f16, 3, 8, 3, 3);
  const TensorView y3 = channels_last(fake(0x400002), DType::f16, 2, 3, 14, 14);
  const TensorView b3 = TensorView::contiguous(fake(0x300000), DType::f16, {3});
  EXPECT_TRUE(conv2d_variant_for(x, w3, b3, y3, {}, epi).output_aligned);
  // An NCHW output of odd rows (89) and an even plane (6 x 89): sm90's halo form stores along a row
  // (one output a store), the sm80 / sm86 plans of the same call along the plane (pairs). The flag
  // holds for every plan: 2 bytes off is unaligned, 4 bytes off aligned.
  Conv2dParams hp;
  hp.stride_h = 2, hp.pad_h = 3, hp.pad_w = 2, hp.dilation_h = 2, hp.dilation_w = 2;
  const TensorView xh = TensorView::contiguous(fake(0x100000), DType::bf16, {1, 1, 7, 87});
  const TensorView wh = TensorView::contiguous(fake(0x200000), DType::bf16, {2, 1, 2, 2});
  const Conv2dVariant h2 = conv2d_variant_for(xh, wh, TensorView{}, TensorView::contiguous(fake(0x400002), DType::bf16, {1, 2, 6, 89}), hp, epi);
  EXPECT_TRUE(conv2d_tiling(h2).halo()) << h2.name();
  EXPECT_FALSE(h2.output_aligned);
  EXPECT_TRUE(conv2d_variant_for(xh, wh, TensorView{}, TensorView::contiguous(fake(0x400004), DType::bf16, {1, 2, 6, 89}), hp, epi)
                  .output_aligned);
  // f32: the inputs never (4-byte copies); an NCHW output where the direct and Winograd kernels
  // store vectors (float4 / float2): a contiguous batch slice of an odd-sized plane is 4-byte aligned.
  const TensorView x32 = channels_last(fake(0x100004), DType::f32, 2, 8, 16, 16);
  const TensorView w32 = channels_last(fake(0x200004), DType::f32, 4, 8, 3, 3);
  const TensorView y32 = TensorView::contiguous(fake(0x400004), DType::f32, {2, 4, 14, 14});
  v = conv2d_variant_for(x32, w32, TensorView{}, y32, {}, epi);
  EXPECT_TRUE(v.inputs_aligned);
  EXPECT_FALSE(v.output_aligned);
  const TensorView y32a = TensorView::contiguous(fake(0x400010), DType::f32, {2, 4, 14, 14});
  EXPECT_TRUE(conv2d_variant_for(x32, w32, TensorView{}, y32a, {}, epi).output_aligned);
  const TensorView y32l = channels_last(fake(0x400004), DType::f32, 2, 4, 14, 14);
  EXPECT_TRUE(conv2d_variant_for(x32, w32, TensorView{}, y32l, {}, epi).output_aligned);  // not NCHW
  // Scalar stores in the direct kernel and Winograd where false.
  for (int cin : {8, 16}) {  // Winograd (8 input channels, 3 x 3) and the direct kernel
    Conv2dVariant f = make_conv2d_variant(cin, 34, 36, 32, 3, 3, Conv2dParams{}, true, epi);
    const std::string aligned = make_request(f).source;
    EXPECT_NE(aligned.find("kOutAligned = 1;"), std::string::npos);
    f.output_aligned = false;
    EXPECT_NE(f.name().find(",y:unaligned"), std::string::npos);
    const cuinline::CompileRequest r = make_request(f);
    EXPECT_NE(r.source.find("kOutAligned = 0;"), std::string::npos) << r.source;
    EXPECT_NO_THROW(cuinline::compile(r, cuinline::Arch::parse("sm_90")));
  }
}

TEST_F(Conv2dDtypeArgs, RejectsDtypeMixesNamingTheTensors) {
  TensorView w32 = weight;
  w32.dtype = DType::f32;
  std::string m = message_of([&] { conv2d(input, w32, bias, output, {}, epi); });
  EXPECT_NE(m.find("input f16, weight f32, bias f16, output f16"), std::string::npos) << m;
  TensorView y_bf = output;
  y_bf.dtype = DType::bf16;
  m = message_of([&] { conv2d(input, weight, TensorView{}, y_bf, {}, epi); });
  EXPECT_NE(m.find("input f16, weight f16, output bf16"), std::string::npos) << m;
  TensorView r32 = residual;
  r32.dtype = DType::f32;
  m = message_of([&] { conv2d(input, weight, bias, output, {}, epi, nullptr, Conv2dPrecision::fp32, r32); });
  EXPECT_NE(m.find("residual f32"), std::string::npos) << m;
  TensorView b_bf = bias;
  b_bf.dtype = DType::bf16;
  EXPECT_THROW(conv2d(input, weight, b_bf, output, {}, epi), InvalidArgument);
  // f64 (supported) beside f16: a mix.
  TensorView x64 = input, w64 = weight;
  x64.dtype = w64.dtype = DType::f64;
  m = message_of([&] { conv2d(x64, w64, TensorView{}, output, {}, epi); });
  EXPECT_NE(m.find("input f64, weight f64, output f16"), std::string::npos) << m;
  EXPECT_EQ(conv2d_stats().launches, 0u);
  EXPECT_EQ(conv2d_stats().cache_lookups, 0u);  // nothing compiled or fetched
}

// Strides that are neither layout (a slice, a step, a permutation, an expanded view) are valid
// F.conv2d input: the call reads or writes such a tensor through a compact copy in a workspace, laid
// out as the dtype's kernels read fastest (f16 / bf16 channels-last, f32 NCHW), so the variant is the
// one of that compact tensor (its alignment the workspace's). An output whose elements share memory
// is refused, as PyTorch refuses to write one.
TEST_F(Conv2dDtypeArgs, StridesThatAreNeitherLayoutArePlannedAsCompactCopies) {
  const Op relu = Op::relu();
  for (DType dt : {DType::f16, DType::f32}) {
    SCOPED_TRACE(cuinline::to_string(dt));
    const bool half = dt != DType::f32;
    const auto compact = [&](std::uintptr_t at, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) {
      return half ? channels_last(fake(at), dt, n, c, h, w) : TensorView::contiguous(fake(at), dt, {n, c, h, w});
    };
    const TensorView x = compact(0x100000, 2, 8, 16, 16), w = compact(0x200000, 4, 8, 3, 3);
    const TensorView b = TensorView::contiguous(fake(0x300000), dt, {4});
    const TensorView y = compact(0x400000, 2, 4, 14, 14), r = compact(0x500000, 2, 4, 14, 14);
    const Conv2dVariant want = conv2d_variant_for(x, w, b, y, {}, relu, Conv2dPrecision::fp32, r);
    // Channels-first with padded rows (a slice of a wider image), 2 bytes past an alignment.
    const TensorView padded = TensorView::strided(fake(0x100002), dt, {2, 8, 16, 16}, {8 * 16 * 20, 16 * 20, 20, 1});
    // NHWC with a gap after each pixel's channels (a slice of more channels).
    const TensorView gappy = TensorView::strided(fake(0x400000), dt, {2, 4, 14, 14}, {14 * 14 * 5, 1, 14 * 5, 5});
    // A weight with H and W swapped in memory.
    const TensorView wt = TensorView::strided(fake(0x200000), dt, {4, 8, 3, 3}, {72, 9, 1, 3});
    // One residual image for every batch entry (expanded: stride 0), and a bias of every other element.
    const TensorView r_expanded = TensorView::strided(fake(0x500000), dt, {2, 4, 14, 14}, {0, 196, 14, 1});
    const TensorView b_step = TensorView::strided(fake(0x300000), dt, {4}, {2});
    const Conv2dVariant got = conv2d_variant_for(padded, wt, b_step, gappy, {}, relu, Conv2dPrecision::fp32, r_expanded);
    EXPECT_EQ(got.input_layout, half ? Conv2dLayout::nhwc : Conv2dLayout::nchw);
    EXPECT_EQ(got.weight_layout, got.input_layout);
    EXPECT_EQ(got.output_layout, got.input_layout);
    EXPECT_TRUE(got.has_residual);
    EXPECT_EQ(got.name(), want.name());
    EXPECT_TRUE(got == want);
    // The same tensors, one at a time, beside compact ones: each planned as its copy.
    EXPECT_TRUE(conv2d_variant_for(padded, w, b, y, {}, relu, Conv2dPrecision::fp32, r) == want);
    EXPECT_TRUE(conv2d_variant_for(x, wt, b, y, {}, relu, Conv2dPrecision::fp32, r) == want);
    EXPECT_TRUE(conv2d_variant_for(x, w, b_step, y, {}, relu, Conv2dPrecision::fp32, r) == want);
    EXPECT_TRUE(conv2d_variant_for(x, w, b, gappy, {}, relu, Conv2dPrecision::fp32, r) == want);
    EXPECT_TRUE(conv2d_variant_for(x, w, b, y, {}, relu, Conv2dPrecision::fp32, r_expanded) == want);

    // One input channel (a depthwise weight [Cout, 1, KH, KW]) with H and W swapped: its compact copy
    // is contiguous and channels-last alike, named NCHW as such a tensor is.
    Conv2dParams dw_params;
    dw_params.groups = 8;
    const TensorView w1 = TensorView::contiguous(fake(0x200000), dt, {8, 1, 3, 3});
    const TensorView w1_swapped = TensorView::strided(fake(0x200000), dt, {8, 1, 3, 3}, {9, 9, 1, 3});
    const TensorView y8 = compact(0x400000, 2, 8, 14, 14);
    EXPECT_TRUE(conv2d_variant_for(x, w1_swapped, TensorView{}, y8, dw_params, relu) ==
                conv2d_variant_for(x, w1, TensorView{}, y8, dw_params, relu));
    // An output with elements at one address: expanded, or rows that overlap.
    const TensorView y_expanded = TensorView::strided(fake(0x400000), dt, {2, 4, 14, 14}, {0, 196, 14, 1});
    std::string m = message_of([&] { conv2d(x, w, b, y_expanded, {}, relu); });
    EXPECT_NE(m.find("output"), std::string::npos) << m;
    EXPECT_NE(m.find("strides (0, 196, 14, 1)"), std::string::npos) << m;
    EXPECT_NE(m.find("share memory"), std::string::npos) << m;
    const TensorView y_rows = TensorView::strided(fake(0x400000), dt, {2, 4, 14, 14}, {4 * 14 * 8, 14 * 8, 8, 1});
    m = message_of([&] { conv2d(x, w, b, y_rows, {}, relu); });
    EXPECT_NE(m.find("share memory"), std::string::npos) << m;
    // The overlap checks reach as far as a strided view does: a padded input whose last row reaches
    // into the output is refused, though its element count would end before it.
    const TensorView x_reaching =
        TensorView::strided(fake(0x400000 - 2 * 8 * 16 * 16 * dtype_size(dt)), dt, {2, 8, 16, 16}, {8 * 16 * 20, 16 * 20, 20, 1});
    m = message_of([&] { conv2d(x_reaching, w, b, y, {}, relu); });
    EXPECT_NE(m.find("output overlaps an input"), std::string::npos) << m;
  }
  EXPECT_EQ(conv2d_stats().launches, 0u);
  EXPECT_EQ(conv2d_stats().cache_lookups, 0u);
}

// A batch past a launch's grid limit is valid (conv2d runs it in slices): planned as any batch.
TEST_F(Conv2dDtypeArgs, BatchesPastTheGridLimitArePlannedAsAnyBatch) {
  const std::int64_t n = kMaxConv2dBatch + 1;
  const TensorView x = TensorView::contiguous(fake(0x10000000), DType::f16, {n, 8, 16, 16});
  const TensorView y = TensorView::contiguous(fake(0x400000000), DType::f16, {n, 4, 14, 14});
  EXPECT_TRUE(conv2d_variant_for(x, weight, bias, y, {}, epi) == conv2d_variant_for(input, weight, bias, output, {}, epi));
}

// F.conv2d's unbatched form: an input [Cin, H, W] and an output [Cout, OH, OW] (a residual too) are one
// image — the variant of the batched call — and a mix of 3-D and 4-D tensors is named.
TEST_F(Conv2dDtypeArgs, UnbatchedTensorsAreOneImage) {
  const TensorView x3 = TensorView::contiguous(fake(0x100000), DType::f16, {8, 16, 16});
  const TensorView y3 = TensorView::contiguous(fake(0x400000), DType::f16, {4, 14, 14});
  const TensorView r3 = TensorView::contiguous(fake(0x500000), DType::f16, {4, 14, 14});
  const TensorView x1 = TensorView::contiguous(fake(0x100000), DType::f16, {1, 8, 16, 16});
  const TensorView y1 = TensorView::contiguous(fake(0x400000), DType::f16, {1, 4, 14, 14});
  const TensorView r1 = TensorView::contiguous(fake(0x500000), DType::f16, {1, 4, 14, 14});
  EXPECT_TRUE(conv2d_variant_for(x3, weight, bias, y3, {}, epi) == conv2d_variant_for(x1, weight, bias, y1, {}, epi));
  EXPECT_TRUE(conv2d_variant_for(x3, weight, bias, y3, {}, epi, Conv2dPrecision::fp32, r3) ==
              conv2d_variant_for(x1, weight, bias, y1, {}, epi, Conv2dPrecision::fp32, r1));
  // Channels-last strides of one image ([H, W, C] in memory: strides [1, W*C, C]).
  const TensorView x3_cl = TensorView::strided(fake(0x100000), DType::f16, {8, 16, 16}, {1, 16 * 8, 8});
  EXPECT_EQ(conv2d_variant_for(x3_cl, weight, bias, y3, {}, epi).input_layout, Conv2dLayout::nhwc);
  std::string m = message_of([&] { conv2d(x3, weight, bias, output, {}, epi); });
  EXPECT_NE(m.find("unbatched input f16[8, 16, 16]"), std::string::npos) << m;
  EXPECT_NE(m.find("output f16[2, 4, 14, 14]"), std::string::npos) << m;
  m = message_of([&] { conv2d(x3, weight, bias, y3, {}, epi, nullptr, Conv2dPrecision::fp32, r1); });
  EXPECT_NE(m.find("residual f16[1, 4, 14, 14]"), std::string::npos) << m;
  m = message_of([&] { conv2d(input, weight, bias, y3, {}, epi); });
  EXPECT_NE(m.find("output must have 4 dimensions"), std::string::npos) << m;
  EXPECT_EQ(conv2d_stats().launches, 0u);
}

// A residual in the other layout than the output's is valid (PyTorch's conv(x) + r takes any): the
// call copies it into the output's layout first, so the variant is the one of a residual laid out as
// the output (the same name, the same kernel), and its alignment is the copy's.
TEST_F(Conv2dDtypeArgs, ResidualInTheOtherLayoutIsPlannedAsTheOutputs) {
  const Op relu = Op::relu();
  for (DType dt : {DType::f16, DType::f32}) {
    for (bool out_nhwc : {false, true}) {
      SCOPED_TRACE(std::string(cuinline::to_string(dt)) + (out_nhwc ? " NHWC output" : " NCHW output"));
      const TensorView x = TensorView::contiguous(fake(0x100000), dt, {2, 8, 16, 16});
      const TensorView w = TensorView::contiguous(fake(0x200000), dt, {4, 8, 3, 3});
      const TensorView b = TensorView::contiguous(fake(0x300000), dt, {4});
      const TensorView y = out_nhwc ? channels_last(fake(0x400000), dt, 2, 4, 14, 14)
                                    : TensorView::contiguous(fake(0x400000), dt, {2, 4, 14, 14});
      const TensorView same = out_nhwc ? channels_last(fake(0x500000), dt, 2, 4, 14, 14)
                                       : TensorView::contiguous(fake(0x500000), dt, {2, 4, 14, 14});
      // The other layout, 2 bytes past a 16-byte boundary: the copy is read, not it.
      const TensorView other = out_nhwc ? TensorView::contiguous(fake(0x600002), dt, {2, 4, 14, 14})
                                        : channels_last(fake(0x600002), dt, 2, 4, 14, 14);
      const Conv2dVariant a = conv2d_variant_for(x, w, b, y, {}, relu, Conv2dPrecision::fp32, same);
      const Conv2dVariant c = conv2d_variant_for(x, w, b, y, {}, relu, Conv2dPrecision::fp32, other);
      EXPECT_TRUE(c.has_residual);
      EXPECT_EQ(c.output_layout, out_nhwc ? Conv2dLayout::nhwc : Conv2dLayout::nchw);
      EXPECT_EQ(a.name(), c.name());
      EXPECT_TRUE(a == c);
    }
  }
  EXPECT_EQ(conv2d_stats().launches, 0u);
}

// F.conv2d's groups from the tensors: the weight has Cin / groups channels; a weight or groups that do
// not fit are refused before anything is compiled, naming the counts.
TEST_F(Conv2dDtypeArgs, GroupsComeFromTheParamsAndTheWeight) {
  Conv2dParams p;
  p.groups = 8;  // depthwise: 8 input channels, weight [8, 1, 3, 3]
  const TensorView wd = TensorView::contiguous(fake(0x200000), DType::f16, {8, 1, 3, 3});
  const TensorView bd = TensorView::contiguous(fake(0x300000), DType::f16, {8});
  const TensorView yd = TensorView::contiguous(fake(0x400000), DType::f16, {2, 8, 14, 14});
  const Conv2dVariant v = conv2d_variant_for(input, wd, bd, yd, p, epi);
  EXPECT_EQ(v.params.groups, 8);
  EXPECT_EQ(v.in_channels, 8);
  EXPECT_EQ(v.out_channels, 8);
  EXPECT_TRUE(conv2d_tiling(v).generic());
  std::string m = message_of([&] { conv2d_variant_for(input, weight, bias, output, p, epi); });
  EXPECT_NE(m.find("expects 8 x groups 8 = 64"), std::string::npos) << m;
  p.groups = 2;  // weight [4, 4, 3, 3]: fine; [3, 4, 3, 3]: 3 output channels in 2 groups
  const TensorView w2 = TensorView::contiguous(fake(0x200000), DType::f16, {4, 4, 3, 3});
  EXPECT_NO_THROW(conv2d_variant_for(input, w2, bias, output, p, epi));
  const TensorView w3 = TensorView::contiguous(fake(0x200000), DType::f16, {3, 4, 3, 3});
  const TensorView y3 = TensorView::contiguous(fake(0x400000), DType::f16, {2, 3, 14, 14});
  m = message_of([&] { conv2d_variant_for(input, w3, TensorView{}, y3, p, epi); });
  EXPECT_NE(m.find("not a multiple of groups 2"), std::string::npos) << m;
  p.groups = -1;
  m = message_of([&] { conv2d_variant_for(input, weight, bias, output, p, epi); });
  EXPECT_NE(m.find("groups must be positive"), std::string::npos) << m;
}

}  // namespace
