// Host tests of the JIT machinery (include/cuinline/jit.hpp) that need no GPU: the policy (process,
// environment, per thread, C API), the background pool (every job runs once, counters, a job that
// fails, wait_for_specializations), the in-process map's pending states, the generic kernels'
// fatbin (every kernel for every built arch) and the programs chains lower to (the constants the
// rendered specialized source holds); the generic conv2d kernels: their fatbin, the parameters and
// epilogue programs a variant becomes, and which variants they serve.
#include <cuinline/cuinline.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuinline/conv2d.hpp>
#include <cuinline/cuinline.hpp>
#include <cuinline/ops.hpp>
#include <fstream>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <thread>

#include "ops/conv2d/conv2d_generic_rt.hpp"
#include "ops/conv2d/conv2d_internal.hpp"
#include "ops/elementwise/generic.hpp"
#include "ops/elementwise/render.hpp"
#include "ops/generic_fatbin.hpp"
#include "ops/reductions/generic.hpp"
#include "ops/specialize.hpp"
#include "ops/variant_map.hpp"
#include "test_support.hpp"

namespace cuinline {
namespace {

TEST(Jit, PolicyProcessWideAndPerThread) {
  const JitPolicy original = jit_policy();
  set_jit_policy(JitPolicy::sync);
  EXPECT_EQ(jit_policy(), JitPolicy::sync);
  {
    ScopedJitPolicy outer(JitPolicy::generic);
    {
      ScopedJitPolicy inner(JitPolicy::async);
      // The scoped policy is what calls on this thread run under (no capture: no stream query).
      std::thread other([] { EXPECT_EQ(jit_policy(), JitPolicy::sync); });
      other.join();
    }
  }
  EXPECT_STREQ(to_string(JitPolicy::async), "async");
  EXPECT_STREQ(to_string(JitPolicy::sync), "sync");
  EXPECT_STREQ(to_string(JitPolicy::generic), "generic");
  set_jit_policy(original);
}

TEST(Jit, CApiPolicyChecksItsArgument) {
  const int original = cuinline_get_jit_policy();
  EXPECT_EQ(cuinline_set_jit_policy(CUINLINE_JIT_GENERIC), CUINLINE_SUCCESS);
  EXPECT_EQ(cuinline_get_jit_policy(), CUINLINE_JIT_GENERIC);
  EXPECT_EQ(cuinline_set_jit_policy(7), CUINLINE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(cuinline_last_error()).find("unknown JIT policy 7"), std::string::npos);
  EXPECT_EQ(cuinline_get_jit_policy(), CUINLINE_JIT_GENERIC) << "a refused call changes nothing";
  EXPECT_EQ(cuinline_set_thread_jit_policy(CUINLINE_JIT_SYNC), CUINLINE_SUCCESS);
  EXPECT_EQ(cuinline_set_thread_jit_policy(-1), CUINLINE_SUCCESS);
  EXPECT_EQ(cuinline_set_thread_jit_policy(-2), CUINLINE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(cuinline_get_jit_stats(nullptr), CUINLINE_ERROR_INVALID_ARGUMENT);
  cuinline_jit_stats stats{};
  EXPECT_EQ(cuinline_get_jit_stats(&stats), CUINLINE_SUCCESS);
  EXPECT_EQ(cuinline_wait_for_specializations(), CUINLINE_SUCCESS);
  cuinline_prewarm();
  EXPECT_EQ(cuinline_set_jit_policy(original), CUINLINE_SUCCESS);
}

TEST(Jit, PolicyFromTheEnvironmentInAFreshProcess) {
  const std::string tool = CUINLINE_TEST_TOOLS_DIR "/jit_tool";
  for (const auto& [value, expected] : {std::pair<const char*, const char*>{"sync", "policy sync"},
                                        {"generic", "policy generic"},
                                        {"async", "policy async"},
                                        {"", "policy async"}}) {
    const test::ProcessResult r =
        test::run_process({tool, "policy"}, {std::string("CUINLINE_JIT_POLICY=") + value});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(expected), std::string::npos) << value << ": " << r.output;
  }
  // (The warning is a warn-level log line: the child logs at warn whatever this process's level.)
  const test::ProcessResult bogus =
      test::run_process({tool, "policy"}, {"CUINLINE_JIT_POLICY=fastest", "CUINLINE_LOG_LEVEL=warn"});
  EXPECT_NE(bogus.output.find("policy async"), std::string::npos) << bogus.output;
  EXPECT_NE(bogus.output.find("CUINLINE_JIT_POLICY='fastest' is not async, sync or generic"),
            std::string::npos)
      << bogus.output;
}

TEST(Jit, PoolRunsEveryJobOnceAndCounts) {
  wait_for_specializations();
  const JitStats before = jit_stats();
  std::atomic<int> ran{0};
  constexpr int kJobs = 50;
  for (int i = 0; i < kJobs; ++i) {
    ASSERT_TRUE(ops::detail::submit_specialization([&ran]() noexcept {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      ran.fetch_add(1);
      ops::detail::count_swap();
    }));
  }
  wait_for_specializations();
  EXPECT_EQ(ran.load(), kJobs);
  const JitStats after = jit_stats();
  EXPECT_EQ(after.submitted, before.submitted + kJobs);
  EXPECT_EQ(after.pending, 0u);
  EXPECT_EQ(after.swaps, before.swaps + kJobs);
}

TEST(Jit, WaitForSpecializationsFromManyThreads) {
  std::atomic<int> ran{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        ASSERT_TRUE(ops::detail::submit_specialization([&ran]() noexcept { ran.fetch_add(1); }));
      }
      wait_for_specializations();
    });
  }
  for (auto& t : threads) t.join();
  wait_for_specializations();
  EXPECT_EQ(ran.load(), 40);
  EXPECT_EQ(jit_stats().pending, 0u);
}

// An exiting process with jobs queued and one running: exit drops the queue, waits for the running
// job, and the process ends cleanly (no hang, no crash).
TEST(Jit, ExitWithSpecializationsPendingIsClean) {
  const auto start = std::chrono::steady_clock::now();
  const test::ProcessResult r = test::run_process({CUINLINE_TEST_TOOLS_DIR "/jit_tool", "exit"});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_LT(seconds, 6.0) << "exit waited for the queued jobs";
  EXPECT_NE(r.output.find("queued 200"), std::string::npos) << r.output;
}

// prewarm() loads the generic kernels' libraries only where the process already has the CUDA
// driver loaded (here, on a machine with one, after an application's first CUDA call: every library
// loaded; test_jit_gpu.cpp checks them there); it never loads the driver itself, so a process that
// forks after start-up keeps CUDA usable in its children.
TEST(Jit, PrewarmLoadsTheGenericLibrariesOnlyWhereTheDriverIsLoaded) {
  const test::ProcessResult r = test::run_process({CUINLINE_TEST_TOOLS_DIR "/jit_tool", "prewarm"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("generic libraries loaded: 0 0 0"), std::string::npos) << r.output;
  const test::ProcessResult with_driver =
      test::run_process({CUINLINE_TEST_TOOLS_DIR "/jit_tool", "prewarm", "driver"});
  EXPECT_EQ(with_driver.exit_code, 0) << with_driver.output;
  if (with_driver.output.find("no driver") == std::string::npos && cuinline::generic_kernels_built()) {
    EXPECT_NE(with_driver.output.find("generic libraries loaded: 1 1 1"), std::string::npos) << with_driver.output;
  }
}

TEST(Jit, VariantMapPendingStates) {
  ops::detail::VariantMap<int, int> map;
  using State = ops::detail::VariantMap<int, int>::State;
  auto is = [](int want) { return [want](int k) { return k == want; }; };
  int value = 0;
  EXPECT_FALSE(map.find(7, 0, is(1), &value).has_value());
  EXPECT_TRUE(map.begin_pending(7, 0, is(1), 1));
  EXPECT_FALSE(map.begin_pending(7, 0, is(1), 1)) << "one job per variant and device";
  EXPECT_TRUE(map.begin_pending(7, 1, is(1), 1)) << "another device";
  EXPECT_TRUE(map.begin_pending(7, 0, is(2), 2)) << "a hash collision is another variant";
  EXPECT_EQ(map.find(7, 0, is(1), &value), State::pending);
  const int made = 42;
  map.finish_pending(7, 0, is(1), &made);
  EXPECT_EQ(map.find(7, 0, is(1), &value), State::ready);
  EXPECT_EQ(value, 42);
  map.finish_pending(7, 1, is(1), nullptr);
  EXPECT_EQ(map.find(7, 1, is(1), &value), State::failed);
  // A synchronous call on a failed or pending entry makes the value and the entry becomes ready.
  EXPECT_EQ(map.find_or_make(7, 1, is(1), [] { return std::make_pair(1, 5); }), 5);
  EXPECT_EQ(map.find(7, 1, is(1), &value), State::ready);
  EXPECT_EQ(map.find_or_make(7, 0, is(2), [] { return std::make_pair(2, 6); }), 6);
  map.cancel_pending(7, 0, is(2));  // no longer pending: stays
  EXPECT_EQ(map.find(7, 0, is(2), &value), State::ready);
  EXPECT_TRUE(map.begin_pending(9, 0, is(3), 3));
  map.cancel_pending(9, 0, is(3));
  EXPECT_FALSE(map.find(9, 0, is(3), &value).has_value());
}

// A fatbin's entries (kind 1 PTX / 2 ELF, arch), sorted; the fatbin header checked (magic, version,
// header size, payload size; each entry: kind, its header size, payload size, ..., the SM number at
// byte 28).
std::vector<std::pair<int, int>> fatbin_entries(std::string_view fatbin) {
  EXPECT_GT(fatbin.size(), 1024u);
  if (fatbin.size() < 16) return {};
  std::uint32_t magic = 0;
  std::memcpy(&magic, fatbin.data(), 4);
  EXPECT_EQ(magic, 0xBA55ED50u) << "a CUDA fatbin";
  std::uint16_t header_size = 0;
  std::uint64_t payload = 0;
  std::memcpy(&header_size, fatbin.data() + 6, 2);
  std::memcpy(&payload, fatbin.data() + 8, 8);
  EXPECT_EQ(header_size + payload, fatbin.size());
  std::vector<std::pair<int, int>> entries;  // (kind, arch)
  for (std::size_t at = header_size; at + 32 <= fatbin.size();) {
    std::uint16_t kind = 0;
    std::uint32_t entry_header = 0, arch = 0;
    std::uint64_t size = 0;
    std::memcpy(&kind, fatbin.data() + at, 2);
    std::memcpy(&entry_header, fatbin.data() + at + 4, 4);
    std::memcpy(&size, fatbin.data() + at + 8, 8);
    std::memcpy(&arch, fatbin.data() + at + 28, 4);
    entries.emplace_back(kind, static_cast<int>(arch));
    at += entry_header + size;
  }
  std::sort(entries.begin(), entries.end());
  return entries;
}

std::size_t occurrences(std::string_view text, const std::string& what) {
  std::size_t count = 0;
  for (std::size_t at = text.find(what); at != std::string_view::npos; at = text.find(what, at + 1)) ++count;
  return count;
}

// SASS for sm_75, sm_80 and sm_90, and PTX for sm_90; each of the 32 kernels the host launches (full
// and light, vectors and single elements, 32- and 64-bit indices: the names it builds, which carry
// the vector kernels' vectors a thread) and the bf16 table kernel in every SASS image.
TEST(Jit, GenericFatbinHoldsEveryKernelForEveryArch) {
  if (!generic_kernels_built()) GTEST_SKIP() << "built with CUINLINE_GENERIC_KERNELS=OFF";
  const std::string_view fatbin = detail::generic_fatbin(detail::GenericFatbin::elementwise);
  EXPECT_EQ(fatbin_entries(fatbin), (std::vector<std::pair<int, int>>{{1, 90}, {2, 75}, {2, 80}, {2, 90}}));
  std::set<std::string> names;
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    for (bool vector : {false, true}) {
      for (bool light : {false, true}) {
        for (bool wide_index : {false, true}) {
          const std::string k = ops::detail::generic_kernel_symbol(dt, vector, light, wide_index);
          names.insert(k);
          EXPECT_GE(occurrences(fatbin, k + '\0'), 3u) << k << " in every SASS image";
        }
      }
    }
  }
  EXPECT_EQ(names.size(), 32u);
  EXPECT_GE(occurrences(fatbin, std::string(ops::detail::kGenericTableSymbol) + '\0'), 3u)
      << "in every SASS image";
  EXPECT_EQ(ops::detail::generic_kernel_symbol(DType::f32, true, false, false), "cuinline_ewg_f32_v4_r2");
  EXPECT_EQ(ops::detail::generic_kernel_symbol(DType::bf16, true, true, false), "cuinline_ewg_bf16_v8_r1_light");
  EXPECT_EQ(ops::detail::generic_kernel_symbol(DType::f64, false, false, true), "cuinline_ewg_f64_v1_i64");
}

// The rows' and columns' multiply-shift divisor: e / d for every e under 2^31, checked at the edges
// and on random dividends, for divisors from 2 to 2^31 - 1; 1 and out-of-range divisors get none.
TEST(Jit, GenericFastDivisorDividesExactly) {
  EXPECT_EQ(ops::detail::fast_divisor(1), (std::pair<std::uint32_t, std::uint32_t>{0, 0}));
  EXPECT_EQ(ops::detail::fast_divisor(0), (std::pair<std::uint32_t, std::uint32_t>{0, 0}));
  EXPECT_EQ(ops::detail::fast_divisor(std::int64_t{1} << 31), (std::pair<std::uint32_t, std::uint32_t>{0, 0}));
  std::mt19937 rng(7);
  std::vector<std::int64_t> divisors = {2, 3, 7, 28672, 4096, 1000003, (std::int64_t{1} << 30) + 1, std::int64_t{1} << 30,
                                        (std::int64_t{1} << 31) - 1};
  for (int i = 0; i < 200; ++i) divisors.push_back(2 + static_cast<std::int64_t>(rng() % ((1u << 31) - 3)));
  for (int i = 2; i < 300; ++i) divisors.push_back(i);
  long long bad = 0;
  for (const std::int64_t d : divisors) {
    const std::pair<std::uint32_t, std::uint32_t> divisor = ops::detail::fast_divisor(d);
    const std::uint32_t mul = divisor.first, shift = divisor.second;
    ASSERT_NE(mul, 0u) << d;
    const auto check = [&](std::uint32_t e) {
      const std::uint32_t q = static_cast<std::uint32_t>((std::uint64_t{e} * mul) >> 32) >> shift;
      if (q != e / static_cast<std::uint64_t>(d)) ++bad;
    };
    for (std::int64_t e : {std::int64_t{0}, std::int64_t{1}, d - 1, d, d + 1, 2 * d - 1, (std::int64_t{1} << 31) - 1,
                           (std::int64_t{1} << 31) - 2, ((std::int64_t{1} << 31) - 1) / d * d,
                           ((std::int64_t{1} << 31) - 1) / d * d - 1}) {
      if (e >= 0 && e < (std::int64_t{1} << 31)) check(static_cast<std::uint32_t>(e));
    }
    for (int i = 0; i < 2000; ++i) check(rng() >> 1);
  }
  EXPECT_EQ(bad, 0);
}

// The conv2d fatbin: the same archs, every dtype's direct (both forms) and depthwise kernels, the
// f32 implicit GEMM and the f16 / bf16 tensor-core kernels in every SASS image.
TEST(Jit, GenericConvFatbinHoldsEveryKernelForEveryArch) {
  if (!generic_kernels_built()) GTEST_SKIP() << "built with CUINLINE_GENERIC_KERNELS=OFF";
  const std::string_view fatbin = detail::generic_fatbin(detail::GenericFatbin::conv2d);
  EXPECT_EQ(fatbin_entries(fatbin), (std::vector<std::pair<int, int>>{{1, 90}, {2, 75}, {2, 80}, {2, 90}}));
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    for (int mode : {0, 1, 2, 3, 4, 5, 6}) {
      if ((mode == 2 || mode == 3 || mode == 6) && dt != DType::f16 && dt != DType::bf16) continue;
      if (mode == 5 && dt != DType::f32) continue;
      const std::string k = ops::conv2d_impl::generic_conv_symbol(dt, mode);
      EXPECT_GE(occurrences(fatbin, k), 3u) << k << " in every SASS image";
    }
  }
  for (DType dt : {DType::f16, DType::bf16}) {
    const std::string k = ops::conv2d_impl::generic_conv_pack_symbol(dt);
    EXPECT_GE(occurrences(fatbin, k), 3u) << k << " in every SASS image";
  }
  EXPECT_EQ(ops::conv2d_impl::generic_conv_symbol(DType::bf16, 1), "cuinline_conv2d_rt_dw_bf16");
  EXPECT_EQ(ops::conv2d_impl::generic_conv_symbol(DType::f16, 2), "cuinline_conv2d_rt_mma_f16");
  EXPECT_EQ(ops::conv2d_impl::generic_conv_symbol(DType::bf16, 3), "cuinline_conv2d_rt_mmag_bf16");
  EXPECT_EQ(ops::conv2d_impl::generic_conv_symbol(DType::f32, 5), "cuinline_conv2d_rt_gemm_f32");
  EXPECT_EQ(ops::conv2d_impl::generic_conv_symbol(DType::bf16, 6), "cuinline_conv2d_rt_mmaw_bf16");
  EXPECT_EQ(occurrences(fatbin, "cuinline_ewg_"), 0u) << "only the conv kernels";
}

// The row-reduction fatbin: the same archs, one kernel per dtype in every SASS image.
TEST(Jit, GenericRowsFatbinHoldsEveryKernelForEveryArch) {
  if (!generic_kernels_built()) GTEST_SKIP() << "built with CUINLINE_GENERIC_KERNELS=OFF";
  const std::string_view fatbin = detail::generic_fatbin(detail::GenericFatbin::reductions);
  EXPECT_EQ(fatbin_entries(fatbin), (std::vector<std::pair<int, int>>{{1, 90}, {2, 75}, {2, 80}, {2, 90}}));
  for (const char* dt : {"f32", "f64", "f16", "bf16"}) {
    const std::string k = std::string("cuinline_rdg_") + dt;
    EXPECT_GE(occurrences(fatbin, k), 3u) << k << " in every SASS image";
  }
  EXPECT_EQ(occurrences(fatbin, "cuinline_ewg_"), 0u) << "only the row kernels";
}

// The program of every step kind holds exactly the constants the rendered specialized source holds:
// each opmath constant printed back with opmath_literal is a literal of the rendered functor, in
// order.
TEST(Jit, GenericProgramsHoldTheRenderedConstants) {
  const char* chains[] = {
      "add(1.5)|sub(0.1)|mul(3)|div(7)|relu|leaky_relu(0.02)|clamp(-1,2)|div(0.001)|mul(inf)|add(-0.0)",
      "sigmoid|tanh|silu|gelu|gelu_tanh|mish|softplus|softplus(2,10)|elu|elu(0.5)|selu|celu(2)",
      "hardswish|hardsigmoid|exp|log|sqrt|abs|neg|softsign|tanhshrink|logsigmoid|hardshrink|hardshrink(0.3)",
      "softshrink(0.2)|threshold(0.1, 20)|threshold(0.1, nan)|hardtanh|relu6|leaky_relu(nan)",
  };
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
    for (const char* text : chains) {
      const ops::Op op = ops::parse_op(text);
      ops::detail::NaryKey key;
      key.dtype = dt;
      key.inputs = 1;
      key.outputs = 1;
      ASSERT_EQ(ops::detail::generic_applies(op, key), generic_kernels_built()) << text;
      const ops::detail::GenericProgram p = ops::detail::generic_program(op, key);
      const std::string source = detail::render_nary_functor(op, dt, 1, "F");
      const auto lowered = detail::lower_chain(op, dt);
      ASSERT_EQ(p.steps, static_cast<int>(lowered.size()));
      std::size_t at = 0;
      for (int i = 0; i < p.steps; ++i) {
        const auto& s = p.step[i];
        EXPECT_EQ(s.fn, static_cast<int>(lowered[static_cast<std::size_t>(i)].fn));
        const std::size_t call = source.find("x = ew_", at);
        ASSERT_NE(call, std::string::npos);
        const std::size_t end = source.find(';', call);
        const std::string statement = source.substr(call, end - call);
        at = end;
        // Every constant of the program appears in the statement as the literal of the same value.
        const int constants = statement.find("ew_clamp") != std::string::npos ||
                                      statement.find("ew_gelu_tanh") != std::string::npos ||
                                      statement.find("ew_softplus") != std::string::npos
                                  ? 2
                              : statement.find("ew_elu") != std::string::npos ? 3
                              : statement.find("(x)") != std::string::npos    ? 0
                                                                              : 1;
        if (statement.find("_exact(") != std::string::npos) {
          // A 16-bit step on the constant as a storage value (render.hpp's exact_16bit_constant):
          // the program's opmath constant, converted exactly.
          EXPECT_NE(statement.find(detail::storage_literal(s.c[0], dt)), std::string::npos) << statement;
          continue;
        }
        for (int c = 0; c < constants; ++c) {
          const std::string literal = detail::opmath_literal(s.c[c], dt);
          EXPECT_NE(statement.find(literal), std::string::npos)
              << text << " " << to_string(dt) << ": " << statement << " lacks " << literal;
        }
        if (lowered[static_cast<std::size_t>(i)].has_storage) {
          const std::string storage =
              detail::storage_literal(lowered[static_cast<std::size_t>(i)].storage, dt);
          EXPECT_NE(statement.find(storage), std::string::npos) << statement;
          EXPECT_EQ(s.storage, detail::scalar_storage_bits(lowered[static_cast<std::size_t>(i)].storage, dt));
        }
      }
    }
  }
}

TEST(Jit, WhatTheGenericKernelsServe) {
  ops::detail::NaryKey key;
  key.dtype = DType::bf16;
  key.inputs = 3;
  key.outputs = 1;
  const bool built = generic_kernels_built();
  EXPECT_EQ(ops::detail::generic_applies(ops::parse_op("add(in1)|mul(in2)|gelu"), key), built);
  EXPECT_FALSE(ops::detail::generic_applies(ops::Op::expr("x * 2"), key)) << "expressions compile";
  ops::detail::NaryKey strided = key;
  strided.strided = true;
  EXPECT_FALSE(ops::detail::generic_applies(ops::parse_op("add(in1)"), strided))
      << "the strided path compiles";
  std::string long_chain = "relu";
  for (int i = 0; i < 32; ++i) long_chain += "|mul(2)";
  EXPECT_FALSE(ops::detail::generic_applies(ops::parse_op(long_chain), key)) << "over 32 steps";
  ops::detail::NaryKey two_outputs = key;
  two_outputs.outputs = 2;
  EXPECT_FALSE(ops::detail::generic_applies(ops::parse_op("relu"), two_outputs));
}

// The generic row kernels: what they serve, and the launch a planned call becomes — the planned
// variant's lanes, accesses and grid (the split form in two phases, its looped fallback whole rows
// on 1024 lanes) and its chains lowered (host buffers: planning touches no device).
TEST(Jit, WhatTheGenericRowKernelsServe) {
  namespace d = ops::detail;
  std::vector<std::uint16_t> x(4 * 40000), y(x.size()), w(40000);
  const auto plan = [&](std::int64_t rows, std::int64_t n, const char* prologue) {
    const TensorView xv = TensorView::contiguous(x.data(), DType::bf16, {rows, n});
    const TensorView yv = TensorView::contiguous(y.data(), DType::bf16, {rows, n});
    const TensorView wv = TensorView::contiguous(w.data(), DType::bf16, {n});
    ops::RowFusion fusion;
    if (*prologue != '\0') fusion.prologue = ops::parse_op(prologue);
    return d::plan_row_call(ops::RowOp::rms_norm, xv, yv, wv, {}, {}, 1e-6, fusion);
  };
  const bool built = generic_kernels_built();
  const d::RowCall warp = plan(37, 1000, "mul(0.125)");
  ASSERT_EQ(warp.plan.variant.form, ops::RowForm::warp);
  EXPECT_EQ(d::generic_rows_apply(warp.plan.variant), built);
  const d::GenericRowLaunch lw = d::generic_rows_launch(warp);
  EXPECT_EQ(lw.shape.threads, warp.plan.variant.threads);
  EXPECT_EQ(lw.shape.vector, warp.plan.variant.vector_width);
  EXPECT_EQ(lw.shape.iters, warp.plan.variant.per_thread / warp.plan.variant.vector_width);
  EXPECT_EQ(lw.shape.phase, 0);
  EXPECT_EQ(lw.shape.op, 2) << "RD_RMS_NORM";
  EXPECT_EQ(lw.grid, warp.plan.grid);
  EXPECT_EQ(lw.block, warp.plan.block);
  ASSERT_EQ(lw.prologue.steps, 1);
  EXPECT_EQ(lw.prologue.step[0].fn, static_cast<int>(cuinline::detail::LoweredFn::mul));
  EXPECT_EQ(lw.prologue.step[0].c[0], 0.125);
  EXPECT_EQ(lw.epilogue.steps, 0);

  // A cluster call runs its split form's two phases (the same bits): 3 chunks of 256 x 64 a row
  // (bf16), a block each.
  const d::RowCall split = plan(4, 40000, "");
  ASSERT_EQ(split.plan.variant.form, ops::RowForm::cluster);
  EXPECT_EQ(split.plan.variant.cluster, 3);
  const d::GenericRowLaunch ls = d::generic_rows_launch(split);
  EXPECT_EQ(ls.shape.phase, 1);
  EXPECT_EQ(ls.shape.threads, 256);
  EXPECT_EQ(ls.shape.iters, 64 / 8);
  EXPECT_EQ(ls.block, 256u);
  EXPECT_EQ(ls.grid, 4u * 3u);
  // Where no workspace can be had: whole rows on 1024 lanes, as the looped form takes them (phase 3).
  const d::GenericRowLaunch whole = d::generic_rows_launch(split, true);
  EXPECT_EQ(whole.shape.phase, 3);
  EXPECT_EQ(whole.shape.threads, 1024);
  EXPECT_EQ(whole.block, 1024u);
  EXPECT_EQ(whole.grid, 4u);
  EXPECT_EQ(whole.shape.iters, (40000 + 1024 * whole.shape.vector - 1) / (1024 * whole.shape.vector));

  ops::RowVariant v = warp.plan.variant;
  v.prologue = ops::Op::expr("x * 2");
  EXPECT_FALSE(d::generic_rows_apply(v)) << "expressions compile";
  std::string chain = "relu";
  for (int i = 0; i < 31; ++i) chain += "|mul(2)";
  v.prologue = ops::parse_op(chain);
  EXPECT_EQ(d::generic_rows_apply(v), built) << "32 steps";
  v.epilogue = ops::parse_op(chain + "|mul(2)");
  EXPECT_FALSE(d::generic_rows_apply(v)) << "over 32 steps";
}

namespace conv {

using ops::Conv2dLayout;
using ops::Conv2dParams;
using ops::Conv2dVariant;
namespace ci = ops::conv2d_impl;

Conv2dVariant variant(int cin, int h, int w, int cout, int k, const Conv2dParams& p, DType dt, Conv2dLayout in,
                      Conv2dLayout wl, Conv2dLayout out, const char* epilogue = "relu") {
  const ops::Op e = *epilogue == '\0' ? ops::Op::chain({}) : ops::parse_op(epilogue);
  Conv2dVariant v = ops::make_conv2d_variant(cin, h, w, cout, k, k, p, true, e);
  v.dtype = dt;
  v.input_layout = in;
  v.weight_layout = wl;
  v.output_layout = out;
  v.validate();
  return v;
}

// The element strides, channel tiles, vector flag, mode and grid of NCHW, channels-last, grouped and
// depthwise variants, against the layouts' definitions.
TEST(Jit, GenericConvParametersAndGrid) {
  const auto nchw = Conv2dLayout::nchw, nhwc = Conv2dLayout::nhwc;
  {  // 12 x 50² -> 20, 3 x 3, f32 NCHW: 2500 pixels, channels in tiles of 8 (8, 8, 4).
    const Conv2dVariant v = variant(12, 50, 50, 20, 3, Conv2dParams{}, DType::f32, nchw, nchw, nchw);
    const ci::GenericConvParams p = ci::generic_conv_params(v);
    EXPECT_EQ(p.in_n, 12 * 2500);
    EXPECT_EQ(p.in_c, 2500);
    EXPECT_EQ(p.in_y, 50);
    EXPECT_EQ(p.in_x, 1);
    EXPECT_EQ(p.out_n, 20 * 48 * 48);
    EXPECT_EQ(p.out_c, 48 * 48);
    EXPECT_EQ(p.out_y, 48);
    EXPECT_EQ(p.w_o, 12 * 9);
    EXPECT_EQ(p.w_i, 9);
    EXPECT_EQ(p.w_y, 3);
    EXPECT_EQ(p.w_x, 1);
    EXPECT_EQ(p.oh, 48);
    EXPECT_EQ(p.ow, 48);
    EXPECT_EQ(p.cin_g, 12);
    EXPECT_EQ(p.cout_g, 20);
    EXPECT_EQ(p.co_tiles, 3);
    EXPECT_EQ(p.has_bias, 1);
    EXPECT_EQ(p.has_residual, 0);
    EXPECT_EQ(p.vec_in, 0);
    EXPECT_EQ(p.vec_w, 0);
    EXPECT_EQ(p.mode, 0);
    const ci::GenericConvGrid g = ci::generic_conv_grid(v);
    EXPECT_EQ(g.threads, 128);
    EXPECT_EQ(g.blocks_x, (48 * 48 + 127) / 128);
    EXPECT_EQ(g.blocks_y, 3);
  }
  {  // 64 x 40² -> 96, f16, every tensor channels-last, stride 2, pad 1, dilation 2.
    Conv2dParams q;
    q.stride_h = q.stride_w = 2;
    q.pad_h = q.pad_w = 1;
    q.dilation_h = q.dilation_w = 2;
    const Conv2dVariant v = variant(64, 40, 40, 96, 3, q, DType::f16, nhwc, nhwc, nhwc);
    const ci::GenericConvParams p = ci::generic_conv_params(v);
    const std::int64_t oh = (40 + 2 - 2 * 2 - 1) / 2 + 1;
    EXPECT_EQ(p.oh, oh);
    EXPECT_EQ(p.in_c, 1);
    EXPECT_EQ(p.in_x, 64);
    EXPECT_EQ(p.in_y, 40 * 64);
    EXPECT_EQ(p.out_c, 1);
    EXPECT_EQ(p.out_x, 96);
    EXPECT_EQ(p.out_y, oh * 96);
    EXPECT_EQ(p.w_i, 1);
    EXPECT_EQ(p.w_x, 64);
    EXPECT_EQ(p.w_y, 3 * 64);
    EXPECT_EQ(p.vec_in, 1) << "64 channels: 16-byte runs";
    EXPECT_EQ(p.vec_w, 1) << "a channels-last weight";
    EXPECT_EQ(p.sh, 2);
    EXPECT_EQ(p.dw, 2);
    EXPECT_EQ(ci::generic_conv_grid(v).blocks_y, 12);
    // On sm_80 and newer the tensor-core kernel: 64 x 64 tiles of pixels x channels.
    const Arch sm75 = Arch::parse("sm_75"), sm80 = Arch::parse("sm_80"), sm90 = Arch::parse("sm_90");
    EXPECT_FALSE(ci::generic_conv_mma_applies(v, sm75)) << "no bf16 / m16n8k16 mma on sm_75";
    EXPECT_TRUE(ci::generic_conv_mma_applies(v, sm80));
    EXPECT_TRUE(ci::generic_conv_mma_applies(v, sm90));
    EXPECT_EQ(ci::generic_conv_params(v, true).mode, 2);
    const ci::GenericConvGrid gm = ci::generic_conv_grid(v, true);
    EXPECT_EQ(gm.threads, 128);
    EXPECT_EQ(gm.blocks_x, (oh * oh + 63) / 64);
    EXPECT_EQ(gm.blocks_y, 2) << "96 channels: two tiles";
    // An NCHW input, or channel runs that are not whole 16-byte vectors: the gathered form; not for
    // f32, or fewer than 16 output channels a group.
    const Conv2dVariant v_nchw = variant(64, 40, 40, 96, 3, q, DType::f16, nchw, nhwc, nhwc);
    EXPECT_TRUE(ci::generic_conv_mma_applies(v_nchw, sm90));
    EXPECT_EQ(ci::generic_conv_params(v_nchw, true).mode, 3);
    EXPECT_EQ(ci::generic_conv_params(v_nchw, true).vec_in, 0);
    const Conv2dVariant v_stem = variant(3, 40, 40, 64, 7, q, DType::bf16, nhwc, nhwc, nhwc);
    EXPECT_TRUE(ci::generic_conv_mma_applies(v_stem, sm80));
    EXPECT_EQ(ci::generic_conv_params(v_stem, true).mode, 3) << "3 channels: gathered";
    EXPECT_FALSE(ci::generic_conv_mma_applies(variant(64, 40, 40, 96, 3, q, DType::f32, nhwc, nhwc, nhwc), sm90));
    // A 1 x 1 filter's channels are contiguous in either weight layout: 16-byte weight loads too.
    const ci::GenericConvParams p1 = ci::generic_conv_params(variant(64, 40, 40, 96, 1, q, DType::f16, nhwc, nchw, nhwc));
    EXPECT_EQ(p1.w_i, 1);
    EXPECT_EQ(p1.vec_w, 1);
    EXPECT_EQ(ci::generic_conv_params(variant(64, 40, 40, 96, 3, q, DType::f16, nhwc, nchw, nhwc)).vec_w, 0);
    EXPECT_FALSE(ci::generic_conv_mma_applies(variant(64, 40, 40, 8, 3, q, DType::f16, nhwc, nhwc, nhwc), sm90))
        << "8 output channels";
    Conv2dParams grouped = q;
    grouped.groups = 4;  // 16 input channels a group: whole vectors; 4 groups x one tile of 24 outputs
    const Conv2dVariant vg = variant(64, 40, 40, 96, 3, grouped, DType::bf16, nhwc, nchw, nchw);
    EXPECT_TRUE(ci::generic_conv_mma_applies(vg, sm90));
    EXPECT_EQ(ci::generic_conv_grid(vg, true).blocks_y, 4);
  }
  {  // Grouped: 4 groups of 3 -> 5 channels, channels-last f16 input of 12 channels (no 16-byte runs).
    Conv2dParams q;
    q.groups = 4;
    const Conv2dVariant v = variant(12, 9, 9, 20, 3, q, DType::f16, nhwc, nchw, nchw);
    const ci::GenericConvParams p = ci::generic_conv_params(v);
    EXPECT_EQ(p.cin_g, 3);
    EXPECT_EQ(p.cout_g, 5);
    EXPECT_EQ(p.co_tiles, 1);
    EXPECT_EQ(p.w_o, 27);
    EXPECT_EQ(p.vec_in, 0);
    EXPECT_EQ(p.vec_w, 0);
    EXPECT_EQ(p.mode, 0);
    const ci::GenericConvGrid g = ci::generic_conv_grid(v);
    EXPECT_EQ(g.blocks_y, 4);
    EXPECT_EQ(g.threads, 64) << "49 pixels: two warps";
  }
  {  // Depthwise with a channels-last input: one channel of kGenericConvDwRows rows of a column a
     // thread, channels fastest (two output channels a group: one channel a thread).
    Conv2dParams q;
    q.groups = 32;
    const Conv2dVariant v = variant(32, 7, 7, 64, 5, q, DType::bf16, nhwc, nchw, nhwc);
    const ci::GenericConvParams p = ci::generic_conv_params(v);
    EXPECT_EQ(p.mode, 1);
    EXPECT_EQ(p.cin_g, 1);
    EXPECT_EQ(p.cout_g, 2);
    EXPECT_EQ(p.dw_channels, 1);
    const ci::GenericConvGrid g = ci::generic_conv_grid(v);
    EXPECT_EQ(g.blocks_y, 1);
    EXPECT_EQ(ci::kGenericConvDwRows, 4);
    EXPECT_EQ(g.blocks_x, (64 * 3 * 1 + 127) / 128) << "64 channels x 3 columns x 1 row group of 3 rows";
    // One output channel a group, 16-bit: a pair of channels a thread; f32: one.
    Conv2dParams d;
    d.groups = 64;
    const Conv2dVariant pair = variant(64, 7, 7, 64, 3, d, DType::f16, nhwc, nhwc, nhwc);
    EXPECT_EQ(ci::generic_conv_params(pair).dw_channels, 2);
    EXPECT_EQ(ci::generic_conv_grid(pair).blocks_x, (32 * 5 * 2 + 127) / 128) << "5 x 5 outputs";
    EXPECT_EQ(ci::generic_conv_params(variant(64, 7, 7, 64, 3, d, DType::f32, nhwc, nhwc, nhwc)).dw_channels, 1);
    EXPECT_FALSE(ci::generic_conv_mma_applies(v, Arch::parse("sm_90"))) << "depthwise keeps its own kernel";
    // The same with an NCHW input: the pixel-fast form.
    EXPECT_EQ(ci::generic_conv_params(variant(32, 7, 7, 64, 5, q, DType::bf16, nchw, nchw, nhwc)).mode, 0);
  }
  {  // The seed model's conv (128 x 8 x 128² -> 64 3 x 3, NCHW) on 132 multiprocessors. f32: the
     // implicit GEMM, 128-pixel tiles over all images (128 x 126² / 128 = 15876) x one 64-channel
     // tile; on 2 images 249 tiles, still a wave; on 1 image 125 tiles: the direct kernel.
    const Conv2dVariant v = variant(8, 128, 128, 64, 3, Conv2dParams{}, DType::f32, nchw, nchw, nchw);
    alignas(16) static const unsigned char buffer[16] = {};
    const Arch sm90 = Arch::parse("sm_90");
    const ci::GenericConvLaunch l = ci::plan_generic_conv(v, 128, sm90, buffer, buffer, 132);
    EXPECT_EQ(l.params.mode, 5);
    EXPECT_EQ(l.grid.threads, 128);
    EXPECT_EQ(l.grid.blocks_x, 15876);
    EXPECT_EQ(l.grid.blocks_y, 1);
    EXPECT_EQ(l.grid_z, 1u);
    EXPECT_EQ(l.params.images, 128);
    EXPECT_EQ(ci::generic_conv_symbol(DType::f32, l.params.mode), "cuinline_conv2d_rt_gemm_f32");
    EXPECT_EQ(ci::plan_generic_conv(v, 2, sm90, buffer, buffer, 132).params.mode, 5);
    EXPECT_EQ(ci::plan_generic_conv(v, 1, sm90, buffer, buffer, 132).params.mode, 0);
    EXPECT_EQ(ci::plan_generic_conv(v, 128, sm90, buffer, buffer).params.mode, 0) << "no SM count";
    // Offsets from a pixel's input origin past 32 bits (60 channels of 5792² NCHW, an image under
    // 2^31 elements: (60 + 8) x 5792² > 2^31): the direct kernel; 16 channels: the GEMM.
    EXPECT_NE(ci::plan_generic_conv(variant(60, 5792, 5792, 64, 3, Conv2dParams{}, DType::f32, nchw, nchw, nchw), 1,
                                    sm90, buffer, buffer, 132)
                  .params.mode,
              5);
    EXPECT_EQ(ci::plan_generic_conv(variant(16, 5792, 5792, 64, 3, Conv2dParams{}, DType::f32, nchw, nchw, nchw), 1,
                                    sm90, buffer, buffer, 132)
                  .params.mode,
              5);
    // Fewer than 32 output channels: the direct kernel (see below).
    EXPECT_NE(ci::plan_generic_conv(variant(8, 128, 128, 24, 3, Conv2dParams{}, DType::f32, nchw, nchw, nchw), 128,
                                    sm90, buffer, buffer, 132)
                  .params.mode,
              5);
    // f64 (no GEMM form): the direct kernel's pixel-row form, 126 rows of 32 groups of 4 pixels,
    // 32 blocks of 128 x 8 channel tiles x 128 images; on 2 images too few blocks for it.
    const Conv2dVariant d = variant(8, 128, 128, 64, 3, Conv2dParams{}, DType::f64, nchw, nchw, nchw);
    const ci::GenericConvLaunch px = ci::plan_generic_conv(d, 128, sm90, buffer, buffer, 132);
    EXPECT_EQ(px.params.mode, 4);
    EXPECT_EQ(px.grid.threads, 128);
    EXPECT_EQ(px.grid.blocks_x, 32);
    EXPECT_EQ(px.grid.blocks_y, 8);
    EXPECT_EQ(px.grid_z, 128u);
    EXPECT_EQ(ci::generic_conv_symbol(DType::f64, px.params.mode), "cuinline_conv2d_rt_px_f64");
    EXPECT_EQ(ci::plan_generic_conv(d, 2, sm90, buffer, buffer, 132).params.mode, 0);
    // f32 channels-last with 16-byte channel runs: the direct kernel's vector loads.
    EXPECT_EQ(ci::plan_generic_conv(variant(8, 128, 128, 64, 3, Conv2dParams{}, DType::f32, nhwc, nhwc, nhwc), 128,
                                    sm90, buffer, buffer, 132)
                  .params.mode,
              0);
  }
  {  // The gathered form's packed weight: ResNet-50's stem (3 -> 64, 7 x 7, stride 2, padding 3) f16
     // channels-last on 132 multiprocessors. Batch 8: 1568 tiles (>= 8 a multiprocessor): K 147
     // packed into rows of 160; batch 1: 196 tiles, gathered.
    Conv2dParams q;
    q.stride_h = q.stride_w = 2;
    q.pad_h = q.pad_w = 3;
    const Conv2dVariant v = variant(3, 224, 224, 64, 7, q, DType::f16, nhwc, nhwc, nhwc);
    alignas(16) static const unsigned char buffer[16] = {};
    const Arch sm90 = Arch::parse("sm_90");
    const ci::GenericConvLaunch eight = ci::plan_generic_conv(v, 8, sm90, buffer, buffer, 132);
    EXPECT_EQ(eight.params.mode, 3);
    EXPECT_EQ(eight.grid.blocks_x, 1568);
    EXPECT_EQ(eight.pack_kpad, 160);
    EXPECT_EQ(eight.weight_w_o, 147);
    EXPECT_EQ(eight.params.w_o, 160);
    EXPECT_EQ(eight.params.vec_w, 1);
    EXPECT_EQ(eight.pack_bytes, 64u * 160 * 2);
    EXPECT_EQ(ci::generic_conv_pack_symbol(DType::bf16), "cuinline_conv2d_rt_wpack_bf16");
    const ci::GenericConvLaunch one = ci::plan_generic_conv(v, 1, sm90, buffer, buffer, 132);
    EXPECT_EQ(one.params.mode, 3);
    EXPECT_EQ(one.pack_kpad, 0);
    EXPECT_EQ(one.params.w_o, 147);
    EXPECT_EQ(one.params.vec_w, 0);
    EXPECT_EQ(ci::plan_generic_conv(v, 8, sm90, buffer, buffer).pack_kpad, 0) << "no SM count";
  }
  {  // Split K of the tensor-core kernel: ResNet-50's 512 -> 512 3 x 3 on 7² (padding 1), f16
     // channels-last, 16-byte aligned, on an sm_90 device of 132 multiprocessors.
    Conv2dParams q;
    q.pad_h = q.pad_w = 1;
    const Conv2dVariant v = variant(512, 7, 7, 512, 3, q, DType::f16, nhwc, nhwc, nhwc);
    alignas(16) static const unsigned char buffer[16] = {};
    const Arch sm90 = Arch::parse("sm_90");
    // Batch 1: 49 pixels, one M tile x 8 N tiles; 9 taps x 16 K tiles of 32 channels = 144 K tiles.
    const ci::GenericConvLaunch one = ci::plan_generic_conv(v, 1, sm90, buffer, buffer, 132);
    EXPECT_EQ(one.params.mode, 2);
    EXPECT_EQ(one.params.k_slices, 16) << "16 slices of 9 K tiles: 128 blocks";
    EXPECT_EQ(one.grid_z, 16u);
    EXPECT_EQ(one.partial_bytes, 8u * 16 * 64 * 64 * 4);
    EXPECT_EQ(one.counter_bytes, 8u * 4);
    EXPECT_EQ(ci::plan_generic_conv(v, 1, sm90, buffer, buffer).params.k_slices, 1) << "no SM count: no split";
    // Batch 8: 7 M tiles x 8 = 56 tiles, 132 / 56 = 2 slices.
    EXPECT_EQ(ci::plan_generic_conv(v, 8, sm90, buffer, buffer, 132).params.k_slices, 2);
    // A 1 x 1 filter of 2048 channels: 64 K tiles (the floor), 8 tiles: 8 slices of 8 K tiles.
    EXPECT_EQ(ci::plan_generic_conv(variant(2048, 7, 7, 512, 1, Conv2dParams{}, DType::f16, nhwc, nhwc, nhwc), 1,
                                    sm90, buffer, buffer, 132)
                  .params.k_slices,
              8);
    // 1024 channels: 32 K tiles, a reduction too short to split.
    EXPECT_EQ(ci::plan_generic_conv(variant(1024, 7, 7, 512, 1, Conv2dParams{}, DType::f16, nhwc, nhwc, nhwc), 1,
                                    sm90, buffer, buffer, 132)
                  .params.k_slices,
              1);
    // ResNet-50's 256-channel 3 x 3 on 14², batch 1: 4 x 4 tiles of 72 K tiles; 132 / 16 = 8 slices of 9.
    EXPECT_EQ(ci::plan_generic_conv(variant(256, 14, 14, 256, 3, q, DType::f16, nhwc, nhwc, nhwc), 1, sm90, buffer,
                                    buffer, 132)
                  .params.k_slices,
              8);
    // Batch 32: the wide tiling's 13 x 4 = 52 tiles of 128 x 128, in 3 slices of 48 K tiles (156
    // blocks; its 64 x 64 tiles, 25 x 8 = 200, would run whole).
    const ci::GenericConvLaunch many = ci::plan_generic_conv(v, 32, sm90, buffer, buffer, 132);
    EXPECT_EQ(many.params.mode, 6);
    EXPECT_EQ(ci::generic_conv_symbol(DType::f16, many.params.mode), "cuinline_conv2d_rt_mmaw_f16");
    EXPECT_EQ(many.grid.blocks_x, 13);
    EXPECT_EQ(many.grid.blocks_y, 4);
    EXPECT_EQ(many.grid.threads, 128);
    EXPECT_EQ(many.grid.shared_bytes, ci::kGenericConvWideSharedBytes);
    EXPECT_GT(many.grid.shared_bytes, 48u * 1024);
    EXPECT_EQ(many.params.k_slices, 3);
    EXPECT_EQ(many.grid_z, 3u);
    EXPECT_EQ(many.partial_bytes, 52u * 3 * 128 * 128 * 4);
    EXPECT_EQ(many.counter_bytes, 52u * 4);
    EXPECT_EQ(ci::plan_generic_conv(v, 32, sm90, buffer, buffer).params.mode, 2) << "no SM count";
    // Batch 8: 16 wide tiles would need 9 slices of 16 K tiles (under 18): the 64 x 64 tiles.
    EXPECT_EQ(ci::plan_generic_conv(v, 8, sm90, buffer, buffer, 132).params.mode, 2);
  }
  {  // The wide tiling unsplit: UNet's 512 -> 256 3 x 3 on 64² (f16 channels-last) at batch 8:
     // 256 x 2 = 512 tiles of 144 K tiles. Not for a 1 x 1 of 256 channels (8 K tiles), nor for 64
     // output channels, nor for a misaligned input (the gathered form).
    Conv2dParams q;
    q.pad_h = q.pad_w = 1;
    alignas(16) static const unsigned char buffer[32] = {};
    const Arch sm90 = Arch::parse("sm_90");
    const ci::GenericConvLaunch l = ci::plan_generic_conv(
        variant(512, 64, 64, 256, 3, q, DType::bf16, nhwc, nhwc, nhwc), 8, sm90, buffer, buffer, 132);
    EXPECT_EQ(l.params.mode, 6);
    EXPECT_EQ(l.grid.blocks_x, 256);
    EXPECT_EQ(l.grid.blocks_y, 2);
    EXPECT_EQ(l.params.k_slices, 1);
    EXPECT_EQ(l.partial_bytes, 0u);
    EXPECT_EQ(
        ci::plan_generic_conv(variant(256, 64, 64, 1024, 1, Conv2dParams{}, DType::bf16, nhwc, nhwc, nhwc), 8,
                              sm90, buffer, buffer, 132)
            .params.mode,
        2);
    EXPECT_EQ(ci::plan_generic_conv(variant(512, 64, 64, 64, 3, q, DType::bf16, nhwc, nhwc, nhwc), 8, sm90,
                                    buffer, buffer, 132)
                  .params.mode,
              2);
    EXPECT_EQ(ci::plan_generic_conv(variant(512, 64, 64, 256, 3, q, DType::bf16, nhwc, nhwc, nhwc), 8, sm90,
                                    buffer + 2, buffer, 132)
                  .params.mode,
              3);
    EXPECT_EQ(ci::plan_generic_conv(variant(512, 64, 64, 256, 3, q, DType::bf16, nhwc, nhwc, nhwc), 8,
                                    Arch::parse("sm_75"), buffer, buffer, 132)
                  .params.mode,
              0)
        << "no tensor-core kernel before sm_80";
  }
}

// CUINLINE_CONV2D_GENERIC_WIDE, read once in the process's first plan (each case a fresh process):
// 1 takes the wide tiling wherever the vector form runs (a 1 x 1 of 8 K tiles, 64 output channels),
// its K tiles split as the rule would where its tiles are few; 0 never (UNet's 512 -> 256 on 64²).
TEST(JitDeathTest, TheGenericWideKnobOverridesTheRule) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto nhwc = Conv2dLayout::nhwc;
  Conv2dParams q;
  q.pad_h = q.pad_w = 1;
  EXPECT_EXIT(
      {
        setenv("CUINLINE_CONV2D_GENERIC_WIDE", "1", 1);
        alignas(16) static const unsigned char buffer[16] = {};
        const Arch sm90 = Arch::parse("sm_90");
        const ci::GenericConvLaunch pointwise = ci::plan_generic_conv(
            variant(256, 64, 64, 1024, 1, Conv2dParams{}, DType::bf16, nhwc, nhwc, nhwc), 8, sm90, buffer,
            buffer, 132);
        const ci::GenericConvLaunch narrow = ci::plan_generic_conv(
            variant(512, 64, 64, 64, 3, q, DType::f16, nhwc, nhwc, nhwc), 8, sm90, buffer, buffer, 132);
        // 512 -> 512 on 7² at batch 1: 4 wide tiles of 144 K tiles, 16 slices of 9.
        const ci::GenericConvLaunch deep = ci::plan_generic_conv(
            variant(512, 7, 7, 512, 3, q, DType::f16, nhwc, nhwc, nhwc), 1, sm90, buffer, buffer, 132);
        const bool ok = pointwise.params.mode == 6 && pointwise.params.k_slices == 1 &&
                        narrow.params.mode == 6 && deep.params.mode == 6 && deep.params.k_slices == 16 &&
                        deep.partial_bytes == 4u * 16 * 128 * 128 * 4;
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        setenv("CUINLINE_CONV2D_GENERIC_WIDE", "0", 1);
        alignas(16) static const unsigned char buffer[16] = {};
        const ci::GenericConvLaunch l =
            ci::plan_generic_conv(variant(512, 64, 64, 256, 3, q, DType::bf16, nhwc, nhwc, nhwc), 8,
                                  Arch::parse("sm_90"), buffer, buffer, 132);
        std::exit(l.params.mode == 2 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

// The epilogue's program holds the steps and opmath constants of the specialized conv's rendered
// functor (render_conv2d_epilogue: the chain lowered at fp32 for f16 / bf16, fp64 for f64), its
// channel operands as inputs 1.., in order.
TEST(Jit, GenericConvEpilogueProgramsHoldTheRenderedConstants) {
  const char* epilogues[] = {"div(3)|leaky_relu(0.01)", "mul(in1)|add(in2)|gelu_tanh|clamp(-0.7, 2.5)",
                             "where(in1, 0.1)|hardswish|elu(0.3)", "add(0.1)|sub(in1)|threshold(0.2, 7)"};
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
    const DType a = dt == DType::f64 ? DType::f64 : DType::f32;
    for (const char* text : epilogues) {
      const ops::Op op = ops::parse_op(text);
      const ops::detail::GenericProgram p = ci::generic_conv_program(op, dt);
      const auto lowered = detail::lower_chain(op, a);
      ASSERT_EQ(p.steps, static_cast<int>(lowered.size())) << text;
      EXPECT_EQ(p.inputs, ops::conv2d_epilogue_operands(op) + 1);
      const std::string source = ci::render_conv2d_epilogue(op, dt, 20);
      std::size_t at = 0;
      for (int i = 0; i < p.steps; ++i) {
        const auto& l = lowered[static_cast<std::size_t>(i)];
        EXPECT_EQ(p.step[i].fn, static_cast<int>(l.fn));
        EXPECT_EQ(p.step[i].operand, l.operand);
        EXPECT_EQ(p.step[i].cond, l.cond);
        const std::size_t call = source.find("x = ew_", at);
        ASSERT_NE(call, std::string::npos) << source;
        const std::size_t end = source.find(';', call);
        const std::string statement = source.substr(call, end - call);
        at = end;
        for (int c = 0; c < 3; ++c) {
          EXPECT_EQ(p.step[i].c[c], detail::opmath_value(l.c[c], a));
          if (p.step[i].c[c] != 0) {
            EXPECT_NE(statement.find(detail::opmath_literal(p.step[i].c[c], a)), std::string::npos)
                << text << " " << to_string(dt) << ": " << statement;
          }
        }
        if (l.has_storage) {
          EXPECT_EQ(p.step[i].storage, detail::scalar_storage_bits(l.storage, a));
          EXPECT_NE(statement.find(detail::storage_literal(l.storage, a)), std::string::npos) << statement;
        }
      }
    }
  }
  EXPECT_THROW(ci::generic_conv_program(ops::Op::expr("x * 2"), DType::f32), InvalidArgument);
  EXPECT_EQ(ci::generic_conv_program(ops::Op::chain({}), DType::f16).steps, 0) << "identity: no steps";
}

// Chains of up to 32 lowered steps with or without channel operands, in every dtype and layout; not
// expressions (they compile under every policy) or longer chains.
TEST(Jit, WhatTheGenericConvKernelServes) {
  const bool built = generic_kernels_built();
  const auto nchw = Conv2dLayout::nchw, nhwc = Conv2dLayout::nhwc;
  Conv2dParams q;
  q.groups = 2;
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
    EXPECT_EQ(ci::generic_conv_applies(variant(8, 10, 10, 6, 3, q, dt, nhwc, nchw, nhwc, "mul(in1)|silu")), built);
    EXPECT_EQ(ci::generic_conv_applies(variant(8, 10, 10, 6, 3, Conv2dParams{}, dt, nchw, nchw, nchw, "")),
              built);
  }
  Conv2dVariant v = variant(8, 10, 10, 6, 3, Conv2dParams{}, DType::f32, nchw, nchw, nchw);
  v.epilogue = ops::Op::expr("x * 2");
  EXPECT_FALSE(ci::generic_conv_applies(v)) << "expressions compile";
  std::string long_chain = "relu";
  for (int i = 0; i < 31; ++i) long_chain += "|mul(2)";
  v.epilogue = ops::parse_op(long_chain);
  EXPECT_EQ(ci::generic_conv_applies(v), built) << "32 steps";
  v.epilogue = ops::parse_op(long_chain + "|div_leaky_relu(2, 0.1)");
  EXPECT_FALSE(ci::generic_conv_applies(v)) << "34 lowered steps";
}

}  // namespace conv
}  // namespace
}  // namespace cuinline
