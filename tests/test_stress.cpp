// Load and concurrency: 4 processes × 16 threads × 50 kernels on one small, always-evicting disk
// cache, offline for sm_90 (no GPU needed). See stress_run.hpp and docs/RELIABILITY.md.
#include "stress_run.hpp"

namespace cuinline {
namespace {

TEST(Stress, ProcessesThreadsAndEvictionNeverServeAWrongKernel) {
  test::run_stress(/*gpu=*/false);
}

}  // namespace
}  // namespace cuinline
