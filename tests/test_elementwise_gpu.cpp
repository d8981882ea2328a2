// GPU tests of the elementwise ops: every op x dtype x vector width x odd sizes x pointer offsets,
// in place, strided, poisoned outputs (nothing written outside the tensor), exact comparison with
// the CPU reference, the kernel map's counters, and a 2^31 + 3 element float32 tensor.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <cuinline/driver.hpp>
#include <cuinline/jit.hpp>
#include <cuinline/kernel_cache.hpp>
#include <cuinline/module.hpp>
#include <cuinline/ops.hpp>
#include <random>
#include <set>

#include "elementwise_reference.hpp"
#include "ops/elementwise/plan.hpp"
#include "test_support.hpp"

namespace {

using cuinline::DType;
using cuinline::TensorView;
using cuinline::ops::Op;
using cuinline::ops::Step;

constexpr std::uint32_t kPoison = 0x5a5a5a5au;

#define SKIP_WITHOUT_GPU() \
  if (cuinline::device_count() == 0) GTEST_SKIP() << "no CUDA device"

std::uint64_t get_bits(const std::vector<unsigned char>& buf, DType dt, std::int64_t i) {
  std::uint64_t b = 0;
  std::memcpy(&b, buf.data() + i * cuinline::dtype_size(dt), cuinline::dtype_size(dt));
  return b;
}
void set_bits(std::vector<unsigned char>& buf, DType dt, std::int64_t i, std::uint64_t b) {
  std::memcpy(buf.data() + i * cuinline::dtype_size(dt), &b, cuinline::dtype_size(dt));
}

// Special values of each dtype: NaN, ±Inf, ±0, smallest subnormals, largest finite, ±1.
std::vector<std::uint64_t> specials(DType dt) {
  switch (dt) {
    case DType::f32:
      return {0x7fc00000, 0xffc00001, 0x7f800000, 0xff800000, 0x80000000, 0,         1,
              0x80000001, 0x007fffff, 0x7f7fffff, 0xff7fffff, 0x3f800000, 0xbf800000};
    case DType::f16:
      return {0x7e00, 0xfe01, 0x7c00, 0xfc00, 0x8000, 0, 1, 0x8001, 0x03ff, 0x7bff, 0xfbff, 0x3c00, 0xbc00};
    case DType::bf16:
      return {0x7fc0, 0xffc1, 0x7f80, 0xff80, 0x8000, 0, 1, 0x8001, 0x007f, 0x7f7f, 0xff7f, 0x3f80, 0xbf80};
    case DType::f64:
      return {0x7ff8000000000000,
              0xfff8000000000001,
              0x7ff0000000000000,
              0xfff0000000000000,
              0x8000000000000000,
              0,
              1,
              0x8000000000000001,
              0x000fffffffffffff,
              0x7fefffffffffffff,
              0xffefffffffffffff,
              0x3ff0000000000000,
              0xbff0000000000000};
  }
  return {};
}

// Fresh random values in [-8, 8) rounded to the dtype, with special values sprinkled in.
std::vector<unsigned char> random_input(DType dt, std::int64_t n, std::mt19937_64& rng) {
  std::vector<unsigned char> buf(static_cast<std::size_t>(n) * cuinline::dtype_size(dt));
  std::uniform_real_distribution<double> dist(-8.0, 8.0);
  const auto sp = specials(dt);
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint64_t b;
    if (rng() % 11 == 0) {
      b = sp[rng() % sp.size()];
    } else if (dt == DType::f64) {
      const double d = dist(rng);
      std::memcpy(&b, &d, 8);
    } else {
      b = cuinline::test::from_op(dt, static_cast<float>(dist(rng)));
    }
    set_bits(buf, dt, i, b);
  }
  return buf;
}

bool has_zero_sign_freedom(const Op& op) {
  for (const Step& s : op.steps) {
    if (s.kind == cuinline::ops::StepKind::relu || s.kind == cuinline::ops::StepKind::clamp) return true;
  }
  return false;
}

struct Case {
  const char* name;
  Op op;
  Op reference;  // a chain with the same semantics (for expressions)
};

std::vector<Case> cases() {
  const Op chain = Op::chain({Step::add(0.5), Step::sub(0.25), Step::mul(3), Step::div(3), Step::relu(),
                              Step::sub(1), Step::leaky_relu(0.1), Step::clamp(-0.05, 6)});
  return {
      {"relu", Op::relu(), Op::relu()},
      {"leaky_relu", Op::leaky_relu(0.01), Op::leaky_relu(0.01)},
      {"div_leaky_relu", Op::div_leaky_relu(2, 0.01), Op::div_leaky_relu(2, 0.01)},
      {"div3_leaky_relu", Op::div_leaky_relu(3, 0.2), Op::div_leaky_relu(3, 0.2)},
      {"chain", chain, chain},
      {"expression", Op::expr("x > 0 ? x : x * s", {{"s", 0.01}}), Op::leaky_relu(0.01)},
  };
}

class ElementwiseGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    cuinline::set_device(0);
  }
};

TEST_F(ElementwiseGpu, EveryOpDtypeWidthSizeAndOffset) {
  std::mt19937_64 rng(cuinline::test::fresh_seed());
  // The last size is 1.5 waves of the float32 kernel's blocks on this GPU (16 bytes per thread,
  // 256 threads, 8 blocks per SM), so float32 takes the two-vectors-per-thread path (reps = 2);
  // (1 << 20) + 5 does for f64 on 132-SM GPUs. f16/bf16 run the same template code.
  const std::int64_t wave_f32 = std::int64_t{cuinline::device_info(0).multiprocessors} * 8 * 256 * 4;
  const std::vector<std::int64_t> sizes = {
      1, 2, 3, 5, 7, 8, 9, 15, 17, 31, 33, 255, 1000, 4099, 65543, (1 << 20) + 5, wave_f32 * 3 / 2 + 3};
  const std::int64_t in_offsets[] = {0, 1, 2, 3};
  const std::int64_t out_offsets[] = {0, 1, 3, 4};
  const std::int64_t cap = sizes.back() + 8;
  cuinline::Stream stream;
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
    const std::size_t es = cuinline::dtype_size(dt);
    const std::size_t bytes = (static_cast<std::size_t>(cap) * es + 3) / 4 * 4;
    cuinline::DeviceBuffer in(bytes), out(bytes);
    for (const Case& c : cases()) {
      SCOPED_TRACE(std::string(c.name) + " " + cuinline::to_string(dt));
      auto host_in = random_input(dt, cap, rng);
      host_in.resize(bytes);
      in.copy_from_host(host_in.data(), bytes);
      std::set<int> widths;
      std::vector<unsigned char> got(bytes);
      std::uint64_t poison = 0;
      std::memset(&poison, 0x5a, es);
      for (std::int64_t n : sizes) {
        for (std::int64_t io : in_offsets) {
          for (std::int64_t oo : out_offsets) {
            if (n > 100000 && (io + oo) % 2 == 1) continue;  // keep the run short
            out.fill_u32(kPoison);
            const auto vin = TensorView::contiguous(in.as<unsigned char>() + io * es, dt, {n});
            const auto vout = TensorView::contiguous(out.as<unsigned char>() + oo * es, dt, {n});
            widths.insert(cuinline::ops::plan(c.op, vin, vout).variant.vector_width);
            cuinline::ops::apply(c.op, vin, vout, stream);
            stream.synchronize();
            // Everything up to 64 elements past the end: an out-of-bounds write lands there.
            const std::int64_t window = std::min<std::int64_t>(cap, oo + n + 64);
            out.copy_to_host(got.data(), static_cast<std::size_t>(window) * es);
            std::int64_t bad = 0;
            for (std::int64_t i = 0; i < window; ++i) {
              const std::uint64_t g = get_bits(got, dt, i);
              if (i < oo || i >= oo + n) {
                if (g != poison && bad++ < 3)
                  ADD_FAILURE() << "n=" << n << " out+" << oo << ": wrote element " << i;
                continue;
              }
              const std::uint64_t x = get_bits(host_in, dt, i - oo + io);
              const std::uint64_t want = cuinline::test::reference(c.reference, dt, x);
              if (!cuinline::test::same_result(dt, g, want, has_zero_sign_freedom(c.reference)) &&
                  bad++ < 3) {
                ADD_FAILURE() << "n=" << n << " in+" << io << " out+" << oo << " element " << i - oo
                              << ": input 0x" << std::hex << x << " got 0x" << g << " want 0x" << want
                              << std::dec;
              }
            }
            ASSERT_EQ(bad, 0);
          }
        }
      }
      const auto all = cuinline::ops::vector_widths(dt);
      EXPECT_EQ(widths, std::set<int>(all.begin(), all.end()));
    }
  }
}

TEST_F(ElementwiseGpu, InPlaceAndStrided) {
  std::mt19937_64 rng(cuinline::test::fresh_seed());
  cuinline::Stream stream;
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
    SCOPED_TRACE(cuinline::to_string(dt));
    const std::size_t es = cuinline::dtype_size(dt);
    const std::int64_t rows = 37, cols = 61, pitch = 70, n = rows * pitch;
    const std::size_t bytes = (static_cast<std::size_t>(n) * es + 3) / 4 * 4;
    auto host = random_input(dt, n, rng);
    host.resize(bytes);
    cuinline::DeviceBuffer a(bytes), b(bytes);
    const Op op = Op::div_leaky_relu(2, 0.01);
    // In place on the whole buffer, offset by one element.
    a.copy_from_host(host.data(), bytes);
    const auto va = TensorView::contiguous(a.as<unsigned char>() + es, dt, {n - 1});
    cuinline::ops::apply(op, va, va, stream);
    stream.synchronize();
    std::vector<unsigned char> got(bytes);
    a.copy_to_host(got.data(), bytes);
    EXPECT_EQ(get_bits(got, dt, 0), get_bits(host, dt, 0));
    for (std::int64_t i = 1; i < n; ++i) {
      ASSERT_TRUE(cuinline::test::same_result(
          dt, get_bits(got, dt, i), cuinline::test::reference(op, dt, get_bits(host, dt, i)), false))
          << "in place, element " << i;
    }
    // Strided: a [rows, cols] window of a pitched input, written transposed into a contiguous output.
    a.copy_from_host(host.data(), bytes);
    b.fill_u32(kPoison);
    const auto vin = TensorView::strided(a.as<void>(), dt, {cols, rows}, {1, pitch});
    const auto vout = TensorView::contiguous(b.as<void>(), dt, {cols, rows});
    EXPECT_EQ(cuinline::ops::plan(op, vin, vout).variant.layout, cuinline::ops::Layout::strided);
    cuinline::ops::apply(op, vin, vout, stream);
    stream.synchronize();
    b.copy_to_host(got.data(), bytes);
    for (std::int64_t c = 0; c < cols; ++c) {
      for (std::int64_t r = 0; r < rows; ++r) {
        const auto want = cuinline::test::reference(op, dt, get_bits(host, dt, r * pitch + c));
        ASSERT_TRUE(cuinline::test::same_result(dt, get_bits(got, dt, c * rows + r), want, false))
            << "strided element (" << c << ", " << r << ")";
      }
    }
  }
}

TEST_F(ElementwiseGpu, ZeroElementsLaunchNothingAndAskingAgainIsAMapHit) {
  // The first call waits for its kernel (the async policy would run the generic kernel meanwhile:
  // tests/test_jit_gpu.cpp), so it is the one cache lookup counted below.
  cuinline::ScopedJitPolicy sync(cuinline::JitPolicy::sync);
  cuinline::DeviceBuffer in(4096), out(4096);
  const auto vin = TensorView::contiguous(in.as<void>(), DType::f32, {1000});
  const auto vout = TensorView::contiguous(out.as<void>(), DType::f32, {1000});
  const auto before = cuinline::ops::stats();
  cuinline::ops::relu(TensorView::contiguous(nullptr, DType::f32, {0}),
                      TensorView::contiguous(nullptr, DType::f32, {0}));
  EXPECT_EQ(cuinline::ops::stats().launches, before.launches);
  cuinline::ops::leaky_relu(vin, vout, 0.125);  // first: a cache lookup
  const auto first = cuinline::ops::stats();
  EXPECT_EQ(first.cache_lookups, before.cache_lookups + 1);
  const auto cache_before = cuinline::default_cache().stats();
  for (int i = 0; i < 10; ++i) cuinline::ops::leaky_relu(vin, vout, 0.125);
  const auto again = cuinline::ops::stats();
  EXPECT_EQ(again.cache_lookups, first.cache_lookups);
  EXPECT_EQ(again.map_hits, first.map_hits + 10);
  EXPECT_EQ(again.launches, first.launches + 10);
  EXPECT_EQ(cuinline::default_cache().stats().compiles, cache_before.compiles);
  // Without the map, the same variant is one memory hit of the KernelCache, no compile.
  cuinline::ops::clear_kernel_map();
  cuinline::ops::leaky_relu(vin, vout, 0.125);
  const auto cache_after = cuinline::default_cache().stats();
  EXPECT_EQ(cache_after.memory_hits, cache_before.memory_hits + 1);
  EXPECT_EQ(cache_after.compiles, cache_before.compiles);
}

// 2^31 + 3 float32 elements (8.6 GB in, 8.6 GB out): the 64-bit index variant.
TEST_F(ElementwiseGpu, MoreThan2To31Elements) {
  const std::int64_t n = (std::int64_t{1} << 31) + 3;
  const std::size_t bytes = static_cast<std::size_t>(n) * 4;
  if (cuinline::device_info(0).total_memory < 2 * bytes + (std::size_t{4} << 30)) {
    GTEST_SKIP() << "needs " << (2 * bytes >> 30) + 4 << " GiB of device memory";
  }
  std::mt19937_64 rng(cuinline::test::fresh_seed());
  const std::int64_t period = (1 << 22) + 1;  // not a multiple of any vector width
  auto pattern = random_input(DType::f32, period, rng);
  const Op op = Op::leaky_relu(0.01);
  std::vector<unsigned char> want(pattern.size());
  for (std::int64_t i = 0; i < period; ++i) {
    set_bits(want, DType::f32, i,
             cuinline::test::reference(op, DType::f32, get_bits(pattern, DType::f32, i)));
  }
  cuinline::DeviceBuffer in(bytes), out(bytes);
  for (std::int64_t at = 0; at < n; at += period) {
    const std::int64_t count = std::min(period, n - at);
    in.copy_from_host(pattern.data(), static_cast<std::size_t>(count) * 4, static_cast<std::size_t>(at) * 4);
  }
  out.fill_u32(kPoison);
  const auto vin = TensorView::contiguous(in.as<void>(), DType::f32, {n});
  const auto vout = TensorView::contiguous(out.as<void>(), DType::f32, {n});
  ASSERT_EQ(cuinline::ops::plan(op, vin, vout).variant.index, cuinline::ops::IndexWidth::i64);
  cuinline::Stream stream;
  cuinline::ops::apply(op, vin, vout, stream);
  stream.synchronize();
  // The first period element by element; every later one must be byte-identical to it (the input
  // repeats), which also covers the last 3 elements past 2^31.
  std::vector<unsigned char> first(pattern.size()), got(pattern.size());
  out.copy_to_host(first.data(), first.size());
  for (std::int64_t i = 0; i < period; ++i) {
    ASSERT_TRUE(cuinline::test::same_result(DType::f32, get_bits(first, DType::f32, i),
                                            get_bits(want, DType::f32, i), false))
        << "element " << i;
  }
  for (std::int64_t at = period; at < n; at += period) {
    const std::int64_t count = std::min(period, n - at);
    out.copy_to_host(got.data(), static_cast<std::size_t>(count) * 4, static_cast<std::size_t>(at) * 4);
    ASSERT_EQ(std::memcmp(got.data(), first.data(), static_cast<std::size_t>(count) * 4), 0)
        << "elements " << at << " ... " << at + count - 1 << " of " << n;
  }
}

}  // namespace
