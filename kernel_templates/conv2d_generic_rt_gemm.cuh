// conv2d_generic_rt_gemm.cuh — the generic conv2d kernel's implicit GEMM on the FP32 pipes (mode 5):
// f32 convs whose input is read element by element (NCHW, or channel runs that are not whole 16-byte
// vectors) with at least 32 output channels a group, enough tiles to fill the GPU, and 32-bit
// offsets (the host's rule, plan_generic_conv). Its shape and epilogue are run-time data (the
// parameters of conv2d_generic_rt.cuh), built with the library by nvcc
// (src/ops/conv2d/conv2d_generic_rt.cu).
//
// The direct kernel (modes 0 and 4) issues a load for every few products, so the load units bound
// it; here a block computes kBM output pixels (of all p.images images: one M dimension) x kBN output
// channels of one group, K = the filter taps x the group's input channels, from tiles in shared
// memory: each thread kTM x kTN outputs, each K step 16 bytes-wide shared loads of kTM + kTN values
// for kTM x kTN fused multiply-adds. A K tile is kBK elements; each thread reads one pixel's kBK
// input elements (consecutive threads, consecutive pixels) and one K element of kBPerThread output
// channels' weights (consecutive threads, consecutive K elements) into registers, issued before the
// current tile's products and stored after them (two buffers). Elements outside the image, past K
// or past the channels are zero.
//
// Arithmetic: K runs over kh, then kw, then the input channels, the direct kernel's order, each
// output's products summed by fused multiply-adds in fp32 one after another; a tap in the padding
// adds 0 x w, which leaves a sum unchanged for every finite weight (the direct kernel skips it), so
// with finite weights the sums are the direct kernel's bit for bit. Then its finish: + bias, + residual,
// the epilogue program, one rounding at the store. The accumulators pass through shared memory so
// that consecutive threads store consecutive elements of the output's fastest dimension.
// Grid: (ceil(images x pixels / kBM), groups x ceil(cout_g / kBN), 1); kThreads threads; static
// shared memory.
#ifndef CUINLINE_CONV2D_GENERIC_RT_GEMM_CUH
#define CUINLINE_CONV2D_GENERIC_RT_GEMM_CUH

#include "conv2d_generic_rt.cuh"

#define CUINLINE_CONV2D_RT_GEMM_THREADS 128
#define CUINLINE_CONV2D_RT_GEMM_BM 128
#define CUINLINE_CONV2D_RT_GEMM_BN 64

namespace cuinline_conv2d_rt_gemm_detail {

constexpr int kThreads = CUINLINE_CONV2D_RT_GEMM_THREADS;
constexpr int kBM = CUINLINE_CONV2D_RT_GEMM_BM;
constexpr int kBN = CUINLINE_CONV2D_RT_GEMM_BN;
constexpr int kBK = 8;  // (16: 1.20 ms on the seed against 1.09, docs/PERFORMANCE.md)
constexpr int kTM = 8, kTN = 8;                  // a thread's outputs: pixels x channels
constexpr int kThreadsN = kBN / kTN;             // threads along N (the fastest)
constexpr int kBPerThread = kBK * kBN / kThreads;  // weights a thread copies a K tile
constexpr int kBChannels = kThreads / kBK;       // channels the block's threads copy at once
constexpr int kBRow = kBN + 4;                   // a K row of the B tile (a thread's stores conflict-free)
constexpr int kOutRow = kBM + 4;                 // a channel's row of the accumulator tile
static_assert(kThreads == kBM, "a thread copies one pixel's A elements");
static_assert((kBM / kTM) * kThreadsN == kThreads, "the threads tile the block's outputs");
static_assert(kBPerThread * kBChannels == kBN, "the threads copy the B tile");

struct Tiles {
  float a[2][kBK][kBM];   // [buffer][k][pixel]
  float b[2][kBK][kBRow];  // [buffer][k][channel]
};
union Shared {
  Tiles tiles;
  float out[kBN][kOutRow];  // the accumulators after the main loop, [channel][pixel]
};

// The input's strides as 32-bit offsets from a pixel's input origin (the host's rule: the largest,
// a tap's channel up to 8 past the group's, and the weight's fit), and the A rows' sentinel: a row
// origin that no tap brings inside the image (pixels past the launch's last one; K elements past
// K).
struct Strides {
  int in_c, in_y, in_x;
};
constexpr int kOutside = -(1 << 30);

// A K element's position in K order (kh, kw, then the channels): input channel c of tap (ky, kx),
// the tap's displacement (dy, dx; dy kOutside past the last tap) and the element's offset from a
// pixel's input origin (off = c in_c + dy in_y + dx in_x). Every thread steps the same positions.
struct KPos {
  int c, ky, kx, dy, dx, off;
};
__device__ __forceinline__ void set_tap(const cuinline_conv2d_rt_params& p, const Strides& st, KPos& k) {
  const bool inside = k.ky < p.kh;
  k.dy = inside ? k.ky * p.dh : kOutside;
  k.dx = k.kx * p.dw;
  k.off = k.c * st.in_c + (inside ? k.dy : 0) * st.in_y + k.dx * st.in_x;
}
__device__ __forceinline__ void step(const cuinline_conv2d_rt_params& p, const Strides& st, KPos& k) {
  k.off += st.in_c;
  if (++k.c == p.cin_g) {
    k.c = 0;
    if (++k.kx == p.kw) k.kx = 0, ++k.ky;
    set_tap(p, st, k);
  }
}

// The weights this thread copies: K element kbk of each tile (consecutive threads, consecutive K
// elements of a channel: a channel's weights are read a few lines at a time, not a line a thread)
// of channels n + kBChannels j of the group.
struct BRows {
  const void* w;   // channel n's weights (a T*)
  int n;           // the first channel, in the group
  int c, ky, kx;   // K element kbk of the current tile (ky == kh: past K)
  int off;         // its offset in a channel's weights
};
__device__ __forceinline__ void set_weight_offset(const cuinline_conv2d_rt_params& p, BRows& b) {
  b.off = b.c * (int)p.w_i + b.ky * (int)p.w_y + b.kx * (int)p.w_x;
}

// K tile k0's elements into registers (the A positions from k, advanced past the tile; B's from b,
// advanced by a tile): this thread's pixel's kBK input elements (in_m: the pixel's input origin;
// iy0 kOutside for a pixel past the launch) and kBPerThread channels' weights of one K element.
template <class T>
__device__ __forceinline__ void gather(const cuinline_conv2d_rt_params& p, const Strides& st, const T* in_m,
                                       int iy0, int ix0, BRows& b, KPos& k, float (&ra)[kBK],
                                       float (&rb)[kBPerThread]) {
  using cuinline_conv2d_generic_detail::load_op;
  if (p.cin_g % kBK == 0) {
    // Whole tiles of channels a tap: one tap (one bounds check) for the tile's elements.
    const int iy = iy0 + k.dy, ix = ix0 + k.dx;
    const bool in = (unsigned)iy < (unsigned)p.h && (unsigned)ix < (unsigned)p.w;
    const T* src = in_m + k.off;
#pragma unroll
    for (int j = 0; j < kBK; ++j) ra[j] = in ? load_op(src + j * st.in_c) : 0.f;
    k.off += kBK * st.in_c;
    k.c += kBK;
    if (k.c == p.cin_g) {
      k.c = 0;
      if (++k.kx == p.kw) k.kx = 0, ++k.ky;
      set_tap(p, st, k);
    }
  } else {
#pragma unroll
    for (int j = 0; j < kBK; ++j) {
      const int iy = iy0 + k.dy, ix = ix0 + k.dx;
      const bool in = (unsigned)iy < (unsigned)p.h && (unsigned)ix < (unsigned)p.w;
      ra[j] = in ? load_op(in_m + k.off) : 0.f;
      step(p, st, k);
    }
  }
  const T* w = static_cast<const T*>(b.w) + b.off;
  const bool k_ok = b.ky < p.kh;
#pragma unroll
  for (int j = 0; j < kBPerThread; ++j) {
    rb[j] = k_ok && b.n + kBChannels * j < p.cout_g ? load_op(w + kBChannels * j * p.w_o) : 0.f;
  }
  b.c += kBK;
  while (b.c >= p.cin_g) {
    b.c -= p.cin_g;
    if (++b.kx == p.kw) b.kx = 0, ++b.ky;
  }
  set_weight_offset(p, b);
}

__device__ __forceinline__ void store(Tiles& t, int s, const float (&ra)[kBK], const float (&rb)[kBPerThread]) {
#pragma unroll
  for (int j = 0; j < kBK; ++j) t.a[s][j][threadIdx.x] = ra[j];
#pragma unroll
  for (int j = 0; j < kBPerThread; ++j) t.b[s][threadIdx.x % kBK][threadIdx.x / kBK + kBChannels * j] = rb[j];
}

// Pixel i and channel j of thread (tm, tn)'s outputs in the block's tile: two runs of 4 of each
// (16-byte shared loads), half a tile apart.
__device__ __forceinline__ int pixel_of(int tm, int i) {
  return (i / 4) * (kBM / 2) + tm * 4 + i % 4;
}
__device__ __forceinline__ int channel_of(int tn, int j) {
  return (j / 4) * (kBN / 2) + tn * 4 + j % 4;
}

// Output pixel m of the launch's M (pixels an image): its image, row and column.
struct Pixel {
  long long img;
  int oy, ox;
};
__device__ __forceinline__ Pixel pixel_at(const cuinline_conv2d_rt_params& p, long long pixels, long long m) {
  Pixel px;
  px.img = m / pixels;
  const int pm = (int)(m - px.img * pixels);
  px.oy = pm / p.ow;
  px.ox = pm - px.oy * p.ow;
  return px;
}
// Where output pixel m starts in the output.
__device__ __forceinline__ long long output_at(const cuinline_conv2d_rt_params& p, long long pixels, long long m) {
  const Pixel px = pixel_at(p, pixels, m);
  return px.img * p.out_n + px.oy * p.out_y + px.ox * p.out_x;
}

// Values v of output channel co at output offsets at[] (ok: the pixel exists): + bias, + residual,
// the epilogue on all of them, one rounding to T at the store (the direct kernel's finish).
template <class T, int N>
__device__ __forceinline__ void finish_values(const cuinline_conv2d_rt_params& p, const ewg_program& e,
                                              const cuinline_conv2d_chan& chan, const T* bias, const T* residual,
                                              T* output, float (&v)[N], int co, const long long (&at)[N],
                                              const bool (&ok)[N]) {
  using cuinline_conv2d_generic_detail::load_op;
  const float b = p.has_bias ? load_op(bias + co) : 0.f;
  const long long oc = (long long)co * p.out_c;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    v[i] = v[i] + b;
    if (p.has_residual && ok[i]) v[i] += load_op(residual + at[i] + oc);
  }
  cuinline_conv2d_rt_detail::epilogue_values<T, float, N>(e, chan, v, co, p.cout - 1);
#pragma unroll
  for (int i = 0; i < N; ++i) {
    if (ok[i]) output[at[i] + oc] = ew_traits<T>::from_op(v[i]);
  }
}

}  // namespace cuinline_conv2d_rt_gemm_detail

/// Mode 5 (f32; T the storage type, opmath float). Arguments as cuinline_conv2d_rt_body's.
template <class T>
__device__ __forceinline__ void cuinline_conv2d_rt_gemm_body(const T* __restrict__ input, const T* __restrict__ weight,
                                                             const T* __restrict__ bias, T* __restrict__ output,
                                                             const T* __restrict__ residual,
                                                             const cuinline_conv2d_chan& chan,
                                                             const cuinline_conv2d_rt_params& p, const ewg_program& e) {
  using namespace cuinline_conv2d_rt_gemm_detail;
#ifdef CUINLINE_CONV2D_RT_MMA_EMULATED
  // (The host emulation, tests/test_conv2d_generic_rt_emulated.cpp: the block's emulated memory.)
  Shared& sh = *reinterpret_cast<Shared*>(cuinline_emulated_smem());
#else
  __shared__ __align__(16) Shared sh;
#endif
  const long long pixels = (long long)p.oh * p.ow;
  const long long m_end = pixels * p.images;
  const long long m0 = (long long)blockIdx.x * kBM;
  const int n_tiles = (p.cout_g + kBN - 1) / kBN;
  const int grp = blockIdx.y / n_tiles;
  const int n0 = (blockIdx.y - grp * n_tiles) * kBN;
  // The pixel whose input this thread copies (in_m: its input origin, offsets from it 32-bit), and
  // the channels and K element of the weights it copies.
  const Strides st{(int)p.in_c, (int)p.in_y, (int)p.in_x};
  const long long m = m0 + threadIdx.x;
  const T* in_m = input;
  int iy0 = kOutside, ix0 = 0;
  if (m < m_end) {
    const Pixel px = pixel_at(p, pixels, m);
    iy0 = px.oy * p.sh - p.ph;
    ix0 = px.ox * p.sw - p.pw;
    in_m = input + px.img * p.in_n + (long long)grp * p.cin_g * p.in_c + (long long)iy0 * p.in_y +
           (long long)ix0 * p.in_x;
  }
  const int k_total = p.kh * p.kw * p.cin_g;
  BRows b;
  b.n = n0 + threadIdx.x / kBK;
  b.w = weight + ((long long)grp * p.cout_g + b.n) * p.w_o;  // (read only where b.n < cout_g)
  {
    const int kbk = threadIdx.x % kBK;
    const int tap = kbk / p.cin_g;
    b.c = kbk - tap * p.cin_g;
    b.ky = tap / p.kw;
    b.kx = tap - b.ky * p.kw;
    set_weight_offset(p, b);
  }
  KPos k{0, 0, 0, 0, 0, 0};
  set_tap(p, st, k);
  const int ktiles = (k_total + kBK - 1) / kBK;
  const int tn = threadIdx.x % kThreadsN, tm = threadIdx.x / kThreadsN;
  float acc[kTM][kTN];
#pragma unroll
  for (int i = 0; i < kTM; ++i)
#pragma unroll
    for (int j = 0; j < kTN; ++j) acc[i][j] = 0.f;
  float ra[kBK], rb[kBPerThread];
  gather<T>(p, st, in_m, iy0, ix0, b, k, ra, rb);
  store(sh.tiles, 0, ra, rb);
  __syncthreads();
#pragma unroll 1
  for (int kt = 0; kt < ktiles; ++kt) {
    const int s = kt & 1;
    const bool more = kt + 1 < ktiles;
    if (more) gather<T>(p, st, in_m, iy0, ix0, b, k, ra, rb);  // (in flight ...)
#pragma unroll
    for (int kk = 0; kk < kBK; ++kk) {
      float a[kTM], w[kTN];
#pragma unroll
      for (int i = 0; i < kTM; ++i) a[i] = sh.tiles.a[s][kk][pixel_of(tm, i)];
#pragma unroll
      for (int j = 0; j < kTN; ++j) w[j] = sh.tiles.b[s][kk][channel_of(tn, j)];
#pragma unroll
      for (int i = 0; i < kTM; ++i)
#pragma unroll
        for (int j = 0; j < kTN; ++j) acc[i][j] = cuinline_conv2d_generic_detail::fma_op(a[i], w[j], acc[i][j]);
    }
    if (more) store(sh.tiles, s ^ 1, ra, rb);  // (... over the products)
    __syncthreads();  // tile kt + 1 stored by every thread; every thread is done with tile kt's buffer
  }
  // (The last barrier above: every thread is done with the tiles, whose memory takes the accumulators.)
#pragma unroll
  for (int i = 0; i < kTM; ++i)
#pragma unroll
    for (int j = 0; j < kTN; ++j) sh.out[channel_of(tn, j)][pixel_of(tm, i)] = acc[i][j];
  __syncthreads();
  constexpr int kRun = 8;  // values a thread finishes together (one channel's)
  const int rows = (int)min((long long)kBM, m_end - m0);
  const int cols = min(kBN, p.cout_g - n0);
  long long at[kRun];
  bool ok[kRun];
  float v[kRun];
  if (p.out_x == 1) {
    // Pixels fastest in the output (NCHW): a thread's 8 pixels are tid % 16 + 16 q, the same for
    // each channel it finishes (channels tid / 16 + 8 r), so consecutive threads store consecutive
    // pixels of a channel.
    constexpr int kLanesM = kBM / kRun;           // 16
    constexpr int kChanStep = kThreads / kLanesM;  // 8
#pragma unroll
    for (int q = 0; q < kRun; ++q) {
      const int r = threadIdx.x % kLanesM + kLanesM * q;
      ok[q] = r < rows;
      at[q] = ok[q] ? output_at(p, pixels, m0 + r) : 0;
    }
#pragma unroll 1
    for (int c = threadIdx.x / kLanesM; c < cols; c += kChanStep) {
#pragma unroll
      for (int q = 0; q < kRun; ++q) v[q] = sh.out[c][threadIdx.x % kLanesM + kLanesM * q];
      finish_values<T, kRun>(p, e, chan, bias, residual, output, v, grp * p.cout_g + n0 + c, at, ok);
    }
    return;
  }
  // Channels fastest (channels-last): thread t finishes channel t % kBN of a run of consecutive
  // pixels, kRun at a time, its output position stepped along the rows.
  const int c = threadIdx.x % kBN;
  if (c >= cols) return;
  constexpr int kRunsPerThread = kBM / (kThreads / kBN);  // 64 pixels a thread
  const int r0 = (threadIdx.x / kBN) * kRunsPerThread;
  long long img = 0;
  int oy = 0, ox = 0;
  if (r0 < rows) {
    const Pixel px = pixel_at(p, pixels, m0 + r0);
    img = px.img, oy = px.oy, ox = px.ox;
  }
#pragma unroll 1
  for (int r = r0; r < r0 + kRunsPerThread && r < rows; r += kRun) {
#pragma unroll
    for (int q = 0; q < kRun; ++q) {
      ok[q] = r + q < rows;
      at[q] = img * p.out_n + oy * p.out_y + ox * p.out_x;
      v[q] = sh.out[c][r + q];
      if (++ox == p.ow) {
        ox = 0;
        if (++oy == p.oh) oy = 0, ++img;
      }
    }
    finish_values<T, kRun>(p, e, chan, bias, residual, output, v, grp * p.cout_g + n0 + c, at, ok);
  }
}

#endif  // CUINLINE_CONV2D_GENERIC_RT_GEMM_CUH
