// Standalone tuning harness for kernel_templates/conv2d_mma.cuh (not part of the CMake build):
//   nvcc -O3 -std=c++17 -arch=sm_90 --fmad=false bench/conv2d_mma_tune.cu -o /tmp/mma_tune && /tmp/mma_tune
//   [index]
// Times tilings / pipeline modes of the seed shape (128x8x128x128, 64 filters 3x3, bias, /2,
// LeakyReLU 0.01) in TF32 and 3xTF32 against a double-accumulation reference kernel.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "../kernel_templates/conv2d_mma.cuh"

struct DivLeaky {
  __device__ __forceinline__ float operator()(float x) const {
    x = x / 0x1p+1f;
    return x > 0.0f ? x : x * 0x1.47ae14p-7f;
  }
};

template <int TC, int TY, int WM, int WN, int MT, int NT, int KHU, int MINB, int PIPE, int SPLIT, int RT,
          int OUTST>
struct Seed {
  static constexpr int kCin = 8, kH = 128, kW = 128, kCout = 64, kKH = 3, kKW = 3, kSH = 1, kSW = 1, kPH = 0,
                       kPW = 0, kDH = 1, kDW = 1, kOH = 126, kOW = 126, kHasBias = 1;
  static constexpr int kRT = RT;
  static constexpr int kTileCols = TC, kTY = TY, kWarpsM = WM, kWarpsN = WN, kMT = MT, kNT = NT, kCiPad = 8,
                       kCiChunk = 8, kCiUnroll = 1, kKhUnroll = KHU, kMinBlocks = MINB, kPipeline = PIPE,
                       kSplit = SPLIT, kOutStage = OUTST;
};

__global__ void reference(const float* in, const float* w, const float* b, float* out, int N) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  const long long total = (long long)N * 64 * 126 * 126;
  if (i >= total) return;
  int ox = i % 126, oy = (i / 126) % 126, co = (i / (126 * 126)) % 64, n = i / (126LL * 126 * 64);
  double acc = b[co];
  for (int ci = 0; ci < 8; ++ci)
    for (int kh = 0; kh < 3; ++kh)
      for (int kw = 0; kw < 3; ++kw)
        acc += (double)in[((n * 8LL + ci) * 128 + oy + kh) * 128 + ox + kw] *
               w[((co * 8 + ci) * 3 + kh) * 3 + kw];
  double x = acc / 2.0;
  out[i] = (float)(x > 0 ? x : x * 0.01);
}

template <class S>
void run(const char* name, const float* in, const float* w, const float* b, float* out, int N,
         std::vector<float>& h_out, const std::vector<float>& h_ref) {
  using P = cuinline_conv2d_mma_detail::Plan<S>;
  constexpr int RT = S::kRT;
  auto kernel = cuinline_conv2d_mma<S, DivLeaky>;
  dim3 grid(P::kTilesX * ((P::kTilesY + RT - 1) / RT), (S::kCout + P::kBlockCout - 1) / P::kBlockCout, N);
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, P::kSmemBytes);
  cudaMemset(out, 0xff, sizeof(float) * h_out.size());  // NaN poison
  kernel<<<grid, P::kThreads, P::kSmemBytes>>>(in, w, b, out, RT);
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    printf("%s: %s\n", name, cudaGetErrorString(e));
    exit(1);
  }
  cudaMemcpy(h_out.data(), out, sizeof(float) * h_out.size(), cudaMemcpyDeviceToHost);
  double num = 0, den = 0;
  size_t nonfinite = 0;
  for (size_t i = 0; i < h_out.size(); ++i) {
    if (!std::isfinite(h_out[i])) ++nonfinite;
    double d = (double)h_out[i] - h_ref[i];
    num += d * d;
    den += (double)h_ref[i] * h_ref[i];
  }
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<float> t;
  for (int it = 0; it < 40; ++it) {
    cudaEventRecord(e0);
    kernel<<<grid, P::kThreads, P::kSmemBytes>>>(in, w, b, out, RT);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    t.push_back(ms);
  }
  std::sort(t.begin() + 5, t.end());
  cudaFuncAttributes a;
  cudaFuncGetAttributes(&a, kernel);
  int occ = 0;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kernel, P::kThreads, P::kSmemBytes);
  printf(
      "%-52s regs %3d lmem %3zu smem %6d blk/SM %d grid %6u  median %.4f ms  min %.4f  rel %.2e nonfinite "
      "%zu\n",
      name, a.numRegs, (size_t)a.localSizeBytes, P::kSmemBytes, occ, grid.x * grid.y * grid.z,
      t[5 + (t.size() - 5) / 2], t[5], std::sqrt(num / den), nonfinite);
}

int main(int argc, char** argv) {
  const int only = argc > 1 ? atoi(argv[1]) : -1;  // run one variant (for ncu)
  int index = 0;
  const int N = 128;
  const size_t n_in = (size_t)N * 8 * 128 * 128, n_w = 64 * 8 * 9, n_out = (size_t)N * 64 * 126 * 126;
  std::vector<float> h_in(n_in), h_w(n_w), h_b(64);
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (auto& v : h_in) v = u(rng);
  for (auto& v : h_w) v = u(rng) * 0.3f;
  for (auto& v : h_b) v = u(rng) * 0.1f;
  float *in, *w, *b, *out, *ref;
  cudaMalloc(&in, n_in * 4);
  cudaMalloc(&w, n_w * 4);
  cudaMalloc(&b, 256);
  cudaMalloc(&out, n_out * 4);
  cudaMalloc(&ref, n_out * 4);
  cudaMemcpy(in, h_in.data(), n_in * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(w, h_w.data(), n_w * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(b, h_b.data(), 256, cudaMemcpyHostToDevice);
  reference<<<(n_out + 255) / 256, 256>>>(in, w, b, ref, N);
  std::vector<float> h_out(n_out), h_ref(n_out);
  cudaMemcpy(h_ref.data(), ref, n_out * 4, cudaMemcpyDeviceToHost);
  {  // device-to-device copy of the output's size: the bandwidth peer
    float* tmp;
    cudaMalloc(&tmp, n_out * 4);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    std::vector<float> t;
    for (int it = 0; it < 20; ++it) {
      cudaEventRecord(e0);
      cudaMemcpyAsync(tmp, out, n_out * 4, cudaMemcpyDeviceToDevice);
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float ms;
      cudaEventElapsedTime(&ms, e0, e1);
      t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    printf("d2d copy of the output (%.0f MB read + write): median %.4f ms\n", n_out * 4 / 1e6, t[10]);
    cudaMemset(tmp, 0, n_out * 4);
    cudaDeviceSynchronize();
    std::fill(t.begin(), t.end(), 0.f);
    for (int it = 0; it < 20; ++it) {
      cudaEventRecord(e0);
      cudaMemsetAsync(tmp, 0, n_out * 4);
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float ms;
      cudaEventElapsedTime(&ms, e0, e1);
      t[it] = ms;
    }
    std::sort(t.begin(), t.end());
    printf("memset of the output (%.0f MB written): median %.4f ms\n", n_out * 4 / 1e6, t[10]);
    cudaFree(tmp);
  }
  // TC, TY, WM, WN, MT, NT, KHU, MINB, PIPE, SPLIT, RT, OUTSTAGE
#define RUN(...)                                                                                       \
  if (only < 0 || only == index) run<Seed<__VA_ARGS__>>(#__VA_ARGS__, in, w, b, out, N, h_out, h_ref); \
  ++index
  // 0: block tiles (8x16 pixels, 4 row tiles), the pre-streaming choice
  RUN(16, 8, 2, 2, 4, 4, 1, 4, 1, 1, 4, 0);
  RUN(128, 1, 2, 2, 4, 4, 1, 4, 3, 1, 42, 2);  // 1: row streaming, output in 2 passes (the library's)
  RUN(128, 1, 1, 2, 8, 4, 1, 3, 3, 1, 42, 2);  // 2: 2 warps of 128 pixels x 32 channels
  RUN(128, 1, 1, 2, 8, 4, 1, 4, 3, 1, 32, 4);  // 3: the same, 4 passes (4 blocks/SM)
  RUN(128, 1, 1, 2, 8, 4, 3, 4, 3, 1, 32, 4);  // 4: + filter rows unrolled
  RUN(128, 1, 1, 4, 8, 2, 1, 4, 3, 1, 32, 2);  // 5: 4 warps of 128 pixels x 16 channels
  RUN(128, 1, 1, 2, 8, 4, 1, 5, 3, 1, 26, 4);  // 6: 5 blocks/SM?
  RUN(16, 8, 2, 2, 4, 4, 1, 3, 1, 3, 4, 0);    // 7: 3xTF32, block tiles (the library's)
  return 0;
}
