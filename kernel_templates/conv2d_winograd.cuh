// conv2d_winograd.cuh — fused 3 x 3, stride 1, dilation 1 convolution (NCHW, float32, groups = 1)
// by Winograd's minimal filtering F(2 x 2, 3 x 3), with a bias and an elementwise epilogue; every
// shape parameter a compile-time constant (NVRTC).
//
// Each 2 x 2 output tile y of one output channel is A^T [ sum over ci of (G g G^T) . (B^T d B) ] A,
// d the tile's 4 x 4 input patch of channel ci, g the 3 x 3 filter (co, ci), '.' elementwise: 16
// multiply-adds per tile and input channel where the direct form needs 36. The transforms are
// additions and exact halvings; the products and sums are fp32 (fused multiply-add), so the result
// is fp32-accurate (relative L2 error ~2e-7 on the seed; the tests hold it to the direct kernel's
// bounds). Where a tile's transformed sums are not finite (a NaN or Inf input or weight, an
// overflow), the tile is recomputed directly, so non-finite values land where the direct
// convolution puts them.
//
// Work split: a block owns kBlockCout output channels and kBlockTiles tiles along x (2 * kBlockTiles
// output columns) of one image, and walks down `row_tiles` tile rows (2 output rows each). Its
// weights are transformed once into shared memory (U, all input channels). A step stages the four
// input rows of a tile row (kCiChunk channels at a time, the next chunk's copy in flight while this
// one is computed), transforms them into V in shared memory, and every thread accumulates the 16
// transformed products of kTT tiles x kTCo channels (16 * kTT * kTCo registers). The library uses
// one chunk (8 input channels): with 2-8 chunks it measured slower than the direct kernel. The
// limit is shared-memory bandwidth: a 16-byte load of V feeds 4 * kTCo products, one of U 4 * kTT,
// and a 16-byte load returns 4 registers a lane, in 4 wavefronts of 128 bytes, unless the lanes
// n and n ^ 1 (or n and n ^ 2) read the same addresses: then 2. A warp is kLX tile lanes x
// (32 / kLX) channel lanes, numbered so that both U and V loads pair up (see the kernel): V loads are
// distinct per tile lane, U loads per channel lane, and the distinct addresses of each half-warp
// are contiguous. Thread (tile lane lx) owns tiles lx + k * kLX of its warp's span, so its V loads
// of a row are contiguous across lanes too. The products run one row of 4 positions at a time, so
// only kTT + kTCo 16-byte operands are live beside the accumulators: the channel loop can stay
// rolled (kCiUnroll 1) without spilling, which halves the NVRTC time of the fully unrolled body.
//
// Required members of S (all `static constexpr int`): the shape (kCin, kH, kW, kCout, kKH == 3,
// kKW == 3, kSH == kSW == 1, kPH, kPW, kDH == kDW == 1, kOH, kOW, kHasBias) and
//   kTT, kTCo (tiles and output channels of a thread), kLX (tile lanes of a warp),
//   kWX, kWC (warps along tiles and along channels), kCiChunk (input channels per stage),
//   kCiUnroll (unroll of the channel loop),
//   kMinBlocks (resident blocks per multiprocessor asked of ptxas).
// The batch size and row_tiles are run-time arguments. Shared memory is dynamic: WPlan<S>::kSmemBytes.

#ifndef CUINLINE_CONV2D_WINOGRAD_CUH
#define CUINLINE_CONV2D_WINOGRAD_CUH

#include "conv2d.cuh"

namespace cuinline_conv2d_wino_detail {

// S::kOutNhwc where S has it (a channels-last output: conv2d.cpp's transposing f32 calls), else 0.
template <class S, class = void>
struct OutNhwcOf {
  static constexpr int value = 0;
};
template <class S>
struct OutNhwcOf<S, decltype(void(S::kOutNhwc))> {
  static constexpr int value = S::kOutNhwc;
};

template <class S>
struct WPlan {
  // The output (and the residual) channels-last, [N][OH][OW][Cout]: a thread stores its kTCo
  // consecutive channels of a pixel together (one 16-byte store for 4 where Cout % 4 == 0 and the
  // pointers are 16-byte aligned).
  static constexpr bool kOutNhwc = OutNhwcOf<S>::value != 0;
  static constexpr int kLanesC = 32 / S::kLX;  // channel lanes of a warp
  static constexpr int kWarpTiles = S::kLX * S::kTT;
  static constexpr int kBlockTiles = S::kWX * kWarpTiles;
  static constexpr int kGroups = S::kWC * kLanesC;  // channel groups (of kTCo) of a block
  static constexpr int kBlockCout = kGroups * S::kTCo;
  static constexpr int kThreads = 32 * S::kWX * S::kWC;
  static constexpr int kTilesAcross = (S::kOW + 1) / 2;  // 2 x 2 tiles of an output row pair
  static constexpr int kTilesX = (kTilesAcross + kBlockTiles - 1) / kBlockTiles;  // blocks along x
  static constexpr int kTilesY = (S::kOH + 1) / 2;                                // tile rows
  static constexpr int kChunks = S::kCin / S::kCiChunk;
  // Staged input: 4 rows x (2 * kBlockTiles + 2) columns of each channel of a chunk.
  static constexpr int kInCols = 2 * kBlockTiles + 2;
  static constexpr int kPitch = (kInCols + 3) / 4 * 4;
  static constexpr bool kVecStage = S::kW % 4 == 0 && S::kPW % 4 == 0 && kBlockTiles % 2 == 0;
  static constexpr int kRawFloats = S::kCiChunk * 4 * kPitch;
  // V[ci][row i][tile][4]: transformed input of a chunk; U[ci][q][c][group][4]: transformed weights.
  static constexpr int kVFloats = S::kCiChunk * 16 * kBlockTiles;
  static constexpr int kUFloats = S::kCin * 16 * kBlockCout;
  static constexpr int kSmemFloats = kUFloats + kVFloats + 2 * kRawFloats;
  static constexpr int kSmemBytes = kSmemFloats * 4;
  static constexpr int kStoreVec = S::kOW % 2 == 0 && cuinline_conv2d_detail::OutAlignedOf<S>::value != 0 ? 2 : 1;
  static_assert(S::kKH == 3 && S::kKW == 3 && S::kSH == 1 && S::kSW == 1 && S::kDH == 1 && S::kDW == 1,
                "Winograd F(2x2, 3x3) needs a 3 x 3 filter, stride 1, dilation 1");
  static_assert(32 % S::kLX == 0 && S::kLX <= 16, "kLX must divide 16 (two channel lanes at least)");
  static_assert(S::kCin % S::kCiChunk == 0, "kCiChunk must divide kCin");
  static_assert(kThreads <= 1024, "block too large");
};

// 4-byte cp.async, its commit and wait, and streaming stores: conv2d.cuh's.
using cuinline_conv2d_detail::copy_async;
using cuinline_conv2d_detail::copy_async_commit;
using cuinline_conv2d_detail::copy_async_wait;
using cuinline_conv2d_detail::store_streaming;

// U = G g G^T for every (output channel of the block, input channel), G = [1 0 0; .5 .5 .5;
// .5 -.5 .5; 0 0 1]. Channels past kCout get zeros.
template <class S>
__device__ __forceinline__ void stage_weights(const float* __restrict__ weight, float* s_u, int co0) {
  using P = WPlan<S>;
#pragma unroll 1
  for (int i = threadIdx.x; i < P::kBlockCout * S::kCin; i += P::kThreads) {
    const int co = i / S::kCin;
    const int ci = i - co * S::kCin;
    float g[9];
    const bool inside = S::kCout % P::kBlockCout == 0 || co0 + co < S::kCout;
    const float* src = weight + ((long long)(co0 + co) * S::kCin + ci) * 9;
#pragma unroll
    for (int k = 0; k < 9; ++k) g[k] = inside ? __ldg(src + k) : 0.0f;
    float t[4][3];  // G g
#pragma unroll
    for (int j = 0; j < 3; ++j) {
      t[0][j] = g[j];
      t[1][j] = 0.5f * (g[j] + g[3 + j] + g[6 + j]);
      t[2][j] = 0.5f * (g[j] - g[3 + j] + g[6 + j]);
      t[3][j] = g[6 + j];
    }
    const int group = co / S::kTCo;
    const int c = co - group * S::kTCo;
#pragma unroll
    for (int r = 0; r < 4; ++r) {  // row r of (G g) G^T: transformed index xi = 4 r + column
      const float u0 = t[r][0];
      const float u1 = 0.5f * (t[r][0] + t[r][1] + t[r][2]);
      const float u2 = 0.5f * (t[r][0] - t[r][1] + t[r][2]);
      const float u3 = t[r][2];
      float* dst = s_u + (((ci * 4 + r) * S::kTCo + c) * P::kGroups + group) * 4;
      *reinterpret_cast<float4*>(dst) = make_float4(u0, u1, u2, u3);
    }
  }
}

// Copies input channels [cb, cb + kCiChunk) of rows iy0 .. iy0 + 3, columns ix0 .. ix0 + kInCols - 1
// (zeros outside the image: the padding). 16-byte copies when every 4-column chunk lies wholly
// inside or wholly outside the image (kW and kPW multiples of 4) and the input is 16-byte aligned
// (`vec`, the same for the whole grid), else 4-byte ones. Both loops stay rolled: unrolled, the
// two paths cost ptxas ~0.1 s more a variant, and a stage is 2-9 copies a thread.
template <class S>
__device__ __forceinline__ void stage_input(const float* __restrict__ in_n, float* s_raw, int cb, int iy0,
                                            int ix0, bool vec) {
  using P = WPlan<S>;
  if (P::kVecStage && vec) {
    constexpr int kChunksPerRow = (P::kInCols + 3) / 4;
    constexpr int kPer = 4 * kChunksPerRow;
#pragma unroll 1
    for (int i = threadIdx.x; i < S::kCiChunk * kPer; i += P::kThreads) {
      const int ci = i / kPer;
      const int rc = i - ci * kPer;
      const int r = rc / kChunksPerRow;
      const int c = (rc - r * kChunksPerRow) * 4;
      const int iy = iy0 + r;
      const int ix = ix0 + c;
      const bool inside = iy >= 0 && iy < S::kH && ix >= 0 && ix < S::kW;
      const float* src = inside ? in_n + (long long)(cb + ci) * (S::kH * S::kW) + iy * S::kW + ix : in_n;
      const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(s_raw + (ci * 4 + r) * P::kPitch + c));
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(inside ? 16 : 0));
    }
  } else {
    constexpr int kPer = 4 * P::kInCols;
#pragma unroll 1
    for (int i = threadIdx.x; i < S::kCiChunk * kPer; i += P::kThreads) {
      const int ci = i / kPer;
      const int rc = i - ci * kPer;
      const int r = rc / P::kInCols;
      const int c = rc - r * P::kInCols;
      const int iy = iy0 + r;
      const int ix = ix0 + c;
      const bool inside = iy >= 0 && iy < S::kH && ix >= 0 && ix < S::kW;
      const float* src = inside ? in_n + (long long)(cb + ci) * (S::kH * S::kW) + iy * S::kW + ix : in_n;
      copy_async(s_raw + (ci * 4 + r) * P::kPitch + c, src, inside);
    }
  }
}

// V = B^T d B for every (channel of the chunk, tile of the block), B^T = [1 0 -1 0; 0 1 1 0;
// 0 -1 1 0; 0 1 0 -1].
template <class S>
__device__ __forceinline__ void transform_input(const float* s_raw, float* s_v) {
  using P = WPlan<S>;
#pragma unroll 1
  for (int i = threadIdx.x; i < S::kCiChunk * P::kBlockTiles; i += P::kThreads) {
    const int ci = i / P::kBlockTiles;
    const int tile = i - ci * P::kBlockTiles;
    const float* src = s_raw + ci * 4 * P::kPitch + 2 * tile;
    float d[4][4];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const float2 a = *reinterpret_cast<const float2*>(src + r * P::kPitch);
      const float2 b = *reinterpret_cast<const float2*>(src + r * P::kPitch + 2);
      d[r][0] = a.x;
      d[r][1] = a.y;
      d[r][2] = b.x;
      d[r][3] = b.y;
    }
    float t[4][4];  // B^T d
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      t[0][j] = d[0][j] - d[2][j];
      t[1][j] = d[1][j] + d[2][j];
      t[2][j] = d[2][j] - d[1][j];
      t[3][j] = d[1][j] - d[3][j];
    }
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      float* dst = s_v + ((ci * 4 + r) * P::kBlockTiles + tile) * 4;
      *reinterpret_cast<float4*>(dst) = make_float4(t[r][0] - t[r][2], t[r][1] + t[r][2], t[r][2] - t[r][1],
                                                    t[r][1] - t[r][3]);
    }
  }
}

// acc[t][c][xi] += U[ci][xi][c] * V[ci][xi][t] for one channel ci of the chunk, one row of four
// positions at a time (kTT + kTCo float4 operands live, not 16 * (kTT + kTCo) floats); kFresh: acc
// starts at zero (multiply instead).
template <class S, bool kFresh>
__device__ __forceinline__ void channel_step(const float* s_u, const float* s_v,
                                             float (&acc)[S::kTT][S::kTCo][16], int tile0, int group, int ci) {
  using P = WPlan<S>;
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    float4 v[S::kTT];
#pragma unroll
    for (int t = 0; t < S::kTT; ++t)
      v[t] = *reinterpret_cast<const float4*>(s_v + ((ci * 4 + r) * P::kBlockTiles + tile0 + t * S::kLX) * 4);
#pragma unroll
    for (int c = 0; c < S::kTCo; ++c) {
      const float4 u =
          *reinterpret_cast<const float4*>(s_u + (((ci * 4 + r) * S::kTCo + c) * P::kGroups + group) * 4);
#pragma unroll
      for (int t = 0; t < S::kTT; ++t) {
        float* a = acc[t][c] + 4 * r;
        if (kFresh) {
          a[0] = __fmul_rn(u.x, v[t].x);
          a[1] = __fmul_rn(u.y, v[t].y);
          a[2] = __fmul_rn(u.z, v[t].z);
          a[3] = __fmul_rn(u.w, v[t].w);
        } else {
          a[0] = __fmaf_rn(u.x, v[t].x, a[0]);
          a[1] = __fmaf_rn(u.y, v[t].y, a[1]);
          a[2] = __fmaf_rn(u.z, v[t].z, a[2]);
          a[3] = __fmaf_rn(u.w, v[t].w, a[3]);
        }
      }
    }
  }
}

// The chunk's channels, kCiUnroll a step (code size and NVRTC time); kFresh: acc starts at zero.
template <class S, bool kFresh>
__device__ __forceinline__ void accumulate(const float* s_u, const float* s_v, float (&acc)[S::kTT][S::kTCo][16],
                                           int tile0, int group) {
  int ci0 = 0;
  if (kFresh) {
    channel_step<S, true>(s_u, s_v, acc, tile0, group, 0);
    ci0 = 1;
  }
#pragma unroll S::kCiUnroll
  for (int ci = ci0; ci < S::kCiChunk; ++ci) channel_step<S, false>(s_u, s_v, acc, tile0, group, ci);
}

// The 2 x 2 outputs (before bias) of the tile at (oy, ox) of channel co, computed directly from
// global memory in the direct kernel's order (zero padding multiplied, as PyTorch does): the path
// for tiles whose Winograd result is not finite. Positions outside the output give 0.
template <class S>
__device__ __noinline__ float4 direct_tile(const float* __restrict__ in_n, const float* __restrict__ weight,
                                           int co, int oy, int ox) {
  float r[4];
#pragma unroll 1
  for (int q = 0; q < 4; ++q) {
    const int y = oy + q / 2;
    const int x = ox + q % 2;
    float acc = 0.0f;
    if (y < S::kOH && x < S::kOW && co < S::kCout) {
#pragma unroll 1
      for (int ci = 0; ci < S::kCin; ++ci) {
#pragma unroll 1
        for (int k = 0; k < 9; ++k) {
          const int iy = y + k / 3 - S::kPH;
          const int ix = x + k % 3 - S::kPW;
          const bool inside = iy >= 0 && iy < S::kH && ix >= 0 && ix < S::kW;
          const float xv = inside ? __ldg(in_n + ((long long)ci * S::kH + iy) * S::kW + ix) : 0.0f;
          acc = __fmaf_rn(xv, __ldg(weight + ((long long)co * S::kCin + ci) * 9 + k), acc);
        }
      }
    }
    r[q] = acc;
  }
  return make_float4(r[0], r[1], r[2], r[3]);
}

// Bias, epilogue and store of the 2 x 2 outputs y of the tile at (oy, ox) of channel co.
template <class S, class E>
__device__ __forceinline__ void store_tile(float* __restrict__ dst, float b, float y00, float y01, float y10,
                                           float y11, int oy, int ox, const float* __restrict__ res) {
  using P = WPlan<S>;
  y00 += b;
  y01 += b;
  y10 += b;
  y11 += b;
  if (S::kHasResidual) {  // conv + bias, rounded, then + residual (PyTorch's two adds)
    const bool right = ox + 1 < S::kOW, below = oy + 1 < S::kOH;
    if (ox < S::kOW) {
      y00 += __ldg(res + ox);
      if (right) y01 += __ldg(res + ox + 1);
      if (below) y10 += __ldg(res + S::kOW + ox);
      if (right && below) y11 += __ldg(res + S::kOW + ox + 1);
    }
  }
  y00 = E{}(y00);
  y01 = E{}(y01);
  y10 = E{}(y10);
  y11 = E{}(y11);
  if (ox >= S::kOW) return;
  if (P::kStoreVec == 2) {
    store_streaming(reinterpret_cast<float2*>(dst + ox), make_float2(y00, y01));
    if (oy + 1 < S::kOH) store_streaming(reinterpret_cast<float2*>(dst + S::kOW + ox), make_float2(y10, y11));
  } else {
    store_streaming(dst + ox, y00);
    if (ox + 1 < S::kOW) store_streaming(dst + ox + 1, y01);
    if (oy + 1 < S::kOH) {
      store_streaming(dst + S::kOW + ox, y10);
      if (ox + 1 < S::kOW) store_streaming(dst + S::kOW + ox + 1, y11);
    }
  }
}

// y = A^T M A (A^T = [1 1 1 0; 0 1 -1 -1]): the 2 x 2 outputs of one tile and channel, row-major.
__device__ __forceinline__ void output_transform(const float (&m)[16], float (&y)[4]) {
  float a0[4], a1[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    a0[j] = m[j] + m[4 + j] + m[8 + j];
    a1[j] = m[4 + j] - m[8 + j] - m[12 + j];
  }
  y[0] = a0[0] + a0[1] + a0[2];
  y[1] = a0[1] - a0[2] - a0[3];
  y[2] = a1[0] + a1[1] + a1[2];
  y[3] = a1[1] - a1[2] - a1[3];
}

// The channels-last form of finish: per tile, the kTCo channels' 2 x 2 outputs, then each of the
// tile's four pixels stored as kTCo consecutive channels (`vec`: one 16-byte store, else one a
// channel).
template <class S, class E>
__device__ __forceinline__ unsigned finish_nhwc(float (&acc)[S::kTT][S::kTCo][16], const float* __restrict__ bias,
                                                float* __restrict__ output, int n, int co_base, int oy, int tile_x0,
                                                const float* __restrict__ residual, bool vec) {
  using P = WPlan<S>;
  unsigned bad = 0;
  float b[S::kTCo];
  bool co_ok[S::kTCo];
#pragma unroll
  for (int c = 0; c < S::kTCo; ++c) {
    co_ok[c] = S::kCout % P::kBlockCout == 0 || co_base + c < S::kCout;
    b[c] = S::kHasBias && co_ok[c] ? __ldg(bias + co_base + c) : 0.0f;
  }
  const bool whole = S::kTCo == 4 && S::kCout % 4 == 0 && co_ok[S::kTCo - 1] && vec;
#pragma unroll
  for (int t = 0; t < S::kTT; ++t) {
    float y[S::kTCo][4];  // [channel][pixel q = 2 row + column]
#pragma unroll
    for (int c = 0; c < S::kTCo; ++c) {
      output_transform(acc[t][c], y[c]);
      if (!isfinite((y[c][0] + y[c][1]) + (y[c][2] + y[c][3]))) bad |= 1u << (t * S::kTCo + c);
    }
    const int ox = 2 * (tile_x0 + t * S::kLX);
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int py = oy + q / 2, px = ox + q % 2;
      if (py >= S::kOH || px >= S::kOW) continue;
      const long long at = (((long long)n * S::kOH + py) * S::kOW + px) * S::kCout + co_base;
      float v[S::kTCo];
#pragma unroll
      for (int c = 0; c < S::kTCo; ++c) v[c] = y[c][q] + b[c];
      if (S::kHasResidual) {  // conv + bias, rounded, then + residual (PyTorch's two adds)
        if (whole) {
          const float4 r = __ldg(reinterpret_cast<const float4*>(residual + at));
          v[0] += r.x;
          v[1] += r.y;
          v[2] += r.z;
          v[3] += r.w;
        } else {
#pragma unroll
          for (int c = 0; c < S::kTCo; ++c) {
            if (co_ok[c]) v[c] += __ldg(residual + at + c);
          }
        }
      }
#pragma unroll
      for (int c = 0; c < S::kTCo; ++c) v[c] = E{}(v[c]);
      if (whole) {
        store_streaming(reinterpret_cast<float4*>(output + at), make_float4(v[0], v[1], v[2], v[3]));
      } else {
#pragma unroll
        for (int c = 0; c < S::kTCo; ++c) {
          if (co_ok[c]) store_streaming(output + at + c, v[c]);
        }
      }
    }
  }
  return bad;
}

// y = A^T M A (output_transform), then bias, epilogue and the store of one tile of each of the
// thread's channels (finish_nhwc for a channels-last output). Returns a bit (t * kTCo + c) for
// every tile whose sums are not finite: a non-finite input or weight (or an overflow) can make all
// of a tile's transformed sums NaN where the direct sums of some of its outputs are finite
// (Inf - Inf); fix_tiles recomputes those.
template <class S, class E>
__device__ __forceinline__ unsigned finish(float (&acc)[S::kTT][S::kTCo][16], const float* __restrict__ bias,
                                           float* __restrict__ output, int n, int co_base, int oy, int tile_x0,
                                           const float* __restrict__ residual, bool vec) {
  using P = WPlan<S>;
  if constexpr (P::kOutNhwc) return finish_nhwc<S, E>(acc, bias, output, n, co_base, oy, tile_x0, residual, vec);
  unsigned bad = 0;
#pragma unroll
  for (int c = 0; c < S::kTCo; ++c) {
    const int co = co_base + c;
    const bool co_ok = S::kCout % P::kBlockCout == 0 || co < S::kCout;
    const float b = S::kHasBias && co_ok ? __ldg(bias + co) : 0.0f;
    const long long row = (((long long)n * S::kCout + co) * S::kOH + oy) * S::kOW;
    float* dst = output + row;
    const float* res = S::kHasResidual ? residual + row : nullptr;
#pragma unroll
    for (int t = 0; t < S::kTT; ++t) {
      float y[4];
      output_transform(acc[t][c], y);
      if (!isfinite((y[0] + y[1]) + (y[2] + y[3]))) bad |= 1u << (t * S::kTCo + c);
      if (co_ok) store_tile<S, E>(dst, b, y[0], y[1], y[2], y[3], oy, 2 * (tile_x0 + t * S::kLX), res);
    }
  }
  return bad;
}

// Recomputes directly (and stores again, after finish's stores of the same thread) the tiles
// flagged in `bad`.
template <class S, class E>
__device__ __noinline__ void fix_tiles(unsigned bad, const float* __restrict__ in_n, const float* __restrict__ weight,
                                       const float* __restrict__ bias, float* __restrict__ output, int n,
                                       int co_base, int oy, int tile_x0, const float* __restrict__ residual) {
#pragma unroll 1
  for (int i = 0; i < S::kTT * S::kTCo; ++i) {
    if (!(bad >> i & 1u)) continue;
    const int t = i / S::kTCo;
    const int co = co_base + i % S::kTCo;
    if (co >= S::kCout) continue;
    const int ox = 2 * (tile_x0 + t * S::kLX);
    const float4 y = direct_tile<S>(in_n, weight, co, oy, ox);
    const float b = S::kHasBias ? __ldg(bias + co) : 0.0f;
    if constexpr (WPlan<S>::kOutNhwc) {
      const float r[4] = {y.x, y.y, y.z, y.w};
#pragma unroll 1
      for (int q = 0; q < 4; ++q) {
        const int py = oy + q / 2, px = ox + q % 2;
        if (py >= S::kOH || px >= S::kOW) continue;
        const long long at = (((long long)n * S::kOH + py) * S::kOW + px) * S::kCout + co;
        float v = r[q] + b;
        if (S::kHasResidual) v += __ldg(residual + at);
        store_streaming(output + at, E{}(v));
      }
      continue;
    }
    const long long row = (((long long)n * S::kCout + co) * S::kOH + oy) * S::kOW;
    store_tile<S, E>(output + row, b, y.x, y.y, y.z, y.w, oy, ox, S::kHasResidual ? residual + row : nullptr);
  }
}

}  // namespace cuinline_conv2d_wino_detail

/// input [N][kCin][kH][kW], weight [kCout][kCin][3][3], bias [kCout] (ignored unless kHasBias),
/// output [N][kCout][kOH][kOW] ([N][kOH][kOW][kCout] with kOutNhwc; the residual likewise). Grid: (kTilesX * ceil(kTilesY / row_tiles), ceil(kCout / kBlockCout),
/// N); block: kThreads; dynamic shared memory: kSmemBytes.
template <class S, class E>
__global__ void __launch_bounds__(cuinline_conv2d_wino_detail::WPlan<S>::kThreads, S::kMinBlocks)
    cuinline_conv2d_winograd(const float* __restrict__ input, const float* __restrict__ weight,
                             const float* __restrict__ bias, float* __restrict__ output, int row_tiles,
                             const float* __restrict__ residual) {
  using P = cuinline_conv2d_wino_detail::WPlan<S>;
  namespace d = cuinline_conv2d_wino_detail;
  extern __shared__ __align__(16) float smem[];
  float* s_u = smem;
  float* s_v = s_u + P::kUFloats;
  float* s_raw = s_v + P::kVFloats;

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int wx = warp % S::kWX;
  const int wc = warp / S::kWX;
  // Lane bits: bit 0 is channel-lane bit 0, bits 1 .. log2(kLX) the tile lane, the rest the other
  // channel-lane bits. Lanes n and n ^ 1 then load the same V, lanes n and n ^ 2 the same U, and a
  // 16-byte shared load whose lane pairs (n, n ^ 1) or (n, n ^ 2) share addresses returns in 2
  // wavefronts instead of 4.
  const int lx = (lane >> 1) % S::kLX;
  const int group = wc * P::kLanesC + ((lane & 1) | ((lane >> 1) / S::kLX) << 1);
  const int bx = blockIdx.x % P::kTilesX;
  const int ty0 = blockIdx.x / P::kTilesX * row_tiles;
  const int co0 = blockIdx.y * P::kBlockCout;
  const int n = blockIdx.z;
  const float* in_n = input + (long long)n * (S::kCin * S::kH * S::kW);
  const int ix0 = 2 * bx * P::kBlockTiles - S::kPW;
  const int tile0 = wx * P::kWarpTiles + lx;  // block-local tile of t = 0
  const int steps = min(row_tiles, P::kTilesY - ty0) * P::kChunks;

  float acc[S::kTT][S::kTCo][16];

  // Stage g: tile row ty0 + g / kChunks, channel chunk g % kChunks; stage g + 1's copy is in flight
  // while g is transformed and computed.
  const bool vec = (reinterpret_cast<unsigned long long>(input) & 15) == 0;
  // (Channels-last output: 16-byte stores, and residual loads, where both pointers allow them.)
  const bool vec_out =
      ((reinterpret_cast<unsigned long long>(output) |
        (S::kHasResidual ? reinterpret_cast<unsigned long long>(residual) : 0ull)) & 15) == 0;
  d::stage_input<S>(in_n, s_raw, 0, 2 * ty0 - S::kPH, ix0, vec);
  d::copy_async_commit();
  d::stage_weights<S>(weight, s_u, co0);
#pragma unroll 1
  for (int g = 0; g < steps; ++g) {
    const int k = g % P::kChunks;
    const int ty = ty0 + g / P::kChunks;
    if (g + 1 < steps) {
      const int k1 = (g + 1) % P::kChunks;
      const int ty1 = ty0 + (g + 1) / P::kChunks;
      d::stage_input<S>(in_n, s_raw + ((g + 1) & 1) * P::kRawFloats, k1 * S::kCiChunk, 2 * ty1 - S::kPH, ix0, vec);
      d::copy_async_commit();
      d::copy_async_wait<1>();
    } else {
      d::copy_async_wait<0>();
    }
    __syncthreads();  // raw stage g (and, at g = 0, U) visible; every thread is done with V
    d::transform_input<S>(s_raw + (g & 1) * P::kRawFloats, s_v);
    __syncthreads();
    const float* s_uk = s_u + k * S::kCiChunk * 16 * P::kBlockCout;
    if constexpr (P::kChunks == 1) {  // accumulate<S, false> is then never compiled
      d::accumulate<S, true>(s_uk, s_v, acc, tile0, group);
    } else if (k == 0) {
      d::accumulate<S, true>(s_uk, s_v, acc, tile0, group);
    } else {
      d::accumulate<S, false>(s_uk, s_v, acc, tile0, group);
    }
    if (k == P::kChunks - 1) {
      const unsigned bad =
          d::finish<S, E>(acc, bias, output, n, co0 + group * S::kTCo, 2 * ty, bx * P::kBlockTiles + tile0,
                          residual, vec_out);
      if (bad != 0) {
        d::fix_tiles<S, E>(bad, in_n, weight, bias, output, n, co0 + group * S::kTCo, 2 * ty,
                           bx * P::kBlockTiles + tile0, residual);
      }
    }
  }
}

#endif  // CUINLINE_CONV2D_WINOGRAD_CUH
