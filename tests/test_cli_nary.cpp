// `cuinline run` / `cuinline bench` with an N-ary op (--inputs): the usage errors — shapes that do
// not broadcast, too many inputs, an op that needs more inputs or other outputs than given, bad
// shapes, flags that do not go together — exit 2 before any GPU is looked for (so these pass on a
// machine without one), compile nothing, and say what was wrong; so do those of the row reductions.
// The runs themselves are in test_cli_nary_gpu.cpp. And `cuinline bench --compile`, which needs no
// GPU.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cuinline/driver.hpp>
#include <cuinline/kernel_cache.hpp>
#include <cuinline/reductions.hpp>
#include <string>
#include <vector>

#include "cli_test_support.hpp"

namespace {

using namespace cuinline::test;

struct Mistake {
  std::vector<std::string> args;
  const char* says;
};

// Each mistake exits 2 with its message, before the command looks for a GPU.
class CliMistakes : public CliTest {
 protected:
  void expect_usage_errors(const std::vector<Mistake>& mistakes) {
    for (const Mistake& m : mistakes) {
      std::string line;
      for (const auto& a : m.args) line += a + " ";
      SCOPED_TRACE(line);
      const Result r = cli(m.args);
      EXPECT_EQ(r.code, 2) << r.out << r.err;
      EXPECT_CONTAINS(r.err, m.says);
      EXPECT_EQ(r.err.find("needs a GPU"), std::string::npos) << "checked before looking for a GPU";
    }
  }
};

TEST_F(CliMistakes, NaryMistakesExit2BeforeTheGpu) {
  const std::vector<Mistake> mistakes = {
      {{"run", "add(in1)|relu", "--inputs", "3x4,5"},
       "--inputs: input 1 [5] does not broadcast with input 0 [3, 4]"},
      {{"run", "where(in1, in2)", "--inputs", "8x16,8x1,4x16"},
       "--inputs: input 2 [4, 16] does not broadcast with input 0 [8, 16]"},
      {{"run", "add(in1)", "--inputs", "16,16,16,16,16,16,16,16,16"},
       "--inputs: 9 shapes given; an op takes at most 8 inputs"},
      {{"run", "add(in1)|mul(in2)", "--inputs", "64x256,256"}, "it uses 3 inputs, 2 given"},
      {{"run", "where(in3, 0.5)", "--inputs", "64x256,256"}, "it uses 4 inputs, 2 given"},
      {{"run", "expr([a, b] a * b)", "--inputs", "64,64,64"}, "it names 2 inputs, 3 given"},
      {{"run", "expr([a, b] a + b)", "--inputs", "64,64", "--outputs", "2"}, "it has 1 output(s), 2 given"},
      {{"run", "expr([a, b] a * c)", "--inputs", "64,64"}, "the expression names 'c'"},
      {{"run", "add(in1)", "--inputs", "64x256,256x"}, "--inputs: '256x' is not a shape"},
      {{"run", "add(in1)", "--inputs", "64x0,64"}, "--inputs: '64x0' is not a shape"},
      {{"run", "add(in1)", "--inputs", ""}, "--inputs: '' is not a shape"},
      {{"run", "where(in0, in1)", "--inputs", "64,64"}, "input 0 is the chain's start"},
      {{"run", "add(in1)", "--inputs", "64,64", "--dtype", "f8"}, "--dtype: expected one of f32,f16,bf16,f64"},
      {{"run", "add(in1)", "--inputs", "64,64", "--shape", "64"}, "--inputs: give the shapes there, not --shape"},
      {{"run", "conv2d", "--inputs", "8x8x32x32"}, "conv2d takes --shape, not --inputs"},
      {{"run", "add(in1)", "--inputs", "64,64", "--precision", "tf32"}, "--precision: only the conv2d op"},
      {{"run", "relu", "--outputs", "2"}, "--outputs: only with --inputs"},
      {{"run", "add(in1)|relu"}, "uses 2 input(s) and 1 output(s): give the inputs' shapes with --inputs"},
      {{"run", "expr([a, b] a + b | y0 * 2.0f)", "--shape", "64"}, "give the inputs' shapes with --inputs"},
      {{"bench", "add(in1)|relu", "--inputs", "3x4,5"}, "--inputs: input 1 [5] does not broadcast"},
      {{"bench", "add(in1)|mul(in2)", "--inputs", "64,64"}, "it uses 3 inputs, 2 given"},
      {{"bench", "add(in1)"}, "give the input shapes, e.g. --inputs"},
      {{"bench", "--inputs", "64,64"}, "--inputs: name the op as well"},
      {{"bench", "add(in1)", "--inputs", "64,64", "--quick"}, "--quick: only for the standard table"},
      {{"bench", "--dtype", "bf16"}, "only with an op and --inputs"},
  };
  expect_usage_errors(mistakes);
  EXPECT_EQ(cli({"run", "add(in1)", "--inputs", "64,64", "--outputs", "5"}).code, 2);  // CLI11's range
  EXPECT_TRUE(entry_files().empty()) << "nothing was compiled";
}

TEST_F(CliTest, NaryRunWithoutAGpuSaysSoAfterTheChecks) {
  if (cuinline::device_count() > 0) GTEST_SKIP() << "a GPU is present (test_cli_nary_gpu runs the op)";
  // Valid calls, a scalar ("scalar" and "1") among the inputs: planned, then exit 1 for the missing GPU.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"run", "where(in1, in2)|add(in3)", "--inputs", "64x256,256,scalar,1", "--dtype", "bf16"},
        std::vector<std::string>{"bench", "expr([a, b] a / (1.0f + expf(-a)) * b)", "--inputs", "64x256,64x256"}}) {
    const Result r = cli(args);
    EXPECT_EQ(r.code, 1) << r.out << r.err;
    EXPECT_CONTAINS(r.err, "needs a GPU");
  }
  EXPECT_TRUE(entry_files().empty());
}

// The row reductions (softmax and the norms): their usage errors exit 2 before any GPU is looked for.
TEST_F(CliMistakes, RowReductionMistakesExit2BeforeTheGpu) {
  const std::vector<Mistake> mistakes = {
      {{"run", "softmx"}, "unknown step 'softmx'"},
      {{"run", "softmx"}, "or a row reduction: softmax, log_softmax, rms_norm, add_rms_norm, layer_norm"},
      {{"run", "softmax", "--shape", "4096"}, "--shape: softmax takes ROWSxCOLS"},
      {{"run", "rms_norm", "--shape", "8x64x64"}, "--shape: rms_norm takes ROWSxCOLS"},
      {{"run", "layer_norm", "--shape", "64x0"}, "--shape: expected positive sizes"},
      {{"run", "rms_norm", "--eps", "-1e-6"}, "--eps: must be finite and >= 0, got -1e-06"},
      {{"run", "layer_norm", "--eps", "inf"}, "--eps: must be finite and >= 0, got inf"},
      {{"run", "softmax", "--eps", "1e-5"}, "--eps: softmax takes no eps"},
      {{"run", "relu", "--eps", "1e-5"}, "--eps: only rms_norm, add_rms_norm and layer_norm take eps"},
      {{"run", "add_rms_norm", "--dtype", "f8"}, "--dtype: expected one of f32,f16,bf16,f64, got 'f8'"},
      {{"run", "log_softmax", "--inputs", "64x64"}, "log_softmax takes --shape ROWSxCOLS, not --inputs"},
      {{"run", "rms_norm", "--precision", "tf32"}, "only conv2d takes them, not 'rms_norm'"},
      {{"run", "softmax", "--shape", "4000000000x8193"}, "softmax: too many rows for one launch"},
      {{"run", "softmax", "--prologue", "add(in1)"}, "softmax: the prologue add(in1) uses tensor operands"},
      {{"run", "rms_norm", "--epilogue", "mul(in1"}, "--epilogue: parsing op 'mul(in1': missing ')'"},
      {{"run", "layer_norm", "--epilogue", "expr(x * 2)"}, "the epilogue expr(x * 2) is an expression"},
      {{"run", "relu", "--prologue", "mul(2)"}, "--prologue / --epilogue: only the row reductions"},
  };
  expect_usage_errors(mistakes);
  if (cuinline::device_count() == 0) {  // a valid call: checked, then exit 1 for the missing GPU
    const Result r = cli({"run", "layer_norm", "--dtype", "f64", "--shape", "8x100000", "--eps", "0"});
    EXPECT_EQ(r.code, 1) << r.out << r.err;
    EXPECT_CONTAINS(r.err, "needs a GPU");
  }
  EXPECT_TRUE(entry_files().empty()) << "nothing was compiled";
}

// cuinline bench --compile: each family's rows, each compile split into NVRTC's phases (front end,
// NVVM and ptxas all reported, so the --time report was read), through a memory-only cache: nothing
// is written to the cache directory. Its usage errors exit 2 and compile nothing.
TEST_F(CliMistakes, BenchCompileSplitsCompilesIntoNvrtcPhases) {
  const Result r = cli({"bench", "--compile", "--arch", "sm_90", "--repeat", "1", "--family", "elementwise,reductions"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_CONTAINS(r.out, "NVRTC ");
  EXPECT_CONTAINS(r.out, "first compile in this process (elementwise f32)");
  for (const char* row : {"elementwise f32 mul(k)|gelu", "elementwise bf16 mul(k)|leaky_relu(0.02)",
                          "elementwise f64 mul(k)|gelu", "reductions bf16 rms_norm, rows of 4096, prologue mul(k)"}) {
    const std::size_t at = r.out.find(row);
    ASSERT_NE(at, std::string::npos) << row << " in\n" << r.out;
    const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
    // "<row>   <wall>  (<front> / <nvvm> / <ptxas>)"
    const std::size_t paren = line.find('(', line.find(row) + std::string(row).size());
    ASSERT_NE(paren, std::string::npos) << line;
    const std::string before = line.substr(0, line.find_last_not_of(' ', paren - 1) + 1);
    const double wall = std::atof(before.c_str() + before.rfind(' ') + 1);
    double front = 0, nvvm = 0, ptxas = 0;
    ASSERT_EQ(std::sscanf(line.c_str() + paren, "( %lf / %lf / %lf", &front, &nvvm, &ptxas), 3) << line;
    EXPECT_GT(front, 0) << line;
    EXPECT_GT(nvvm, 0) << line;
    EXPECT_GT(ptxas, 0) << line;
    EXPECT_GE(wall, front) << line;
  }
  EXPECT_EQ(r.out.find("conv2d"), std::string::npos) << "only the families asked for";
  EXPECT_TRUE(entry_files().empty()) << "a memory-only cache";
  expect_usage_errors({
      {{"bench", "--compile", "--arch", "sm_90", "--family", "conv3d"},
       "--family 'conv3d': the families are elementwise, nary, conv2d and reductions"},
      {{"bench", "--family", "conv2d"}, "bench: --arch and --family go with --compile"},
      {{"bench", "--arch", "sm_90"}, "bench: --arch and --family go with --compile"},
      {{"bench", "--compile", "--arch", "sm_90", "relu", "--inputs", "8x8"}, "it takes no op or --inputs"},
      {{"bench", "--compile", "--arch", "sm_9x"}, "--arch: "},
  });
  if (cuinline::device_count() == 0) {
    const Result no_arch = cli({"bench", "--compile"});
    EXPECT_EQ(no_arch.code, 2) << no_arch.out << no_arch.err;
    EXPECT_CONTAINS(no_arch.err, "no GPU to take the architecture from; pass --arch");
  }
}

// A where chain flows through a warm spec's N-ary entries like any chain.
TEST_F(CliTest, WarmSpecTakesWhereSteps) {
  auto spec = write_spec("s.json", R"json({"entries": [{"kind": "op", "op": ["mul(in1)|where(in2, in3)",
      "where(in2, 0.1)|relu"], "dtype": ["f16", "f64"], "inputs": [[64, 256], [64, 256], [256], [64, 1]]}]})json");
  const Result r = cli({"warm", "--spec", spec.string(), "--arch", "sm_90", "--dry-run"});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_CONTAINS(r.out, "mul(in1)|where(in2,in3) f16");
  EXPECT_CONTAINS(r.out, "where(in2,0.1)|relu f64");
  EXPECT_CONTAINS(r.out, "4 variants");
  auto bad = write_spec("bad.json", R"json({"entries": [{"kind": "op", "op": "where(in1, in2)", "dtype": "f32",
      "inputs": [[64, 256], [256]]}]})json");
  const Result b = cli({"warm", "--spec", bad.string(), "--arch", "sm_90", "--dry-run"});
  EXPECT_EQ(b.code, 2) << b.out << b.err;
  EXPECT_CONTAINS(b.err, "it uses 3 inputs, 2 given");
}

// A reductions entry with chains warms the fused variants a call with those chains then finds (its
// epilogue tensors aligned as x); a chain the ops refuse names its field and compiles nothing.
TEST_F(CliTest, WarmReductionsWithChains) {
  auto spec = write_spec("r.json", R"json({"entries": [
      {"kind": "reductions", "op": "softmax", "dtype": "f32", "row_length": 100, "prologue": "mul(0.125)"},
      {"kind": "reductions", "op": "rms_norm", "dtype": "bf16", "row_length": 100, "epilogue": "mul(in1)"}]})json");
  const Result warm = cli({"warm", "--spec", spec.string(), "--arch", "sm_90", "-j", "2"});
  ASSERT_EQ(warm.code, 0) << warm.out << warm.err;
  EXPECT_CONTAINS(warm.out, "warm: 2 compiled, 0 already cached, 0 failed");
  EXPECT_CONTAINS(warm.out, "compiled softmax<f32,warp,v4,e4,pro=mul(0.125)> sm_90");
  cuinline::CacheConfig config;
  config.directory = cache_;
  cuinline::KernelCache cache(config);
  using cuinline::DType;
  using cuinline::TensorView;
  const auto fake = [](std::uintptr_t a) { return reinterpret_cast<void*>(a); };
  const auto rows = [&](std::uintptr_t a, DType dt) { return TensorView::contiguous(fake(a), dt, {3, 100}); };
  cuinline::ops::RowFusion scale, gate;
  scale.prologue = cuinline::ops::parse_op("mul(0.125)");
  gate.epilogue = cuinline::ops::parse_op("mul(in1)");
  gate.epilogue_inputs = {rows(0x50000000, DType::bf16)};
  for (const cuinline::ops::RowPlan& plan :
       {cuinline::ops::plan_rows(cuinline::ops::RowOp::softmax, rows(0x10000000, DType::f32),
                                 rows(0x20000000, DType::f32), {}, {}, {}, 0, scale),
        cuinline::ops::plan_rows(cuinline::ops::RowOp::rms_norm, rows(0x10000000, DType::bf16),
                                 rows(0x20000000, DType::bf16), {}, {}, {}, 1e-6, gate)}) {
    cuinline::CacheTier tier = cuinline::CacheTier::compiled;
    cache.get(cuinline::ops::make_request(plan.variant), cuinline::Arch::parse("sm_90"), &tier);
    EXPECT_NE(tier, cuinline::CacheTier::compiled) << plan.variant.name();
  }
  EXPECT_EQ(cache.stats().compiles, 0u);
  const std::size_t entries = entry_files().size();
  auto bad = write_spec("bad.json", R"json({"entries": [{"kind": "reductions", "op": "softmax", "dtype": "f32",
      "row_length": 100, "prologue": "add(in1)"}]})json");
  const Result b = cli({"warm", "--spec", bad.string(), "--arch", "sm_90"});
  EXPECT_EQ(b.code, 2) << b.out << b.err;
  EXPECT_CONTAINS(b.err, "entries[0].prologue: softmax: the prologue add(in1) uses tensor operands");
  EXPECT_EQ(entry_files().size(), entries);
}

TEST_F(CliTest, HelpNamesTheNaryOptions) {
  const Result run = cli({"run", "--help"});
  EXPECT_EQ(run.code, 0);
  EXPECT_CONTAINS(run.out, "--inputs");
  EXPECT_CONTAINS(run.out, "--outputs");
  const Result bench = cli({"bench", "--help"});
  EXPECT_EQ(bench.code, 0);
  EXPECT_CONTAINS(bench.out, "--inputs");
  EXPECT_CONTAINS(bench.out, "--dtype");
}

}  // namespace
