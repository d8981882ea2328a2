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
//   (unroll of the filter-row loop), kKwUnroll (of the filter-column loop: kKW or 1), kMinBlocks,
//   kPipeline (0, 1, 2 as in conv2d.cuh, or 3: row streaming, below), kSplit (1 or 3), kOutStage
//   (0: fragments are stored straight to global memory; 1, 2 or 4, row streaming only: through a
//   per-warp shared-memory tile, as aligned float4 runs, in that many passes over the warp's
//   channel tiles), kSumsFromZero (kSplit 3: 1 sums each k8 step's products from zero and adds them
//   to the running sum in fp32; 0 chains them into the running sum on the tensor cores, the
//   CUINLINE_CONV2D_TF32X3_SUMS=chained A/B).
//
// kPipeline = 3 (row streaming, all channels staged): a block computes `row_tiles` steps of kTY
// (1 to 4; the host picks 1 or 2) consecutive output rows of one column tile. The weights are staged once; the input rows
// live in a ring of kRing = kWindow + 2 * kTY * kSH rows per channel (kWindow: the rows one step
// reads), so each step stages only the input rows it does not share with the previous one, two steps
// ahead of the one computed (one barrier a step). With kTY = 2 the warps of the two rows store rows
// oy and oy + 1 of a channel together: in NCHW they are one run of 2 * kOW floats.
//
// TF32 (kSplit = 1) with row streaming: every staged value is rounded to TF32 once, in shared
// memory, by the thread that copied it (after its own cp.async group completed, before the barrier
// that publishes it), so the fragment loads need no conversion.

#ifndef CUINLINE_CONV2D_MMA_CUH
#define CUINLINE_CONV2D_MMA_CUH

#include "conv2d.cuh"
#include "conv2d_mma_plan.cuh"

namespace cuinline_conv2d_mma_detail {

// The figures of conv2d_mma_plan.cuh for a shape struct S, evaluated once an instantiation (a
// namespace-scope variable template: NVRTC emits a class's static constexpr members as device
// globals).
template <class S>
constexpr MmaPlanFigures kMmaPlanFigures =
    mma_plan_figures(MmaPlanShape{S::kKH, S::kKW, S::kSH, S::kSW, S::kDH, S::kDW, S::kOH, S::kOW, S::kTileCols,
                                  S::kTY, S::kWarpsM, S::kWarpsN, S::kMT, S::kNT, S::kCiChunk, S::kPipeline,
                                  S::kOutStage});

template <class S>
struct Plan {
  static constexpr int kWarps = kMmaPlanFigures<S>.warps;
  static constexpr int kThreads = kMmaPlanFigures<S>.threads;
  static constexpr int kBlockCout = kMmaPlanFigures<S>.block_cout;
  static constexpr int kColTiles = kMmaPlanFigures<S>.col_tiles;
  static constexpr int kTilesX = kMmaPlanFigures<S>.tiles_x;
  static constexpr int kTilesY = kMmaPlanFigures<S>.tiles_y;
  static constexpr bool kStream = kMmaPlanFigures<S>.stream;
  // Rounding in shared memory pays where a staged value feeds many rows (row streaming); in the
  // block-tile modes the extra pass over the stage costs more than the conversions it saves.
  static constexpr bool kPreRound = S::kSplit == 1 && kStream;
  static constexpr bool kSumsFromZero = S::kSumsFromZero != 0;
  static constexpr int kSpan = kMmaPlanFigures<S>.span;
  static constexpr int kStepRows = kMmaPlanFigures<S>.step_rows;
  static constexpr int kWindow = kMmaPlanFigures<S>.window;
  static constexpr int kNew = kMmaPlanFigures<S>.new_rows;
  static constexpr int kRing = kMmaPlanFigures<S>.ring;
  static constexpr int kInRows = kMmaPlanFigures<S>.in_rows;
  static constexpr int kInCols = kMmaPlanFigures<S>.in_cols;
  static constexpr int kPitch = kMmaPlanFigures<S>.pitch;
  static constexpr int kPlane = kMmaPlanFigures<S>.plane;
  static constexpr int kInFloats = kMmaPlanFigures<S>.in_floats;
  static constexpr int kTaps = kMmaPlanFigures<S>.taps;
  static constexpr int kWPitch = kMmaPlanFigures<S>.w_pitch;
  static constexpr int kWFloats = kMmaPlanFigures<S>.w_floats;
  static constexpr int kBuffers = kMmaPlanFigures<S>.buffers;
  static constexpr int kWBuffers = kMmaPlanFigures<S>.w_buffers;
  static constexpr int kWarpCols = kMmaPlanFigures<S>.warp_cols;
  static constexpr int kOutPitch = kMmaPlanFigures<S>.out_pitch;
  static constexpr int kOutChunks = kMmaPlanFigures<S>.out_chunks;
  static constexpr int kOutFloats = kMmaPlanFigures<S>.out_floats;
  static constexpr int kSmemBytes = (int)kMmaPlanFigures<S>.smem_bytes;
  static_assert(S::kTileCols % 16 == 0, "a pixel tile is 16 columns");
  static_assert(S::kWarpsM * S::kMT == S::kTY * kColTiles, "the warps' pixel tiles must cover the block");
  static_assert(S::kCiPad % 8 == 0 && S::kCiPad >= S::kCin && S::kCiPad - S::kCin < 8, "kCiPad");
  static_assert(S::kCiChunk % 8 == 0 && S::kCiPad % S::kCiChunk == 0, "kCiChunk");
  static_assert(S::kPipeline != 1 || S::kCiChunk == S::kCiPad, "the row-tile pipeline needs one input stage");
  static_assert(S::kPipeline >= 0 && S::kPipeline <= 3, "kPipeline is 0, 1, 2 or 3");
  static_assert(!kStream || (S::kTY >= 1 && S::kTY <= 4 && S::kCiChunk == S::kCiPad),
                "row streaming: one to four rows a step, all channels");
  static_assert(!S::kOutStage || (kColTiles % S::kMT == 0 && S::kNT % S::kOutStage == 0),
                "output staging: a warp's tiles side by side in one row, whole n tiles a pass");
  static_assert(!S::kOutStage || S::kPipeline == 3, "output staging is part of row streaming");
  static_assert(!S::kOutStage || !S::kHasResidual, "a residual is added on the direct store path");
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

// Rounds one staged value to TF32 in place (the thread that copied it, once its group completed).
__device__ __forceinline__ void round_in_place(float* p) {
  *p = __uint_as_float(to_tf32(*p));
}

// Stages input channels [cb, cb + kCiChunk) of image `in_n` (channels >= kCin and pixels outside
// the image are zeros) at tile origin (iy0, ix0). kRound: round what this thread staged instead.
template <class S, bool kRound = false>
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
    float* dst = s_in + ci * P::kPlane + r * P::kPitch + c;
    if (kRound) {
      round_in_place(dst);
      continue;
    }
    const int iy = iy0 + r;
    const int ix = ix0 + c;
    const bool inside =
        (S::kCin % S::kCiChunk == 0 || cb + ci < S::kCin) && iy >= 0 && iy < S::kH && ix >= 0 && ix < S::kW;
    const float* src = inside ? in_n + (long long)(cb + ci) * (S::kH * S::kW) + iy * S::kW + ix : in_n;
    cuinline_conv2d_detail::copy_async(dst, src, inside);
  }
}

// Row streaming: stages kRows input rows of all channels, ring rows rel0, rel0 + 1, ... (modulo
// kRing; rel counts from the block's first input row iy_base), into their ring slots. A thread owns
// columns (coalesced copies along a row) and walks the channels with constant offsets, so a copy
// costs no index arithmetic; an out-of-image row or column still reads from inside the image
// (plane ci of image n) so that every address stays valid, but copies nothing (zero fill).
template <class S, int kRows, bool kRound = false>
__device__ __forceinline__ void stage_ring_rows(const float* __restrict__ in_n, float* s_in, int iy_base,
                                                int rel0, int ix0) {
  using P = Plan<S>;
#pragma unroll 1
  for (int c = threadIdx.x; c < P::kInCols; c += P::kThreads) {
    const int ix = ix0 + c;
    const bool col_ok = ix >= 0 && ix < S::kW;
    // The rows a step adds unroll; a block's first window (once a block) stays a loop: less code.
    constexpr int kRowUnroll = kRows <= 2 ? kRows : 1;
#pragma unroll kRowUnroll
    for (int r = 0; r < kRows; ++r) {
      const int rel = rel0 + r;
      const int iy = iy_base + rel;
      const bool ok = col_ok && iy >= 0 && iy < S::kH;
      float* dst = s_in + rel % P::kRing * P::kPitch + c;
      const float* src = ok ? in_n + iy * S::kW + ix : in_n;
      // (8 channels an unrolled step: full unrolling of 64 channels x 5 instantiations of this
      // function doubled NVRTC's time for the kernel)
#pragma unroll 8
      for (int ci = 0; ci < S::kCiPad; ++ci) {
        if (kRound) {
          round_in_place(dst + ci * P::kPlane);
        } else if (ci < S::kCin) {
          cuinline_conv2d_detail::copy_async(dst + ci * P::kPlane, src + ci * (S::kH * S::kW), ok);
        } else {
          cuinline_conv2d_detail::copy_async(dst + ci * P::kPlane, in_n, false);
        }
      }
    }
  }
}

// Weights of channels [cb, cb + kCiChunk) and output channels [co0, co0 + kBlockCout), laid out
// [tap][ci][co] (K-major rows of the GEMM's B). kRound: round what this thread staged instead.
template <class S, bool kRound = false>
__device__ __forceinline__ void stage_weights(const float* __restrict__ weight, float* s_w, int cb, int co0) {
  using P = Plan<S>;
  constexpr int kPerCo = S::kCiChunk * P::kTaps;
  // Row streaming stages the weights once a block: a rolled loop (less code, less NVRTC time).
  // The block tiles stage them every channel chunk: unrolled (rolled, 7-9 % slower on the H200).
  constexpr int kUnroll = P::kStream ? 1 : 4;
#pragma unroll kUnroll
  for (int i = threadIdx.x; i < P::kBlockCout * kPerCo; i += P::kThreads) {
    const int co = i / kPerCo;
    const int rest = i - co * kPerCo;
    const int ci = rest / P::kTaps;
    const int tap = rest - ci * P::kTaps;
    float* dst = s_w + (tap * S::kCiChunk + ci) * P::kWPitch + co;
    if (kRound) {
      round_in_place(dst);
      continue;
    }
    const bool inside = (S::kCout % P::kBlockCout == 0 || co0 + co < S::kCout) &&
                        (S::kCin % S::kCiChunk == 0 || cb + ci < S::kCin);
    const float* src =
        inside ? weight + (long long)(co0 + co) * (S::kCin * P::kTaps) + (cb + ci) * P::kTaps + tap : weight;
    cuinline_conv2d_detail::copy_async(dst, src, inside);
  }
}

// After this thread's copies of one stage completed: rounds them to TF32 (kSplit = 1 only).
template <class S>
__device__ __forceinline__ void round_stage(float* s_in, float* s_w, bool weights) {
  if (Plan<S>::kPreRound) {
    stage_input<S, true>(nullptr, s_in, 0, 0, 0);
    if (weights) stage_weights<S, true>(nullptr, s_w, 0, 0);
  }
}

// acc += the staged chunk. a_off[i]: this thread's A word for pixel tile i (channel t, pixel g);
// b_off: its B word (k = t, channel g of the warp's first n tile). Row streaming: filter row kh
// reads ring slot rbase + kh * kDH (mod kRing).
template <class S>
__device__ __forceinline__ void accumulate(const float* s_in, const float* s_w,
                                           float (&acc)[S::kMT][S::kNT][4], const int (&a_off)[S::kMT],
                                           int b_off, int rbase = 0) {
  using P = Plan<S>;
  // A TF32 operand: the staged value's bits when it was rounded in shared memory.
  auto tf32 = [](float x) { return P::kPreRound ? __float_as_uint(x) : to_tf32(x); };
#pragma unroll S::kCiUnroll
  for (int c8 = 0; c8 < S::kCiChunk / 8; ++c8) {
#pragma unroll S::kKhUnroll
    for (int kh = 0; kh < S::kKH; ++kh) {
      int row = kh * S::kDH;
      if (P::kStream) {
        row += rbase;
        if (row >= P::kRing) row -= P::kRing;
      }
#pragma unroll S::kKwUnroll
      for (int kw = 0; kw < S::kKW; ++kw) {
        const float* ap = s_in + c8 * 8 * P::kPlane + row * P::kPitch + kw * S::kDW;
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
            bh[j][0] = tf32(w0);
            bh[j][1] = tf32(w1);
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
              ah[q] = tf32(x[q]);
            }
          }
#pragma unroll
          for (int j = 0; j < S::kNT; ++j) {
            if (S::kSplit == 3 && P::kSumsFromZero) {
              // The three products of a k8 step summed from zero on the tensor cores, then added to
              // the running sum in fp32 (round to nearest). The tensor cores' own fp32 accumulation
              // truncates (rounds toward zero) at every mma: chained into the running sum, that lost
              // about half an ulp of the sum per mma, always toward zero, so the error grew with the
              // reduction's length (rel L2 1.3e-4 against float64 at Cin x KH x KW = 14448, where
              // PyTorch's fp32 conv had 2.7e-6: bench/conv2d_fuzz.py). Here a truncation costs half
              // an ulp of one step's 24 products, and the running sum rounds as fp32 FMA code does.
              float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
              mma_tf32(d, al, bc[j]);
              mma_tf32(d, ac, bl[j]);
              mma_tf32(d, ah, bh[j]);
#pragma unroll
              for (int q = 0; q < 4; ++q) acc[i][j][q] += d[q];
            } else {
              if (S::kSplit == 3) {  // (CUINLINE_CONV2D_TF32X3_SUMS=chained: the form before)
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
}

// acc = the start value of its channel: start[j][q & 1] is channel 2t + (q & 1) of n tile j (zeros,
// or the bias where the sums start at it).
template <class S>
__device__ __forceinline__ void fill_acc(float (&acc)[S::kMT][S::kNT][4], const float (&start)[S::kNT][2]) {
#pragma unroll
  for (int i = 0; i < S::kMT; ++i) {
#pragma unroll
    for (int j = 0; j < S::kNT; ++j) {
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[i][j][q] = start[j][q & 1];
    }
  }
}

// Bias, epilogue and store of one warp's tiles (output rows from oy0, columns from ox0, channels
// from co_w); resets acc. Accumulator q of tile (i, j): pixel g + 8 * (q / 2), channel 2t + q % 2.
template <class S, class E>
__device__ __forceinline__ void finish(float (&acc)[S::kMT][S::kNT][4], const float* __restrict__ bias,
                                       float* __restrict__ output, int n, int oy0, int ox0, int co_w, int wm,
                                       int g, int t, const float* __restrict__ residual, const E& ep) {
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
            const long long at = (((long long)n * S::kCout + co) * S::kOH + oy) * S::kOW + ox;
            float* dst = output + at;
            // conv + bias, rounded, then + residual (PyTorch's two adds), then the epilogue.
            if (S::kOW % S::kTileCols == 0 || ox < S::kOW) {
              float v = acc[i][j][e] + b;
              if (S::kHasResidual) v += __ldg(residual + at);
              cuinline_conv2d_detail::store_streaming(dst, ep(v, co));
            }
            if (S::kOW % S::kTileCols == 0 || ox + 8 < S::kOW) {
              float v = acc[i][j][2 + e] + b;
              if (S::kHasResidual) v += __ldg(residual + at + 8);
              cuinline_conv2d_detail::store_streaming(dst + 8, ep(v, co));
            }
          }
        }
      }
    }
  }
  constexpr float kZeros[S::kNT][2] = {};
  fill_acc<S>(acc, kZeros);
}

// finish() through shared memory (kOutStage = number of passes): the accumulators start at the
// bias (bias_r: channel 2t + e of n tile j), and are reset to it. Per pass the warp writes kNT /
// kOutStage of its channel tiles, activated, into s_out (a row per channel, shifted by
// the row's global address mod 4), then stores each channel's run of kWarpCols outputs: the
// aligned float4 chunks that lie wholly in the run (kWarpCols / 4 chunks a row, 32 / that many rows
// an iteration), then the at most 3 + 3 elements at the run's ends as scalars.
template <class S, class E>
__device__ __forceinline__ void finish_staged(float (&acc)[S::kMT][S::kNT][4],
                                              const float (&bias_r)[S::kNT][2], float* __restrict__ output,
                                              float* s_out, int n, int oy, int ox_w, int co_w, int lane,
                                              const E& ep) {
  using P = Plan<S>;
  namespace cd = cuinline_conv2d_detail;
  constexpr int kPassNT = S::kNT / (S::kOutStage > 0 ? S::kOutStage : 1);
  constexpr int kRows = 8 * kPassNT;       // channel rows a pass
  constexpr int kMain = P::kWarpCols / 4;  // chunks of an unshifted run (4, 8, 16 or 32)
  constexpr int kRowsIter = 32 / kMain;
  constexpr long long kPlaneOut = (long long)S::kOH * S::kOW;
  const int g = lane / 4;
  const int t = lane % 4;
  const int len = oy >= S::kOH ? 0 : S::kOW - ox_w < P::kWarpCols ? S::kOW - ox_w : P::kWarpCols;
  // (n, co_w, oy, ox_w): the run of channel c starts c * kPlaneOut later. Only the start mod 4
  // decides the shift, so 32-bit arithmetic is enough there.
  float* run = output + ((((long long)n * S::kCout + co_w) * S::kOH + oy) * S::kOW + ox_w);
  const unsigned shift0 = static_cast<unsigned>(reinterpret_cast<unsigned long long>(run) / 4);
  const unsigned plane4 = static_cast<unsigned>(kPlaneOut & 3);
#pragma unroll
  for (int pass = 0; pass < S::kOutStage; ++pass) {
    __syncwarp();  // the previous pass's (or row's) reads of s_out are done
#pragma unroll
    for (int jj = 0; jj < kPassNT; ++jj) {
      const int j = pass * kPassNT + jj;
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int c = jj * 8 + 2 * t + e;
        const int co = co_w + j * 8 + 2 * t + e;
        float* row = s_out + c * P::kOutPitch + ((shift0 + (pass * kRows + c) * plane4) & 3u) + g;
#pragma unroll
        for (int i = 0; i < S::kMT; ++i) {
          row[i * 16] = ep(acc[i][j][e], co);
          row[i * 16 + 8] = ep(acc[i][j][2 + e], co);
        }
      }
    }
    __syncwarp();
    if (len > 0) {
      // The whole float4 chunks of the rows: chunk k holds run elements 4k - shift .. 4k + 3 - shift.
#pragma unroll 4
      for (int it = 0; it < kRows / kRowsIter; ++it) {
        const int c = it * kRowsIter + lane / kMain;
        const int k = lane % kMain;
        const int ch = pass * kRows + c;
        const int shift = static_cast<int>((shift0 + ch * plane4) & 3u);
        if ((S::kCout % P::kBlockCout == 0 || co_w + ch < S::kCout) && 4 * k >= shift &&
            4 * k + 4 <= shift + len) {
          cd::store_streaming(reinterpret_cast<float4*>(run + (ch * kPlaneOut - shift + 4 * k)),
                              *reinterpret_cast<const float4*>(s_out + c * P::kOutPitch + 4 * k));
        }
      }
      // The rest of each row, as scalars: up to 3 elements before its first whole chunk (slots
      // 0-3) and up to 3 after its last (slots 4-7).
#pragma unroll
      for (int slot = lane; slot < kRows * 8; slot += 32) {
        const int c = slot / 8;
        const int q = slot % 8;
        const int ch = pass * kRows + c;
        const int shift = static_cast<int>((shift0 + ch * plane4) & 3u);
        const int head = min((4 - shift) & 3, len);
        const int tail0 = max(((shift + len) & ~3) - shift, head);
        const int p = q < 4 ? q : tail0 + q - 4;
        if ((S::kCout % P::kBlockCout == 0 || co_w + ch < S::kCout) && (q < 4 ? p < head : p < len)) {
          cd::store_streaming(run + (ch * kPlaneOut + p), s_out[c * P::kOutPitch + shift + p]);
        }
      }
    }
  }
  fill_acc<S>(acc, bias_r);
}

}  // namespace cuinline_conv2d_mma_detail

/// The same contract as cuinline_conv2d (conv2d.cuh): input [N][kCin][kH][kW], weight
/// [kCout][kCin][kKH][kKW], bias [kCout] (ignored unless kHasBias), output [N][kCout][kOH][kOW],
/// residual (ignored unless kHasResidual).
/// Grid: (kTilesX * ceil(kTilesY / row_tiles), ceil(kCout / kBlockCout), N); block: kThreads;
/// dynamic shared memory: kSmemBytes. row_tiles (rows of tiles a block computes in turn; with row
/// streaming, steps of kTY output rows) must be 1 unless kPipeline is 1 (row-tile pipeline) or 3
/// (row streaming).
template <class S, class E>
__global__ void __launch_bounds__(cuinline_conv2d_mma_detail::Plan<S>::kThreads, S::kMinBlocks)
    cuinline_conv2d_mma(const float* __restrict__ input, const float* __restrict__ weight,
                        const float* __restrict__ bias, float* __restrict__ output, int row_tiles,
                        const float* __restrict__ residual, const cuinline_conv2d_chan chan) {
  using P = cuinline_conv2d_mma_detail::Plan<S>;
  const E ep{chan};
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
    a_off[i] = t * P::kPlane + (P::kStream ? 0 : (tile / P::kColTiles) * S::kSH * P::kPitch) +
               ((tile % P::kColTiles) * 16 + g) * S::kSW;
  }
  const int b_off = t * P::kWPitch + wn * 8 * S::kNT + g;

  float acc[S::kMT][S::kNT][4];
  constexpr float kZeros[S::kNT][2] = {};
  d::fill_acc<S>(acc, kZeros);

  if constexpr (S::kPipeline != 3) {
    cd::run_pipeline<S::kPipeline, S::kCiPad / S::kCiChunk, P::kTilesY, false>(
        [&](int in_buf, int w_buf, int k, int tile_y, bool weights) {
          d::stage_input<S>(in_n, s_in + in_buf * P::kInFloats, k * S::kCiChunk,
                            tile_y * S::kTY * S::kSH - S::kPH, ix0);
          if (weights) d::stage_weights<S>(weight, s_w + w_buf * P::kWFloats, k * S::kCiChunk, co0);
        },
        [&](int in_buf, int w_buf, bool weights) {
          d::round_stage<S>(s_in + in_buf * P::kInFloats, s_w + w_buf * P::kWFloats, weights);
        },
        [&](int in_buf, int w_buf) {
          d::accumulate<S>(s_in + in_buf * P::kInFloats, s_w + w_buf * P::kWFloats, acc, a_off, b_off);
        },
        [&](int tile_y) { d::finish<S, E>(acc, bias, output, n, tile_y * S::kTY, ox0, co_w, wm, g, t, residual, ep); },
        tile_y0, row_tiles);
  } else {
    // Row streaming: steps tile_y0 .. tile_y0 + steps - 1 of kTY output rows each. Copy groups:
    // {weights, step 0's window}, {step 1's new rows}, then one group an iteration (step r + 2's new
    // rows, maybe empty), so `wait_group 1` at step r means: everything step r reads has landed.
    const int steps = min(row_tiles, P::kTilesY - tile_y0);
    if (steps <= 0) return;  // (the whole block)
    const int iy_base = tile_y0 * P::kStepRows - S::kPH;
    // This warp's output row within a step, and its first column.
    const int warp_row = wm * S::kMT / P::kColTiles;
    const int ox_w = ox0 + wm * S::kMT % P::kColTiles * 16;
    float* s_out = s_w + P::kWFloats + P::kInFloats + warp * (P::kOutFloats / P::kWarps);
    float bias_r[S::kNT][2];
#pragma unroll
    for (int j = 0; j < S::kNT; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int co = co_w + j * 8 + 2 * t + e;
        bias_r[j][e] =
            S::kHasBias && (S::kCout % P::kBlockCout == 0 || co < S::kCout) ? __ldg(bias + co) : 0.0f;
      }
    }
    if (S::kOutStage) d::fill_acc<S>(acc, bias_r);  // the sums start at the bias (one add an output fewer)
    d::stage_weights<S>(weight, s_w, 0, co0);
    d::stage_ring_rows<S, P::kWindow>(in_n, s_in, iy_base, 0, ix0);
    cd::copy_async_commit();
    if (steps > 1) {
      d::stage_ring_rows<S, P::kNew>(in_n, s_in, iy_base, P::kStepRows + P::kWindow - P::kNew, ix0);
    }
    cd::copy_async_commit();
#pragma unroll 1
    for (int r = 0; r < steps; ++r) {
      cd::copy_async_wait<1>();
      if (P::kPreRound) {
        if (r == 0) {
          d::stage_weights<S, true>(nullptr, s_w, 0, 0);
          d::stage_ring_rows<S, P::kWindow, true>(nullptr, s_in, 0, 0, 0);
        } else {
          d::stage_ring_rows<S, P::kNew, true>(nullptr, s_in, 0, r * P::kStepRows + P::kWindow - P::kNew, 0);
        }
      }
      __syncthreads();
      // Step r + 2's new rows go to the slots step r - 1 read last (every warp is past it now).
      if (r + 2 < steps) {
        d::stage_ring_rows<S, P::kNew>(in_n, s_in, iy_base, (r + 2) * P::kStepRows + P::kWindow - P::kNew,
                                       ix0);
      }
      cd::copy_async_commit();
      d::accumulate<S>(s_in, s_w, acc, a_off, b_off, (r * P::kStepRows + warp_row * S::kSH) % P::kRing);
      if (S::kOutStage) {
        // (a warp whose row is past the image in the last step stores nothing)
        d::finish_staged<S, E>(acc, bias_r, output, s_out, n, (tile_y0 + r) * S::kTY + warp_row, ox_w, co_w,
                               lane, ep);
      } else {
        d::finish<S, E>(acc, bias, output, n, (tile_y0 + r) * S::kTY, ox0, co_w, wm, g, t, residual, ep);
      }
    }
  }
}

#endif  // CUINLINE_CONV2D_MMA_CUH
