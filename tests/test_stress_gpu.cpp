// The stress test on a GPU: as test_stress, for the device's own arch, and every kernel obtained is
// also launched and its output checked (poisoned first, random salt per launch). Skips without a GPU.
#include "stress_run.hpp"

namespace cuinline {
namespace {

TEST(StressGpu, EveryKernelServedRunsAndComputesItsOwnResult) {
  if (device_count() == 0) GTEST_SKIP() << "no GPU: " << driver_unavailable_reason();
  test::run_stress(/*gpu=*/true);
}

}  // namespace
}  // namespace cuinline
