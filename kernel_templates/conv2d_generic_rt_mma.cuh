// conv2d_generic_rt_mma.cuh — the generic conv2d kernel on tensor cores: f16 / bf16 with a
// channels-last input whose groups' channel runs are whole 16-byte vectors, every shape, stride,
// padding, dilation, group count, weight and output layout and the epilogue run-time data (the
// parameters of conv2d_generic_rt.cuh), built with the library by nvcc
// (src/ops/conv2d/conv2d_generic_rt.cu) for sm_80 and newer. It serves a never-seen variant of the
// common tensor-core shapes while the specialized kernel compiles, at a few times the specialized
// kernel's time instead of the direct kernel's tens.
//
// An implicit GEMM per group: M = the output pixels of all p.images images (a tile may span two
// images, so small planes and small batches still fill the GPU), N = the group's output channels, K =
// the filter taps x the group's input channels (tap-major, channels fastest, so a K tile of kBK
// channels at one tap is one 16-byte-vector run of every pixel's input). A block computes kBM
// pixels x kBN channels with four warps of 32 x 32 (mma.sync m16n8k16, fp32 accumulators), its
// tiles staged through shared memory by cp.async kStages deep (zero-filled outside the image and
// past the channels), read with ldmatrix. A channels-last weight is copied the same way; any other
// weight layout is gathered element by element (weights are small and stay in L2).
//
// Arithmetic: products of the storage values summed in fp32 by the tensor cores (their order is not
// the direct kernel's), then conv2d_generic_rt.cuh's finish: + bias, + residual, the epilogue
// program in fp32, one rounding at the store.
// Grid: (ceil(images x pixels / kBM), groups x ceil(cout_g / kBN), 1); kThreads threads; static shared
// memory.
#ifndef CUINLINE_CONV2D_GENERIC_RT_MMA_CUH
#define CUINLINE_CONV2D_GENERIC_RT_MMA_CUH

#include "conv2d_generic_rt.cuh"  // (first: the arch wrappers need ew_half and ew_bf16)
#include "arch/copy_sm80.cuh"
#include "arch/mma_sm80.cuh"

#define CUINLINE_CONV2D_RT_MMA_THREADS 128
#define CUINLINE_CONV2D_RT_MMA_BM 64
#define CUINLINE_CONV2D_RT_MMA_BN 64

namespace cuinline_conv2d_rt_mma_detail {

constexpr int kThreads = CUINLINE_CONV2D_RT_MMA_THREADS;
constexpr int kBM = CUINLINE_CONV2D_RT_MMA_BM;
constexpr int kBN = CUINLINE_CONV2D_RT_MMA_BN;
constexpr int kBK = 32;           // input channels of one tap a K tile
constexpr int kRow = kBK + 8;     // a tile row in shared memory: 80 bytes, so ldmatrix's 8 rows hit 8 bank groups
constexpr int kStages = 3;
constexpr int kVec = 8;           // 16-bit elements a 16-byte vector
constexpr int kRowsPerThread = kBM * (kBK / kVec) / kThreads;  // A (and B) vectors a thread copies a tile
constexpr int kOutRow = kBN + 4;  // the accumulators' row in shared memory (after the main loop)
static_assert(kBM == kBN, "A and B tiles are copied by the same thread rows");

template <class T>
struct Tiles {
  T a[kStages][kBM * kRow];
  T b[kStages][kBN * kRow];
};
static_assert(sizeof(float) * kBM * kOutRow <= sizeof(Tiles<ew_half>), "the accumulators fit in the tiles' memory");

// The pixels whose A vectors this thread copies: their image's group input, their input origin,
// and whether they exist (rows past the last image's last pixel do not).
template <class T>
struct PixelRows {
  const T* in[kRowsPerThread];
  int iy0[kRowsPerThread], ix0[kRowsPerThread];
  bool valid[kRowsPerThread];
};

// K tile kt (tap kt / cchunks, channels (kt % cchunks) kBK ..) of A and B into stage s.
template <class T>
__device__ __forceinline__ void load_tile(const cuinline_conv2d_rt_params& p, const T* w_g,
                                          const PixelRows<T>& px, int n0, int kt, int cchunks, bool vec_w,
                                          Tiles<T>& t, int s) {
  using namespace cuinline_arch;
  const int tap = kt / cchunks;
  const int c0 = (kt - tap * cchunks) * kBK;
  const int ky = tap / p.kw;
  const int kx = tap - ky * p.kw;
  const int cc = threadIdx.x % (kBK / kVec);
  const int c = c0 + cc * kVec;
  const bool c_valid = c < p.cin_g;
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i) {
    const int row = threadIdx.x / (kBK / kVec) + i * (kThreads / (kBK / kVec));
    const int iy = px.iy0[i] + ky * p.dh;
    const int ix = px.ix0[i] + kx * p.dw;
    const bool valid = px.valid[i] && c_valid && iy >= 0 && iy < p.h && ix >= 0 && ix < p.w;
    const T* src = valid ? px.in[i] + iy * p.in_y + ix * p.in_x + c : px.in[i];
    copy16_async<0>(&t.a[s][row * kRow + cc * kVec], src, valid);
  }
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i) {
    const int row = threadIdx.x / (kBK / kVec) + i * (kThreads / (kBK / kVec));
    const int co = n0 + row;
    const bool valid = co < p.cout_g && c_valid;
    const long long at = (long long)co * p.w_o + ky * p.w_y + kx * p.w_x;
    if (vec_w) {
      copy16_async<1>(&t.b[s][row * kRow + cc * kVec], valid ? w_g + at + c : w_g, valid);
    } else {
      union {
        uint4 raw;
        T v[kVec];
      } u;
#pragma unroll
      for (int j = 0; j < kVec; ++j) u.v[j] = valid ? w_g[at + (long long)(c + j) * p.w_i] : T();
      *reinterpret_cast<uint4*>(&t.b[s][row * kRow + cc * kVec]) = u.raw;
    }
  }
}

// The block's kBK-deep product of stage s into the warp's 32 x 32 accumulators.
template <class T>
__device__ __forceinline__ void mma_tile(const Tiles<T>& t, int s, int wm, int wn, float (&acc)[2][4][4]) {
  using namespace cuinline_arch;
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int kk = 0; kk < kBK; kk += 16) {
    unsigned a[2][4], b[4][2];
#pragma unroll
    for (int mi = 0; mi < 2; ++mi) {
      const int row = wm * 32 + mi * 16 + (lane & 15);
      ldmatrix_x4(a[mi], smem_address(&t.a[s][row * kRow + kk + (lane >> 4) * 8]));
    }
#pragma unroll
    for (int np = 0; np < 2; ++np) {
      const int row = wn * 32 + np * 16 + (lane & 7) + (lane >> 4) * 8;
      unsigned r[4];
      ldmatrix_x4(r, smem_address(&t.b[s][row * kRow + kk + ((lane >> 3) & 1) * 8]));
      b[np * 2][0] = r[0], b[np * 2][1] = r[1], b[np * 2 + 1][0] = r[2], b[np * 2 + 1][1] = r[3];
    }
#pragma unroll
    for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) Mma<T>::run(acc[mi][ni], a[mi], b[ni][0], b[ni][1]);
    }
  }
}

}  // namespace cuinline_conv2d_rt_mma_detail

/// The tensor-core generic conv (T = ew_half or ew_bf16; p.vec_in set, the input 16-byte aligned;
/// vec_w: the channels-last weight read by cp.async, also 16-byte aligned). Arguments as
/// cuinline_conv2d_rt_body's.
template <class T>
__device__ __forceinline__ void cuinline_conv2d_rt_mma_body(const T* __restrict__ input, const T* __restrict__ weight,
                                                            const T* __restrict__ bias, T* __restrict__ output,
                                                            const T* __restrict__ residual,
                                                            const cuinline_conv2d_chan& chan,
                                                            const cuinline_conv2d_rt_params& p, const ewg_program& e) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using namespace cuinline_conv2d_rt_mma_detail;
  __shared__ __align__(16) Tiles<T> tiles;
  const long long pixels = (long long)p.oh * p.ow;
  const long long m_end = pixels * p.images;
  const long long m0 = (long long)blockIdx.x * kBM;
  const int n_tiles = (p.cout_g + kBN - 1) / kBN;
  const int grp = blockIdx.y / n_tiles;
  const int n0 = (blockIdx.y - grp * n_tiles) * kBN;
  const T* w_g = weight + (long long)grp * p.cout_g * p.w_o;
  const bool vec_w = p.vec_w != 0;
  PixelRows<T> px;
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i) {
    const long long m = m0 + threadIdx.x / (kBK / kVec) + i * (kThreads / (kBK / kVec));
    const long long img = m / pixels;
    const int pm = (int)(m - img * pixels);
    const int oy = pm / p.ow;
    const int ox = pm - oy * p.ow;
    px.valid[i] = m < m_end;
    px.in[i] = input + img * p.in_n + (long long)grp * p.cin_g * p.in_c;
    px.iy0[i] = oy * p.sh - p.ph;
    px.ix0[i] = ox * p.sw - p.pw;
  }
  const int cchunks = (p.cin_g + kBK - 1) / kBK;
  const int ktiles = p.kh * p.kw * cchunks;
  float acc[2][4][4];
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[mi][ni][r] = 0.f;
  const int warp = threadIdx.x / 32;
  const int wm = warp & 1, wn = warp >> 1;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < ktiles) load_tile<T>(p, w_g, px, n0, s, cchunks, vec_w, tiles, s);
    cuinline_arch::copy_commit();
  }
#pragma unroll 1
  for (int kt = 0; kt < ktiles; ++kt) {
    cuinline_arch::copy_wait<kStages - 2>();
    __syncthreads();  // tile kt landed for every thread; every warp is done with tile kt - 1's stage
    const int next = kt + kStages - 1;
    if (next < ktiles) load_tile<T>(p, w_g, px, n0, next, cchunks, vec_w, tiles, next % kStages);
    cuinline_arch::copy_commit();
    mma_tile<T>(tiles, kt % kStages, wm, wn, acc);
  }
  cuinline_arch::copy_wait<0>();
  __syncthreads();  // every warp is done with the tiles: their memory takes the accumulators
  // Lane (g, t) holds rows g and g + 8 of each m16 tile, columns 2t and 2t + 1 of each n8.
  float(*out_tile)[kOutRow] = reinterpret_cast<float(*)[kOutRow]>(&tiles);
  const int lane = threadIdx.x % 32;
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        out_tile[wm * 32 + mi * 16 + g + (r >> 1) * 8][wn * 32 + ni * 8 + 2 * t + (r & 1)] = acc[mi][ni][r];
      }
  __syncthreads();
  // One output a thread at a time, consecutive threads along the output's fastest dimension (the
  // channels of a channels-last output, else the pixels): one copy of the epilogue's interpreter.
  using A = typename ew_traits<T>::op;
  const bool channels_fast = p.out_c == 1;
#pragma unroll 1
  for (int i = threadIdx.x; i < kBM * kBN; i += kThreads) {
    const int r = channels_fast ? i / kBN : i % kBM;
    const int c = channels_fast ? i % kBN : i / kBM;
    const long long m = m0 + r;
    const int cl = n0 + c;
    if (m >= m_end || cl >= p.cout_g) continue;
    const long long img = m / pixels;
    const int pm = (int)(m - img * pixels);
    const int oy = pm / p.ow;
    const int ox = pm - oy * p.ow;
    const int co = grp * p.cout_g + cl;
    cuinline_conv2d_rt_detail::finish<T, A>(p, e, chan, bias, residual, output, out_tile[r][c], co,
                                            img * p.out_n + oy * p.out_y + ox * p.out_x + co * p.out_c);
  }
#endif
}

#endif  // CUINLINE_CONV2D_GENERIC_RT_MMA_CUH
