// What an NCHW output costs the f16 seed's store pattern, without the convolution (issue 19: the
// seed's NCHW output runs 0.169 ms on an H100 against 0.111 channels-last). Each pattern writes
// the seed's output, 128 x 64 x 126 x 126 f16 (260 MB), from registers — no loads, no shared
// memory — in the order the halo kernel's blocks write it:
//   contig16   the 260 MB as 16-byte stores, grid-stride (the write floor)
//   nhwc       a tile (one output row) = 126 pixels x 64 channels contiguous, 16-byte stores, tiles
//              every G-th of the batch, R tiles a block (the channels-last kernel's order)
//   nchw4      a tile = 64 channel rows of 126 values (252 bytes, 4-byte aligned), stored 2 values a
//              thread (the NCHW kernel's stores), same order
//   nchw16     the same rows stored as the aligned 16-byte chunks they cover (heads and tails as
//              narrower stores): the instruction count of channels-last, the NCHW sector pattern
//   nchw16h    the same, 16 lanes a channel row (two rows a warp store)
//   2 rows     two consecutive output rows a tile (504-byte runs)
//   planes     a block writes whole channel planes (31752 contiguous bytes) with 8-byte stores
// Median of 30 after 3 warm-ups, CUDA events, L2 flushed (a 256 MB write) before each timed launch.
//   nvcc -O3 -arch=sm_90 -o nchw_store_probe bench/nchw_store_probe.cu && ./nchw_store_probe
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

constexpr int kN = 128, kC = 64, kH = 126, kW = 126;
constexpr long long kPlane = (long long)kH * kW;
constexpr long long kElems = (long long)kN * kC * kPlane;

#define CHECK(x)                                                                        \
  do {                                                                                  \
    cudaError_t e = (x);                                                                \
    if (e != cudaSuccess) {                                                             \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)

__global__ void contig16(uint4* out, long long n16) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n16; i += (long long)gridDim.x * blockDim.x)
    out[i] = make_uint4((unsigned)i, 1u, 2u, 3u);
}

// Tiles t = first, first + G, ... (R of them), G = gridDim.x; tile t = image t / kH, row t % kH.
template <int kMode, int kLanes = 32>
__global__ void __launch_bounds__(128) tiles(unsigned short* out, int rows_per_tile, int R) {
  const long long total = (long long)kN * kH / rows_per_tile;
  const long long G = gridDim.x;
  for (long long t = blockIdx.x, k = 0; t < total && k < R; t += G, ++k) {
    const long long n = t * rows_per_tile / kH;
    const int r0 = (int)(t * rows_per_tile % kH);
    const unsigned v = (unsigned)t * 2654435761u;
    if constexpr (kMode == 0) {  // nhwc: the tile's rows_per_tile * kW * kC values are contiguous
      uint4* base = reinterpret_cast<uint4*>(out + ((n * kH + r0) * kW) * kC);
      const int n16 = rows_per_tile * kW * kC / 8;
      for (int i = threadIdx.x; i < n16; i += 128) base[i] = make_uint4(v, v + i, v ^ i, 7u);
    } else if constexpr (kMode == 1) {  // nchw, 2 values a thread: 64 threads a channel row
      const int run = rows_per_tile * kW;  // contiguous values a channel
      const int lane = threadIdx.x % 64;
      for (int c = threadIdx.x / 64; c < kC; c += 2) {
        unsigned short* row = out + (n * kC + c) * kPlane + (long long)r0 * kW;
        for (int x = 2 * lane; x < run; x += 128) *reinterpret_cast<unsigned*>(row + x) = v + x;
      }
    } else {  // nchw as aligned 16-byte chunks: kLanes lanes a channel row (32, or 16: two rows a warp)
      const int run = rows_per_tile * kW;
      const int lane = threadIdx.x % kLanes;
      for (int c = threadIdx.x / kLanes; c < kC; c += 128 / kLanes) {
        unsigned short* row = out + (n * kC + c) * kPlane + (long long)r0 * kW;
        const unsigned long long a = reinterpret_cast<unsigned long long>(row);
        const unsigned long long a16 = (a + 15) & ~15ull;
        const int head = (int)((a16 - a) / 2);  // values before the first aligned chunk
        const int chunks = (run - head) / 8;
        for (int i = lane; i < chunks; i += kLanes)
          reinterpret_cast<uint4*>(row + head)[i] = make_uint4(v, v + i, 3u, 4u);
        // head and tail, 2-byte stores (at most 7 + 7 values)
        const int tail0 = head + chunks * 8;
        if (lane < head) row[lane] = (unsigned short)v;
        if (lane < run - tail0) row[tail0 + lane] = (unsigned short)v;
      }
    }
  }
}

__global__ void planes(uint4* out, int planes_total) {  // one block a plane at a time, 16-byte stores
  const long long plane_bytes = kPlane * 2;  // 31752: 8-aligned; stores as uint2 to keep alignment
  for (int p = blockIdx.x; p < planes_total; p += gridDim.x) {
    uint2* base = reinterpret_cast<uint2*>(reinterpret_cast<char*>(out) + p * plane_bytes);
    for (int i = threadIdx.x; i < plane_bytes / 8; i += blockDim.x) base[i] = make_uint2(p, i);
  }
}

int main() {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  unsigned short* out = nullptr;
  CHECK(cudaMalloc(&out, kElems * 2 + 64));
  void* flush = nullptr;
  const size_t flush_bytes = 256ull << 20;
  CHECK(cudaMalloc(&flush, flush_bytes));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  std::printf("device %s, %d SMs; output %.1f MB\n", prop.name, sms, kElems * 2 / 1e6);
  auto time = [&](const char* name, auto&& launch) {
    std::vector<float> ms;
    for (int i = 0; i < 33; ++i) {
      CHECK(cudaMemsetAsync(flush, i, flush_bytes));
      CHECK(cudaEventRecord(e0));
      launch();
      CHECK(cudaEventRecord(e1));
      CHECK(cudaEventSynchronize(e1));
      CHECK(cudaGetLastError());
      float t = 0;
      CHECK(cudaEventElapsedTime(&t, e0, e1));
      if (i >= 3) ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    const double med = ms[ms.size() / 2];
    std::printf("%-34s %.4f ms  %.2f TB/s\n", name, med, kElems * 2 / (med * 1e-3) / 1e12);
  };
  time("contig16", [&] { contig16<<<sms * 16, 256>>>(reinterpret_cast<uint4*>(out), kElems / 8); });
  time("planes (8-byte stores)", [&] { planes<<<sms * 8, 256>>>(reinterpret_cast<uint4*>(out), kN * kC); });
  const long long rows = (long long)kN * kH;
  for (int R : {1, 2, 4}) {
    char name[64];
    const int grid1 = (int)((rows + R - 1) / R);
    std::snprintf(name, sizeof name, "nhwc  1 row,  %d tiles a block", R);
    time(name, [&] { tiles<0><<<grid1, 128>>>(out, 1, R); });
    std::snprintf(name, sizeof name, "nchw4 1 row,  %d tiles a block", R);
    time(name, [&] { tiles<1><<<grid1, 128>>>(out, 1, R); });
    std::snprintf(name, sizeof name, "nchw16 1 row, %d tiles a block", R);
    time(name, [&] { tiles<2><<<grid1, 128>>>(out, 1, R); });
    std::snprintf(name, sizeof name, "nchw16h 1 row, %d tiles a block", R);
    time(name, [&] { tiles<2, 16><<<grid1, 128>>>(out, 1, R); });
    const int grid2 = (int)((rows / 2 + R - 1) / R);
    std::snprintf(name, sizeof name, "nchw4 2 rows, %d tiles a block", R);
    time(name, [&] { tiles<1><<<grid2, 128>>>(out, 2, R); });
    std::snprintf(name, sizeof name, "nchw16 2 rows, %d tiles a block", R);
    time(name, [&] { tiles<2><<<grid2, 128>>>(out, 2, R); });
    std::snprintf(name, sizeof name, "nchw16h 2 rows, %d tiles a block", R);
    time(name, [&] { tiles<2, 16><<<grid2, 128>>>(out, 2, R); });
  }
  return 0;
}
