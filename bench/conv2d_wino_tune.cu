// Standalone tuning harness for kernel_templates/conv2d_winograd.cuh (not part of the CMake build):
//   nvcc -O3 -std=c++17 -arch=sm_90 --fmad=false -Xptxas=-O1 bench/conv2d_wino_tune.cu -o /tmp/wt && /tmp/wt [index]
// (-DWINO_PREV with a renamed earlier copy of the template in bench/wino_prev.cuh: that one first.)
// Times several tilings of the Winograd F(2x2, 3x3) and F(4x4, 3x3) kernels on the seed shape (128x8x128x128, 64
// filters 3x3, /2, LeakyReLU 0.01) against a double-accumulation reference (conv2d_tune_common.cuh).
#include "../kernel_templates/conv2d.cuh"
#include "../kernel_templates/conv2d_winograd.cuh"
#include "conv2d_tune_common.cuh"

#include <cstring>
#ifdef WINO_PREV  // an earlier copy of the template, renamed (wino_prev_detail, wino_prev_kernel): A/B in one run
#include "wino_prev.cuh"
#endif

template <int TT, int TCO, int LX, int WX, int WC, int CIC, int MINB, int RT, int UNR = 8, int M = 2, int TC = 0>
struct Seed : SeedShape {
  static constexpr int kRT = RT;
  static constexpr int kTT = TT, kTCo = TCO, kLX = LX, kWX = WX, kWC = WC, kCiChunk = CIC, kMinBlocks = MINB,
                       kCiUnroll = UNR, kWinoM = M, kWinoTC = TC;
};

// The first Winograd variant's output of each tile size m: every later one of that m is compared
// with it bit for bit (the tilings, the column fold and the raw buffers change no sum's order).
std::vector<float> g_first[5];

inline void compare_bits(SeedData& d, int m) {
  if (g_first[m].empty()) {
    g_first[m] = d.h_out;
    return;
  }
  size_t differ = 0;
  for (size_t i = 0; i < d.n_out; ++i) differ += std::memcmp(&g_first[m][i], &d.h_out[i], 4) != 0;
  printf("  %zu outputs differ in bits from the first F(%dx%d) variant\n", differ, m, m);
}

template <class S>
void run(const char* name, SeedData& d) {
  using P = cuinline_conv2d_wino_detail::WPlan<S>;
  run_variant<P>(name, cuinline_conv2d_winograd<S, DivLeaky>, S::kRT, d);
  compare_bits(d, P::kTC ? 3 : P::kM);  // (slot 3: the tensor-core F(2x2))
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
#ifdef WINO_PREV
  if (only < 0) {  // the 16-accumulator form before the column fold, the library's seed tiling
    using S = Seed<2, 4, 8, 1, 4, 8, 2, 8, 1>;
    run_variant<wino_prev_detail::WPlan<S>>("previous template: 2, 4, 8, 1, 4, 8, 2, 8, 1",
                                            wino_prev_kernel<S, DivLeaky>, S::kRT, d);
    compare_bits(d, 2);
  }
#endif
  // The column fold (2026-11-25): 8 registers a tile and channel instead of 16. H200, in-run
  // baseline (the previous template, 0.437 ms): 2 tiles x 4 channels 0.426-0.428 at 8-16 warps an SM
  // (105 registers), 4 tiles x 4 channels 0.479 (8 warps) / 0.440 (12), 4 tiles with 4 tile lanes
  // 0.553, 2 tiles x 8 channels 0.505, 4 tiles unrolled 2 0.468, 4 row tiles 0.483, 2 x 2 warps 0.505.
  // Then one raw input buffer (the next row's copy issued after the transform) and F(4x4, 3x3), same
  // run, previous template 0.439: F(2x2) 0.418 (unrolled 2: 0.424); F(4x4) 1 tile x 4 channels with
  // 4 warps 0.575, 2 x 4 warps 0.467 (4 row tiles 0.474, 16: 0.478, unrolled 2 0.460), 4 x 4 warps
  // 0.512, 2 x 2 warps 0.470, 1 x 2 warps 0.525, 2 tiles a thread (223 registers) 0.498. All F(4x4)
  // relative L2 8.8e-7 (F(2x2) 1.4e-7).
  // TT, TCo, LX, WX, WC, CI chunk, min blocks, row tiles, CI unroll, m
  RUN(2, 4, 8, 1, 4, 8, 4, 8, 1, 2);  // 0: F(2x2): the library's seed tiling
  RUN(2, 4, 8, 1, 4, 8, 4, 8, 8, 2);  // 1: channel loop unrolled
  RUN(2, 4, 8, 1, 4, 8, 4, 8, 4, 2);  // 2: unrolled 4
  // H100, 2026-11-26 (same process, two rounds): 0 ran 0.542-0.550 ms, 3 0.431-0.435 (ptxas -O2 / -O3
  // within 1 % of -O1 for both); H200 the same day 0.4164 / 0.4302. Through the library (H200, L2
  // flushed) 3 ran 0.4815 against 0's 0.4340: 0 stays (CUINLINE_CONV2D_WINOGRAD_WARPS=8 selects 3).
  RUN(2, 4, 8, 2, 4, 8, 2, 8, 1, 2);  // 3: 2 x 4 warps (32 tiles: 2 blocks a row of tiles)
  RUN(2, 4, 8, 1, 4, 8, 4, 16, 1, 2); // 4: 16 row tiles a block
  RUN(2, 4, 8, 1, 4, 8, 4, 4, 1, 2);  // 5: 4 row tiles a block
  RUN(1, 4, 8, 2, 4, 8, 2, 8, 2, 4);  // 6: F(4x4), its best above
  // The products on tensor cores (3xTF32 mma.sync m16n8k8, kWinoTC): not bit for bit the FMA form.
  RUN(2, 4, 8, 1, 4, 8, 4, 8, 1, 2, 1);  // 7: the library's seed tiling
  RUN(2, 4, 8, 2, 4, 8, 2, 8, 1, 2, 1);  // 8: 2 x 4 warps
  RUN(2, 4, 8, 1, 4, 8, 3, 8, 1, 2, 1);  // 9: 1 x 4 warps, 3 blocks an SM asked
  RUN(2, 4, 8, 2, 4, 8, 1, 8, 1, 2, 1);  // 10: 2 x 4 warps, 1 block asked
  RUN(2, 4, 8, 4, 4, 8, 1, 8, 1, 2, 1);  // 11: 4 x 4 warps
  RUN(2, 4, 8, 4, 2, 8, 2, 8, 1, 2, 1);  // 12: 4 x 2 warps (a whole output row of the seed, 32 channels)
  RUN(2, 4, 8, 2, 2, 8, 3, 8, 1, 2, 1);  // 13: 2 x 2 warps
  RUN(2, 4, 8, 2, 4, 8, 2, 4, 1, 2, 1);  // 14: 2 x 4 warps, 4 row tiles
  RUN(2, 4, 8, 2, 4, 8, 2, 2, 1, 2, 1);  // 15: 2 x 4 warps, 2 row tiles
  RUN(2, 4, 8, 1, 4, 8, 4, 4, 1, 2, 1);  // 16: 1 x 4 warps, 4 row tiles
  RUN(2, 4, 8, 1, 4, 8, 4, 2, 1, 2, 1);  // 17: 1 x 4 warps, 2 row tiles
  RUN(2, 4, 8, 2, 2, 8, 3, 4, 1, 2, 1);  // 18: 2 x 2 warps, 4 row tiles
  RUN(2, 4, 8, 4, 2, 8, 2, 4, 1, 2, 1);  // 19: 4 x 2 warps, 4 row tiles
  RUN(2, 4, 8, 2, 4, 8, 2, 4, 1, 2, 0);  // 20: FMA, 2 x 4 warps, 4 row tiles
  RUN(2, 4, 8, 2, 4, 8, 2, 1, 1, 2, 1);  // 21: 2 x 4 warps, 1 row tile
  RUN(2, 4, 8, 2, 4, 8, 3, 4, 1, 2, 1);  // 22: 2 x 4 warps, 4 row tiles, 3 blocks an SM asked
  RUN(2, 4, 8, 2, 2, 8, 5, 4, 1, 2, 1);  // 23: 2 x 2 warps, 4 row tiles, 5 blocks an SM asked
  RUN(2, 4, 8, 2, 2, 8, 4, 2, 1, 2, 1);  // 24: 2 x 2 warps, 2 row tiles
  return 0;
}
