// conv2d_mma.cuh — the tensor-core form of conv2d.cuh: the same fused convolution (NCHW, float32
// data, groups = 1, bias, elementwise epilogue) as an implicit GEMM on TF32 tensor cores
// (mma.sync m16n8k8, fp32 accumulation), compiled by NVRTC with every shape parameter a constant.
//
// GEMM view: M = output pixels, N = output channels, K = (kh, kw, ci) with ci innermost, so one
// k8 step of the mma is 8 input channels of one filter tap. Input channels are padded to a multiple
// of 8 with zeros (in shared memory only). For a fixed tap the A fragment of a thread is
// s_in[ci = tig (+4)][row][col + tap offset]: its address is the thread's base plus a constant, so
// the unrolled tap loop needs no index arithmetic at all.
//
// Work split: a block computes kTY output rows x kTileCols output columns (M) x kBlockCout output
// channels (N) of one image. kWarpsM x kWarpsN warps; a warp owns kMT 16-pixel tiles (a tile is
// 16 consecutive columns of one row) x kNT 8-channel tiles. Staging (cp.async, zero-filled halo
// and padding) and the three pipeline modes are those of conv2d.cuh.
//
// kSplit = 1: TF32 (operands rounded to nearest TF32, like cuBLAS/cuDNN TF32 modes).
// kSplit = 3: 3xTF32: x = hi + lo with hi = tf32(x), lo = tf32(x - hi); the product is
//             hi*hi + hi*lo + lo*hi (the lo*lo term is below fp32's rounding), accumulated in fp32.
//
// Required members of S (all `static constexpr int`):
//   kCin, kH, kW, kCout, kKH, kKW, kSH, kSW, kPH, kPW, kDH, kDW, kOH, kOW, kHasBias,
//   kTileCols (multiple of 16), kTY, kWarpsM, kWarpsN, kMT, kNT, kCiPad (kCin rounded up to 8),
//   kCiChunk (multiple of 8 dividing kCiPad), kCiUnroll (unroll of the 8-channel loop), kKhUnroll
//   (unroll of the filter-row loop; filter columns always unroll), kMinBlocks, kPipeline (0, 1, 2
//   as in conv2d.cuh), kSplit (1 or 3).

#ifndef CUINLINE_CONV2D_MMA_CUH
#define CUINLINE_CONV2D_MMA_CUH

#include "conv2d.cuh"

namespace cuinline_conv2d_mma_detail {

// Largest number of distinct words one bank serves when the 32 lanes (g = lane / 4, t = lane % 4)
// read word t * plane + g * sw (an A fragment: channel t, pixel g).
__host__ __device__ constexpr int bank_conflicts(int plane, int sw) {
  int worst = 0;
  for (int bank = 0; bank < 32; ++bank) {
    int n = 0;
    for (int t = 0; t < 4; ++t) {
      for (int g = 0; g < 8; ++g) n += (t * plane + g * sw) % 32 == bank ? 1 : 0;
    }
    worst = n > worst ? n : worst;
  }
  return worst;
}
// The smallest plane stride >= min_plane with the fewest conflicts (the host mirrors this).
__host__ __device__ constexpr int conflict_free_plane(int min_plane, int sw) {
  int best = min_plane;
  int best_conflicts = bank_conflicts(min_plane, sw);
  for (int p = min_plane + 1; p < min_plane + 32; ++p) {
    const int c = bank_conflicts(p, sw);
    if (c < best_conflicts) {
      best = p;
      best_conflicts = c;
    }
  }
  return best;
}
// A weight row pitch >= cout with pitch % 32 in {8, 24}: the B fragment (k = t, n = g) is then
// conflict-free.
__host__ __device__ constexpr int weight_pitch(int cout) {
  int p = cout;
  while (p % 32 != 8 && p % 32 != 24) ++p;
  return p;
}

template <class S>
struct Plan {
  static constexpr int kWarps = S::kWarpsM * S::kWarpsN;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kBlockCout = 8 * S::kWarpsN * S::kNT;
  static constexpr int kColTiles = S::kTileCols / 16;
  static constexpr int kTilesX = (S::kOW + S::kTileCols - 1) / S::kTileCols;
  static constexpr int kTilesY = (S::kOH + S::kTY - 1) / S::kTY;
  static constexpr int kInRows = (S::kTY - 1) * S::kSH + (S::kKH - 1) * S::kDH + 1;
  static constexpr int kInCols = (S::kTileCols - 1) * S::kSW + (S::kKW - 1) * S::kDW + 1;
  static constexpr int kPitch = kInCols;
  static constexpr int kPlane = conflict_free_plane(kInRows * kPitch, S::kSW);
  static constexpr int kInFloats = S::kCiChunk * kPlane;
  static constexpr int kTaps = S::kKH * S::kKW;
  static constexpr int kWPitch = weight_pitch(kBlockCout);
  static constexpr int kWFloats = kTaps * S::kCiChunk * kWPitch;
  static constexpr int kBuffers = S::kPipeline != 0 ? 2 : 1;
  static constexpr int kWBuffers = S::kPipeline == 2 ? 2 : 1;
  static constexpr int kSmemBytes = (kWBuffers * kWFloats + kBuffers * kInFloats) * 4;
  static_assert(S::kTileCols % 16 == 0, "a pixel tile is 16 columns");
  static_assert(S::kWarpsM * S::kMT == S::kTY * kColTiles, "the warps' pixel tiles must cover the block");
  static_assert(S::kCiPad % 8 == 0 && S::kCiPad >= S::kCin && S::kCiPad - S::kCin < 8, "kCiPad");
  static_assert(S::kCiChunk % 8 == 0 && S::kCiPad % S::kCiChunk == 0, "kCiChunk");
  static_assert(S::kPipeline != 1 || S::kCiChunk == S::kCiPad, "the row-tile pipeline needs one input stage");
  static_assert(S::kPipeline >= 0 && S::kPipeline <= 2, "kPipeline is 0, 1 or 2");
  static_assert(S::kSplit == 1 || S::kSplit == 3, "kSplit is 1 (TF32) or 3 (3xTF32)");
  static_assert(kThreads <= 1024, "block too large");
};

__device__ __forceinline__ unsigned to_tf32(float x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}
// hi = tf32(x), lo = tf32(x - hi); for the cross terms (lo * other's hi) `cross` is hi where x is
// finite and 0 where it is not, and lo is 0 there: an infinite or NaN operand then reaches the
// sum only through hi * hi, so Inf * finite stays Inf instead of 0 * Inf = NaN.
__device__ __forceinline__ void split_tf32(float x, unsigned& hi, unsigned& lo, unsigned& cross) {
  hi = to_tf32(x);
  const bool finite = fabsf(x) <= 3.402823466e38f;
  lo = finite ? to_tf32(x - __uint_as_float(hi)) : 0u;
  cross = finite ? hi : 0u;
}

// d += a * b on one m16n8k8 tile (A row-major 16x8, B column-major 8x8, fp32 accumulators).
__device__ __forceinline__ void mma_tf32(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Stages input channels [cb, cb + kCiChunk) of image `in_n` (channels >= kCin and pixels outside
// the image are zeros) at tile origin (iy0, ix0).
template <class S>
__device__ __forceinline__ void stage_input(const float* __restrict__ in_n, float* s_in, int cb, int iy0,
                                            int ix0) {
  using P = Plan<S>;
  constexpr int kUsed = P::kInRows * P::kInCols;
#pragma unroll 4
  for (int i = threadIdx.x; i < S::kCiChunk * kUsed; i += P::kThreads) {
    const int ci = i / kUsed;
    const int rc = i - ci * kUsed;
    const int r = rc / P::kInCols;
    const int c = rc - r * P::kInCols;
    const int iy = iy0 + r;
    const int ix = ix0 + c;
    const bool inside = (S::kCin % S::kCiChunk == 0 || cb + ci < S::kCin) && iy >= 0 && iy < S::kH &&
                        ix >= 0 && ix < S::kW;
    const float* src = inside ? in_n + (long long)(cb + ci) * (S::kH * S::kW) + iy * S::kW + ix : in_n;
    cuinline_conv2d_detail::copy_async(s_in + ci * P::kPlane + r * P::kPitch + c, src, inside);
  }
}

// Weights of channels [cb, cb + kCiChunk) and output channels [co0, co0 + kBlockCout), laid out
// [tap][ci][co] (K-major rows of the GEMM's B).
template <class S>
__device__ __forceinline__ void stage_weights(const float* __restrict__ weight, float* s_w, int cb, int co0) {
  using P = Plan<S>;
  constexpr int kPerCo = S::kCiChunk * P::kTaps;
#pragma unroll 4
  for (int i = threadIdx.x; i < P::kBlockCout * kPerCo; i += P::kThreads) {
    const int co = i / kPerCo;
    const int rest = i - co * kPerCo;
    const int ci = rest / P::kTaps;
    const int tap = rest - ci * P::kTaps;
    const bool inside = (S::kCout % P::kBlockCout == 0 || co0 + co < S::kCout) &&
                        (S::kCin % S::kCiChunk == 0 || cb + ci < S::kCin);
    const float* src =
        inside ? weight + (long long)(co0 + co) * (S::kCin * P::kTaps) + (cb + ci) * P::kTaps + tap : weight;
    cuinline_conv2d_detail::copy_async(s_w + (tap * S::kCiChunk + ci) * P::kWPitch + co, src, inside);
  }
}

// acc += the staged chunk. a_off[i]: this thread's A word for pixel tile i (channel t, pixel g);
// b_off: its B word (k = t, channel g of the warp's first n tile).
template <class S>
__device__ __forceinline__ void accumulate(const float* s_in, const float* s_w, float (&acc)[S::kMT][S::kNT][4],
                                           const int (&a_off)[S::kMT], int b_off) {
  using P = Plan<S>;
#pragma unroll S::kCiUnroll
  for (int c8 = 0; c8 < S::kCiChunk / 8; ++c8) {
#pragma unroll S::kKhUnroll
    for (int kh = 0; kh < S::kKH; ++kh) {
#pragma unroll
      for (int kw = 0; kw < S::kKW; ++kw) {
        const float* ap = s_in + c8 * 8 * P::kPlane + kh * S::kDH * P::kPitch + kw * S::kDW;
        const float* bp = s_w + ((kh * S::kKW + kw) * S::kCiChunk + c8 * 8) * P::kWPitch + b_off;
        unsigned bh[S::kNT][2], bl[S::kNT][2], bc[S::kNT][2];
#pragma unroll
        for (int j = 0; j < S::kNT; ++j) {
          const float w0 = bp[j * 8];
          const float w1 = bp[j * 8 + 4 * P::kWPitch];
          if (S::kSplit == 3) {
            split_tf32(w0, bh[j][0], bl[j][0], bc[j][0]);
            split_tf32(w1, bh[j][1], bl[j][1], bc[j][1]);
          } else {
            bh[j][0] = to_tf32(w0);
            bh[j][1] = to_tf32(w1);
          }
        }
#pragma unroll
        for (int i = 0; i < S::kMT; ++i) {
          const float* a = ap + a_off[i];
          const float x[4] = {a[0], a[8 * S::kSW], a[4 * P::kPlane], a[4 * P::kPlane + 8 * S::kSW]};
          unsigned ah[4], al[4], ac[4];
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            if (S::kSplit == 3) {
              split_tf32(x[q], ah[q], al[q], ac[q]);
            } else {
              ah[q] = to_tf32(x[q]);
            }
          }
#pragma unroll
          for (int j = 0; j < S::kNT; ++j) {
            if (S::kSplit == 3) {
              mma_tf32(acc[i][j], al, bc[j]);
              mma_tf32(acc[i][j], ac, bl[j]);
            }
            mma_tf32(acc[i][j], ah, bh[j]);
          }
        }
      }
    }
  }
}

// Bias, epilogue and store of one warp's tiles (output rows from oy0, columns from ox0, channels
// from co_w); resets acc. Accumulator q of tile (i, j): pixel g + 8 * (q / 2), channel 2t + q % 2.
template <class S, class E>
__device__ __forceinline__ void finish(float (&acc)[S::kMT][S::kNT][4], const float* __restrict__ bias,
                                       float* __restrict__ output, int n, int oy0, int ox0, int co_w, int wm,
                                       int g, int t) {
  using P = Plan<S>;
#pragma unroll
  for (int i = 0; i < S::kMT; ++i) {
    const int tile = wm * S::kMT + i;
    const int oy = oy0 + tile / P::kColTiles;
    const int ox = ox0 + (tile % P::kColTiles) * 16 + g;
    if (oy < S::kOH) {
#pragma unroll
      for (int j = 0; j < S::kNT; ++j) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int co = co_w + j * 8 + 2 * t + e;
          if (S::kCout % P::kBlockCout == 0 || co < S::kCout) {
            const float b = S::kHasBias ? __ldg(bias + co) : 0.0f;
            float* dst = output + (((long long)n * S::kCout + co) * S::kOH + oy) * S::kOW + ox;
            if (S::kOW % S::kTileCols == 0 || ox < S::kOW)
              cuinline_conv2d_detail::store_streaming(dst, E{}(acc[i][j][e] + b));
            if (S::kOW % S::kTileCols == 0 || ox + 8 < S::kOW)
              cuinline_conv2d_detail::store_streaming(dst + 8, E{}(acc[i][j][2 + e] + b));
          }
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < S::kMT; ++i) {
#pragma unroll
    for (int j = 0; j < S::kNT; ++j) {
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.0f;
    }
  }
}

}  // namespace cuinline_conv2d_mma_detail

/// The same contract as cuinline_conv2d (conv2d.cuh): input [N][kCin][kH][kW], weight
/// [kCout][kCin][kKH][kKW], bias [kCout] (ignored unless kHasBias), output [N][kCout][kOH][kOW].
/// Grid: (kTilesX * ceil(kTilesY / row_tiles), ceil(kCout / kBlockCout), N); block: kThreads;
/// dynamic shared memory: kSmemBytes. row_tiles must be 1 unless kPipeline == 1.
template <class S, class E>
__global__ void __launch_bounds__(cuinline_conv2d_mma_detail::Plan<S>::kThreads, S::kMinBlocks)
    cuinline_conv2d_mma(const float* __restrict__ input, const float* __restrict__ weight,
                        const float* __restrict__ bias, float* __restrict__ output, int row_tiles) {
  using P = cuinline_conv2d_mma_detail::Plan<S>;
  namespace d = cuinline_conv2d_mma_detail;
  namespace cd = cuinline_conv2d_detail;
  extern __shared__ __align__(16) float smem[];
  float* s_w = smem;
  float* s_in = smem + P::kWBuffers * P::kWFloats;

  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int wm = warp % S::kWarpsM;
  const int wn = warp / S::kWarpsM;
  const int g = lane / 4;
  const int t = lane % 4;
  const int bx = blockIdx.x % P::kTilesX;
  const int tile_y0 = blockIdx.x / P::kTilesX * row_tiles;
  const int ox0 = bx * S::kTileCols;
  const int co0 = blockIdx.y * P::kBlockCout;
  const int co_w = co0 + wn * 8 * S::kNT;
  const int n = blockIdx.z;
  const float* in_n = input + (long long)n * (S::kCin * S::kH * S::kW);
  const int ix0 = ox0 * S::kSW - S::kPW;

  int a_off[S::kMT];
#pragma unroll
  for (int i = 0; i < S::kMT; ++i) {
    const int tile = wm * S::kMT + i;
    a_off[i] = t * P::kPlane + (tile / P::kColTiles) * S::kSH * P::kPitch + ((tile % P::kColTiles) * 16 + g) * S::kSW;
  }
  const int b_off = t * P::kWPitch + wn * 8 * S::kNT + g;

  float acc[S::kMT][S::kNT][4];
#pragma unroll
  for (int i = 0; i < S::kMT; ++i) {
#pragma unroll
    for (int j = 0; j < S::kNT; ++j) {
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.0f;
    }
  }

  if (S::kPipeline == 0) {
    const int oy0 = tile_y0 * S::kTY;
#pragma unroll 1
    for (int cb = 0; cb < S::kCiPad; cb += S::kCiChunk) {
      if (cb != 0) __syncthreads();
      d::stage_input<S>(in_n, s_in, cb, oy0 * S::kSH - S::kPH, ix0);
      d::stage_weights<S>(weight, s_w, cb, co0);
      cd::copy_async_commit();
      cd::copy_async_wait<0>();
      __syncthreads();
      d::accumulate<S>(s_in, s_w, acc, a_off, b_off);
    }
    d::finish<S, E>(acc, bias, output, n, oy0, ox0, co_w, wm, g, t);
  } else if (S::kPipeline == 2) {
    constexpr int kChunks = S::kCiPad / S::kCiChunk;
    const int oy0 = tile_y0 * S::kTY;
    const int iy0 = oy0 * S::kSH - S::kPH;
    d::stage_input<S>(in_n, s_in, 0, iy0, ix0);
    d::stage_weights<S>(weight, s_w, 0, co0);
    cd::copy_async_commit();
#pragma unroll 1
    for (int k = 0; k < kChunks; ++k) {
      if (k + 1 < kChunks) {
        const int next = (k + 1) & 1;
        d::stage_input<S>(in_n, s_in + next * P::kInFloats, (k + 1) * S::kCiChunk, iy0, ix0);
        d::stage_weights<S>(weight, s_w + next * P::kWFloats, (k + 1) * S::kCiChunk, co0);
        cd::copy_async_commit();
        cd::copy_async_wait<1>();
      } else {
        cd::copy_async_wait<0>();
      }
      __syncthreads();
      d::accumulate<S>(s_in + (k & 1) * P::kInFloats, s_w + (k & 1) * P::kWFloats, acc, a_off, b_off);
      __syncthreads();  // buffer k & 1 is overwritten by the copy issued in the next iteration
    }
    d::finish<S, E>(acc, bias, output, n, oy0, ox0, co_w, wm, g, t);
  } else {
    d::stage_weights<S>(weight, s_w, 0, co0);
    d::stage_input<S>(in_n, s_in, 0, tile_y0 * S::kTY * S::kSH - S::kPH, ix0);
    cd::copy_async_commit();
#pragma unroll 1
    for (int r = 0; r < row_tiles; ++r) {
      const int tile_y = tile_y0 + r;
      if (tile_y >= P::kTilesY) break;
      if (r + 1 < row_tiles && tile_y + 1 < P::kTilesY) {
        d::stage_input<S>(in_n, s_in + ((r + 1) & 1) * P::kInFloats, 0, (tile_y + 1) * S::kTY * S::kSH - S::kPH,
                          ix0);
        cd::copy_async_commit();
        cd::copy_async_wait<1>();
      } else {
        cd::copy_async_wait<0>();
      }
      __syncthreads();
      d::accumulate<S>(s_in + (r & 1) * P::kInFloats, s_w, acc, a_off, b_off);
      d::finish<S, E>(acc, bias, output, n, tile_y * S::kTY, ox0, co_w, wm, g, t);
      __syncthreads();
    }
  }
}

#endif  // CUINLINE_CONV2D_MMA_CUH
