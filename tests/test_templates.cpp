// Host tests of the kernel templates: lookup (embedded, CUINLINE_TEMPLATE_DIR), rendering of exact
// constants, one variant per key, and an offline NVRTC compile of every variant for sm_90.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <cuinline/cache.hpp>
#include <cuinline/compiler.hpp>
#include <cuinline/error.hpp>
#include <cuinline/ops.hpp>
#include <fstream>
#include <limits>
#include <random>
#include <set>

#include "ops/elementwise/render.hpp"
#include "templates/template_source.hpp"
#include "test_support.hpp"

namespace {

using cuinline::DType;
using cuinline::ops::Op;
using cuinline::ops::Step;
using cuinline::ops::Variant;

// Parses a literal rendered by opmath_literal back (hex literals with strtod/strtof).
double parse_literal(const std::string& lit, DType dtype) {
  if (dtype == DType::f64) return std::strtod(lit.c_str(), nullptr);
  EXPECT_EQ(lit.back(), 'f') << lit;
  return std::strtof(lit.substr(0, lit.size() - 1).c_str(), nullptr);
}

template <class T, class U>
T bits_of(U v) {
  static_assert(sizeof(T) == sizeof(U));
  T t;
  std::memcpy(&t, &v, sizeof t);
  return t;
}

TEST(Templates, EmbeddedTemplatesArePresent) {
  const auto names = cuinline::detail::embedded_template_names();
  for (const char* name : {"ew_common.cuh", "ew_ops.cuh", "elementwise.cuh"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
    EXPECT_NE(cuinline::detail::template_text(name).find("#ifndef"), std::string::npos);
  }
  EXPECT_THROW(cuinline::detail::template_text("no_such.cuh"), cuinline::InvalidArgument);
}

TEST(Templates, FloatConstantsRoundTripBitExactly) {
  std::mt19937_64 rng(cuinline::test::fresh_seed());
  std::vector<float> values = {0.01f,
                               -0.0f,
                               0.0f,
                               1.0f,
                               -2.5f,
                               std::numeric_limits<float>::max(),
                               std::numeric_limits<float>::lowest(),
                               std::numeric_limits<float>::min(),
                               std::numeric_limits<float>::denorm_min(),
                               1.17549421e-38f /* subnormal */};
  for (int i = 0; i < 2000; ++i) {
    const auto bits = static_cast<std::uint32_t>(rng());
    const float f = bits_of<float>(bits);
    if (std::isfinite(f)) values.push_back(f);
  }
  for (float f : values) {
    const std::string lit = cuinline::detail::opmath_literal(f, DType::f32);
    EXPECT_EQ(lit.rfind("0x", 0) == 0 || lit.rfind("-0x", 0) == 0, true) << "not a hex literal: " << lit;
    EXPECT_EQ(lit.find_first_of("+-", 1), lit.find('p') + 1) << "decimal exponent: " << lit;
    const float back = static_cast<float>(parse_literal(lit, DType::f32));
    EXPECT_EQ(bits_of<std::uint32_t>(back), bits_of<std::uint32_t>(f)) << lit;
    // f16 / bf16 compute in float: the same literal.
    EXPECT_EQ(cuinline::detail::opmath_literal(f, DType::f16), lit);
    EXPECT_EQ(cuinline::detail::opmath_literal(f, DType::bf16), lit);
  }
  // A double constant is rounded to float (nearest) for the float opmath types, as PyTorch does.
  EXPECT_EQ(cuinline::detail::opmath_literal(0.01, DType::f32), "0x1.47ae14p-7f");
  EXPECT_EQ(cuinline::detail::opmath_literal(-0.0, DType::f32), "-0x0p+0f");
  EXPECT_EQ(cuinline::detail::opmath_literal(1e300, DType::f32), "__int_as_float(0x7f800000)");
  EXPECT_EQ(cuinline::detail::opmath_literal(-INFINITY, DType::f32), "__int_as_float(0xff800000)");
  EXPECT_EQ(cuinline::detail::opmath_literal(NAN, DType::f32).rfind("__int_as_float(0x7fc", 0), 0u);
}

TEST(Templates, DoubleConstantsRoundTripBitExactly) {
  std::mt19937_64 rng(cuinline::test::fresh_seed());
  std::vector<double> values = {0.01, -0.0, std::numeric_limits<double>::max(),
                                std::numeric_limits<double>::min(),
                                std::numeric_limits<double>::denorm_min()};
  for (int i = 0; i < 2000; ++i) {
    const double d = bits_of<double>(static_cast<std::uint64_t>(rng()));
    if (std::isfinite(d)) values.push_back(d);
  }
  for (double d : values) {
    const std::string lit = cuinline::detail::opmath_literal(d, DType::f64);
    EXPECT_EQ(bits_of<std::uint64_t>(parse_literal(lit, DType::f64)), bits_of<std::uint64_t>(d)) << lit;
  }
  EXPECT_EQ(cuinline::detail::opmath_literal(INFINITY, DType::f64),
            "__longlong_as_double(0x7ff0000000000000ll)");
}

TEST(Templates, FunctorRendersEveryStep) {
  const Op op = Op::chain({Step::add(1), Step::sub(0.5), Step::mul(3), Step::div(3), Step::relu(),
                           Step::leaky_relu(0.01), Step::clamp(-1, 6), Step::div_leaky_relu(2, 0.2)});
  const std::string f32 = cuinline::detail::render_op_functor(op, DType::f32, "E");
  EXPECT_NE(f32.find("struct E {"), std::string::npos);
  EXPECT_NE(f32.find("float operator()(float x) const"), std::string::npos);  // conv2d epilogue shape
  EXPECT_NE(f32.find("ew_add(x, 0x1p+0f)"), std::string::npos) << f32;
  EXPECT_NE(f32.find("ew_sub(x, 0x1p-1f)"), std::string::npos) << f32;
  EXPECT_NE(f32.find("ew_mul(x, 0x1.8p+1f)"), std::string::npos) << f32;
  // x / 3 is x * float(1.0 / 3.0), the reciprocal computed in double and rounded to float (PyTorch
  // 2.11's div by a scalar); x / 0.001 is x * 1000.0f (1.0f / 0.001f would be 999.99994f).
  const std::string third = cuinline::detail::opmath_literal(static_cast<float>(1.0 / 3.0), DType::f32);
  EXPECT_NE(f32.find("ew_mul(x, " + third + ")"), std::string::npos) << f32;
  // (f16 and bf16 hold 1000 exactly: there the step is the storage type's own product.)
  const std::string milli =
      cuinline::detail::render_op_functor(Op::chain({Step::div(0.001)}), DType::f32, "E");
  EXPECT_NE(milli.find("ew_mul(x, " + cuinline::detail::opmath_literal(1000.0, DType::f32) + ")"),
            std::string::npos)
      << milli;
  EXPECT_NE(cuinline::detail::render_op_functor(Op::chain({Step::div(0.001)}), DType::f16, "E")
                .find("ew_mul_exact(x, ew_half{0x63d0});"),
            std::string::npos);
  EXPECT_NE(cuinline::detail::render_op_functor(Op::chain({Step::div(0.001)}), DType::bf16, "E")
                .find("ew_mul_exact(x, ew_bf16{0x447a});"),
            std::string::npos);
  EXPECT_NE(f32.find("ew_relu(x)"), std::string::npos);
  EXPECT_NE(f32.find("ew_leaky_relu(x, 0x1.47ae14p-7f)"), std::string::npos);
  EXPECT_NE(f32.find("ew_clamp(x, -0x1p+0f, 0x1.8p+2f)"), std::string::npos);
  EXPECT_NE(f32.find("ew_mul(x, 0x1p-1f)"), std::string::npos);
  const std::string f64 = cuinline::detail::render_op_functor(op, DType::f64, "E");
  EXPECT_NE(f64.find("ew_mul(x, " + cuinline::detail::opmath_literal(1.0 / 3.0, DType::f64) + ")"),
            std::string::npos);
  EXPECT_NE(cuinline::detail::render_op_functor(op, DType::bf16, "E").find("ew_bf16 operator()(ew_bf16 x)"),
            std::string::npos);
  const std::string ex =
      cuinline::detail::render_op_functor(Op::expr("x > 0 ? x : x * s", {{"s", 0.01}}), DType::f16, "E");
  EXPECT_NE(ex.find("const T::op s = 0x1.47ae14p-7f;"), std::string::npos) << ex;
  EXPECT_NE(ex.find("(x > 0 ? x : x * s)"), std::string::npos) << ex;
}

// A 16-bit scalar add, sub or mul is the storage type's own instruction where that rounds as
// PyTorch's float computation (render.hpp's exact_16bit_constant): the constant a storage value,
// finite, and for a bf16 product no bit under 2^-16; every other step and dtype keeps the float form.
TEST(Templates, ExactSixteenBitConstants) {
  using cuinline::detail::LoweredFn;
  using cuinline::detail::LoweredStep;
  const auto step = [](LoweredFn fn, double c) {
    LoweredStep s;
    s.fn = fn;
    s.c[0] = c;
    return s;
  };
  const auto exact = [](const LoweredStep& s, DType dt) {
    return cuinline::detail::exact_16bit_constant(s, dt);
  };
  EXPECT_EQ(exact(step(LoweredFn::mul, 0.125), DType::bf16), std::optional<std::uint16_t>(0x3e00));
  EXPECT_EQ(exact(step(LoweredFn::mul, 0.125), DType::f16), std::optional<std::uint16_t>(0x3000));
  EXPECT_EQ(exact(step(LoweredFn::add, -1.5), DType::bf16), std::optional<std::uint16_t>(0xbfc0));
  EXPECT_EQ(exact(step(LoweredFn::sub, 65504), DType::f16), std::optional<std::uint16_t>(0x7bff));
  EXPECT_EQ(exact(step(LoweredFn::add, -0.0), DType::f16), std::optional<std::uint16_t>(0x8000));
  EXPECT_EQ(exact(step(LoweredFn::mul, 0x1p-16), DType::bf16), std::optional<std::uint16_t>(0x3780));
  EXPECT_EQ(exact(step(LoweredFn::mul, 0x1p-24), DType::f16),
            std::optional<std::uint16_t>(0x0001));                  // subnormal
  EXPECT_FALSE(exact(step(LoweredFn::mul, 0x1p-17), DType::bf16));  // a bf16 product: a bit under 2^-16
  EXPECT_FALSE(exact(step(LoweredFn::mul, 0x1.02p-10), DType::bf16));
  EXPECT_TRUE(exact(step(LoweredFn::add, 0x1p-17), DType::bf16));  // a sum is exact in float anyway
  EXPECT_FALSE(exact(step(LoweredFn::mul, 0.1), DType::bf16));     // not a storage value
  EXPECT_FALSE(exact(step(LoweredFn::mul, 0.1), DType::f16));
  EXPECT_FALSE(exact(step(LoweredFn::add, 1e-10), DType::f16));  // under f16's subnormals
  EXPECT_FALSE(exact(step(LoweredFn::mul, 1e6), DType::f16));    // past f16's range
  EXPECT_FALSE(exact(step(LoweredFn::mul, INFINITY), DType::bf16));
  EXPECT_FALSE(exact(step(LoweredFn::add, NAN), DType::f16));
  EXPECT_FALSE(exact(step(LoweredFn::mul, 0.125), DType::f32));
  EXPECT_FALSE(exact(step(LoweredFn::mul, 0.125), DType::f64));
  EXPECT_FALSE(exact(step(LoweredFn::leaky_relu, 0.125), DType::bf16));
  // Rendered: the exact steps as ew_*_exact on storage literals, the others as before.
  const Op op = Op::chain({Step::mul(0.125), Step::add(0.1), Step::sub(2), Step::div(4)});
  const std::string bf16 = cuinline::detail::render_op_functor(op, DType::bf16, "E");
  EXPECT_NE(bf16.find("x = ew_mul_exact(x, ew_bf16{0x3e00});"), std::string::npos) << bf16;
  EXPECT_NE(bf16.find("x = ew_add(x, 0x1.99999ap-4f);"), std::string::npos) << bf16;
  EXPECT_NE(bf16.find("x = ew_sub_exact(x, ew_bf16{0x4000});"), std::string::npos) << bf16;
  EXPECT_NE(bf16.find("x = ew_mul_exact(x, ew_bf16{0x3e80});"), std::string::npos) << bf16;
  EXPECT_EQ(cuinline::detail::render_op_functor(op, DType::f32, "E").find("_exact"), std::string::npos);
  // Scalar arithmetic (the reductions' light prologues): add, sub, mul and div steps, exact or not;
  // not div_leaky_relu (two steps, one an activation), a tensor step, an expression or no step.
  EXPECT_TRUE(cuinline::detail::chain_is_scalar_arithmetic(op));
  EXPECT_FALSE(cuinline::detail::chain_is_scalar_arithmetic(Op::chain({Step::mul(0.125), Step::relu()})));
  EXPECT_FALSE(cuinline::detail::chain_is_scalar_arithmetic(Op::chain({Step::div_leaky_relu(2, 0.2)})));
  EXPECT_FALSE(cuinline::detail::chain_is_scalar_arithmetic(cuinline::ops::parse_op("mul(in1)")));
  EXPECT_FALSE(cuinline::detail::chain_is_scalar_arithmetic(Op::expr("x * 2", {})));
  EXPECT_FALSE(cuinline::detail::chain_is_scalar_arithmetic(Op{}));
}

TEST(Templates, OneVariantPerKey) {
  const auto arch = cuinline::Arch::parse("sm_90");
  std::set<std::string> keys;
  std::size_t count = 0;
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
    for (const Op& op :
         {Op::relu(), Op::leaky_relu(0.01), Op::leaky_relu(0.02), Op::div_leaky_relu(2, 0.01)}) {
      for (const Variant& v : cuinline::ops::enumerate_variants(op, dt, {true, true, true})) {
        const auto request = cuinline::ops::make_request(v);
        EXPECT_EQ(cuinline::make_cache_key(request, arch),
                  cuinline::make_cache_key(cuinline::ops::make_request(v), arch));
        keys.insert(cuinline::make_cache_key(request, arch).hex());
        ++count;
      }
    }
  }
  EXPECT_EQ(keys.size(), count);  // every variant its own entry
  // Constants that are the same float give the same program: one entry.
  const Variant a{Op::leaky_relu(0.01), DType::f32, 4, cuinline::ops::IndexWidth::i32,
                  cuinline::ops::Layout::contiguous};
  Variant b = a;
  b.op = Op::leaky_relu(static_cast<double>(0.01f));
  EXPECT_NE(a, b);
  EXPECT_EQ(cuinline::make_cache_key(cuinline::ops::make_request(a), arch),
            cuinline::make_cache_key(cuinline::ops::make_request(b), arch));
  // ...but not for f64, where they differ.
  Variant a64 = a, b64 = b;
  a64.dtype = b64.dtype = DType::f64;
  a64.vector_width = b64.vector_width = 2;
  EXPECT_NE(cuinline::make_cache_key(cuinline::ops::make_request(a64), arch),
            cuinline::make_cache_key(cuinline::ops::make_request(b64), arch));
}

TEST(Templates, EnumeratesVariantsForWarm) {
  using cuinline::ops::enumerate_variants;
  EXPECT_EQ(enumerate_variants(Op::relu(), DType::f32).size(), 3u);  // v1, v2, v4
  EXPECT_EQ(enumerate_variants(Op::relu(), DType::f16).size(), 4u);  // v1 ... v8
  EXPECT_EQ(enumerate_variants(Op::relu(), DType::f64).size(), 2u);
  EXPECT_EQ(enumerate_variants(Op::relu(), DType::bf16, {true, true, true}).size(), 9u);
  EXPECT_EQ(enumerate_variants(Op::relu(), DType::f32, {false, true, false}).front().name(),
            "relu<f32,v1,i64>");
  EXPECT_EQ(enumerate_variants(Op::relu(), DType::f32, {false, false, true}).front().name(),
            "relu<f32,strided>");
  EXPECT_EQ(cuinline::ops::vector_widths(DType::f16), (std::vector<int>{1, 2, 4, 8}));
}

TEST(Templates, TemplateDirOverridesEmbedded) {
  cuinline::test::TempDir dir("tpl");
  std::string text = cuinline::detail::template_text("elementwise.cuh");
  const Variant v{Op::relu(), DType::f32, 4, cuinline::ops::IndexWidth::i32,
                  cuinline::ops::Layout::contiguous};
  const auto arch = cuinline::Arch::parse("sm_90");
  const auto key_before = cuinline::make_cache_key(cuinline::ops::make_request(v), arch);
  {
    std::ofstream f(dir.path() / "elementwise.cuh");
    f << text << "\n// edited\n";
  }
  ASSERT_EQ(setenv("CUINLINE_TEMPLATE_DIR", dir.path().c_str(), 1), 0);
  const std::string edited = cuinline::detail::template_text("elementwise.cuh");
  const auto key_after = cuinline::make_cache_key(cuinline::ops::make_request(v), arch);
  // Files not in the directory still come from the embedded copies.
  const std::string common = cuinline::detail::template_text("ew_common.cuh");
  unsetenv("CUINLINE_TEMPLATE_DIR");
  EXPECT_NE(edited.find("// edited"), std::string::npos);
  EXPECT_NE(key_before, key_after);  // an edited template is a different entry
  EXPECT_NE(common.find("ew_traits"), std::string::npos);
  EXPECT_EQ(cuinline::make_cache_key(cuinline::ops::make_request(v), arch), key_before);
}

// Every variant of every op kind compiles for sm_90 (no GPU needed), and quickly.
TEST(Templates, EveryVariantCompilesForSm90) {
  const auto arch = cuinline::Arch::parse("sm_90");
  const std::vector<Op> ops = {Op::relu(), Op::leaky_relu(0.01), Op::div_leaky_relu(2, 0.01),
                               Op::chain({Step::add(1), Step::sub(0.5), Step::mul(3), Step::div(3),
                                          Step::relu(), Step::leaky_relu(0.1), Step::clamp(-1, 6)}),
                               Op::expr("x > 0 ? x : x * s", {{"s", 0.01}})};
  double slowest_ms = 0, total_ms = 0;
  int compiled = 0;
  for (const Op& op : ops) {
    for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
      for (const Variant& v : cuinline::ops::enumerate_variants(op, dt, {true, true, true})) {
        const auto request = cuinline::ops::make_request(v);
        const auto t0 = std::chrono::steady_clock::now();
        cuinline::CompiledProgram program;
        ASSERT_NO_THROW(program = cuinline::compile(request, arch)) << v.name();
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        slowest_ms = std::max(slowest_ms, ms);
        total_ms += ms;
        ++compiled;
        EXPECT_EQ(program.kind, cuinline::BinaryKind::cubin);
        EXPECT_TRUE(program.lowered_name(cuinline::ops::kernel_name(v)).has_value()) << v.name();
        EXPECT_TRUE(program.log.empty() || program.log.find("warning") == std::string::npos)
            << v.name() << ": " << program.log;
      }
    }
  }
  std::printf("compiled %d variants for sm_90: mean %.1f ms, slowest %.1f ms\n", compiled,
              total_ms / compiled, slowest_ms);
}

TEST(Templates, BadExpressionIsACompileError) {
  const Variant v{Op::expr("x +* s", {{"s", 1.0}}), DType::f32, 1, cuinline::ops::IndexWidth::i32,
                  cuinline::ops::Layout::contiguous};
  EXPECT_THROW(cuinline::compile(cuinline::ops::make_request(v), cuinline::Arch::parse("sm_90")),
               cuinline::CompileError);
}

}  // namespace
