// Standalone tuning harness for kernel_templates/conv2d_mma.cuh (not part of the CMake build):
//   nvcc -O3 -std=c++17 -arch=sm_90 --fmad=false bench/conv2d_mma_tune.cu -o /tmp/mma_tune && /tmp/mma_tune
//   [index]
// Times tilings / pipeline modes of the seed shape (128x8x128x128, 64 filters 3x3, bias, /2,
// LeakyReLU 0.01) in TF32 and 3xTF32 against a double-accumulation reference kernel, beside a
// device-to-device copy and a memset of the output (bench/conv2d_tune_common.cuh).
#include "../kernel_templates/conv2d_mma.cuh"
#include "conv2d_tune_common.cuh"

template <int TC, int TY, int WM, int WN, int MT, int NT, int KHU, int KWU, int MINB, int PIPE, int SPLIT, int RT,
          int OUTST>
struct Seed : SeedShape {
  static constexpr int kRT = RT;
  static constexpr int kTileCols = TC, kTY = TY, kWarpsM = WM, kWarpsN = WN, kMT = MT, kNT = NT, kCiPad = 8,
                       kCiChunk = 8, kCiUnroll = 1, kKhUnroll = KHU, kKwUnroll = KWU, kMinBlocks = MINB,
                       kPipeline = PIPE, kSplit = SPLIT, kOutStage = OUTST;
};

// Epilogues for measuring what the epilogue costs: LeakyReLU as max(x, x * slope) (the same values
// for 0 <= slope <= 1), and none at all (the check then fails: timing only).
struct DivLeakyMax {
  __device__ __forceinline__ float operator()(float x) const {
    x = x / 0x1p+1f;
    return fmaxf(x, x * 0x1.47ae14p-7f);
  }
};
struct NoEpilogue {
  __device__ __forceinline__ float operator()(float x) const { return x; }
};

template <class S, class E = DivLeaky>
void run(const char* name, SeedData& d) {
  run_variant<cuinline_conv2d_mma_detail::Plan<S>>(name, cuinline_conv2d_mma<S, E>, S::kRT, d);
}

int main(int argc, char** argv) {
  const int only = argc > 1 ? atoi(argv[1]) : -1;  // run one variant (for ncu)
  int index = 0;
  SeedData d;
  print_bandwidth_peers(d);
  // TC, TY, WM, WN, MT, NT, KHU, KWU, MINB, PIPE, SPLIT, RT, OUTSTAGE
#define RUN_E(E, ...)                                                                \
  if (only < 0 || only == index) run<Seed<__VA_ARGS__>, E>(#E " " #__VA_ARGS__, d); \
  ++index
  // 0: row streaming, two rows a step: 4 warps (2 rows x 2 channel halves) of 128 pixels x 32
  // channels, 4 output passes (the library's TF32 seed)
  RUN(128, 2, 2, 2, 8, 4, 1, 3, 2, 3, 1, 32, 4);
  RUN(128, 1, 1, 2, 8, 4, 1, 3, 4, 3, 1, 32, 4);                 // 1: the same, one row a step
  RUN_E(NoEpilogue, 128, 2, 2, 2, 8, 4, 1, 3, 2, 3, 1, 32, 4);   // 2: no epilogue (timing only)
  RUN(128, 1, 1, 4, 8, 2, 1, 3, 4, 3, 1, 32, 2);                 // 3: 4 warps of 128 pixels x 16 channels
  RUN(16, 8, 2, 2, 4, 4, 1, 3, 4, 1, 1, 4, 0);                   // 4: TF32 block tiles (before streaming)
  RUN(16, 8, 2, 2, 4, 4, 1, 3, 3, 1, 3, 4, 0);                   // 5: 3xTF32 block tiles, filter columns unrolled (the library's)
  RUN(16, 8, 2, 2, 4, 4, 1, 1, 3, 1, 3, 4, 0);                   // 6: the same, a filter column an iteration (11 % slower)
  // ptxas -O1 (H200, 2026-11-21): here 5 / 6 ran 0.670 / 0.644 ms against 0.651 / 0.674 at -O3, but
  // the library's own 3xTF32 launches at -O1 (6 for 3 x 3 filters) ran 10-75 % slower over the whole
  // sweep (seed 0.596 -> 0.663), so the library keeps -O3; TF32's 0: 0.233 at -O3, 0.239 at -O1.
  RUN(128, 3, 3, 2, 8, 4, 1, 3, 1, 3, 1, 21, 4);                 // 7: row streaming, three rows a step
  RUN(128, 4, 4, 2, 8, 4, 1, 3, 1, 3, 1, 32, 4);                 // 8: four rows a step, one block an image
  RUN(128, 4, 4, 2, 8, 4, 1, 3, 1, 3, 1, 16, 4);                 // 9: four rows a step, two blocks an image
  return 0;
}
