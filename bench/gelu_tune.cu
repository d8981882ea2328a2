// Loop-shape experiment for compute-heavier N-ary expressions (issue 17): f32 bias + GELU,
// y = gelu(x + bias) with a bias row, [8192, 28672], the shape where ew_nary was 4 % behind
// torch.compile's Triton kernel (0.461 vs 0.443 ms on an H200). Which of these closes the gap:
// contraction (ew_nary compiles with --fmad=false so that chains round after every step), fewer
// resident blocks (more registers), or two vectors a thread (Triton's XBLOCK 1024 / 4 warps gives
// each thread 2 x 4 elements, 512 apart)? Standalone, CUDA events, the L2 flushed before every
// timed launch (KernelBench's way), median of 30 after warm-up; a device-to-device copy of the
// same bytes in the same run.
//   nvcc -O3 -arch=sm_90 -o gelu_tune bench/gelu_tune.cu && ./gelu_tune
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

// GELU as PyTorch's kernel computes it (opmath float), with or without contraction.
template <bool Fma>
__device__ __forceinline__ float gelu(float x, float b) {
  if (Fma) {
    const float t = x + b;
    return 0.5f * t * (1.0f + erff(t * 0.70710678118654752440f));
  }
  const float t = __fadd_rn(x, b);
  return __fmul_rn(__fmul_rn(0.5f, t), __fadd_rn(1.0f, erff(__fmul_rn(t, 0.70710678118654752440f))));
}

// U vectors of 4 floats a thread, B apart (coalesced per u), exact grid; bias row of `cols` floats.
template <int B, int MinBlocks, int U, bool Fma>
__global__ void __launch_bounds__(B, MinBlocks)
    bias_gelu(const float4* __restrict__ x, const float4* __restrict__ bias, float4* __restrict__ y, unsigned nv,
              unsigned cols_v) {
  const unsigned first = blockIdx.x * (B * U) + threadIdx.x;
  float4 a[U], c[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const unsigned v = first + u * B;
    if (v < nv) {
      a[u] = __ldg(x + v);
      c[u] = __ldg(bias + v % cols_v);
    }
  }
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const unsigned v = first + u * B;
    if (v < nv) {
      float4 r;
      r.x = gelu<Fma>(a[u].x, c[u].x);
      r.y = gelu<Fma>(a[u].y, c[u].y);
      r.z = gelu<Fma>(a[u].z, c[u].z);
      r.w = gelu<Fma>(a[u].w, c[u].w);
      y[v] = r;
    }
  }
}

#define CK(x)                                                      \
  do {                                                             \
    cudaError_t e = (x);                                           \
    if (e != cudaSuccess) {                                        \
      std::printf("%s: %s\n", #x, cudaGetErrorString(e));          \
      return 1;                                                    \
    }                                                              \
  } while (0)

struct Bench {
  void* flush;
  size_t flush_bytes;
  cudaEvent_t start, stop;
  template <class F>
  float median_ms(F&& launch) {
    for (int i = 0; i < 5; ++i) launch();
    std::vector<float> t;
    for (int i = 0; i < 30; ++i) {
      cudaMemsetAsync(flush, i, flush_bytes);  // evicts the L2
      cudaEventRecord(start);
      launch();
      cudaEventRecord(stop);
      cudaEventSynchronize(stop);
      float ms = 0;
      cudaEventElapsedTime(&ms, start, stop);
      t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }
};

int main() {
  const unsigned rows = 8192, cols = 28672;
  const size_t n = size_t{rows} * cols, bytes = n * 4;
  float *x, *bias, *y, *ref;
  CK(cudaMalloc(&x, bytes));
  CK(cudaMalloc(&y, bytes));
  CK(cudaMalloc(&ref, bytes));
  CK(cudaMalloc(&bias, cols * 4));
  std::vector<float> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = static_cast<float>((static_cast<int>((i * 2654435761u) >> 8) % 20001) - 10000) * 1e-3f;
  CK(cudaMemcpy(x, host.data(), bytes, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(bias, host.data() + 12345, cols * 4, cudaMemcpyHostToDevice));
  Bench b{};
  b.flush_bytes = size_t{256} << 20;
  CK(cudaMalloc(&b.flush, b.flush_bytes));
  CK(cudaEventCreate(&b.start));
  CK(cudaEventCreate(&b.stop));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s, %d SMs, L2 %d MB; [%u, %u] f32, bias row\n", prop.name, prop.multiProcessorCount,
              prop.l2CacheSize >> 20, rows, cols);
  const unsigned nv = static_cast<unsigned>(n / 4), cols_v = cols / 4;
  const float copy = b.median_ms([&] { cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice); });
  std::printf("%-44s %.4f ms  (%.2f TB/s)\n", "copy of x (the bytes floor)", copy, 2.0 * bytes / copy / 1e9);
  // The reference: the current ew_nary shape (256 threads, 8 blocks an SM, one vector, no contraction).
  bias_gelu<256, 8, 1, false><<<(nv + 255) / 256, 256>>>((const float4*)x, (const float4*)bias, (float4*)ref, nv, cols_v);
  CK(cudaDeviceSynchronize());
  std::vector<float> expect(n), got(n);
  CK(cudaMemcpy(expect.data(), ref, bytes, cudaMemcpyDeviceToHost));

#define RUN(B, MB, U, FMA)                                                                                      \
  do {                                                                                                          \
    const unsigned grid = (nv + (B) * (U) - 1) / ((B) * (U));                                                   \
    cudaMemset(y, 0xff, bytes);                                                                                 \
    const float ms = b.median_ms([&] {                                                                          \
      bias_gelu<B, MB, U, FMA><<<grid, B>>>((const float4*)x, (const float4*)bias, (float4*)y, nv, cols_v);     \
    });                                                                                                         \
    CK(cudaGetLastError());                                                                                     \
    CK(cudaMemcpy(got.data(), y, bytes, cudaMemcpyDeviceToHost));                                               \
    double worst = 0;                                                                                           \
    for (size_t i = 0; i < n; i += 7) {                                                                         \
      const double d = std::fabs(double(got[i]) - double(expect[i])) / std::max(1e-30, std::fabs(double(expect[i]))); \
      worst = std::max(worst, d);                                                                               \
    }                                                                                                           \
    std::printf("B=%-4d minblocks=%d U=%d fma=%d %17s %.4f ms  %5.1f %% of copy  max rel diff %.1e\n", B, MB, U, \
                int(FMA), "", ms, 100.0 * copy / ms, worst);                                                    \
  } while (0)

  RUN(256, 8, 1, false);  // ew_nary today
  RUN(256, 8, 1, true);
  RUN(256, 4, 1, false);
  RUN(256, 4, 1, true);
  RUN(256, 4, 2, false);
  RUN(256, 4, 2, true);
  RUN(128, 8, 2, false);  // Triton's shape
  RUN(128, 8, 2, true);
  RUN(128, 16, 1, true);
  RUN(512, 4, 1, true);
  RUN(256, 8, 2, true);
  RUN(256, 2, 4, true);
  return 0;
}
