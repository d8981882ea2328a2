// conv2d_generic_rt_mma.cuh — the generic conv2d kernel on tensor cores: f16 / bf16, every shape,
// layout, stride, padding, dilation and group count with at least 16 output channels a group, the
// epilogue run-time data (the parameters of conv2d_generic_rt.cuh), built with the library by nvcc
// (src/ops/conv2d/conv2d_generic_rt.cu) for sm_80 and newer. It serves a never-seen variant while
// the specialized kernel compiles, at a few times the specialized kernel's time instead of the
// direct kernel's tens.
//
// An implicit GEMM per group: M = the output pixels of all p.images images (a tile may span two
// images, so small planes and small batches still fill the GPU), N = the group's output channels,
// K = the filter taps x the group's input channels. A block computes kBM pixels x kBN channels with
// four warps (mma.sync m16n8k16, fp32 accumulators), its tiles read from shared memory with
// ldmatrix: 64 x 64 (warps of 32 x 32), or, in the wide form, 128 x 128 (warps of 64 x 64, four K
// tiles in flight, dynamic shared memory) for a vector-form launch of many tiles. Two forms, each
// its own kernel (the vector form's wide tiling a third):
// - the vector form, for a channels-last, 16-byte aligned input whose groups' channel runs are whole
//   16-byte vectors: K tap-major, a K tile kBK channels of one tap (one 16-byte-vector run of each
//   pixel's input), the tiles copied by cp.async kStages deep, zero-filled outside the image and past
//   the channels; a channels-last weight (or a 1 x 1 one) copied the same way, any other gathered
//   element by element (weights are small and stay in L2);
// - the gathered form, for any other input: K the flat index over taps x channels (no tap's
//   channels padded to kBK), each thread's elements read one by one into registers; the weight
//   too, or, where the host packed it K-major first (p.vec_w in this form; a launch of many
//   tiles), 8 K elements of a channel a 16-byte load.
//
// Arithmetic: products of the storage values summed in fp32 by the tensor cores (their order is not
// the direct kernel's), then conv2d_generic_rt.cuh's finish (finish8 below: the same on 8 channels
// at once): + bias, + residual, the epilogue program in fp32, one rounding at the store.
// Split K (p.k_slices > 1, where the launch's tiles are too few to fill the GPU: a small plane of
// many channels): block z sums its slice's K tiles (consecutive runs of them) and writes its fp32
// tile to p.partials; the last block of a tile to arrive (p.counters) adds the slices' tiles in
// slice order, so the result does not depend on which arrives last, resets the tile's counter and
// runs the epilogue.
// Grid: (ceil(images x pixels / kBM), groups x ceil(cout_g / kBN), k_slices); kThreads threads;
// static shared memory.
#ifndef CUINLINE_CONV2D_GENERIC_RT_MMA_CUH
#define CUINLINE_CONV2D_GENERIC_RT_MMA_CUH

#include "conv2d_generic_rt.cuh"  // (first: the arch wrappers need ew_half and ew_bf16)
#include "arch/copy_sm80.cuh"
#include "arch/mma_sm80.cuh"

#define CUINLINE_CONV2D_RT_MMA_THREADS 128
#define CUINLINE_CONV2D_RT_MMA_BM 64
#define CUINLINE_CONV2D_RT_MMA_BN 64
#define CUINLINE_CONV2D_RT_MMAW_BM 128  // the wide form's tile (its threads: CUINLINE_CONV2D_RT_MMA_THREADS)
#define CUINLINE_CONV2D_RT_MMAW_BN 128
#define CUINLINE_CONV2D_RT_MMAW_STAGES 4

namespace cuinline_conv2d_rt_mma_detail {

constexpr int kBK = 32;  // input channels of one tap a K tile
// A tile row in shared memory: 80 bytes, so ldmatrix's 8 rows hit 8 bank groups.
constexpr int kRow = kBK + 8;
constexpr int kVec = 8;  // 16-bit elements a 16-byte vector

// A block's tiling: kBM pixels x kBN channels on kWarpsM x kWarpsN warps (each kBM / kWarpsM x
// kBN / kWarpsN), kStages K tiles in flight. kDynamic: its tiles are in dynamic shared memory
// (kSharedBytes, over the static 48 KiB).
template <int BM, int BN, int WarpsM, int WarpsN, int Stages, bool Dynamic>
struct Shape {
  static constexpr int kBM = BM, kBN = BN, kWarpsM = WarpsM, kWarpsN = WarpsN, kStages = Stages;
  static constexpr bool kDynamic = Dynamic;
  static constexpr int kThreads = 32 * WarpsM * WarpsN;
  static constexpr int kMI = BM / WarpsM / 16;  // a warp's m16 tiles
  static constexpr int kNI = BN / WarpsN / 8;   // and n8 tiles
  // A (and B) vectors a thread copies a K tile.
  static constexpr int kRowsPerThread = BM * (kBK / kVec) / kThreads;
  static constexpr int kOutRow = BN + 4;  // the accumulators' row in shared memory (after the main loop)
  static constexpr int kSharedBytes = Stages * (BM + BN) * kRow * 2;
  static_assert(BM == BN, "A and B tiles are copied by the same thread rows");
  static_assert(kNI % 2 == 0 && BM * (kBK / kVec) % kThreads == 0, "whole ldmatrix pairs and copies");
  // After the main loop the tiles' memory holds the accumulators, split K's flag (a word past
  // them) and, from kOutAtOffset, the output offset of each of the block's kBM pixels.
  static constexpr int kOutAtOffset = (int)((sizeof(float) * BM * kOutRow + 16 + 15) / 16 * 16);
  static_assert(kOutAtOffset + (int)sizeof(long long) * BM <= kSharedBytes,
                "the accumulators, split K's flag and the pixels' output offsets fit in the tiles' memory");
};
// The 64 x 64 form (warps of 32 x 32, static shared memory), and the wide form for long reductions
// (warps of 64 x 64: twice the products a shared load; 80 KiB of dynamic shared memory, two blocks
// a multiprocessor on sm_80 and sm_90). Both split K where the launch asks.
using Tile64 = Shape<CUINLINE_CONV2D_RT_MMA_BM, CUINLINE_CONV2D_RT_MMA_BN, 2, 2, 3, false>;
using TileWide =
    Shape<CUINLINE_CONV2D_RT_MMAW_BM, CUINLINE_CONV2D_RT_MMAW_BN, 2, 2, CUINLINE_CONV2D_RT_MMAW_STAGES, true>;
static_assert(Tile64::kThreads == CUINLINE_CONV2D_RT_MMA_THREADS &&
                  TileWide::kThreads == CUINLINE_CONV2D_RT_MMA_THREADS,
              "one block size");
static_assert(Tile64::kSharedBytes <= 48 * 1024, "the 64 x 64 form's tiles are static");

template <class T, class C>
struct Tiles {
  T a[C::kStages][C::kBM * kRow];
  T b[C::kStages][C::kBN * kRow];
};

// The pixels whose A vectors this thread copies: the address of their input origin (their image's
// group input + iy0 in_y + ix0 in_x, as an address: before the input where the origin is in the
// padding; read only at taps inside the image), the origin, and whether they exist (rows past the
// last image's last pixel do not).
template <class T, class C>
struct PixelRows {
  const T* at[C::kRowsPerThread];
  int iy0[C::kRowsPerThread], ix0[C::kRowsPerThread];
  bool valid[C::kRowsPerThread];
};

// The vector form's next K tile: its tap (ky, kx) and first channel c0. The loads are issued in K
// order, so the cursor steps one K tile at a time (no division a tile).
struct KCursor {
  int c0, ky, kx;
};
__device__ __forceinline__ KCursor k_cursor(const cuinline_conv2d_rt_params& p, int kt, int cchunks) {
  KCursor k;
  const int tap = kt / cchunks;
  k.c0 = (kt - tap * cchunks) * kBK;
  k.ky = tap / p.kw;
  k.kx = tap - k.ky * p.kw;
  return k;
}
__device__ __forceinline__ void k_next(const cuinline_conv2d_rt_params& p, KCursor& k) {
  k.c0 += kBK;
  if (k.c0 >= p.cin_g) {
    k.c0 = 0;
    if (++k.kx == p.kw) k.kx = 0, ++k.ky;
  }
}

// The cursor's K tile of A and B into stage s, then the cursor to the next. A thread's B rows are
// output channels w_co (its first: w_g + its first channel's offset) + i kThreads / 4 (w_step
// elements apart). fallback: an address the zero-filling copies name (not read).
template <class T, class C>
__device__ __forceinline__ void load_tile(const cuinline_conv2d_rt_params& p, const T* w_co, long long w_step,
                                          int co_first, const PixelRows<T, C>& px, KCursor& k, bool vec_w,
                                          const T* fallback, Tiles<T, C>& t, int s) {
  constexpr int kRowsPerThread = C::kRowsPerThread, kThreads = C::kThreads;
  using namespace cuinline_arch;
  const int cc = threadIdx.x % (kBK / kVec);
  const int c = k.c0 + cc * kVec;
  const bool c_valid = c < p.cin_g;
  // The tap's offsets, the same for every row: in the input from a pixel's origin, in the weight
  // from a channel's row.
  const int dy = k.ky * p.dh, dx = k.kx * p.dw;
  const long long a_off = (long long)dy * p.in_y + (long long)dx * p.in_x + c;
  const long long b_off = (long long)k.ky * p.w_y + (long long)k.kx * p.w_x;
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i) {
    const int row = threadIdx.x / (kBK / kVec) + i * (kThreads / (kBK / kVec));
    const unsigned iy = static_cast<unsigned>(px.iy0[i] + dy);
    const unsigned ix = static_cast<unsigned>(px.ix0[i] + dx);
    const bool valid =
        px.valid[i] && c_valid && iy < static_cast<unsigned>(p.h) && ix < static_cast<unsigned>(p.w);
    copy16_async<0>(&t.a[s][row * kRow + cc * kVec], valid ? px.at[i] + a_off : fallback, valid);
  }
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i) {
    const int row = threadIdx.x / (kBK / kVec) + i * (kThreads / (kBK / kVec));
    const bool valid = co_first + i * (kThreads / (kBK / kVec)) < p.cout_g && c_valid;
    const T* w_row = w_co + i * w_step + b_off;
    if (vec_w) {
      copy16_async<1>(&t.b[s][row * kRow + cc * kVec], valid ? w_row + c : fallback, valid);
    } else {
      union {
        uint4 raw;
        T v[kVec];
      } u;
#pragma unroll
      for (int j = 0; j < kVec; ++j) u.v[j] = valid ? w_row[(long long)(c + j) * p.w_i] : T();
      *reinterpret_cast<uint4*>(&t.b[s][row * kRow + cc * kVec]) = u.raw;
    }
  }
  k_next(p, k);
}

// The gathered form (any input layout or channel count; p.vec_in 0): K is the flat index over taps x
// the group's channels, channels fastest, and a thread reads its 8 consecutive K elements of each of
// its A and B rows one by one into registers (issued before the tile's products, stored after them).
// The 8 elements' taps and channels are stepped from the first one's (two divisions a tile), and
// their offsets in the input and the weight, computed once, serve all of the thread's rows.
template <class T, class C>
struct Gathered {
  uint4 a[C::kRowsPerThread], b[C::kRowsPerThread];
};

template <class T, class C>
__device__ __forceinline__ void gather_tile(const cuinline_conv2d_rt_params& p, const T* w_g,
                                            const PixelRows<T, C>& px, int n0, int kt, int k_total,
                                            Gathered<T, C>& g) {
  constexpr int kRowsPerThread = C::kRowsPerThread, kThreads = C::kThreads;
  union Vec {
    uint4 raw;
    T v[kVec];
  };
  const int k0 = kt * kBK + (threadIdx.x % (kBK / kVec)) * kVec;
  const int tap0 = k0 / p.cin_g;
  int c = k0 - tap0 * p.cin_g;
  int ky = tap0 / p.kw;
  int kx = tap0 - ky * p.kw;
  int dy[kVec], dx[kVec];
  long long a_at[kVec], b_at[kVec];
  bool k_ok[kVec];
#pragma unroll
  for (int j = 0; j < kVec; ++j) {  // element k0 + j: its tap's offsets and its channel
    k_ok[j] = k0 + j < k_total;
    dy[j] = ky * p.dh;
    dx[j] = kx * p.dw;
    a_at[j] = (long long)c * p.in_c + (long long)dy[j] * p.in_y + (long long)dx[j] * p.in_x;
    b_at[j] = p.vec_w ? 0 : (long long)c * p.w_i + (long long)ky * p.w_y + (long long)kx * p.w_x;
    if (++c == p.cin_g) {
      c = 0;
      if (++kx == p.kw) kx = 0, ++ky;
    }
  }
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i) {
    Vec va;
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const unsigned iy = static_cast<unsigned>(px.iy0[i] + dy[j]);
      const unsigned ix = static_cast<unsigned>(px.ix0[i] + dx[j]);
      const bool ok = px.valid[i] && k_ok[j] && iy < static_cast<unsigned>(p.h) && ix < static_cast<unsigned>(p.w);
      va.v[j] = ok ? px.at[i][a_at[j]] : T();
    }
    g.a[i] = va.raw;
    const int co = n0 + threadIdx.x / (kBK / kVec) + i * (kThreads / (kBK / kVec));
    const T* w_co = w_g + (long long)co * p.w_o;
    if (p.vec_w) {
      // The weight packed K-major (rows of p.w_o elements, a multiple of kBK, zero past K; the
      // host's pack_gathered_weight): the 8 elements in one 16-byte load.
      const uint4 zero = {0u, 0u, 0u, 0u};
      g.b[i] = co < p.cout_g ? __ldg(reinterpret_cast<const uint4*>(w_co + k0)) : zero;
      continue;
    }
    Vec vb;
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const bool ok = co < p.cout_g && k_ok[j];
      vb.v[j] = ok ? w_co[b_at[j]] : T();
    }
    g.b[i] = vb.raw;
  }
}

template <class T, class C>
__device__ __forceinline__ void store_tile(const Gathered<T, C>& g, Tiles<T, C>& t, int s) {
  constexpr int kRowsPerThread = C::kRowsPerThread, kThreads = C::kThreads;
  const int cc = threadIdx.x % (kBK / kVec);
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i) {
    const int row = threadIdx.x / (kBK / kVec) + i * (kThreads / (kBK / kVec));
    *reinterpret_cast<uint4*>(&t.a[s][row * kRow + cc * kVec]) = g.a[i];
    *reinterpret_cast<uint4*>(&t.b[s][row * kRow + cc * kVec]) = g.b[i];
  }
}

// The block's kBK-deep product of stage s into the warp's accumulators (kMI m16 x kNI n8 tiles).
template <class T, class C>
__device__ __forceinline__ void mma_tile(const Tiles<T, C>& t, int s, int wm, int wn,
                                         float (&acc)[C::kMI][C::kNI][4]) {
  using namespace cuinline_arch;
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int kk = 0; kk < kBK; kk += 16) {
    unsigned a[C::kMI][4], b[C::kNI][2];
#pragma unroll
    for (int mi = 0; mi < C::kMI; ++mi) {
      const int row = wm * (C::kMI * 16) + mi * 16 + (lane & 15);
      ldmatrix_x4(a[mi], smem_address(&t.a[s][row * kRow + kk + (lane >> 4) * 8]));
    }
#pragma unroll
    for (int np = 0; np < C::kNI / 2; ++np) {
      const int row = wn * (C::kNI * 8) + np * 16 + (lane & 7) + (lane >> 4) * 8;
      unsigned r[4];
      ldmatrix_x4(r, smem_address(&t.b[s][row * kRow + kk + ((lane >> 3) & 1) * 8]));
      b[np * 2][0] = r[0], b[np * 2][1] = r[1], b[np * 2 + 1][0] = r[2], b[np * 2 + 1][1] = r[3];
    }
#pragma unroll
    for (int mi = 0; mi < C::kMI; ++mi) {
#pragma unroll
      for (int ni = 0; ni < C::kNI; ++ni) Mma<T>::run(acc[mi][ni], a[mi], b[ni][0], b[ni][1]);
    }
  }
}

// conv2d_generic_rt.cuh's finish on 8 consecutive output channels co .. co + 7 of one pixel of a
// channels-last output (the output and residual at `at` 16-byte aligned): element by element the
// same arithmetic, with 16-byte residual loads and output stores, and each epilogue step
// dispatched once for the 8 values.
template <class T>
__device__ __forceinline__ void finish8(const cuinline_conv2d_rt_params& p, const ewg_program& e,
                                        const cuinline_conv2d_chan& chan, const T* bias, const T* residual,
                                        T* output, const float (&acc)[kVec], int co, long long at) {
  using cuinline_conv2d_generic_detail::load_op;
  union Vec {
    uint4 raw;
    T t[kVec];
  };
  float v[kVec];
#pragma unroll
  for (int w = 0; w < kVec; ++w) v[w] = acc[w] + (p.has_bias ? load_op(bias + co + w) : 0.f);
  if (p.has_residual) {
    Vec r;
    r.raw = __ldg(reinterpret_cast<const uint4*>(residual + at));
#pragma unroll
    for (int w = 0; w < kVec; ++w) v[w] += ew_traits<T>::to_op(r.t[w]);
  }
  if (e.steps > 0) {
    const int last = p.cout - 1;
    float x0[kVec];
#pragma unroll
    for (int w = 0; w < kVec; ++w) x0[w] = v[w];
    for (int s = 0; s < e.steps; ++s) {
      const ewg_step& st = e.step[s];
      const ewg_opmath<float> k(st);
      float o[kVec], cnd[kVec];
      if (st.fn >= EWG_ADD_T && st.fn <= EWG_WHERE_T) {
#pragma unroll
        for (int w = 0; w < kVec; ++w) {
          o[w] = st.operand == 0 ? x0[w] : ew_channel_value<T>(chan.p[st.operand - 1], min(co + w, last));
        }
      }
      if (st.fn == EWG_WHERE_T || st.fn == EWG_WHERE_S) {
#pragma unroll
        for (int w = 0; w < kVec; ++w) {
          cnd[w] = st.cond == 0 ? x0[w] : ew_channel_value<T>(chan.p[st.cond - 1], min(co + w, last));
        }
      }
      ewg_step_values<float, kVec, true>(st, k, v, o, cnd);
    }
  }
  Vec out;
#pragma unroll
  for (int w = 0; w < kVec; ++w) out.t[w] = ew_traits<T>::from_op(v[w]);
  *reinterpret_cast<uint4*>(output + at) = out.raw;
}

}  // namespace cuinline_conv2d_rt_mma_detail

/// The gathered form's packed weight (src/ops/conv2d/conv2d_generic_rt.cpp, where a launch has many
/// tiles): element (row, k) of p.cout x kpad a thread, the weight's element k of output channel row
/// in K order (taps, then the group's channels), zero past K, so the form reads a thread's 8 K
/// elements of a channel in one 16-byte load. p: the weight's own strides.
template <class T>
__device__ __forceinline__ void cuinline_conv2d_rt_pack_weight_body(const T* __restrict__ weight, T* __restrict__ packed,
                                                                    const cuinline_conv2d_rt_params& p, int kpad) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (long long)p.cout * kpad) return;
  const int row = (int)(i / kpad);
  const int k = (int)(i - (long long)row * kpad);
  T v = T();
  if (k < p.kh * p.kw * p.cin_g) {
    const int tap = k / p.cin_g;
    const int c = k - tap * p.cin_g;
    const int ky = tap / p.kw;
    const int kx = tap - ky * p.kw;
    v = weight[row * p.w_o + c * p.w_i + ky * p.w_y + kx * p.w_x];
  }
  packed[i] = v;
}

/// The tensor-core generic conv (T = ew_half or ew_bf16). kGathered: the gathered form (p.vec_in
/// 0), else the vector form (p.vec_in set, the input 16-byte aligned; p.vec_w: the channels-last
/// weight read by cp.async, also 16-byte aligned); each its own kernel, so the vector form keeps
/// its registers. C: the block's tiling (Tile64, or TileWide for the vector form: the wide form, its
/// own kernel; launched with TileWide::kSharedBytes of dynamic shared memory). Arguments as
/// cuinline_conv2d_rt_body's.
template <class T, bool kGathered, class C = cuinline_conv2d_rt_mma_detail::Tile64>
__device__ __forceinline__ void cuinline_conv2d_rt_mma_body(
    const T* __restrict__ input, const T* __restrict__ weight, const T* __restrict__ bias,
    T* __restrict__ output, const T* __restrict__ residual, const cuinline_conv2d_chan& chan,
    const cuinline_conv2d_rt_params& p, const ewg_program& e) {
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800) || defined(CUINLINE_CONV2D_RT_MMA_EMULATED)
  using namespace cuinline_conv2d_rt_mma_detail;
  static_assert(!(kGathered && C::kDynamic), "the gathered form has the 64 x 64 tiling");
  constexpr int kBM = C::kBM, kBN = C::kBN, kStages = C::kStages, kThreads = C::kThreads;
  constexpr int kRowsPerThread = C::kRowsPerThread, kOutRow = C::kOutRow;
#ifdef CUINLINE_CONV2D_RT_MMA_EMULATED
  // (The host emulation, tests/test_conv2d_generic_rt_emulated.cpp: the block's emulated memory.)
  Tiles<T, C>& tiles = *reinterpret_cast<Tiles<T, C>*>(cuinline_emulated_smem());
#else
  Tiles<T, C>* tiles_at;
  if constexpr (C::kDynamic) {
    extern __shared__ __align__(16) unsigned char cuinline_conv2d_rt_mma_smem[];
    tiles_at = reinterpret_cast<Tiles<T, C>*>(cuinline_conv2d_rt_mma_smem);
  } else {
    __shared__ __align__(16) Tiles<T, C> static_tiles;
    tiles_at = &static_tiles;
  }
  Tiles<T, C>& tiles = *tiles_at;
#endif
  const long long pixels = (long long)p.oh * p.ow;
  const long long m_end = pixels * p.images;
  const long long m0 = (long long)blockIdx.x * kBM;
  const int n_tiles = (p.cout_g + kBN - 1) / kBN;
  const int grp = blockIdx.y / n_tiles;
  const int n0 = (blockIdx.y - grp * n_tiles) * kBN;
  const T* w_g = weight + (long long)grp * p.cout_g * p.w_o;
  const bool vec_w = p.vec_w != 0;
  PixelRows<T, C> px;
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i) {
    const long long m = m0 + threadIdx.x / (kBK / kVec) + i * (kThreads / (kBK / kVec));
    const long long img = m / pixels;
    const int pm = (int)(m - img * pixels);
    const int oy = pm / p.ow;
    const int ox = pm - oy * p.ow;
    px.valid[i] = m < m_end;
    px.iy0[i] = oy * p.sh - p.ph;
    px.ix0[i] = ox * p.sw - p.pw;
    // (As an integer: the origin may lie before the input.)
    const long long origin = img * p.in_n + (long long)grp * p.cin_g * p.in_c +
                             (long long)px.iy0[i] * p.in_y + (long long)px.ix0[i] * p.in_x;
    px.at[i] = reinterpret_cast<const T*>(reinterpret_cast<unsigned long long>(input) +
                                          static_cast<unsigned long long>(origin) * sizeof(T));
  }
  // The vector form's B rows: this thread's first output channel (of the group) and its row.
  const int co_first = n0 + (int)threadIdx.x / (kBK / kVec);
  const T* const w_co = w_g + (long long)co_first * p.w_o;
  const long long w_step = (long long)(kThreads / (kBK / kVec)) * p.w_o;
  constexpr bool gathered = kGathered;
  const int cchunks = (p.cin_g + kBK - 1) / kBK;
  const int k_total = p.kh * p.kw * p.cin_g;  // (the gathered form's K)
  const int ktiles_all = gathered ? (k_total + kBK - 1) / kBK : p.kh * p.kw * cchunks;
  // This block's K tiles: slice blockIdx.z's run of them (all of them unsplit).
  const int slices = p.k_slices > 1 ? p.k_slices : 1;
  const int per_slice = (ktiles_all + slices - 1) / slices;
  const int kt0 = min(ktiles_all, (int)blockIdx.z * per_slice);
  const int ktiles = min(ktiles_all - kt0, per_slice);
  float acc[C::kMI][C::kNI][4];
#pragma unroll
  for (int mi = 0; mi < C::kMI; ++mi)
#pragma unroll
    for (int ni = 0; ni < C::kNI; ++ni)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[mi][ni][r] = 0.f;
  const int warp = threadIdx.x / 32;
  const int wm = warp % C::kWarpsM, wn = warp / C::kWarpsM;
  if constexpr (gathered) {
    Gathered<T, C> g;
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < ktiles) {
        gather_tile<T, C>(p, w_g, px, n0, kt0 + s, k_total, g);
        store_tile<T, C>(g, tiles, s);
      }
    }
#pragma unroll 1
    for (int kt = 0; kt < ktiles; ++kt) {
      __syncthreads();  // tile kt stored by every thread; every warp is done with tile kt - 1's stage
      const int next = kt + kStages - 1;
      if (next < ktiles) gather_tile<T, C>(p, w_g, px, n0, kt0 + next, k_total, g);  // (loads in flight ...)
      mma_tile<T, C>(tiles, kt % kStages, wm, wn, acc);
      if (next < ktiles) store_tile<T, C>(g, tiles, next % kStages);  // (... over the products)
    }
  } else {
    KCursor k = k_cursor(p, kt0, cchunks);
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < ktiles) load_tile<T, C>(p, w_co, w_step, co_first, px, k, vec_w, input, tiles, s);
      cuinline_arch::copy_commit();
    }
#pragma unroll 1
    for (int kt = 0; kt < ktiles; ++kt) {
      cuinline_arch::copy_wait<kStages - 2>();
      __syncthreads();  // tile kt landed for every thread; every warp is done with tile kt - 1's stage
      const int next = kt + kStages - 1;
      if (next < ktiles)
        load_tile<T, C>(p, w_co, w_step, co_first, px, k, vec_w, input, tiles, next % kStages);
      cuinline_arch::copy_commit();
      mma_tile<T, C>(tiles, kt % kStages, wm, wn, acc);
    }
    cuinline_arch::copy_wait<0>();
  }
  __syncthreads();  // every warp is done with the tiles: their memory takes the accumulators
  // Lane (g, t) holds rows g and g + 8 of each m16 tile, columns 2t and 2t + 1 of each n8.
  float(*out_tile)[kOutRow] = reinterpret_cast<float(*)[kOutRow]>(&tiles);
  const int lane = threadIdx.x % 32;
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int mi = 0; mi < C::kMI; ++mi)
#pragma unroll
    for (int ni = 0; ni < C::kNI; ++ni)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        out_tile[wm * (C::kMI * 16) + mi * 16 + g + (r >> 1) * 8]
                [wn * (C::kNI * 8) + ni * 8 + 2 * t + (r & 1)] = acc[mi][ni][r];
      }
  __syncthreads();
  if (slices > 1) {
    // This slice's tile to the workspace; the tile's last block to arrive sums them all. (16-byte
    // accesses: a row of the accumulator tile is kOutRow floats, a multiple of 4; the workspace's
    // tiles are kBM x kBN floats.)
    constexpr int kQuads = kBM * kBN / 4;  // float4s a tile
    const long long tile = (long long)blockIdx.y * gridDim.x + blockIdx.x;
    float4* const part = reinterpret_cast<float4*>(p.partials) + tile * slices * kQuads;
    unsigned* const counter = reinterpret_cast<unsigned*>(p.counters) + tile;
#pragma unroll 1
    for (int i = threadIdx.x; i < kQuads; i += kThreads) {
      part[blockIdx.z * kQuads + i] = *reinterpret_cast<const float4*>(&out_tile[i / (kBN / 4)][(i % (kBN / 4)) * 4]);
    }
    __threadfence();  // the tile visible device-wide before the arrival that announces it
    __syncthreads();
    int* const last = reinterpret_cast<int*>(out_tile + kBM);  // (a word past the accumulators)
    if (threadIdx.x == 0) *last = atomicAdd(counter, 1u) == (unsigned)slices - 1;
    __syncthreads();
    if (!*last) return;
    __threadfence();
    // The slices' tiles added in slice order (the same sum whichever block arrives last), kPer of a
    // thread's quads at a time, so their loads are in flight together.
    constexpr int kQuadsPerThread = kQuads / kThreads;
    constexpr int kPer = kQuadsPerThread < 8 ? kQuadsPerThread : 8;
    static_assert(kQuads % kThreads == 0 && kQuadsPerThread % kPer == 0, "whole quads a thread");
#pragma unroll 1
    for (int j0 = 0; j0 < kQuadsPerThread; j0 += kPer) {
      const float4* const at = part + threadIdx.x + j0 * kThreads;
      float4 sum[kPer];
#pragma unroll
      for (int j = 0; j < kPer; ++j) sum[j] = __ldcg(at + j * kThreads);
#pragma unroll 1
      for (int z = 1; z < slices; ++z) {
        float4 v[kPer];
#pragma unroll
        for (int j = 0; j < kPer; ++j) v[j] = __ldcg(at + z * kQuads + j * kThreads);
#pragma unroll
        for (int j = 0; j < kPer; ++j)
          sum[j].x += v[j].x, sum[j].y += v[j].y, sum[j].z += v[j].z, sum[j].w += v[j].w;
      }
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        const int i = threadIdx.x + (j0 + j) * kThreads;
        *reinterpret_cast<float4*>(&out_tile[i / (kBN / 4)][(i % (kBN / 4)) * 4]) = sum[j];
      }
    }
    if (threadIdx.x == 0) *counter = 0;  // (zeroed for a replay of a captured launch too)
    __syncthreads();
  }
  // Each of the block's pixels' output offset (-1 past the last image's last pixel), computed once
  // for every channel the block writes.
  long long* const out_at =
      reinterpret_cast<long long*>(reinterpret_cast<unsigned char*>(&tiles) + C::kOutAtOffset);
  for (int r = threadIdx.x; r < kBM; r += kThreads) {
    const long long m = m0 + r;
    long long at = -1;
    if (m < m_end) {
      const long long img = m / pixels;
      const int pm = (int)(m - img * pixels);
      const int oy = pm / p.ow;
      const int ox = pm - oy * p.ow;
      at = img * p.out_n + oy * p.out_y + ox * p.out_x;
    }
    out_at[r] = at;
  }
  __syncthreads();
  // A channels-last output of whole 16-byte channel runs: 8 channels of a pixel a thread, consecutive
  // threads along the channels, 16-byte stores.
  const bool vec_out = p.out_c == 1 && p.cout % kVec == 0 && p.cout_g % kVec == 0 &&
                       (reinterpret_cast<unsigned long long>(output) & 15) == 0 &&
                       (!p.has_residual || (reinterpret_cast<unsigned long long>(residual) & 15) == 0);
  if (vec_out) {
#pragma unroll 1
    for (int i = threadIdx.x; i < kBM * (kBN / kVec); i += kThreads) {
      const int r = i / (kBN / kVec);
      const int c = (i - r * (kBN / kVec)) * kVec;
      const long long at = out_at[r];
      const int cl = n0 + c;
      if (at < 0 || cl >= p.cout_g) continue;
      const int co = grp * p.cout_g + cl;
      float acc8[kVec];
#pragma unroll
      for (int w = 0; w < kVec; ++w) acc8[w] = out_tile[r][c + w];
      finish8<T>(p, e, chan, bias, residual, output, acc8, co, at + co);
    }
    return;
  }
  // Otherwise one output a thread at a time, consecutive threads along the output's fastest
  // dimension (the channels of a channels-last output, else the pixels).
  using A = typename ew_traits<T>::op;
  const bool channels_fast = p.out_c == 1;
  const int rows = (int)min((long long)kBM, m_end - m0);
  const int cols = min(kBN, p.cout_g - n0);
#pragma unroll 1
  for (int i = threadIdx.x; i < rows * cols; i += kThreads) {
    const int r = channels_fast ? i / cols : i % rows;  // (rows < m_end - m0: out_at[r] >= 0)
    const int c = channels_fast ? i % cols : i / rows;
    const int co = grp * p.cout_g + n0 + c;
    cuinline_conv2d_rt_detail::finish<T, A>(p, e, chan, bias, residual, output, out_tile[r][c], co,
                                            out_at[r] + co * p.out_c);
  }
#endif
}

#endif  // CUINLINE_CONV2D_GENERIC_RT_MMA_CUH
