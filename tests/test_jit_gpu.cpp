// GPU tests of the JIT policies (include/cuinline/jit.hpp) through ops::apply, as an application
// calls them: the generic elementwise kernel against the specialized one bit for bit (every step,
// every dtype, one to three inputs with broadcast patterns, vector and single-element paths, special
// values), the async policy serving a never-seen chain at once and swapping the specialized kernel
// in, a graph captured while a specialization is pending, a background compile that fails, and the
// policies switched per thread.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuinline/cuinline.hpp>
#include <cuinline/ops.hpp>
#include <fstream>
#include <random>

#include "elementwise_reference.hpp"
#include "ops/elementwise/plan.hpp"
#include "ops/elementwise/table.hpp"
#include "test_support.hpp"

namespace cuinline {
namespace {

using ops::Op;

class JitGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (device_count() == 0) GTEST_SKIP() << "no GPU: " << driver_unavailable_reason();
    if (!generic_kernels_built()) GTEST_SKIP() << "built without the generic kernels";
    set_device(0);
    seed_ = test::fresh_seed();
    rng_.seed(seed_);
  }
  std::uint64_t seed_ = 0;
  std::mt19937_64 rng_;
};

std::uint64_t bits_of(DType dt, double v) {
  return test::bits_of(dt, v);
}

// Random values in [lo, hi] with special values mixed in (NaN, ±Inf, ±0, subnormals, ±1, 20).
std::vector<unsigned char> random_bytes(DType dt, std::size_t n, std::mt19937_64& rng, double lo, double hi) {
  const std::size_t es = dtype_size(dt);
  std::vector<unsigned char> buf(n * es);
  std::uniform_real_distribution<double> dist(lo, hi);
  const double specials[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1.0, -1.0, 20.0, 3.0, -3.0, 1e-40, -1e-310};
  for (std::size_t i = 0; i < n; ++i) {
    const double v = rng() % 16 == 0 ? specials[rng() % (sizeof specials / sizeof specials[0])] : dist(rng);
    std::uint64_t b = bits_of(dt, v);
    if (rng() % 64 == 0) b = 1;  // the smallest subnormal
    std::memcpy(buf.data() + i * es, &b, es);
  }
  return buf;
}

bool is_nan(DType dt, std::uint64_t b) {
  return std::isnan(test::value_of(dt, b));
}

// The element's bits in `buf`.
std::uint64_t at(const std::vector<unsigned char>& buf, DType dt, std::size_t i) {
  std::uint64_t b = 0;
  std::memcpy(&b, buf.data() + i * dtype_size(dt), dtype_size(dt));
  return b;
}

struct Case {
  const char* op;
  int inputs;  // 1..3: in1 and in2 broadcast as a row and a scalar where `broadcast`
  double lo, hi;
};

const Case kCases[] = {
    {"add(1.5)|sub(0.25)|mul(3)|div(7)", 1, -4, 4},
    {"relu|leaky_relu(0.02)|clamp(-1, 2)", 1, -4, 4},
    {"div(0.001)|leaky_relu", 1, -4, 4},
    {"sigmoid", 1, -12, 12},
    {"tanh", 1, -6, 6},
    {"silu", 1, -12, 12},
    {"gelu", 1, -8, 8},
    {"gelu_tanh", 1, -8, 8},
    {"mish", 1, -12, 12},
    {"softplus|softplus(2, 5)", 1, -30, 30},
    {"elu|elu(0.3)|selu|celu(1.7)", 1, -8, 8},
    {"hardswish|hardsigmoid|hardtanh|relu6", 1, -6, 6},
    {"exp|log|sqrt|abs|neg", 1, -2, 10},
    {"softsign|tanhshrink|logsigmoid", 1, -30, 30},
    {"hardshrink|softshrink(0.3)|threshold(0.1, 20)", 1, -2, 2},
    {"mul(0.5)|gelu|mul(2)|sigmoid|mul(3)", 1, -6, 6},
    {"add(in1)|gelu", 2, -6, 6},
    {"sub(in1)|mul(in2)|div(in1)", 3, -4, 4},
    {"mul(in1)|add(in2)|where(in1, in2)|where(in2, 0.5)|silu", 3, -4, 4},
};

// Waits for the work on the null stream.
void check_driver_sync() {
  Event done;
  done.record(nullptr);
  done.synchronize();
}

// Runs `op` over fresh inputs under `policy`; returns the output's bytes (poisoned first).
std::vector<unsigned char> run(const Op& op, DType dt, const std::vector<std::vector<unsigned char>>& host,
                               const std::vector<std::vector<std::int64_t>>& shapes, std::int64_t rows,
                               std::int64_t cols, std::size_t offset, JitPolicy policy) {
  const std::size_t es = dtype_size(dt);
  std::vector<DeviceBuffer> bufs;
  std::vector<TensorView> inputs;
  for (std::size_t k = 0; k < host.size(); ++k) {
    bufs.emplace_back(host[k].size() + 64);
    bufs.back().copy_from_host(host[k].data(), host[k].size(), k == 0 ? offset * es : 0);
    TensorView v;
    v.data = reinterpret_cast<char*>(bufs.back().ptr()) + (k == 0 ? offset * es : 0);
    v.dtype = dt;
    v.ndim = static_cast<int>(shapes[k].size());
    std::int64_t stride = 1;
    for (int d = v.ndim - 1; d >= 0; --d) {
      v.shape[static_cast<std::size_t>(d)] = shapes[k][static_cast<std::size_t>(d)];
      v.strides[static_cast<std::size_t>(d)] = stride;
      stride *= shapes[k][static_cast<std::size_t>(d)];
    }
    inputs.push_back(v);
  }
  const std::size_t n = static_cast<std::size_t>(rows * cols);
  DeviceBuffer out_buf(n * es + 64);
  std::vector<unsigned char> poison(n * es + 64, 0xA5);
  out_buf.copy_from_host(poison.data(), poison.size());
  TensorView out =
      TensorView::contiguous(reinterpret_cast<char*>(out_buf.ptr()) + offset * es, dt, {rows, cols});
  {
    ScopedJitPolicy guard(policy);
    ops::apply(op, ops::TensorList(inputs), ops::TensorList(&out, 1), nullptr);
  }
  check_driver_sync();
  std::vector<unsigned char> result(n * es);
  out_buf.copy_to_host(result.data(), result.size(), offset * es);
  return result;
}

TEST_F(JitGpu, GenericEqualsSpecializedBitForBit) {
  // Sizes with a scalar head and tail; offset 1 misaligns every 16-byte vector (single-element path).
  const std::pair<std::int64_t, std::int64_t> sizes[] = {{37, 1031}, {4, 8}, {1, 1}};
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
    for (const Case& c : kCases) {
      const Op op = ops::parse_op(c.op);
      for (const auto& [rows, cols] : sizes) {
        for (std::size_t offset : {std::size_t{0}, std::size_t{1}}) {
          std::vector<std::vector<std::int64_t>> shapes = {{rows, cols}};
          std::vector<std::vector<unsigned char>> host = {
              random_bytes(dt, static_cast<std::size_t>(rows * cols), rng_, c.lo, c.hi)};
          if (c.inputs >= 2) {  // a row, broadcast over the rows
            shapes.push_back({1, cols});
            host.push_back(random_bytes(dt, static_cast<std::size_t>(cols), rng_, c.lo, c.hi));
          }
          if (c.inputs >= 3) {  // a whole tensor
            shapes.push_back({rows, cols});
            host.push_back(random_bytes(dt, static_cast<std::size_t>(rows * cols), rng_, c.lo, c.hi));
          }
          const auto generic = run(op, dt, host, shapes, rows, cols, offset, JitPolicy::generic);
          const auto specialized = run(op, dt, host, shapes, rows, cols, offset, JitPolicy::sync);
          std::size_t bad = 0;
          for (std::size_t i = 0; i < static_cast<std::size_t>(rows * cols); ++i) {
            const std::uint64_t g = at(generic, dt, i), s = at(specialized, dt, i);
            if (g == s || (is_nan(dt, g) && is_nan(dt, s))) continue;
            if (++bad <= 3) {
              ADD_FAILURE() << c.op << " " << to_string(dt) << " [" << rows << ", " << cols << "] offset "
                            << offset << " element " << i << ": generic 0x" << std::hex << g
                            << ", specialized 0x" << s << std::dec << " (seed " << seed_ << ")";
            }
          }
          EXPECT_EQ(bad, 0u) << c.op << " " << to_string(dt);
        }
      }
    }
  }
}

// The 16-bit scalar steps whose constants f16 / bf16 hold exactly run as the storage type's own
// instruction in the specialized kernel (ew_ops.cuh's ew_*_exact) and in float in the generic one:
// the same bits on every one of the 65536 values, for products and sums at the bounds of the rule
// (render.hpp's exact_16bit_constant: a bf16 product's constant has no bit under 2^-16).
TEST_F(JitGpu, ExactSixteenBitStepsEqualTheGenericKernelOnEveryValue) {
  const char* chains[] = {
      "mul(0.125)",          "mul(-3)",     "mul(0.0000152587890625)", "mul(1.0078125)", "div(0.001)",
      "add(1.5)|sub(-0.25)", "add(-65504)", "sub(0.0000152587890625)", "mul(65504)"};
  const std::int64_t rows = 256, cols = 256;  // every bit pattern once
  for (DType dt : {DType::f16, DType::bf16}) {
    std::vector<unsigned char> all(static_cast<std::size_t>(rows * cols) * 2);
    for (std::uint32_t b = 0; b < 65536; ++b) {
      const auto h = static_cast<std::uint16_t>(b);
      std::memcpy(all.data() + 2 * b, &h, 2);
    }
    for (const char* text : chains) {
      const Op op = ops::parse_op(text);
      const auto generic = run(op, dt, {all}, {{rows, cols}}, rows, cols, 0, JitPolicy::generic);
      const auto specialized = run(op, dt, {all}, {{rows, cols}}, rows, cols, 0, JitPolicy::sync);
      std::size_t bad = 0;
      for (std::size_t i = 0; i < 65536; ++i) {
        const std::uint64_t g = at(generic, dt, i), s = at(specialized, dt, i);
        if (g == s || (is_nan(dt, g) && is_nan(dt, s))) continue;
        if (++bad <= 3) {
          ADD_FAILURE() << text << " " << to_string(dt) << " x = 0x" << std::hex << i << ": generic 0x" << g
                        << ", specialized 0x" << s << std::dec;
        }
      }
      EXPECT_EQ(bad, 0u) << text << " " << to_string(dt);
    }
  }
}

// The bf16 table form (kernel_templates/ew_table.cuh): a large call looks its chain's last run of
// one-input steps up in a table each block computed with the plain kernel's code. Its output, under
// sync (the specialized table kernel) and generic (the generic table kernel for one input, the
// generic kernel for two), against the same chain over row blocks small enough for the plain
// kernel: the same bits on every element. Input 0 starts with every bf16 bit pattern (the values
// outside the table: zeros, subnormals, |x| < 2^-16, |x| >= 2^16, Inf, NaN), then random values
// with special ones; offset 3 gives the vector kernels a scalar head and tail.
TEST_F(JitGpu, Bf16TableFormEqualsThePlainKernelBitForBit) {
  const std::int64_t rows = 4096, cols = 8200, n = rows * cols, block_rows = 1024;
  ASSERT_GE(n, ops::detail::kTableMinElements);
  ASSERT_LT(block_rows * cols, ops::detail::kTableMinElements);
  const Case cases[] = {{"gelu", 1, -8, 8},
                        {"mul(0.5)|gelu|mul(2)", 1, -8, 8},
                        {"div_leaky_relu(2, 0.1)|mish", 1, -12, 12},
                        {"softplus|elu(0.3)", 1, -30, 30},
                        {"log|selu", 1, -2, 10},
                        {"silu|tanh", 1, -12, 12},
                        {"add(in1)|gelu", 2, -6, 6},
                        {"mul(in1)|add(0.5)|logsigmoid", 2, -30, 30}};
  const std::size_t offset = 3;
  for (const Case& c : cases) {
    const Op op = ops::parse_op(c.op);
    std::vector<unsigned char> x = random_bytes(DType::bf16, static_cast<std::size_t>(n), rng_, c.lo, c.hi);
    for (std::uint32_t b = 0; b < 65536; ++b) {
      const auto h = static_cast<std::uint16_t>(b);
      std::memcpy(x.data() + 2 * b, &h, 2);
    }
    std::vector<std::vector<unsigned char>> host = {x};
    std::vector<std::vector<std::int64_t>> shapes = {{rows, cols}};
    if (c.inputs == 2) {
      host.push_back(random_bytes(DType::bf16, static_cast<std::size_t>(cols), rng_, c.lo, c.hi));
      shapes.push_back({cols});
    }
    {  // the call takes the table form (the plan ops::apply makes for these tensors)
      const TensorView in0 =
          TensorView::contiguous(reinterpret_cast<void*>(std::uintptr_t{1} << 40), DType::bf16, {rows, cols});
      const TensorView in1 =
          TensorView::contiguous(reinterpret_cast<void*>(std::uintptr_t{2} << 40), DType::bf16, {cols});
      const TensorView out =
          TensorView::contiguous(reinterpret_cast<void*>(std::uintptr_t{3} << 40), DType::bf16, {rows, cols});
      const TensorView ins[] = {in0, in1};
      const auto plan = ops::detail::plan_nary(op, ops::TensorList(ins, static_cast<std::size_t>(c.inputs)),
                                               ops::TensorList(&out, 1));
      ASSERT_TRUE(plan.key.table) << c.op;
      ASSERT_EQ(ops::detail::generic_table_applies(plan.key), c.inputs == 1) << c.op;
    }
    const auto table = run(op, DType::bf16, host, shapes, rows, cols, offset, JitPolicy::sync);
    const auto generic = run(op, DType::bf16, host, shapes, rows, cols, offset, JitPolicy::generic);
    std::vector<unsigned char> plain;
    for (std::int64_t r0 = 0; r0 < rows; r0 += block_rows) {
      std::vector<std::vector<unsigned char>> part = host;
      part[0].assign(x.begin() + r0 * cols * 2, x.begin() + (r0 + block_rows) * cols * 2);
      std::vector<std::vector<std::int64_t>> part_shapes = shapes;
      part_shapes[0] = {block_rows, cols};
      const auto got = run(op, DType::bf16, part, part_shapes, block_rows, cols, offset, JitPolicy::sync);
      plain.insert(plain.end(), got.begin(), got.end());
    }
    std::size_t bad_table = 0, bad_generic = 0;
    for (std::size_t i = 0; i < static_cast<std::size_t>(n); ++i) {
      const std::uint64_t p = at(plain, DType::bf16, i), t = at(table, DType::bf16, i),
                          g = at(generic, DType::bf16, i);
      if (t != p && ++bad_table <= 3) {
        ADD_FAILURE() << c.op << " element " << i << " (x = 0x" << std::hex << at(x, DType::bf16, i)
                      << "): table 0x" << t << ", plain 0x" << p << std::dec << " (seed " << seed_ << ")";
      }
      if (g != p && ++bad_generic <= 3) {
        ADD_FAILURE() << c.op << " element " << i << " (x = 0x" << std::hex << at(x, DType::bf16, i)
                      << "): generic 0x" << g << ", plain 0x" << p << std::dec << " (seed " << seed_ << ")";
      }
    }
    EXPECT_EQ(bad_table, 0u) << c.op;
    EXPECT_EQ(bad_generic, 0u) << c.op;
  }
}

// Past 2^31 elements the generic kernels index in 64 bits (the _i64 kernels): bf16 [32769, 65536]
// (4.3 GB a tensor) with a broadcast row, a light chain and one with an activation step, generic
// against specialized over every element. The input repeats one random row, so each output row
// also equals the first (which catches an index that wrapped in both kernels alike).
TEST_F(JitGpu, GenericPast2To31ElementsEqualsSpecialized) {
  const std::int64_t rows = 32769, cols = 65536, n = rows * cols;
  const std::size_t bytes = static_cast<std::size_t>(n) * 2;
  if (device_info(0).total_memory < 3 * bytes + (std::size_t{4} << 30)) {
    GTEST_SKIP() << "needs " << (3 * bytes >> 30) + 4 << " GiB of device memory";
  }
  const auto row = random_bytes(DType::bf16, static_cast<std::size_t>(cols), rng_, -6, 6);
  const auto bias = random_bytes(DType::bf16, static_cast<std::size_t>(cols), rng_, -6, 6);
  DeviceBuffer in(bytes), bias_buf(bias.size()), out_generic(bytes), out_specialized(bytes);
  for (std::int64_t r = 0; r < rows; ++r) {
    in.copy_from_host(row.data(), row.size(), static_cast<std::size_t>(r) * row.size());
  }
  bias_buf.copy_from_host(bias.data(), bias.size());
  const auto vin = TensorView::contiguous(in.as<void>(), DType::bf16, {rows, cols});
  const auto vbias = TensorView::contiguous(bias_buf.as<void>(), DType::bf16, {1, cols});
  for (const char* text : {"mul(0.5)|leaky_relu(0.02)", "add(in1)|gelu"}) {
    const Op op = ops::parse_op(text);
    const bool two = op.min_inputs() == 2;
    std::vector<std::vector<unsigned char>> got;
    for (auto [buf, policy] : {std::pair{&out_generic, JitPolicy::generic}, {&out_specialized, JitPolicy::sync}}) {
      buf->fill_u32(0xA5A5A5A5u);
      TensorView out = TensorView::contiguous(buf->as<void>(), DType::bf16, {rows, cols});
      const TensorView ins[] = {vin, vbias};
      ScopedJitPolicy guard(policy);
      ops::apply(op, ops::TensorList(ins, two ? 2 : 1), ops::TensorList(&out, 1), nullptr);
      check_driver_sync();
      got.emplace_back(bytes);
      buf->copy_to_host(got.back().data(), bytes);
    }
    ASSERT_EQ(std::memcmp(got[0].data(), got[1].data(), bytes), 0) << text << ": generic and specialized differ";
    for (std::int64_t r = 1; r < rows; ++r) {
      ASSERT_EQ(std::memcmp(got[0].data() + r * cols * 2, got[0].data(), static_cast<std::size_t>(cols) * 2), 0)
          << text << ": row " << r << " differs from row 0";
    }
  }
}

// A chain no earlier call compiled: a constant drawn at random.
// A chain no earlier call of the process used: a scale in [1, 2) on fp32's grid there (2^23
// values, written exactly), so two draws of a test coincide with odds of about 1e-5 (a 6-digit
// decimal scale repeats with odds of about 3e-4 a run: one specialization then serves two calls).
Op never_seen(std::mt19937_64& rng, const char* tail) {
  const double k = 1.0 + std::ldexp(static_cast<double>(rng() % (1u << 23)), -23);
  char text[40];
  std::snprintf(text, sizeof text, "%.17g", k);
  return ops::parse_op(std::string("mul(") + text + ")|" + tail);
}

TEST_F(JitGpu, AsyncServesAtOnceThenSwapsTheSpecializedKernelIn) {
  const Op op = never_seen(rng_, "leaky_relu(0.02)");
  const std::int64_t rows = 64, cols = 4096;
  auto host = random_bytes(DType::f32, rows * cols, rng_, -3, 3);
  const JitStats before = jit_stats();
  const auto first = run(op, DType::f32, {host}, {{rows, cols}}, rows, cols, 0, JitPolicy::async);
  const JitStats after_first = jit_stats();
  EXPECT_EQ(after_first.generic_launches, before.generic_launches + 1);
  EXPECT_EQ(after_first.submitted, before.submitted + 1);
  wait_for_specializations();
  const JitStats drained = jit_stats();
  EXPECT_EQ(drained.pending, 0u);
  EXPECT_EQ(drained.swaps, before.swaps + 1);
  EXPECT_EQ(drained.background_failures, before.background_failures);
  const auto second = run(op, DType::f32, {host}, {{rows, cols}}, rows, cols, 0, JitPolicy::async);
  const JitStats after_second = jit_stats();
  EXPECT_EQ(after_second.generic_launches, drained.generic_launches) << "the specialized kernel runs now";
  EXPECT_EQ(after_second.submitted, drained.submitted);
  EXPECT_EQ(first, second) << "generic and specialized results differ (seed " << seed_ << ")";
}

TEST_F(JitGpu, ManyNeverSeenChainsAllServedWhileTheyCompile) {
  const std::int64_t rows = 8, cols = 1024;
  auto host = random_bytes(DType::bf16, rows * cols, rng_, -3, 3);
  const JitStats before = jit_stats();
  std::vector<std::vector<unsigned char>> firsts;
  std::vector<Op> chain;
  for (int i = 0; i < 12; ++i) {
    chain.push_back(never_seen(rng_, i % 2 ? "gelu" : "add(0.5)|sigmoid"));
    firsts.push_back(run(chain.back(), DType::bf16, {host}, {{rows, cols}}, rows, cols, 0, JitPolicy::async));
  }
  EXPECT_EQ(jit_stats().generic_launches, before.generic_launches + 12);
  wait_for_specializations();
  EXPECT_EQ(jit_stats().swaps, before.swaps + 12);
  for (std::size_t i = 0; i < chain.size(); ++i) {
    EXPECT_EQ(run(chain[i], DType::bf16, {host}, {{rows, cols}}, rows, cols, 0, JitPolicy::async), firsts[i]);
  }
}

TEST_F(JitGpu, CaptureWhileASpecializationIsPendingRecordsTheSpecializedKernel) {
  const Op op = never_seen(rng_, "silu");
  const std::int64_t n = 1 << 16;
  auto host = random_bytes(DType::f32, n, rng_, -5, 5);
  DeviceBuffer in(n * 4), out(n * 4);
  in.copy_from_host(host.data(), host.size());
  const TensorView vin = TensorView::contiguous(reinterpret_cast<void*>(in.ptr()), DType::f32, {n});
  const TensorView vout = TensorView::contiguous(reinterpret_cast<void*>(out.ptr()), DType::f32, {n});
  Stream stream;
  ops::apply(op, vin, vout, stream.get());  // eager, async: generic now, specialization queued
  stream.synchronize();
  std::vector<unsigned char> eager(n * 4);
  out.copy_to_host(eager.data(), eager.size());

  const JitStats before = jit_stats();
  Graph graph = Graph::capture(
      stream.get(), [&] { ops::apply(op, vin, vout, stream.get()); }, CaptureMode::global);
  EXPECT_EQ(jit_stats().generic_launches, before.generic_launches)
      << "a capture waits for the specialized kernel";
  std::vector<unsigned char> poison(n * 4, 0xA5);
  out.copy_from_host(poison.data(), poison.size());
  graph.launch(stream.get());
  stream.synchronize();
  std::vector<unsigned char> replayed(n * 4);
  out.copy_to_host(replayed.data(), replayed.size());
  EXPECT_EQ(replayed, eager);
  wait_for_specializations();
}

TEST_F(JitGpu, AFailedBackgroundCompileKeepsTheGenericKernelAndThrowsNothing) {
  // A template directory whose ew_nary.cuh does not compile: the specialized kernel fails, the
  // generic one (built with the library) still serves the calls.
  test::TempDir dir("jit-broken-templates");
  ASSERT_EQ(::chmod(dir.path().c_str(), 0700), 0);
  {
    std::ofstream f((dir.path() / "ew_nary.cuh").string());
    f << "#error a broken template\n";
  }
  ASSERT_EQ(::chmod(((dir.path() / "ew_nary.cuh").string()).c_str(), 0600), 0);
  ::setenv("CUINLINE_TEMPLATE_DIR", dir.path().c_str(), 1);
  const Op op = never_seen(rng_, "tanh");
  const std::int64_t n = 4099;
  auto host = random_bytes(DType::f16, n, rng_, -3, 3);
  const JitStats before = jit_stats();
  const auto first = run(op, DType::f16, {host}, {{1, n}}, 1, n, 0, JitPolicy::async);
  wait_for_specializations();
  const JitStats failed = jit_stats();
  EXPECT_EQ(failed.background_failures, before.background_failures + 1);
  EXPECT_EQ(failed.swaps, before.swaps);
  // Later calls keep the generic kernel (no retry, no exception), with the same results.
  const auto again = run(op, DType::f16, {host}, {{1, n}}, 1, n, 0, JitPolicy::async);
  EXPECT_EQ(again, first);
  EXPECT_EQ(jit_stats().generic_launches, failed.generic_launches + 1);
  EXPECT_EQ(jit_stats().submitted, failed.submitted);
  // Under sync the caller asked to wait: the compile error is its own, and is thrown to it.
  EXPECT_THROW(run(op, DType::f16, {host}, {{1, n}}, 1, n, 0, JitPolicy::sync), CompileError);
  ::unsetenv("CUINLINE_TEMPLATE_DIR");
  // The template fixed: the same call under sync compiles and matches the generic result.
  EXPECT_EQ(run(op, DType::f16, {host}, {{1, n}}, 1, n, 0, JitPolicy::sync), first);
}

TEST_F(JitGpu, GenericPolicyCompilesNothingAndSyncWaits) {
  const Op op = never_seen(rng_, "gelu_tanh");
  const std::int64_t n = 10000;
  auto host = random_bytes(DType::f64, n, rng_, -5, 5);
  const CacheStats cache_before = default_cache().stats();
  const JitStats before = jit_stats();
  const auto g = run(op, DType::f64, {host}, {{1, n}}, 1, n, 0, JitPolicy::generic);
  EXPECT_EQ(jit_stats().submitted, before.submitted);
  EXPECT_EQ(default_cache().stats().compiles, cache_before.compiles);
  const auto s = run(op, DType::f64, {host}, {{1, n}}, 1, n, 0, JitPolicy::sync);
  EXPECT_EQ(jit_stats().sync_waits, before.sync_waits + 1);
  EXPECT_EQ(default_cache().stats().compiles, cache_before.compiles + 1);
  EXPECT_EQ(g, s);
  // Expressions have no generic form: they compile under every policy.
  const Op expr = ops::Op::expr("x * 0.5f + 0.25f");
  const auto e = run(expr, DType::f32, {random_bytes(DType::f32, 64, rng_, -1, 1)}, {{1, 64}}, 1, 64, 0,
                     JitPolicy::generic);
  EXPECT_EQ(e.size(), 64u * 4);
}

}  // namespace
}  // namespace cuinline
