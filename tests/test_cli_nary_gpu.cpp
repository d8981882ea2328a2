// `cuinline run` / `cuinline bench` with N-ary ops on a GPU: chains (tensor operands, where with
// broadcast conditions, scalar inputs) bit-exact against the CLI's CPU reference in every dtype;
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

}  // namespace
