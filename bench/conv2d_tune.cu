// Standalone tuning harness for kernel_templates/conv2d.cuh (not part of the CMake build):
//   nvcc -O3 -std=c++17 -arch=sm_90 --fmad=false bench/conv2d_tune.cu -o /tmp/conv2d_tune && /tmp/conv2d_tune
//   [index]
// Times several tilings of the seed shape (128x8x128x128, 64 filters 3x3, /2, LeakyReLU 0.01)
// against a double-accumulation reference kernel (bench/conv2d_tune_common.cuh).
#include "../kernel_templates/conv2d.cuh"
#include "conv2d_tune_common.cuh"

template <int TX, int TY, int TG, int TP, int TC, int CIC, int UNR, int MINB, int RT = 1, int TK = 1,
          int KHU = 3>
struct Seed : SeedShape {
  static constexpr int kRT = RT;
  static constexpr int kTX = TX, kTY = TY, kTG = TG, kTP = TP, kTC = TC, kTK = TK, kCiChunk = CIC,
                       kCiUnroll = UNR, kKhUnroll = KHU, kMinBlocks = MINB, kPipeline = RT > 1 ? 1 : 0,
                       kColPhases = 1;
};

template <class S>
void run(const char* name, SeedData& d) {
  run_variant<cuinline_conv2d_detail::Plan<S>>(name, cuinline_conv2d<S, DivLeaky>, S::kRT, d);
}

int main(int argc, char** argv) {
  const int only = argc > 1 ? atoi(argv[1]) : -1;  // run one variant (for ncu)
  int index = 0;
  SeedData d;
  printf("floors: FMA 0.28 ms (H200/H100 SXM 67 TFLOP/s), bytes 587 MB\n");
  print_bandwidth_peers(d);
  // TX, TY, TG, TP, TC, CI chunk, CI unroll, min blocks, row tiles (, TK, KH unroll)
  RUN(32, 2, 4, 4, 16, 8, 1, 2, 4);  // 0: the library's choice
  RUN(32, 2, 4, 4, 16, 8, 1, 2, 8);
  RUN(32, 2, 4, 4, 16, 8, 1, 2, 16);
  RUN(32, 2, 4, 4, 16, 8, 2, 2, 8);
  RUN(32, 1, 4, 4, 16, 8, 1, 4, 8);  // 4: 128 threads, 4 blocks/SM
  RUN(32, 1, 4, 4, 16, 8, 1, 3, 8);
  RUN(32, 4, 4, 4, 16, 8, 1, 1, 4);  // 6: 512 threads
  RUN(32, 2, 2, 4, 16, 8, 1, 3, 8);  // 7: half the channels per block
  RUN(32, 2, 4, 4, 8, 8, 1, 3, 8);   // 8: 32 accumulators
  RUN(16, 4, 4, 8, 8, 8, 1, 2, 8);   // 9: 8 px x 8 ch
  return 0;
}
