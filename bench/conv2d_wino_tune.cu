// Standalone tuning harness for kernel_templates/conv2d_winograd.cuh (not part of the CMake build):
//   nvcc -O3 -std=c++17 -arch=sm_90 --fmad=false bench/conv2d_wino_tune.cu -o /tmp/w && /tmp/w [index]
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
                       kKhUnroll = 3, kMinBlocks = 2, kPipeline = 1;
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
  // H200, 2026-11-21, in-run direct baseline 0.557 ms: 0 measured 0.469-0.51 (the library's own
  // launch 0.469); rolled channel loops spilled (1: 0.70 ms, 2: 0.50, 4: 0.73); 64 or 256 threads,
  // 8 or 32 tile lanes, a single barrier a step (double-buffered V) and 64-accumulator tiles with
  // the positions split over lane pairs were all slower (0.48-0.64 ms).
  RUN(2, 4, 8, 1, 4, 8, 3, 8, 8);   // 0: the library's seed tiling (16 tiles x 64 channels, 128 threads)
  RUN(2, 4, 8, 1, 4, 8, 3, 8, 2);   // 1: channel loop unrolled 2
  RUN(2, 4, 16, 1, 4, 8, 2, 8, 8);  // 2: 16 tile lanes (32 tiles x 32 channels), no register cap
  RUN(2, 4, 8, 2, 2, 8, 3, 8, 8);   // 3: 32 tiles x 32 channels
  RUN(2, 4, 8, 1, 4, 8, 3, 16, 8);  // 4: 16 tile rows a block
  return 0;
}
