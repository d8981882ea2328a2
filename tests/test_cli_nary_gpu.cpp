// `cuinline run` / `cuinline bench` with N-ary ops on a GPU: chains (tensor operands, where with
// broadcast conditions, scalar inputs) bit-exact against the CLI's CPU reference in every dtype;
// chains with activation steps within the host-libm tolerance;
// an expression reported as written with no reference; bench prints the op's bandwidth beside a copy.
#include <gtest/gtest.h>

#include <cuinline/driver.hpp>
#include <string>
#include <vector>

#include "cli_test_support.hpp"

namespace {

using namespace cuinline::test;

class CliNaryGpu : public CliTest {
 protected:
  void SetUp() override {
    if (cuinline::device_count() == 0) GTEST_SKIP() << "no GPU: " << cuinline::driver_unavailable_reason();
    CliTest::SetUp();
  }
};

TEST_F(CliNaryGpu, ChainsAreBitExactAgainstTheCpuReference) {
  struct Case {
    const char* op;
    const char* inputs;
  };
  const std::vector<Case> cases = {
      {"add(in1)|relu", "256x1024,1024"},
      {"mul(in1)|where(in2, in3)|add(0.5)|where(in2, 0.1)|relu", "256x1024,256x1024,1024,256x1"},
      {"div(in1)|sub(in2)|clamp(-1,1)", "33x129,33x1,scalar"},
      {"where(in1, -0)|mul(in2)", "8x16x32,8x1x32,1"},  // a middle broadcast: the strided path
  };
  for (const char* dtype : {"f32", "f16", "bf16", "f64"}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(dtype) + " " + c.op + " " + c.inputs);
      const Result r = cli({"run", c.op, "--inputs", c.inputs, "--dtype", dtype, "--repeat", "3"});
      EXPECT_EQ(r.code, 0) << r.out << r.err;
      EXPECT_CONTAINS(r.out, "ok, bit-exact against the CPU reference");
      EXPECT_CONTAINS(r.out, "seed");
    }
  }
}

// Activation steps: the CPU reference is the host's libm, not CUDA's, so the check allows a few ulp
// and says so; a wrong result still fails (FunctionsGpu tests that side). One input without
// --inputs (the one-input path) and over tensor operands (the N-ary path).
TEST_F(CliNaryGpu, ActivationStepsAreCheckedWithinTheHostLibmTolerance) {
  for (const char* dtype : {"f32", "f16", "bf16", "f64"}) {
    SCOPED_TRACE(dtype);
    Result r = cli({"run", "add(in1)|gelu|mul(in2)", "--inputs", "256x1024,1024,256x1024", "--dtype", dtype,
                    "--repeat", "3"});
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_CONTAINS(r.out, "ok against the CPU reference");
    EXPECT_CONTAINS(r.out, "within the host-libm tolerance");
    r = cli({"run", "mish|softplus(2,5)", "--dtype", dtype, "--shape", "1000003", "--repeat", "3"});
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_EQ(r.out.find("FAILED"), std::string::npos) << r.out;
    EXPECT_TRUE(r.out.find("differ from the CPU reference (the host's libm, not CUDA's)") != std::string::npos ||
                r.out.find("ok, bit-exact against the CPU reference") != std::string::npos)
        << r.out;
  }
}

TEST_F(CliNaryGpu, ExpressionsAreCheckedForBeingWrittenOnly) {
  const Result r = cli({"run", "expr([a, b] a / (1.0f + expf(-a)) * b | y0 * 2.0f)", "--inputs", "512x1024,512x1024",
                        "--dtype", "bf16", "--repeat", "3"});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_CONTAINS(r.out, "all 1048576 outputs written");
  EXPECT_CONTAINS(r.out, "no CPU reference exists for expressions");
}

TEST_F(CliNaryGpu, BenchPrintsTheCopyBeside) {
  const Result r = cli({"bench", "add(in1)|relu", "--inputs", "4096x4096,4096", "--dtype", "bf16", "--repeat", "5"});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_CONTAINS(r.out, "the L2 flushed before each");
  EXPECT_CONTAINS(r.out, "copied (cuMemcpyDtoDAsync)");
  EXPECT_CONTAINS(r.out, "ok, bit-exact");
}

// The row reductions through `cuinline run`: each row against the float64 reference, exit 0.
TEST_F(CliNaryGpu, RowReductionsPassTheirCheck) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"run", "rms_norm", "--shape", "512x4096", "--repeat", "3"},
        std::vector<std::string>{"run", "softmax", "--dtype", "bf16", "--shape", "64x100000", "--repeat", "3"},
        std::vector<std::string>{"run", "softmax", "--prologue", "mul(0.125)", "--shape", "512x4096", "--repeat", "3"},
        std::vector<std::string>{"run", "add_rms_norm", "--dtype", "f16", "--prologue", "mul(0.5)", "--epilogue",
                                 "silu|mul(in1)", "--shape", "64x40000", "--repeat", "3"}}) {
    SCOPED_TRACE(args[1]);
    const Result r = cli(args);
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_CONTAINS(r.out, "check      passed: ");
    EXPECT_CONTAINS(r.out, "GB/s");
  }
}

}  // namespace
