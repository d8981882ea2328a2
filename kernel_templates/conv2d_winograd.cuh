// conv2d_winograd.cuh — fused 3 x 3, stride 1, dilation 1 convolution (NCHW, float32, groups = 1)
// by Winograd's minimal filtering F(m x m, 3 x 3), m = 2, with a bias and an elementwise epilogue;
// every shape parameter a compile-time constant (NVRTC).
//
// Each m x m output tile y of one output channel is A^T [ sum over ci of (G g G^T) . (B^T d B) ] A,
// d the tile's a x a input patch of channel ci (a = m + 2), g the 3 x 3 filter (co, ci), '.'
// elementwise: a^2 = 16 multiply-adds per tile and input channel where the direct form needs 36.
// The transforms are additions and exact halvings. The products and sums are 3xTF32 on tensor
// cores with S::kWinoTC (see WPlan::kTC; relative L2 error ~1.7e-7 on the seed), else fp32 fused
// multiply-adds (~1.4e-7; the targets without TF32 tensor cores).
// Where a tile's transformed sums are not finite (a NaN or Inf input or weight, an overflow of the
// transforms), the tile is recomputed directly, so non-finite values land where the direct
// convolution puts them.
//
// Work split: a block owns kBlockCout output channels and kBlockTiles tiles along x (m * kBlockTiles
// output columns) of one image, and walks down `row_tiles` tile rows (m output rows each). Its
// weights are transformed once into shared memory (U, all input channels). A step stages the a
// input rows of a tile row (all kCin channels; one buffer: the next row's copy is issued once this
// row is transformed, and is in flight while it is computed) and transforms them into V in shared
// memory. Every thread then takes the a x a transformed positions one column (a positions) at a
// time: it sums the column's products over the input channels for its kTT tiles x kTCo channels
// (a * kTT * kTCo registers) and folds the column into the m x m outputs at once (A^T of the
// column, then its share of the output row sums: m^2 * kTT * kTCo more), in the order y = A^T M A
// is summed anyway (the result of the full 16-position form bit for bit, with half its
// accumulators). A column is stored as a float4 (fp32 products). The limit is shared-memory
// bandwidth: a 16-byte load of V feeds 4 * kTCo products, one of U 4 * kTT, and a 16-byte load
// returns 4 registers a lane, in 4 wavefronts of 128 bytes, unless the lanes n and n ^ 1 (or n and
// n ^ 2) read the same addresses: then 2. A warp is kLX tile lanes x (32 / kLX) channel lanes,
// numbered so that both U and V loads pair up (see the kernel): V loads are distinct per tile lane,
// U loads per channel lane, and the distinct addresses of each half-warp are contiguous. Thread
// (tile lane lx) owns tiles lx + k * kLX of its warp's span, so its V loads of a column are
// contiguous across lanes too. The channel loop can stay rolled (kCiUnroll 1), which halves the
// NVRTC time of the fully unrolled body.
//
// Required members of S (all `static constexpr int`): the shape (kCin, kH, kW, kCout, kKH == 3,
// kKW == 3, kSH == kSW == 1, kPH, kPW, kDH == kDW == 1, kOH, kOW, kHasBias) and
//   kTT, kTCo (tiles and output channels of a thread), kLX (tile lanes of a warp),
//   kWX, kWC (warps along tiles and along channels), kCiChunk (input channels per stage: kCin, one
//   stage a tile row), kCiUnroll (unroll of the channel loop),
//   kMinBlocks (resident blocks per multiprocessor asked of ptxas), kWinoTC (1: the products on
//   tensor cores, 3xTF32; 0: FMA), kOutNhwc (1: a channels-last output, conv2d.cpp's transposing f32
//   calls), kOutAligned (as in conv2d.cuh).
// The batch size and row_tiles are run-time arguments. Shared memory is dynamic: WPlan<S>::kSmemBytes (conv2d_winograd_plan.cuh, which the host compiles too).

#ifndef CUINLINE_CONV2D_WINOGRAD_CUH
#define CUINLINE_CONV2D_WINOGRAD_CUH

#include "conv2d.cuh"
#include "conv2d_winograd_plan.cuh"

namespace cuinline_conv2d_wino_detail {

template <class S>
struct WPlan {
  // The output (and the residual) channels-last, [N][OH][OW][Cout]: a thread stores its kTCo
  // consecutive channels of a pixel together (one 16-byte store for 4 where Cout % 4 == 0 and the
  // pointers are 16-byte aligned).
  static constexpr bool kOutNhwc = S::kOutNhwc != 0;
  // The figures of conv2d_winograd_plan.cuh (what they are is said there).
  static constexpr int kM = kWinogradPlanFigures<S>.m;
  static constexpr int kA = kWinogradPlanFigures<S>.a;
  static constexpr int kMM = kWinogradPlanFigures<S>.mm;
  static constexpr int kLanesC = kWinogradPlanFigures<S>.lanes_c;
  static constexpr int kWarpTiles = kWinogradPlanFigures<S>.warp_tiles;
  static constexpr int kBlockTiles = kWinogradPlanFigures<S>.block_tiles;
  static constexpr int kGroups = kWinogradPlanFigures<S>.groups;
  static constexpr int kBlockCout = kWinogradPlanFigures<S>.block_cout;
  static constexpr int kThreads = kWinogradPlanFigures<S>.threads;
  static constexpr int kTilesAcross = kWinogradPlanFigures<S>.tiles_across;
  static constexpr int kTilesX = kWinogradPlanFigures<S>.tiles_x;
  static constexpr int kTilesY = kWinogradPlanFigures<S>.tiles_y;
  static constexpr int kInCols = kWinogradPlanFigures<S>.in_cols;
  static constexpr int kPitch = kWinogradPlanFigures<S>.pitch;
  static constexpr bool kVecStage = kWinogradPlanFigures<S>.vec_stage;
  static constexpr int kRawFloats = (int)kWinogradPlanFigures<S>.raw_floats;
  static constexpr int kV4Floats = (int)kWinogradPlanFigures<S>.v4_floats;
  static constexpr int kU4Floats = (int)kWinogradPlanFigures<S>.u4_floats;
  static constexpr int kSmemFloats = (int)kWinogradPlanFigures<S>.smem_floats;
  static constexpr int kSmemBytes = (int)kWinogradPlanFigures<S>.smem_bytes;
  static constexpr int kStoreVec = kWinogradPlanFigures<S>.store_vec;
  // The products on tensor cores (S::kWinoTC): each transformed position's sums over the
  // input channels are a [16 tiles x kCin] x [kCin x 8 channels] product of a warp, mma.sync
  // m16n8k8 in 3xTF32 (each fp32 operand split into a TF32 value and its TF32 remainder, the three
  // products that matter summed in fp32: fp32 accuracy, ~2e-7 relative L2 on the seed). A thread's
  // accumulators are then the same 2 tiles (lane / 4 and lane / 4 + 8) x 4 channels (4 (lane % 4)
  // + 0..3: the weights' columns are permuted to put them there) that the FMA form gives it, so the
  // fold and the stores stay as they are. Shared memory: V[position][tile][ci] and
  // U[position][channel warp][8-channel half][column][ci], as many floats as the FMA form's. (sm_80
  // and later, as cp.async.)
  static constexpr bool kTC = S::kWinoTC != 0;
  static_assert(!kTC || (S::kLX == 8 && S::kTT == 2 && S::kTCo == 4 && S::kCin % 8 == 0),
                "tensor-core Winograd: 8 tile lanes, 2 tiles x 4 channels a thread, Cin a multiple of 8");
  static_assert(S::kKH == 3 && S::kKW == 3 && S::kSH == 1 && S::kSW == 1 && S::kDH == 1 && S::kDW == 1,
                "Winograd F(2 x 2, 3 x 3) needs a 3 x 3 filter, stride 1, dilation 1");
  static_assert(32 % S::kLX == 0 && S::kLX <= 16, "kLX must divide 16 (two channel lanes at least)");
  static_assert(S::kCiChunk == S::kCin, "one stage a tile row: kCiChunk must be kCin");
  static_assert(S::kTT * S::kTCo <= 32, "a bit a tile and channel in fix_tiles' mask");
  static_assert(kThreads <= 1024, "block too large");
};

// 4- and 16-byte cp.async (plain copies with CUINLINE_CONV2D_SYNC_COPIES), their commit and wait,
// and streaming stores: conv2d.cuh's.
using cuinline_conv2d_detail::copy_async;
using cuinline_conv2d_detail::copy_async16;
using cuinline_conv2d_detail::copy_async_commit;
using cuinline_conv2d_detail::copy_async_wait;
using cuinline_conv2d_detail::store_streaming;

// Column nu of a 4 x 4 transform x (row-major) into a float4 at p4.
__device__ __forceinline__ void store_column(const float (&x)[4][4], int nu, float* p4) {
  *reinterpret_cast<float4*>(p4) = make_float4(x[0][nu], x[1][nu], x[2][nu], x[3][nu]);
}

// The columns of G g for one filter column (g0, g1, g2 its rows): G = [1 0 0; .5 .5 .5;
// .5 -.5 .5; 0 0 1].
__device__ __forceinline__ void filter_transform(float g0, float g1, float g2, float (&t)[4]) {
  t[0] = g0;
  t[1] = 0.5f * (g0 + g1 + g2);
  t[2] = 0.5f * (g0 - g1 + g2);
  t[3] = g2;
}

// U = G g G^T for every (output channel of the block, input channel). Channels past kCout get
// zeros.
template <class S>
__device__ __forceinline__ void stage_weights(const float* __restrict__ weight, float* s_u4, int co0) {
  using P = WPlan<S>;
  constexpr int kA = P::kA;
#pragma unroll 1
  for (int i = threadIdx.x; i < P::kBlockCout * S::kCin; i += P::kThreads) {
    const int co = i / S::kCin;
    const int ci = i - co * S::kCin;
    float g[9];
    const bool inside = S::kCout % P::kBlockCout == 0 || co0 + co < S::kCout;
    const float* src = weight + ((long long)(co0 + co) * S::kCin + ci) * 9;
#pragma unroll
    for (int k = 0; k < 9; ++k) g[k] = inside ? __ldg(src + k) : 0.0f;
    float gg[3][kA];  // (G g)^T: [filter column j][row r]
#pragma unroll
    for (int j = 0; j < 3; ++j) filter_transform(g[j], g[3 + j], g[6 + j], gg[j]);
    float u[kA][kA];  // (G g) G^T, [row][column]
#pragma unroll
    for (int r = 0; r < kA; ++r) {
      float row[kA];
      filter_transform(gg[0][r], gg[1][r], gg[2][r], row);
#pragma unroll
      for (int c = 0; c < kA; ++c) u[r][c] = row[c];
    }
    if constexpr (P::kTC) {
      // Block channel co = 16 wc + 4 t + 2 f + e sits in column 2 t + e of the warp's half f.
      const int wc = co / 16, r = co % 16;
      const int column = 2 * (r / 4) + (r % 2), half = (r % 4) / 2;
#pragma unroll
      for (int p = 0; p < kA * kA; ++p) {
        s_u4[(((p * S::kWC + wc) * 2 + half) * 8 + column) * S::kCin + ci] = u[p % kA][p / kA];
      }
    } else {
      const int group = co / S::kTCo;
      const int c = co - group * S::kTCo;
#pragma unroll
      for (int nu = 0; nu < kA; ++nu) {
        const int at = ((ci * kA + nu) * S::kTCo + c) * P::kGroups + group;
        store_column(u, nu, s_u4 + at * 4);
      }
    }
  }
}

// Copies the input channels of rows iy0 .. iy0 + a - 1, columns ix0 .. ix0 + kInCols - 1
// (zeros outside the image: the padding). 16-byte copies when every 4-column chunk lies wholly
// inside or wholly outside the image (kW and kPW multiples of 4) and the input is 16-byte aligned
// (`vec`, the same for the whole grid), else 4-byte ones. Both loops stay rolled: unrolled, the
// two paths cost ptxas ~0.1 s more a variant, and a stage is 2-9 copies a thread.
template <class S>
__device__ __forceinline__ void stage_input(const float* __restrict__ in_n, float* s_raw, int iy0, int ix0,
                                            bool vec) {
  using P = WPlan<S>;
  if (P::kVecStage && vec) {
    constexpr int kChunksPerRow = (P::kInCols + 3) / 4;
    constexpr int kPer = P::kA * kChunksPerRow;
#pragma unroll 1
    for (int i = threadIdx.x; i < S::kCin * kPer; i += P::kThreads) {
      const int ci = i / kPer;
      const int rc = i - ci * kPer;
      const int r = rc / kChunksPerRow;
      const int c = (rc - r * kChunksPerRow) * 4;
      const int iy = iy0 + r;
      const int ix = ix0 + c;
      const bool inside = iy >= 0 && iy < S::kH && ix >= 0 && ix < S::kW;
      const float* src = inside ? in_n + (long long)ci * (S::kH * S::kW) + iy * S::kW + ix : in_n;
      copy_async16(s_raw + (ci * P::kA + r) * P::kPitch + c, src, inside);
    }
  } else {
    constexpr int kPer = P::kA * P::kInCols;
#pragma unroll 1
    for (int i = threadIdx.x; i < S::kCin * kPer; i += P::kThreads) {
      const int ci = i / kPer;
      const int rc = i - ci * kPer;
      const int r = rc / P::kInCols;
      const int c = rc - r * P::kInCols;
      const int iy = iy0 + r;
      const int ix = ix0 + c;
      const bool inside = iy >= 0 && iy < S::kH && ix >= 0 && ix < S::kW;
      const float* src = inside ? in_n + (long long)ci * (S::kH * S::kW) + iy * S::kW + ix : in_n;
      copy_async(s_raw + (ci * P::kA + r) * P::kPitch + c, src, inside);
    }
  }
}

// B^T applied to the 4 values x of one input column (or row): B^T = [1 0 -1 0; 0 1 1 0;
// 0 -1 1 0; 0 1 0 -1].
__device__ __forceinline__ void data_transform(const float (&x)[4], float (&t)[4]) {
  t[0] = x[0] - x[2];
  t[1] = x[1] + x[2];
  t[2] = x[2] - x[1];
  t[3] = x[1] - x[3];
}

// V = B^T d B for every (channel, tile of the block).
template <class S>
__device__ __forceinline__ void transform_input(const float* s_raw, float* s_v4) {
  using P = WPlan<S>;
  constexpr int kA = P::kA;
#pragma unroll 1
  for (int i = threadIdx.x; i < S::kCin * P::kBlockTiles; i += P::kThreads) {
    // (Tensor cores: consecutive threads on consecutive channels, whose V are adjacent.)
    const int ci = P::kTC ? i % S::kCin : i / P::kBlockTiles;
    const int tile = P::kTC ? i / S::kCin : i - ci * P::kBlockTiles;
    const float* src = s_raw + ci * kA * P::kPitch + P::kM * tile;
    float d[kA][kA];  // [row][column]
#pragma unroll
    for (int r = 0; r < kA; ++r) {
      const float2 a = *reinterpret_cast<const float2*>(src + r * P::kPitch);
      const float2 b = *reinterpret_cast<const float2*>(src + r * P::kPitch + 2);
      d[r][0] = a.x;
      d[r][1] = a.y;
      d[r][2] = b.x;
      d[r][3] = b.y;
    }
    float t[kA][kA];  // B^T d, [row][column]
#pragma unroll
    for (int j = 0; j < kA; ++j) {
      float col[kA], out[kA];
#pragma unroll
      for (int r = 0; r < kA; ++r) col[r] = d[r][j];
      data_transform(col, out);
#pragma unroll
      for (int r = 0; r < kA; ++r) t[r][j] = out[r];
    }
    float v[kA][kA];  // (B^T d) B, [row][column]
#pragma unroll
    for (int r = 0; r < kA; ++r) data_transform(t[r], v[r]);
    if constexpr (P::kTC) {
#pragma unroll
      for (int p = 0; p < kA * kA; ++p) s_v4[(p * P::kBlockTiles + tile) * S::kCin + ci] = v[p % kA][p / kA];
    } else {
#pragma unroll
      for (int nu = 0; nu < kA; ++nu) {
        const int at = (ci * kA + nu) * P::kBlockTiles + tile;
        store_column(v, nu, s_v4 + at * 4);
      }
    }
  }
}

// m[t][c][xi] (+)= U[ci][nu][c][xi] * V[ci][nu][t][xi]: column nu (a positions) of channel ci's
// transformed products; kFresh: m starts at zero (multiply instead).
template <class S, bool kFresh>
__device__ __forceinline__ void column_step(const float* s_u4, const float* s_v4,
                                            float (&m)[S::kTT][S::kTCo][WPlan<S>::kA], int tile0, int group,
                                            int ci, int nu) {
  using P = WPlan<S>;
  constexpr int kA = P::kA;
  float v[S::kTT][kA];
#pragma unroll
  for (int t = 0; t < S::kTT; ++t) {
    const int at = (ci * kA + nu) * P::kBlockTiles + tile0 + t * S::kLX;
    const float4 a = *reinterpret_cast<const float4*>(s_v4 + at * 4);
    v[t][0] = a.x;
    v[t][1] = a.y;
    v[t][2] = a.z;
    v[t][3] = a.w;
  }
#pragma unroll
  for (int c = 0; c < S::kTCo; ++c) {
    const int at = ((ci * kA + nu) * S::kTCo + c) * P::kGroups + group;
    float u[kA];
    const float4 a = *reinterpret_cast<const float4*>(s_u4 + at * 4);
    u[0] = a.x;
    u[1] = a.y;
    u[2] = a.z;
    u[3] = a.w;
#pragma unroll
    for (int t = 0; t < S::kTT; ++t) {
#pragma unroll
      for (int x = 0; x < kA; ++x) m[t][c][x] = kFresh ? __fmul_rn(u[x], v[t][x]) : __fmaf_rn(u[x], v[t][x], m[t][c][x]);
    }
  }
}

// Column nu of M = sum over the input channels of U . V, channel 0 first (kCiUnroll a step: code
// size and NVRTC time).
template <class S>
__device__ __forceinline__ void column_products(const float* s_u4, const float* s_v4,
                                                float (&m)[S::kTT][S::kTCo][WPlan<S>::kA], int tile0, int group,
                                                int nu) {
  column_step<S, true>(s_u4, s_v4, m, tile0, group, 0, nu);
#pragma unroll S::kCiUnroll
  for (int ci = 1; ci < S::kCin; ++ci) column_step<S, false>(s_u4, s_v4, m, tile0, group, ci, nu);
}

// Folds column nu of M (m, its 4 rows) into the tile's 2 x 2 outputs y (row-major) of
// y = A^T M A: a = A^T m, then y[i][j] += a[i] * A^T[j][nu], summed left to right across the
// columns (the first column that reaches y[i][j] sets it). A^T = [1 1 1 0; 0 1 -1 -1] (NU = 0 sets
// column 0, NU = 1 column 1). NU is a template argument, so each column's branch is chosen by the
// front end: chosen by NVVM after unrolling (nu a loop index) it cost NVVM's optimizer ~1.1 s of the
// seed variant's 1.5 s compile (dev host), for the same machine code.
template <int NU>
__device__ __forceinline__ void fold_column(const float (&m)[4], float (&y)[4]) {
  const float a0 = m[0] + m[1] + m[2];
  const float a1 = m[1] - m[2] - m[3];
  if constexpr (NU == 0) {
    y[0] = a0;
    y[2] = a1;
  } else if constexpr (NU == 1) {
    y[0] += a0;
    y[2] += a1;
    y[1] = a0;
    y[3] = a1;
  } else if constexpr (NU == 2) {
    y[0] += a0;
    y[2] += a1;
    y[1] -= a0;
    y[3] -= a1;
  } else {
    y[1] -= a0;
    y[3] -= a1;
  }
}

// x as a TF32 value (round to nearest, ties away) and the rest, x - big (whose low 13 bits the
// tensor core ignores).
__device__ __forceinline__ void split_tf32(float x, unsigned& big, unsigned& small) {
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(big) : "f"(x));
  small = __float_as_uint(x - __uint_as_float(big));
}

// c += a b, one m16n8k8 TF32 product (a: 4 registers, b: 2; fp32 accumulators).
__device__ __forceinline__ void mma_tf32(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                         unsigned b0, unsigned b1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Column nu of M on tensor cores (WPlan::kTC): m[t][c][xi] = sum over ci of U . V at position
// (xi, nu), for the thread's tiles (t = 0: warp tile lane / 4, t = 1: that + 8) and channels
// (4 (lane % 4) + c). The k index of a product is permuted so that a lane's two input channels
// (2 (lane % 4), + 1) are adjacent: k = lane % 4 is channel 2 (lane % 4), k = lane % 4 + 4 the next.
// Per position: 3xTF32 (small x big, big x small, big x big, in that order) for each 8-channel
// half, over kCin / 8 steps.
template <class S>
__device__ __forceinline__ void column_products_tc(const float* s_u, const float* s_v,
                                                   float (&m)[S::kTT][S::kTCo][WPlan<S>::kA], int wx, int wc,
                                                   int lane, int nu) {
  using P = WPlan<S>;
  constexpr int kA = P::kA;
  const int g = lane >> 2, k2 = 2 * (lane & 3);
#pragma unroll
  for (int xi = 0; xi < kA; ++xi) {
    const int p = nu * kA + xi;
    float acc[2][4] = {};
    const float* v = s_v + (p * P::kBlockTiles + wx * P::kWarpTiles + g) * S::kCin + k2;
    const float* u = s_u + ((p * S::kWC + wc) * 2 * 8 + g) * S::kCin + k2;
#pragma unroll
    for (int kc = 0; kc < S::kCin; kc += 8) {
      const float2 lo = *reinterpret_cast<const float2*>(v + kc);
      const float2 hi = *reinterpret_cast<const float2*>(v + 8 * S::kCin + kc);
      unsigned ab[4], as[4];
      split_tf32(lo.x, ab[0], as[0]);  // row g, k = lane % 4
      split_tf32(hi.x, ab[1], as[1]);  // row g + 8
      split_tf32(lo.y, ab[2], as[2]);  // row g, k + 4
      split_tf32(hi.y, ab[3], as[3]);
#pragma unroll
      for (int f = 0; f < 2; ++f) {
        const float2 b = *reinterpret_cast<const float2*>(u + f * 8 * S::kCin + kc);
        unsigned bb0, bs0, bb1, bs1;
        split_tf32(b.x, bb0, bs0);
        split_tf32(b.y, bb1, bs1);
        mma_tf32(acc[f], as[0], as[1], as[2], as[3], bb0, bb1);
        mma_tf32(acc[f], ab[0], ab[1], ab[2], ab[3], bs0, bs1);
        mma_tf32(acc[f], ab[0], ab[1], ab[2], ab[3], bb0, bb1);
      }
    }
#pragma unroll
    for (int f = 0; f < 2; ++f) {
      m[0][2 * f][xi] = acc[f][0];
      m[0][2 * f + 1][xi] = acc[f][1];
      m[1][2 * f][xi] = acc[f][2];
      m[1][2 * f + 1][xi] = acc[f][3];
    }
  }
}

// Column NU of the tile's m x m outputs (before bias) of each of the thread's kTT tiles x kTCo
// channels, then the columns after it (a template recursion rather than an unrolled loop: see
// fold_column).
template <class S, int NU>
__device__ __forceinline__ void tile_columns(const float* s_u4, const float* s_v4,
                                             float (&y)[S::kTT][S::kTCo][WPlan<S>::kMM], int tile0, int group) {
  using P = WPlan<S>;
  if constexpr (NU < P::kA) {
    float m[S::kTT][S::kTCo][P::kA];
    if constexpr (P::kTC) {
      const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
      column_products_tc<S>(s_u4, s_v4, m, warp % S::kWX, warp / S::kWX, lane, NU);
    } else {
      column_products<S>(s_u4, s_v4, m, tile0, group, NU);
    }
#pragma unroll
    for (int t = 0; t < S::kTT; ++t) {
#pragma unroll
      for (int c = 0; c < S::kTCo; ++c) fold_column<NU>(m[t][c], y[t][c]);
    }
    tile_columns<S, NU + 1>(s_u4, s_v4, y, tile0, group);
  }
}

// The tile's m x m outputs (before bias) of each of the thread's kTT tiles x kTCo channels: the a
// columns of M, each summed over the channels and folded.
template <class S>
__device__ __forceinline__ void tile_outputs(const float* s_u4, const float* s_v4,
                                             float (&y)[S::kTT][S::kTCo][WPlan<S>::kMM], int tile0, int group) {
  tile_columns<S, 0>(s_u4, s_v4, y, tile0, group);
}

// The m x m outputs (before bias) of the tile at (oy, ox) of channel co, computed directly from
// global memory in the direct kernel's order (zero padding multiplied, as PyTorch does): the path
// for tiles whose Winograd result is not finite. Positions outside the output give 0.
template <class S>
__device__ __noinline__ void direct_tile(const float* __restrict__ in_n, const float* __restrict__ weight, int co,
                                         int oy, int ox, float* r) {
  constexpr int kM = WPlan<S>::kM;
#pragma unroll 1
  for (int q = 0; q < kM * kM; ++q) {
    const int y = oy + q / kM;
    const int x = ox + q % kM;
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
}

// Bias, epilogue and store of the m x m outputs y (row-major) of the tile at (oy, ox) of one
// channel; dst and res point at the channel's row oy.
template <class S, class E>
__device__ __forceinline__ void store_tile(float* __restrict__ dst, float b, const float* y, int oy, int ox,
                                           const float* __restrict__ res, const E& ep, int co) {
  using P = WPlan<S>;
  constexpr int kM = P::kM;
  if (ox >= S::kOW) return;
#pragma unroll
  for (int i = 0; i < kM; ++i) {
    if (oy + i >= S::kOH) break;
    float v[kM];
#pragma unroll
    for (int j = 0; j < kM; ++j) {
      v[j] = y[kM * i + j] + b;
      // conv + bias, rounded, then + residual (PyTorch's two adds)
      if (S::kHasResidual && ox + j < S::kOW) v[j] += __ldg(res + i * S::kOW + ox + j);
      v[j] = ep(v[j], co);
    }
    float* row = dst + i * S::kOW + ox;
    if constexpr (P::kStoreVec == 2) {
#pragma unroll
      for (int j = 0; j < kM; j += 2) {
        if (ox + j < S::kOW) store_streaming(reinterpret_cast<float2*>(row + j), make_float2(v[j], v[j + 1]));
      }
    } else {
#pragma unroll
      for (int j = 0; j < kM; ++j) {
        if (ox + j < S::kOW) store_streaming(row + j, v[j]);
      }
    }
  }
}

// A bit (t * kTCo + c) for every tile of the thread whose outputs are not all finite.
template <class S>
__device__ __forceinline__ unsigned nonfinite_tiles(const float (&y)[S::kTT][S::kTCo][WPlan<S>::kMM]) {
  unsigned bad = 0;
#pragma unroll
  for (int t = 0; t < S::kTT; ++t) {
#pragma unroll
    for (int c = 0; c < S::kTCo; ++c) {
      const float s = (y[t][c][0] + y[t][c][1]) + (y[t][c][2] + y[t][c][3]);  // as before the column fold
      if (!isfinite(s)) bad |= 1u << (t * S::kTCo + c);
    }
  }
  return bad;
}

// The channels-last form of finish: the tile's pixels each stored as kTCo consecutive channels
// (`vec`: one 16-byte store, else one a channel).
template <class S, class E>
__device__ __forceinline__ void finish_nhwc(const float (&y)[S::kTT][S::kTCo][WPlan<S>::kMM],
                                            const float* __restrict__ bias, float* __restrict__ output, int n,
                                            int co_base, int oy, int tile_x0, const float* __restrict__ residual,
                                            bool vec, const E& ep) {
  using P = WPlan<S>;
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
    const int ox = P::kM * (tile_x0 + t * S::kLX);
#pragma unroll
    for (int q = 0; q < P::kMM; ++q) {
      const int py = oy + q / P::kM, px = ox + q % P::kM;
      if (py >= S::kOH || px >= S::kOW) continue;
      const long long at = (((long long)n * S::kOH + py) * S::kOW + px) * S::kCout + co_base;
      float v[S::kTCo];
#pragma unroll
      for (int c = 0; c < S::kTCo; ++c) v[c] = y[t][c][q] + b[c];
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
      for (int c = 0; c < S::kTCo; ++c) v[c] = ep(v[c], co_base + c);
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
}

// Bias, epilogue and the store of the m x m outputs y (tile_outputs) of each of the thread's tiles
// and channels (finish_nhwc for a channels-last output). Returns nonfinite_tiles(y): a non-finite
// input or weight (or an overflow) can make all of a tile's transformed sums NaN where the direct
// sums of some of its outputs are finite (Inf - Inf); fix_tiles recomputes those.
template <class S, class E>
__device__ __forceinline__ unsigned finish(const float (&y)[S::kTT][S::kTCo][WPlan<S>::kMM],
                                           const float* __restrict__ bias, float* __restrict__ output, int n,
                                           int co_base, int oy, int tile_x0, const float* __restrict__ residual,
                                           bool vec, const E& ep) {
  using P = WPlan<S>;
  if constexpr (P::kOutNhwc) {
    finish_nhwc<S, E>(y, bias, output, n, co_base, oy, tile_x0, residual, vec, ep);
  } else {
#pragma unroll
    for (int c = 0; c < S::kTCo; ++c) {
      const int co = co_base + c;
      const bool co_ok = S::kCout % P::kBlockCout == 0 || co < S::kCout;
      const float b = S::kHasBias && co_ok ? __ldg(bias + co) : 0.0f;
      const long long row = (((long long)n * S::kCout + co) * S::kOH + oy) * S::kOW;
      const float* res = S::kHasResidual ? residual + row : nullptr;
#pragma unroll
      for (int t = 0; t < S::kTT; ++t) {
        if (co_ok) store_tile<S, E>(output + row, b, y[t][c], oy, P::kM * (tile_x0 + t * S::kLX), res, ep, co);
      }
    }
  }
  return nonfinite_tiles<S>(y);
}

// Recomputes directly (and stores again, after finish's stores of the same thread) the tiles
// flagged in `bad`.
template <class S, class E>
__device__ __noinline__ void fix_tiles(unsigned bad, const float* __restrict__ in_n, const float* __restrict__ weight,
                                       const float* __restrict__ bias, float* __restrict__ output, int n,
                                       int co_base, int oy, int tile_x0, const float* __restrict__ residual,
                                       const E ep) {  // (by value: a call, not inlined)
  using P = WPlan<S>;
#pragma unroll 1
  for (int i = 0; i < S::kTT * S::kTCo; ++i) {
    if (!(bad >> i & 1u)) continue;
    const int t = i / S::kTCo;
    const int co = co_base + i % S::kTCo;
    if (co >= S::kCout) continue;
    const int ox = P::kM * (tile_x0 + t * S::kLX);
    float y[P::kMM];
    direct_tile<S>(in_n, weight, co, oy, ox, y);
    const float b = S::kHasBias ? __ldg(bias + co) : 0.0f;
    if constexpr (P::kOutNhwc) {
#pragma unroll 1
      for (int q = 0; q < P::kMM; ++q) {
        const int py = oy + q / P::kM, px = ox + q % P::kM;
        if (py >= S::kOH || px >= S::kOW) continue;
        const long long at = (((long long)n * S::kOH + py) * S::kOW + px) * S::kCout + co;
        float v = y[q] + b;
        if (S::kHasResidual) v += __ldg(residual + at);
        store_streaming(output + at, ep(v, co));
      }
      continue;
    }
    const long long row = (((long long)n * S::kCout + co) * S::kOH + oy) * S::kOW;
    store_tile<S, E>(output + row, b, y, oy, ox, S::kHasResidual ? residual + row : nullptr, ep, co);
  }
}

}  // namespace cuinline_conv2d_wino_detail

/// input [N][kCin][kH][kW], weight [kCout][kCin][3][3], bias [kCout] (ignored unless kHasBias),
/// output [N][kCout][kOH][kOW] ([N][kOH][kOW][kCout] with kOutNhwc; the residual likewise). Grid:
/// (kTilesX * ceil(kTilesY / row_tiles), ceil(kCout / kBlockCout), N); block: kThreads; dynamic
/// shared memory: kSmemBytes.
template <class S, class E>
__global__ void __launch_bounds__(cuinline_conv2d_wino_detail::WPlan<S>::kThreads, S::kMinBlocks)
    cuinline_conv2d_winograd(const float* __restrict__ input, const float* __restrict__ weight,
                             const float* __restrict__ bias, float* __restrict__ output, int row_tiles,
                             const float* __restrict__ residual, const cuinline_conv2d_chan chan) {
  using P = cuinline_conv2d_wino_detail::WPlan<S>;
  const E ep{chan};
  namespace d = cuinline_conv2d_wino_detail;
  extern __shared__ __align__(16) float smem[];
  float* s_u4 = smem;
  float* s_v4 = s_u4 + P::kU4Floats;
  float* s_raw = s_v4 + P::kV4Floats;

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int wx = warp % S::kWX;
  const int wc = warp / S::kWX;
  // Lane bits: bit 0 is channel-lane bit 0, bits 1 .. log2(kLX) the tile lane, the rest the other
  // channel-lane bits. Lanes n and n ^ 1 then load the same V, lanes n and n ^ 2 the same U, and a
  // 16-byte shared load whose lane pairs (n, n ^ 1) or (n, n ^ 2) share addresses returns in 2
  // wavefronts instead of 4.
  // (Tensor cores: the mma.sync accumulator layout, tile lane lane / 4, channel lane lane % 4.)
  const int lx = P::kTC ? lane >> 2 : (lane >> 1) % S::kLX;
  const int group = wc * P::kLanesC + (P::kTC ? lane & 3 : (lane & 1) | ((lane >> 1) / S::kLX) << 1);
  const int bx = blockIdx.x % P::kTilesX;
  const int ty0 = blockIdx.x / P::kTilesX * row_tiles;
  const int co0 = blockIdx.y * P::kBlockCout;
  const int n = blockIdx.z;
  const float* in_n = input + (long long)n * (S::kCin * S::kH * S::kW);
  const int ix0 = P::kM * bx * P::kBlockTiles - S::kPW;
  const int tile0 = wx * P::kWarpTiles + lx;  // block-local tile of t = 0
  const int steps = min(row_tiles, P::kTilesY - ty0);

  // Step g: tile row ty0 + g. Its input is copied while step g - 1 computes: the copy is issued as
  // soon as step g - 1's raw rows are transformed (one raw buffer).
  const bool vec = (reinterpret_cast<unsigned long long>(input) & 15) == 0;
  // (Channels-last output: 16-byte stores, and residual loads, where both pointers allow them.)
  const bool vec_out =
      ((reinterpret_cast<unsigned long long>(output) |
        (S::kHasResidual ? reinterpret_cast<unsigned long long>(residual) : 0ull)) & 15) == 0;
  d::stage_input<S>(in_n, s_raw, P::kM * ty0 - S::kPH, ix0, vec);
  d::copy_async_commit();
  d::stage_weights<S>(weight, s_u4, co0);
#pragma unroll 1
  for (int g = 0; g < steps; ++g) {
    const int ty = ty0 + g;
    d::copy_async_wait<0>();
    __syncthreads();  // raw rows of step g (and, at g = 0, U) visible; every thread is done with V
    d::transform_input<S>(s_raw, s_v4);
    __syncthreads();  // V visible; every thread is done with the raw rows
    if (g + 1 < steps) {
      d::stage_input<S>(in_n, s_raw, P::kM * (ty + 1) - S::kPH, ix0, vec);
      d::copy_async_commit();
    }
    float y[S::kTT][S::kTCo][P::kMM];
    d::tile_outputs<S>(s_u4, s_v4, y, tile0, group);
    const unsigned bad = d::finish<S, E>(y, bias, output, n, co0 + group * S::kTCo, P::kM * ty,
                                         bx * P::kBlockTiles + tile0, residual, vec_out, ep);
    if (bad != 0) {
      d::fix_tiles<S, E>(bad, in_n, weight, bias, output, n, co0 + group * S::kTCo, P::kM * ty,
                         bx * P::kBlockTiles + tile0, residual, ep);
    }
  }
}

#endif  // CUINLINE_CONV2D_WINOGRAD_CUH
