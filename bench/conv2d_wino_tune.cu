// Standalone tuning harness for kernel_templates/conv2d_winograd.cuh (not part of the CMake build):
//   nvcc -O3 -std=c++17 -arch=sm_90 --fmad=false -Xptxas=-O1 bench/conv2d_wino_tune.cu -o /tmp/wt && /tmp/wt [index]
// Times several tilings of the Winograd F(2x2, 3x3) kernel on the seed shape (128x8x128x128, 64
// filters 3x3, /2, LeakyReLU 0.01) against a double-accumulation reference (conv2d_tune_common.cuh).
#include "../kernel_templates/conv2d.cuh"
#include "../kernel_templates/conv2d_winograd.cuh"
#include "conv2d_tune_common.cuh"

template <int TT, int TCO, int LX, int WX, int WC, int CIC, int MINB, int RT, int UNR = 8>
struct Seed : SeedShape {
  static constexpr int kRT = RT;
  static constexpr int kTT = TT, kTCo = TCO, kLX = LX, kWX = WX, kWC = WC, kCiChunk = CIC, kMinBlocks = MINB,
                       kCiUnroll = UNR;
};

template <class S>
void run(const char* name, SeedData& d) {
  using P = cuinline_conv2d_wino_detail::WPlan<S>;
  run_variant<P>(name, cuinline_conv2d_winograd<S, DivLeaky>, S::kRT, d);
}

// The library's direct FMA tiling of the seed (bench/conv2d_tune.cu variant 0): the in-run baseline.
struct DirectSeed : SeedShape {
  static constexpr int kTX = 32, kTY = 2, kTG = 4, kTP = 4, kTC = 16, kTK = 1, kCiChunk = 8, kCiUnroll = 1,
                       kKhUnroll = 3, kMinBlocks = 2, kPipeline = 1, kColPhases = 1;
};

int main(int argc, char** argv) {
  const int only = argc > 1 ? atoi(argv[1]) : -1;  // run one variant (for ncu)
  int index = 0;
  SeedData d;
  printf("floors: FMA 0.28 ms direct (0.125 ms of Winograd products), bytes 587 MB\n");
  print_bandwidth_peers(d);
  if (only < 0) {
    run_variant<cuinline_conv2d_detail::Plan<DirectSeed>>("direct FMA (library, fp32)",
                                                          cuinline_conv2d<DirectSeed, DivLeaky>, 4, d);
  }
  // TT, TCo, LX, WX, WC, CI chunk, min blocks, row tiles, CI unroll
  // H200, 2026-11-21, ptxas -O1 as the library compiles it, in-run direct baseline 0.573 ms: 0 ran
  // 0.436, 1 0.444, 2 0.433, 3 0.421; rows of 4 tile rows 0.478-0.481; 4 tiles x 2 channels a thread
  // 0.519. At ptxas's default -O3 the same kernels ran 0.462-0.530 (the lane numbering before pairs:
  // 0.513). With --Ofast-compile=min 0.430-0.485; =mid spilled (6.7 ms). Staging U in a bank-conflict-
  // free order (consecutive threads on consecutive channel groups) ran 0.450 against 0.434 (A/B).
  RUN(2, 4, 8, 1, 4, 8, 2, 8, 1);  // 0: the library's seed tiling (channel loop rolled, 8 warps an SM)
  RUN(2, 4, 8, 1, 4, 8, 3, 8, 1);  // 1: 12 warps an SM (168 registers)
  RUN(2, 4, 8, 1, 4, 8, 3, 8, 4);  // 2: channel loop unrolled 4
  RUN(2, 4, 8, 1, 4, 8, 3, 8, 8);  // 3: unrolled 8 (NVRTC ~2.3x the time of 0)
  return 0;
}
