// conv2d_generic.cuh — the general direct convolution: any valid shape, storage dtype f32, f16,
// bf16 or f64, input / weight / output each NCHW or channels-last (NHWC), compiled by NVRTC with
// every shape and layout a compile-time constant. It computes what the fp32 kernels compute:
//   y = E(conv(x, w) + b [+ residual])
// in opmath A = ew_traits<T>::op (fp32 for f32, f16 and bf16; fp64 for f64): loads widened to A
// (exact), products and sums in A (fused multiply-adds, __fmaf_rn / __fma_rn, like conv2d.cuh), the
// bias, residual and epilogue E in A, and one rounding (to nearest even) to the storage type at the
// store (ew_traits<T>::from_op: cvt.rn.f16.f32 / cvt.rn.bf16.f32; none for f32 and f64).
//
// The rendered program defines a shape struct S and an epilogue functor E (`__device__ A
// operator()(A, int co) const`), then names `cuinline_conv2d_generic<S, E>`.
//
// Work split: a thread computes one output pixel (oy, ox) of one image for kCoTile consecutive
// output channels (kCoTile accumulators); depthwise (one input channel a group) a thread computes
// one output channel at several pixels instead: kPixPerThread columns of a row with a channels-last
// input (kChannelFast), kRowsPerThread rows of a column otherwise (kRowFast). A block is kThreads consecutive pixels of the flattened
// OH x OW plane; grid (kTilesX, ceil(kCout / kCoTile), N). No shared memory, no barriers: this is
// the correctness path for dtypes and layouts the tuned kernels do not read; lanes of a warp share
// their weights (warp-wide broadcast loads), and with a channels-last input the inner loop over
// input channels reads consecutive elements.
//
// Grouped convolutions (S::kGroups > 1): output channel co reads input channels
// [g kCin / kGroups, (g + 1) kCin / kGroups) of group g = co / (kCout / kGroups), and the weight is
// [kCout][kCin / kGroups][kKH][kKW]; a thread's kCoTile channels lie in one group.
//
// Required members of S:
//   typedef storage (float, ew_half, ew_bf16 or double);
//   static constexpr int kCin, kH, kW, kCout, kKH, kKW, kSH, kSW, kPH, kPW, kDH, kDW, kOH, kOW,
//     kHasBias, kHasResidual, kInNhwc, kWNhwc, kOutNhwc (0 or 1), kThreads, kCoTile, kGroups (1: not
//     grouped), kChannelFast (1: threads along the output channels first) with kPixPerThread (the
//     consecutive output columns such a thread computes; 1 otherwise), kRowFast (1: a thread computes
//     kRowsPerThread output rows of one column, the columns fastest) with kRowsPerThread (1
//     otherwise).
// No standard or toolkit headers (ew_common.cuh has the half types and their conversions).

#ifndef CUINLINE_CONV2D_GENERIC_CUH
#define CUINLINE_CONV2D_GENERIC_CUH

#include "ew_common.cuh"

namespace cuinline_conv2d_generic_detail {

// Storage elements in 16 bytes.
template <class T>
struct Vec16 {
  static constexpr int kN = 16 / sizeof(T);
};

template <class S>
struct Plan {
  static constexpr int kGroups = S::kGroups;
  static constexpr int kCinG = S::kCin / kGroups;    // input channels a group (the weight's)
  static constexpr int kCoutG = S::kCout / kGroups;  // output channels a group
  static constexpr int kThreads = S::kThreads;
  static constexpr long long kPixels = (long long)S::kOH * S::kOW;
  // Channel-fast (grouped convs with a channels-last input): a thread is one (pixel, channel) pair,
  // channels fastest, so a warp reads consecutive input channels; one output channel a thread.
  // A channel-fast thread computes kPix consecutive columns of one output row (its filter taps'
  // weights loaded once, kept in registers).
  static constexpr bool kChannelFast = S::kChannelFast != 0;
  static constexpr int kPix = S::kPixPerThread;
  static constexpr int kColGroups = (S::kOW + kPix - 1) / kPix;  // column groups a row
  // Row-fast (one input channel a group, up to 49 taps): a thread is kRows consecutive output rows
  // of one column of one output channel, columns fastest for an NCHW input and channels fastest for
  // a channels-last one (a warp's loads are consecutive elements); each input row it loads serves
  // every one of its rows that the filter reaches, and its taps' weights are loaded once.
  static constexpr bool kRowFast = S::kRowFast != 0;
  static constexpr int kRows = S::kRowsPerThread;
  static constexpr int kRowGroups = (S::kOH + kRows - 1) / kRows;  // row groups a column
  static constexpr long long kItems = kChannelFast ? (long long)S::kOH * kColGroups * S::kCout
                                      : kRowFast   ? (long long)(S::kCout / S::kCoTile) * kRowGroups * S::kOW
                                                   : kPixels;
  static constexpr int kTilesX = (int)((kItems + kThreads - 1) / kThreads);
  static constexpr int kTilesY = 1;
  static constexpr int kSmemBytes = 0;
  // Element strides (channel, row, column, image) of the input, output and weight.
  static constexpr long long kInC = S::kInNhwc ? 1 : (long long)S::kH * S::kW;
  static constexpr long long kInY = S::kInNhwc ? (long long)S::kW * S::kCin : S::kW;
  static constexpr long long kInX = S::kInNhwc ? S::kCin : 1;
  static constexpr long long kInN = (long long)S::kCin * S::kH * S::kW;
  static constexpr long long kOutC = S::kOutNhwc ? 1 : kPixels;
  static constexpr long long kOutY = S::kOutNhwc ? (long long)S::kOW * S::kCout : S::kOW;
  static constexpr long long kOutX = S::kOutNhwc ? S::kCout : 1;
  static constexpr long long kOutN = (long long)S::kCout * kPixels;
  static constexpr long long kWO = (long long)kCinG * S::kKH * S::kKW;  // both layouts
  static constexpr long long kWI = S::kWNhwc ? 1 : S::kKH * S::kKW;
  static constexpr long long kWY = S::kWNhwc ? (long long)S::kKW * kCinG : S::kKW;
  static constexpr long long kWX = S::kWNhwc ? kCinG : 1;
  static_assert(S::kCin % kGroups == 0 && S::kCout % kGroups == 0, "groups divide the channels");
  // (Except a row-fast thread's channel pair: two groups of one channel, below.)
  static_assert(kGroups == 1 || kCoutG % S::kCoTile == 0 || (S::kRowFast != 0 && kCoutG == 1),
                "a thread's channels in one group");
  static_assert(!kChannelFast || (S::kCoTile == 1 && kCinG == 1 && kPix >= 1 && kPix <= 8),
                "channel-fast (depthwise): one output channel of up to 8 columns a thread");
  static_assert(!kRowFast || (!kChannelFast && kCinG == 1 && kRows >= 1 && kRows <= 8 && S::kKH * S::kKW <= 49 &&
                              (S::kCoTile == 1 ||
                               (S::kCoTile == 2 && kCoutG == 1 && S::kInNhwc && S::kCout % 2 == 0 &&
                                sizeof(typename S::storage) == 2 && S::kKH * S::kKW <= 9))),
                "row-fast (depthwise): one output channel of up to 8 rows a thread, up to 49 taps, or a pair "
                "of a channels-last 16-bit input's channels, up to 9 taps");
  // A channels-last input whose pixels and groups start on 16-byte boundaries (with an aligned
  // pointer, checked at run time): a pixel's channels read 16 bytes a load.
  static constexpr int kVec = Vec16<typename S::storage>::kN;
  static constexpr bool kVecIn = S::kInNhwc && kCinG % kVec == 0 && S::kCin % kVec == 0;
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "whole warps, at most 1024 threads");
  static_assert(S::kCoTile >= 1 && S::kCoTile <= 16, "1 to 16 output channels a thread");
};

// A storage element widened to fp32 (exactly), through the read-only cache.
__device__ __forceinline__ float load_op(const float* p) {
  return __ldg(p);
}
__device__ __forceinline__ double load_op(const double* p) {
  return __ldg(p);
}
__device__ __forceinline__ float load_op(const ew_half* p) {
  ew_half h;
  h.bits = __ldg(reinterpret_cast<const unsigned short*>(p));
  return ew_traits<ew_half>::to_op(h);
}
__device__ __forceinline__ float load_op(const ew_bf16* p) {
  ew_bf16 h;
  h.bits = __ldg(reinterpret_cast<const unsigned short*>(p));
  return ew_traits<ew_bf16>::to_op(h);
}

// a * b + c rounded once, in the opmath type.
__device__ __forceinline__ float fma_op(float a, float b, float c) {
  return __fmaf_rn(a, b, c);
}
__device__ __forceinline__ double fma_op(double a, double b, double c) {
  return __fma_rn(a, b, c);
}

// 16 bytes of storage elements (2 f64, 4 f32, 8 f16 or bf16) at a 16-byte aligned p, widened to opmath.
__device__ __forceinline__ void load16(const double* p, double (&x)[2]) {
  const double2 v = __ldg(reinterpret_cast<const double2*>(p));
  x[0] = v.x, x[1] = v.y;
}
__device__ __forceinline__ void load16(const float* p, float (&x)[4]) {
  const float4 v = __ldg(reinterpret_cast<const float4*>(p));
  x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w;
}
template <class H>
__device__ __forceinline__ void load16(const H* p, float (&x)[8]) {
  const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
  const unsigned words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    H h;
    h.bits = static_cast<unsigned short>(words[i / 2] >> (16 * (i % 2)));
    x[i] = ew_traits<H>::to_op(h);
  }
}

// Two adjacent 16-bit storage elements at a 4-byte aligned p, widened to fp32 / stored as one word.
template <class H>
__device__ __forceinline__ void load_pair(const H* p, float& x0, float& x1) {
  const unsigned v = __ldg(reinterpret_cast<const unsigned*>(p));
  H h0, h1;
  h0.bits = static_cast<unsigned short>(v), h1.bits = static_cast<unsigned short>(v >> 16);
  x0 = ew_traits<H>::to_op(h0), x1 = ew_traits<H>::to_op(h1);
}
template <class H>
__device__ __forceinline__ void store_pair(H* p, H y0, H y1) {
  *reinterpret_cast<unsigned*>(p) = static_cast<unsigned>(y0.bits) | static_cast<unsigned>(y1.bits) << 16;
}

}  // namespace cuinline_conv2d_generic_detail

/// input, weight, output and residual in the layouts of S (see the file comment); bias [kCout]
/// (ignored unless kHasBias); residual of the output's shape and layout (ignored unless
/// kHasResidual). Grid: (kTilesX, ceil(kCout / kCoTile), N); block: kThreads; no shared memory.
/// row_tiles is unused (the launch passes the same arguments to every conv2d kernel).
template <class S, class E>
__global__ void __launch_bounds__(S::kThreads)
    cuinline_conv2d_generic(const typename S::storage* __restrict__ input,
                            const typename S::storage* __restrict__ weight,
                            const typename S::storage* __restrict__ bias, typename S::storage* __restrict__ output,
                            int row_tiles, const typename S::storage* __restrict__ residual,
                            const cuinline_conv2d_chan chan) {
  using P = cuinline_conv2d_generic_detail::Plan<S>;
  const E ep{chan};
  using T = typename S::storage;
  using A = typename ew_traits<T>::op;  // opmath: float, or double for f64
  using cuinline_conv2d_generic_detail::fma_op;
  using cuinline_conv2d_generic_detail::load_op;
  using cuinline_conv2d_generic_detail::load_pair;
  using cuinline_conv2d_generic_detail::store_pair;
  (void)row_tiles;
  const long long item = (long long)blockIdx.x * P::kThreads + threadIdx.x;
  if (item >= P::kItems) return;
  const long long n = blockIdx.z;
  if constexpr (P::kChannelFast) {
    // Depthwise, channels-last input: output channel co of columns ox0 .. ox0 + kPix - 1 of row oy;
    // its input channel is co's group's one.
    const long long group_item = item / S::kCout;
    const int co = (int)(item - group_item * S::kCout);
    const int oy = (int)(group_item / P::kColGroups);
    const int ox0 = (int)(group_item - (long long)oy * P::kColGroups) * P::kPix;
    const T* in_c = input + n * P::kInN + (long long)(co / P::kCoutG) * P::kInC;
    const T* w_co = weight + co * P::kWO;
    // (Several columns: the taps' weights once, in registers; one: loaded beside each input.)
    constexpr int kTaps = S::kKH * S::kKW;
    A w[P::kPix > 1 ? kTaps : 1];
    if constexpr (P::kPix > 1) {
#pragma unroll
      for (int t = 0; t < kTaps; ++t) w[t] = load_op(w_co + (t / S::kKW) * P::kWY + (t % S::kKW) * P::kWX);
    }
    const A b = S::kHasBias ? load_op(bias + co) : A(0);
#pragma unroll
    for (int p = 0; p < P::kPix; ++p) {
      const int ox = ox0 + p;
      if (P::kPix > 1 && ox >= S::kOW) break;
      A acc = A(0);
#pragma unroll
      for (int kh = 0; kh < S::kKH; ++kh) {
        const int iy = oy * S::kSH - S::kPH + kh * S::kDH;
        if (iy < 0 || iy >= S::kH) continue;  // zero padding
#pragma unroll
        for (int kw = 0; kw < S::kKW; ++kw) {
          const int ix = ox * S::kSW - S::kPW + kw * S::kDW;
          if (ix < 0 || ix >= S::kW) continue;
          const A wt = P::kPix > 1 ? w[kh * S::kKW + kw] : load_op(w_co + kh * P::kWY + kw * P::kWX);
          acc = fma_op(load_op(in_c + iy * P::kInY + ix * P::kInX), wt, acc);
        }
      }
      // As below: conv + bias, rounded, + residual, rounded, the epilogue, one rounding to T.
      A v = acc + b;
      const long long at = n * P::kOutN + oy * P::kOutY + ox * P::kOutX + co * P::kOutC;
      if (S::kHasResidual) v += load_op(residual + at);
      output[at] = ew_traits<T>::from_op(ep(v, co));
    }
    return;
  }
  if constexpr (P::kRowFast) {
    // Output channels co .. co + kCh - 1 (kCh = kCoTile: 1, or 2 adjacent channels of a channels-last
    // 16-bit input), rows oy0 .. oy0 + kRows - 1 of column ox; input row j of the span feeds output
    // row p where j - p kSH is a filter row's offset kh kDH. Each output's sum runs over kh, then kw,
    // as below; taps in the padding are skipped (not multiplied by zero).
    // (Items: with a channels-last input channels fastest, else columns fastest, so that a warp's
    // loads are consecutive elements.)
    constexpr int kCh = S::kCoTile;
    constexpr int kChGroups = S::kCout / kCh;
    int ox, oy0, co;
    if constexpr (S::kInNhwc) {
      co = (int)(item % kChGroups) * kCh;
      const long long rest = item / kChGroups;
      ox = (int)(rest % S::kOW);
      oy0 = (int)(rest / S::kOW) * P::kRows;
    } else {
      ox = (int)(item % S::kOW);
      const long long rest = item / S::kOW;
      oy0 = (int)(rest % P::kRowGroups) * P::kRows;
      co = (int)(rest / P::kRowGroups);
    }
    // (A pair's input channels are co, co + 1 too: one output channel a group.)
    const T* in_c = input + n * P::kInN + (long long)(co / P::kCoutG) * P::kInC;
    constexpr int kTaps = S::kKH * S::kKW;
    A w[kCh][kTaps];
#pragma unroll
    for (int c = 0; c < kCh; ++c) {
#pragma unroll
      for (int t = 0; t < kTaps; ++t) {
        w[c][t] = load_op(weight + (co + c) * P::kWO + (t / S::kKW) * P::kWY + (t % S::kKW) * P::kWX);
      }
    }
    A acc[kCh][P::kRows];
#pragma unroll
    for (int c = 0; c < kCh; ++c) {
#pragma unroll
      for (int p = 0; p < P::kRows; ++p) acc[c][p] = A(0);
    }
    // A pair is read (and stored) as one 32-bit word where the pointers allow it.
    const bool words = kCh == 2 && ((reinterpret_cast<unsigned long long>(input) |
                                     reinterpret_cast<unsigned long long>(output) |
                                     (S::kHasResidual ? reinterpret_cast<unsigned long long>(residual) : 0ull)) &
                                    3) == 0;
    constexpr int kSpan = (P::kRows - 1) * S::kSH + (S::kKH - 1) * S::kDH + 1;  // input rows
    const int ix0 = ox * S::kSW - S::kPW;
    const bool interior = ix0 >= 0 && ix0 + (S::kKW - 1) * S::kDW < S::kW;
    const int iy0 = oy0 * S::kSH - S::kPH;
#pragma unroll
    for (int j = 0; j < kSpan; ++j) {
      const int iy = iy0 + j;
      if (iy < 0 || iy >= S::kH) continue;  // zero padding
      const T* row = in_c + iy * P::kInY;
      A xs[kCh][S::kKW];
      bool ok[S::kKW];
#pragma unroll
      for (int kw = 0; kw < S::kKW; ++kw) {
        const int ix = ix0 + kw * S::kDW;
        ok[kw] = interior || (ix >= 0 && ix < S::kW);
        if constexpr (kCh == 2) {
          if (!ok[kw]) {
            xs[0][kw] = xs[1][kw] = A(0);
          } else if (words) {
            load_pair(row + ix * P::kInX, xs[0][kw], xs[1][kw]);
          } else {
            xs[0][kw] = load_op(row + ix * P::kInX);
            xs[1][kw] = load_op(row + ix * P::kInX + 1);
          }
        } else {
          xs[0][kw] = ok[kw] ? load_op(row + ix * P::kInX) : A(0);
        }
      }
#pragma unroll
      for (int p = 0; p < P::kRows; ++p) {
        const int off = j - p * S::kSH;  // kh * kDH (compile-time after unrolling)
        if (off < 0 || off % S::kDH != 0 || off / S::kDH >= S::kKH) continue;
        const int kh = off / S::kDH;
#pragma unroll
        for (int kw = 0; kw < S::kKW; ++kw) {
#pragma unroll
          for (int c = 0; c < kCh; ++c) {
            if (ok[kw]) acc[c][p] = fma_op(xs[c][kw], w[c][kh * S::kKW + kw], acc[c][p]);
          }
        }
      }
    }
    A b[kCh];
#pragma unroll
    for (int c = 0; c < kCh; ++c) b[c] = S::kHasBias ? load_op(bias + co + c) : A(0);
#pragma unroll
    for (int p = 0; p < P::kRows; ++p) {
      const int oy = oy0 + p;
      if (S::kOH % P::kRows != 0 && oy >= S::kOH) break;
      // As below: conv + bias, rounded, + residual, rounded, the epilogue, one rounding to T.
      const long long at = n * P::kOutN + co * P::kOutC + oy * P::kOutY + ox * P::kOutX;
      A v[kCh];
#pragma unroll
      for (int c = 0; c < kCh; ++c) v[c] = acc[c][p] + b[c];
      if constexpr (kCh == 2 && S::kOutNhwc) {  // the pair adjacent in the output too
        if (words) {
          if (S::kHasResidual) {
            A r0, r1;
            load_pair(residual + at, r0, r1);
            v[0] += r0, v[1] += r1;
          }
          store_pair(output + at, ew_traits<T>::from_op(ep(v[0], co)), ew_traits<T>::from_op(ep(v[1], co + 1)));
          continue;
        }
      }
#pragma unroll
      for (int c = 0; c < kCh; ++c) {
        if (S::kHasResidual) v[c] += load_op(residual + at + c * P::kOutC);
        output[at + c * P::kOutC] = ew_traits<T>::from_op(ep(v[c], co + c));
      }
    }
    return;
  }
  // The block column's kCoTile channels of one pixel a thread.
  const long long pix = item;
  const int oy = (int)(pix / S::kOW);
  const int ox = (int)(pix - (long long)oy * S::kOW);
  const int co0 = blockIdx.y * S::kCoTile;
  // (Grouped: the input channels of co0's group.)
  const T* in_n = input + n * P::kInN + (P::kGroups == 1 ? 0 : (long long)(co0 / P::kCoutG) * P::kCinG * P::kInC);
  const T* w_co = weight + co0 * P::kWO;

  A acc[S::kCoTile];
#pragma unroll
  for (int c = 0; c < S::kCoTile; ++c) acc[c] = A(0);
  const bool vec_in = P::kVecIn && (reinterpret_cast<unsigned long long>(input) & 15) == 0;

#pragma unroll 1
  for (int kh = 0; kh < S::kKH; ++kh) {
    const int iy = oy * S::kSH - S::kPH + kh * S::kDH;
    if (iy < 0 || iy >= S::kH) continue;  // zero padding
#pragma unroll 1
    for (int kw = 0; kw < S::kKW; ++kw) {
      const int ix = ox * S::kSW - S::kPW + kw * S::kDW;
      if (ix < 0 || ix >= S::kW) continue;
      const T* src = in_n + iy * P::kInY + ix * P::kInX;
      const T* wp = w_co + kh * P::kWY + kw * P::kWX;
      if constexpr (P::kVecIn) {
        if (vec_in) {
          // The same sums in the same order as the loop below, 16 bytes of channels a load.
#pragma unroll 1
          for (int cv = 0; cv < P::kCinG; cv += P::kVec) {
            A xs[P::kVec];
            cuinline_conv2d_generic_detail::load16(src + cv * P::kInC, xs);
#pragma unroll
            for (int j = 0; j < P::kVec; ++j) {
#pragma unroll
              for (int c = 0; c < S::kCoTile; ++c) {
                if (S::kCout % S::kCoTile != 0 && co0 + c >= S::kCout) break;
                acc[c] = fma_op(xs[j], load_op(wp + c * P::kWO + (cv + j) * P::kWI), acc[c]);
              }
            }
          }
          continue;
        }
      }
#pragma unroll 4
      for (int ci = 0; ci < P::kCinG; ++ci) {
        const A x = load_op(src + ci * P::kInC);
#pragma unroll
        for (int c = 0; c < S::kCoTile; ++c) {
          if (S::kCout % S::kCoTile != 0 && co0 + c >= S::kCout) break;
          acc[c] = fma_op(x, load_op(wp + c * P::kWO + ci * P::kWI), acc[c]);
        }
      }
    }
  }

  const long long out_pix = n * P::kOutN + oy * P::kOutY + ox * P::kOutX;
#pragma unroll
  for (int c = 0; c < S::kCoTile; ++c) {
    const int co = co0 + c;
    if (S::kCout % S::kCoTile != 0 && co >= S::kCout) break;
    // conv + bias, rounded, then + residual, rounded (PyTorch's two adds), then the epilogue: all
    // fp32, as the fp32 kernels do; one rounding to the storage type.
    A v = acc[c] + (S::kHasBias ? load_op(bias + co) : A(0));
    const long long at = out_pix + co * P::kOutC;
    if (S::kHasResidual) v += load_op(residual + at);
    output[at] = ew_traits<T>::from_op(ep(v, co));
  }
}

#endif  // CUINLINE_CONV2D_GENERIC_CUH
