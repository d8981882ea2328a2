// Standalone tuning harness for kernel_templates/conv2d_mma.cuh (not part of the CMake build):
//   nvcc -O3 -std=c++17 -arch=sm_90 --fmad=false bench/conv2d_mma_tune.cu -o /tmp/mma_tune && /tmp/mma_tune
//   [index]
// Times tilings / pipeline modes of the seed shape (128x8x128x128, 64 filters 3x3, bias, /2,
// LeakyReLU 0.01) in TF32 and 3xTF32 against a double-accumulation reference kernel, beside a
// device-to-device copy and a memset of the output (bench/conv2d_tune_common.cuh).
#include "../kernel_templates/conv2d_mma.cuh"
#include "conv2d_tune_common.cuh"

template <int TC, int TY, int WM, int WN, int MT, int NT, int KHU, int MINB, int PIPE, int SPLIT, int RT,
          int OUTST>
struct Seed : SeedShape {
  static constexpr int kRT = RT;
  static constexpr int kTileCols = TC, kTY = TY, kWarpsM = WM, kWarpsN = WN, kMT = MT, kNT = NT, kCiPad = 8,
                       kCiChunk = 8, kCiUnroll = 1, kKhUnroll = KHU, kMinBlocks = MINB, kPipeline = PIPE,
                       kSplit = SPLIT, kOutStage = OUTST;
};

template <class S>
void run(const char* name, SeedData& d) {
  run_variant<cuinline_conv2d_mma_detail::Plan<S>>(name, cuinline_conv2d_mma<S, DivLeaky>, S::kRT, d);
}

int main(int argc, char** argv) {
  const int only = argc > 1 ? atoi(argv[1]) : -1;  // run one variant (for ncu)
  int index = 0;
  SeedData d;
  print_bandwidth_peers(d);
  // TC, TY, WM, WN, MT, NT, KHU, MINB, PIPE, SPLIT, RT, OUTSTAGE
#define RUN(...)                                                          \
  if (only < 0 || only == index) run<Seed<__VA_ARGS__>>(#__VA_ARGS__, d); \
  ++index
  // 0: block tiles (8x16 pixels, 4 row tiles), the choice before row streaming
  RUN(16, 8, 2, 2, 4, 4, 1, 4, 1, 1, 4, 0);
  RUN(128, 1, 2, 2, 4, 4, 1, 4, 3, 1, 42, 2);  // 1: row streaming, 2 x 2 warps of 4 x 4 tiles, 2 passes
  RUN(128, 1, 1, 2, 8, 4, 1, 3, 3, 1, 42, 2);  // 2: 2 warps of 128 pixels x 32 channels
  RUN(128, 1, 1, 2, 8, 4, 1, 4, 3, 1, 32, 4);  // 3: the same, 4 passes, 4 blocks/SM (the library's)
  RUN(128, 1, 1, 2, 8, 4, 3, 4, 3, 1, 32, 4);  // 4: + filter rows unrolled
  RUN(128, 1, 1, 4, 8, 2, 1, 4, 3, 1, 32, 2);  // 5: 4 warps of 128 pixels x 16 channels
  RUN(16, 8, 2, 2, 4, 4, 1, 3, 1, 3, 4, 0);    // 6: 3xTF32, block tiles (the library's)
  return 0;
}
