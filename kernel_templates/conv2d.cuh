// conv2d.cuh — fused direct convolution (NCHW, float32, groups = 1) with a bias and an elementwise
// epilogue, compiled by NVRTC with every shape parameter a compile-time constant.
//
// The rendered program defines a shape struct S (all constants below) and an epilogue functor E
// (`__device__ float operator()(float) const`), then names `cuinline_conv2d<S, E>`.
//
// Work split: a block computes kTY output rows x kTX*kTP output columns x kTG*kTC output channels
// of one image. Each thread owns kTP consecutive output columns x kTC output channels in registers
// (an outer-product register tile). With kTK > 1 the block has kTK such thread sets, each summing
// its own slice of every staged channel chunk; the partial tiles are added in shared memory (in
// slice order) before the epilogue: more threads for shapes with few outputs and long reductions. The input
// tile (with its halo) and the block's weights are staged in shared memory, kCiChunk input channels at a
// time; weights are read as warp-wide broadcasts (every lane of a warp shares one channel group), inputs as
// 16-byte loads whose quarter-warps touch 32 distinct banks. The filter loops are unrolled (kKhUnroll filter
// rows at a time, every filter column). Where the filter's reach along an axis is no larger than the stride
// (1x1 stride 2, say), the stage is compact: it holds only the input rows / columns the filter reads, kKH
// (kKW) per output. With a column stride kSW > 1 and a wider reach (3x3 stride 2, say), kColPhases = kSW
// splits every staged row into kSW phases (input columns of one residue mod kSW, in order): a thread's
// outputs then read consecutive floats of each phase, so its 16-byte loads sit 16 bytes from its
// neighbour's (a plain row puts them kTP * kSW floats apart: 2-way bank conflicts at stride 2).
//
// Required members of S (all `static constexpr int`):
//   kCin, kH, kW, kCout, kKH, kKW, kSH, kSW, kPH, kPW, kDH, kDW, kOH, kOW, kHasBias, kHasResidual
//   kTX, kTY, kTG (threads along x, y and channel groups), kTP, kTC (per-thread tile),
//   kTK (thread sets that split each channel chunk), kCiChunk (input channels per shared-memory
//   stage), kCiUnroll (unroll of that loop), kKhUnroll (unroll of the filter-row loop),
//   kMinBlocks (resident blocks per multiprocessor asked of ptxas: caps registers per thread),
//   kColPhases (1, or kSW to stage each row as kSW column phases: needs a non-compact column axis),
//   kPipeline: 0 = one buffer, every channel chunk copied then computed;
//              1 = row-tile pipeline (needs kCiChunk == kCin): weights staged once, the input tile
//                  double-buffered; a block computes the kernel argument `row_tiles` row tiles in
//                  turn, copying the next tile while computing this one;
//              2 = channel-chunk pipeline: input and weights of chunk k + 1 are copied while chunk
//                  k is computed (two buffers of each);
//   kOutAligned (1: the output and residual pointers are 16-byte aligned, so the output is stored in
//     vectors; 0: one value a store).
// The batch size and row_tiles are run-time arguments.
// Shared memory is dynamic: Plan<S>::kSmemBytes (conv2d_plan.cuh, which the host compiles too).
// No standard or toolkit headers: NVRTC's built-ins (float4, __ldg, __stcs) are enough.

#ifndef CUINLINE_CONV2D_CUH
#define CUINLINE_CONV2D_CUH

#include "conv2d_plan.cuh"

namespace cuinline_conv2d_detail {

template <class S>
struct Plan {
  // The figures of conv2d_plan.cuh (what they are is said there).
  static constexpr int kSetThreads = kDirectPlanFigures<S>.set_threads;
  static constexpr int kThreads = kDirectPlanFigures<S>.threads;
  static constexpr int kBlockCout = kDirectPlanFigures<S>.block_cout;
  static constexpr int kTileCols = kDirectPlanFigures<S>.tile_cols;
  static constexpr int kTilesX = kDirectPlanFigures<S>.tiles_x;
  static constexpr bool kCompactH = kDirectPlanFigures<S>.compact_h;
  static constexpr bool kCompactW = kDirectPlanFigures<S>.compact_w;
  static constexpr int kRowStep = kDirectPlanFigures<S>.row_step;
  static constexpr int kRowDil = kDirectPlanFigures<S>.row_dil;
  static constexpr int kColStep = kDirectPlanFigures<S>.col_step;
  static constexpr int kColDil = kDirectPlanFigures<S>.col_dil;
  static constexpr int kInRows = kDirectPlanFigures<S>.in_rows;
  static constexpr int kInCols = kDirectPlanFigures<S>.in_cols;
  static constexpr bool kSplit = kDirectPlanFigures<S>.split;
  static constexpr int kPhases = kDirectPlanFigures<S>.phases;
  // Staged columns of phase ph one thread reads per filter row (0: none).
  __host__ __device__ static constexpr int phase_need(int ph) { return direct_phase_need(direct_plan_shape<S>(), ph); }
  static constexpr int kNeed = kDirectPlanFigures<S>.need;
  static constexpr bool kVecIn = kDirectPlanFigures<S>.vec_in;
  static constexpr int kNeedPad = kDirectPlanFigures<S>.need_pad;
  static constexpr int kLastRead = kDirectPlanFigures<S>.last_read;
  static constexpr int kPhaseCols = kDirectPlanFigures<S>.phase_cols;
  static constexpr int kPitchRaw = kDirectPlanFigures<S>.pitch_raw;
  static constexpr int kPhasePitch = kDirectPlanFigures<S>.phase_pitch;
  static constexpr int kPitch = kDirectPlanFigures<S>.pitch;
  static constexpr int kInFloats = (int)kDirectPlanFigures<S>.in_floats;
  static constexpr int kTaps = kDirectPlanFigures<S>.taps;
  static constexpr int kWPitch = kDirectPlanFigures<S>.w_pitch;
  static constexpr int kWFloats = (int)kDirectPlanFigures<S>.w_floats;
  static constexpr bool kVecW = kDirectPlanFigures<S>.vec_w;
  static constexpr int kTilesY = kDirectPlanFigures<S>.tiles_y;
  static constexpr int kBuffers = kDirectPlanFigures<S>.buffers;
  static constexpr int kWBuffers = kDirectPlanFigures<S>.w_buffers;
  static constexpr int kStageFloats = (int)kDirectPlanFigures<S>.stage_floats;
  static constexpr int kRedFloats = (int)kDirectPlanFigures<S>.red_floats;
  static constexpr int kSmemFloats = (int)kDirectPlanFigures<S>.smem_floats;
  static constexpr int kSmemBytes = (int)kDirectPlanFigures<S>.smem_bytes;
  static constexpr int kCiSlice = kDirectPlanFigures<S>.ci_slice;
  static constexpr int kStoreVec = kDirectPlanFigures<S>.store_vec;
  static_assert(kThreads <= 1024, "block too large");
  static_assert(kThreads % 32 == 0, "whole warps");
  static_assert(S::kCin % S::kCiChunk == 0, "kCiChunk must divide kCin");
  static_assert(S::kCiChunk % S::kTK == 0, "kTK must divide kCiChunk");
  static_assert(S::kKH % S::kKhUnroll == 0, "kKhUnroll must divide kKH");
  static_assert(S::kPipeline != 1 || S::kCiChunk == S::kCin, "the row-tile pipeline needs one input stage");
  static_assert(S::kPipeline >= 0 && S::kPipeline <= 2, "kPipeline is 0, 1 or 2");
  static_assert(S::kColPhases == 1 || (S::kColPhases == S::kSW && !kCompactW),
                "kColPhases is 1, or kSW with a non-compact column axis");
};

// CUINLINE_CONV2D_SYNC_COPIES (rendered for the sm75 target; also below sm_80, which has no
// cp.async): the copies below are plain loads and stores, done when issued. Every caller already
// waits (copy_async_wait) and then synchronizes the block before it reads a stage, and never
// writes a buffer that is still being read (an asynchronous copy could land at any time), so the
// same kernel is correct either way.
#if !defined(CUINLINE_CONV2D_SYNC_COPIES) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define CUINLINE_CONV2D_SYNC_COPIES 1
#endif

// 4-byte asynchronous copy global -> shared (LDGSTS); with `valid` false it writes a zero and
// reads nothing. Every copy of a stage is in flight at once, so a stage costs about one latency.
__device__ __forceinline__ void copy_async(float* dst, const float* src, bool valid) {
#ifdef CUINLINE_CONV2D_SYNC_COPIES
  *dst = valid ? __ldg(src) : 0.0f;
#else
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 4 : 0));
#endif
}
// The same for 16 bytes (both addresses 16-byte aligned), bypassing L1 (cp.async.cg).
__device__ __forceinline__ void copy_async16(float* dst, const float* src, bool valid) {
#ifdef CUINLINE_CONV2D_SYNC_COPIES
  *reinterpret_cast<float4*>(dst) = valid ? __ldg(reinterpret_cast<const float4*>(src)) : make_float4(0.f, 0.f, 0.f, 0.f);
#else
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 16 : 0));
#endif
}
__device__ __forceinline__ void copy_async_commit() {
#ifndef CUINLINE_CONV2D_SYNC_COPIES
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int kPending>
__device__ __forceinline__ void copy_async_wait() {
#ifndef CUINLINE_CONV2D_SYNC_COPIES
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
#endif
}

// Stages input channels [cb, cb + kCiChunk) of image `in_n` (tile origin iy0, ix0, zero outside the
// image: that is the padding) and the matching weights of channels [co0, co0 + kBlockCout).
template <class S>
__device__ __forceinline__ void stage_input(const float* __restrict__ in_n, float* s_in, int cb, int iy0,
                                            int ix0) {
  using P = Plan<S>;
  // Rows of the stage are spread over groups of kLanes threads (the fewest power of two that spans a
  // row, at most a warp; 16 where that leaves fewer lanes idle, as for 65 columns), each lane copying
  // every kLanes-th column. A lane's columns (their offsets in the image row and in the staged row,
  // and whether they fall inside the image) are worked out once per stage; a row costs its
  // coordinates and two pointers, a column one predicated copy at constant offsets from them (no
  // per-element index arithmetic). Out-of-image copies read nothing (source size 0), so their
  // addresses are not clamped. Measured (a tiling harness, H200, against the per-element
  // version this replaced): 16x64x56^2 -> 128 k3 s2 0.103 -> 0.087 ms, other stride-2 shapes 2-7 %
  // faster, stride-1 ones 2-4 % faster than a flat element index.
  constexpr int kFit = P::kInCols > 16 ? 32 : P::kInCols > 8 ? 16 : P::kInCols > 4 ? 8 : 4;
  constexpr int kLanes = kFit == 32 && (P::kInCols + 15) / 16 * 16 < (P::kInCols + 31) / 32 * 32 ? 16 : kFit;
  constexpr int kGroups = P::kThreads / kLanes;
  constexpr int kRowsAll = S::kCiChunk * P::kInRows;
  constexpr int kIters = (P::kInCols + kLanes - 1) / kLanes;
  // Phases of a split row whose lane pattern repeats every kLanes columns: a column's staged offset
  // is the lane's plus a constant.
  constexpr bool kRegular = !P::kSplit || kLanes % S::kSW == 0;
  const int lane = threadIdx.x % kLanes;
  // Source and staged offsets of the lane's columns: for a plain column axis (and a regular split)
  // they are the lane's plus constants, which the copies take as immediate offsets.
  int src_col[kIters], dst_col[kIters];
  bool col_ok[kIters];
#pragma unroll
  for (int j = 0; j < kIters; ++j) {
    const int c = j * kLanes + lane;
    src_col[j] = P::kCompactW ? c / S::kKW * S::kSW + c % S::kKW * S::kDW : c;
    dst_col[j] = P::kSplit ? c % S::kSW * P::kPhasePitch + c / S::kSW : c;
    col_ok[j] = (P::kInCols % kLanes == 0 || c < P::kInCols) && ix0 + src_col[j] >= 0 && ix0 + src_col[j] < S::kW;
  }
  // Image columns linear in the staged ones (all but a compact axis of a filter wider than 1).
  constexpr bool kLinear = !P::kCompactW || S::kKW == 1;
  constexpr int kColStride = P::kCompactW ? S::kSW : 1;  // image columns a staged column (kLinear)
  const float* src_lane = in_n + (ix0 + (kLinear ? lane * kColStride : 0));
  float* dst_lane = s_in + (kRegular ? dst_col[0] : 0);
#pragma unroll 2
  for (int rr = threadIdx.x / kLanes; rr < kRowsAll; rr += kGroups) {
    const int ci = rr / P::kInRows;
    const int r = rr - ci * P::kInRows;
    const int iy = P::kCompactH ? iy0 + r / S::kKH * S::kSH + r % S::kKH * S::kDH : iy0 + r;
    const bool row_inside = static_cast<unsigned>(iy) < static_cast<unsigned>(S::kH);
    const float* src = src_lane + ((cb + ci) * (S::kH * S::kW) + iy * S::kW);
    float* dst = dst_lane + rr * P::kPitch;  // rr == ci * kInRows + r
#pragma unroll
    for (int j = 0; j < kIters; ++j) {
      if (P::kInCols % kLanes == 0 || j * kLanes + lane < P::kInCols) {
        const float* s = kLinear ? src + j * kLanes * kColStride : src + src_col[j];
        float* d = !kRegular ? dst + dst_col[j] : dst + j * (P::kSplit ? kLanes / S::kSW : kLanes);
        copy_async(d, s, row_inside && col_ok[j]);
      }
    }
  }
}

template <class S>
__device__ __forceinline__ void stage_weights(const float* __restrict__ weight, float* s_w, int cb, int co0) {
  using P = Plan<S>;
  constexpr int kPerCout = S::kCiChunk * P::kTaps;  // contiguous in the [Cout][Cin][KH][KW] weight
  // kL consecutive lanes copy kL consecutive floats of one output channel's run; a thread keeps its
  // channel and steps through the run at a constant stride, so the copies take immediate offsets
  // from one source and one staged pointer. Staged every chunk, kL = 8 where the block allows: a
  // warp reads 4 runs of 32 bytes and, thanks to the padded pitch, writes 32 distinct banks.
  // Measured (a tiling harness, H200) against the element index over [channel][run] it
  // replaced (coalesced reads, but a warp's 32 writes in one bank): 16x64x56^2 -> 128 k3 s2 0.088 ->
  // 0.074 ms, 8x32x112^2 -> 64 k5 0.319 -> 0.254, 32x64x56^2 -> 64 k3 0.252 -> 0.212. Staged once a
  // block (unpadded pitch), kL = 1: consecutive lanes take consecutive channels (conflict-free
  // writes; 4 lanes a run measured 6 % slower on 32x3x224^2 -> 64 k7 s2, 4-way conflicts).
  constexpr int kMaxL = S::kPipeline == 1 ? 1 : 8;
  constexpr auto fits = [](int l) {
    return l <= kMaxL && l <= kPerCout && P::kThreads % (l * P::kBlockCout) == 0;
  };
  constexpr int kL = fits(8) ? 8 : fits(4) ? 4 : fits(2) ? 2 : fits(1) ? 1 : 0;
  if constexpr (kL > 0) {
    constexpr int kStep = P::kThreads / P::kBlockCout;  // runs' floats copied at once
    const int co = threadIdx.x / kL % P::kBlockCout;
    const bool inside = S::kCout % P::kBlockCout == 0 || co0 + co < S::kCout;
    const float* src = weight + ((long long)(co0 + co) * (S::kCin * P::kTaps) + cb * P::kTaps);
    float* dst = s_w + co;
#pragma unroll 4
    for (int rest = threadIdx.x / (kL * P::kBlockCout) * kL + threadIdx.x % kL; rest < kPerCout; rest += kStep) {
      copy_async(dst + rest * P::kWPitch, src + rest, inside);
    }
  } else {
    // (A block size no multiple of the block's channels.)
    for (int i = threadIdx.x; i < P::kBlockCout * kPerCout; i += P::kThreads) {
      const int co = i / kPerCout;
      const int rest = i - co * kPerCout;
      const bool inside = S::kCout % P::kBlockCout == 0 || co0 + co < S::kCout;
      copy_async(s_w + rest * P::kWPitch + co,
                 weight + ((long long)(co0 + co) * (S::kCin * P::kTaps) + cb * P::kTaps + rest), inside);
    }
  }
}

// Outputs are written once and not read again: streaming stores keep them from evicting the input
// tiles other blocks still read from L2.
template <class T>
__device__ __forceinline__ void store_streaming(T* p, T v) {
#ifdef CUINLINE_CONV2D_PLAIN_STORES
  *p = v;
#else
  __stcs(p, v);
#endif
}

template <class S, class E>
__device__ __forceinline__ void store_row(float* __restrict__ dst, const float (&acc)[S::kTP], float b,
                                          int ox, const float* __restrict__ res, const E& ep, int co) {
  using P = Plan<S>;
  float v[S::kTP];
#pragma unroll
  for (int p = 0; p < S::kTP; ++p) {
    // conv + bias, rounded, then + residual, rounded (PyTorch's two adds), then the epilogue.
    v[p] = acc[p] + b;
    if (S::kHasResidual && ox + p < S::kOW) v[p] += __ldg(res + p);
    v[p] = ep(v[p], co);
  }
  if (P::kStoreVec == 4) {
#pragma unroll
    for (int p = 0; p < S::kTP; p += 4) {
      if (ox + p < S::kOW)
        store_streaming(reinterpret_cast<float4*>(dst + p), make_float4(v[p], v[p + 1], v[p + 2], v[p + 3]));
    }
  } else if (P::kStoreVec == 2) {
#pragma unroll
    for (int p = 0; p < S::kTP; p += 2) {
      if (ox + p < S::kOW) store_streaming(reinterpret_cast<float2*>(dst + p), make_float2(v[p], v[p + 1]));
    }
  } else {
#pragma unroll
    for (int p = 0; p < S::kTP; ++p) {
      if (ox + p < S::kOW) store_streaming(dst + p, v[p]);
    }
  }
}

// N floats of shared memory into r[0, N), as float4 loads (then a float2 and a float for the rest)
// when p is 16-byte aligned (Vec).
template <int N, bool Vec, int M>
__device__ __forceinline__ void cv_load_floats(float (&r)[M], const float* p) {
  static_assert(N <= M, "register array too small");
  if (Vec) {
    constexpr int kQuads = N / 4 * 4;
#pragma unroll
    for (int q = 0; q < kQuads; q += 4) {
      const float4 v = *reinterpret_cast<const float4*>(p + q);
      r[q] = v.x;
      r[q + 1] = v.y;
      r[q + 2] = v.z;
      r[q + 3] = v.w;
    }
    if constexpr (N % 4 >= 2) {
      const float2 v = *reinterpret_cast<const float2*>(p + kQuads);
      r[kQuads] = v.x;
      r[kQuads + 1] = v.y;
    }
    if constexpr (N % 2 == 1) r[N - 1] = p[N - 1];
  } else {
#pragma unroll
    for (int q = 0; q < N; ++q) r[q] = p[q];
  }
}

// Phases Ph .. kPhases - 1 of one staged row, each the floats its filter columns read.
template <class S, int Ph, int M>
__device__ __forceinline__ void load_phases(float (&r)[Plan<S>::kPhases][M], const float* row) {
  using P = Plan<S>;
  if constexpr (Ph < P::kPhases) {
    if constexpr (P::phase_need(Ph) > 0)
      cv_load_floats<P::phase_need(Ph), P::kVecIn>(r[Ph], row + Ph * P::kPhasePitch);
    load_phases<S, Ph + 1>(r, row);
  }
}

// N floats of registers into shared memory, as float4 stores when p is 16-byte aligned (Vec).
template <int N, bool Vec>
__device__ __forceinline__ void cv_store_floats(float* p, const float (&r)[N]) {
  if (Vec) {
#pragma unroll
    for (int q = 0; q < N; q += 4)
      *reinterpret_cast<float4*>(p + q) = make_float4(r[q], r[q + 1], r[q + 2], r[q + 3]);
  } else {
#pragma unroll
    for (int q = 0; q < N; ++q) p[q] = r[q];
  }
}

// acc += the contribution of the staged channel chunk: thread set tk sums channels
// [tk * kCiSlice, (tk + 1) * kCiSlice) of it.
template <class S>
__device__ __forceinline__ void accumulate(const float* s_in, const float* s_w, float (&acc)[S::kTC][S::kTP],
                                           int tx, int ty, int tg, int tk) {
  using P = Plan<S>;
  s_in += (tk * P::kCiSlice * P::kInRows + ty * P::kRowStep) * P::kPitch +
          tx * S::kTP * (P::kSplit ? 1 : P::kColStep);
  s_w += tk * P::kCiSlice * P::kTaps * P::kWPitch + tg * S::kTC;
#pragma unroll S::kCiUnroll
  for (int ci = 0; ci < P::kCiSlice; ++ci) {
#pragma unroll S::kKhUnroll
    for (int kh = 0; kh < S::kKH; ++kh) {
      const float* row = s_in + (ci * P::kInRows + kh * P::kRowDil) * P::kPitch;
      float r[P::kPhases][P::kNeedPad];
      if constexpr (P::kSplit) {
        load_phases<S, 0>(r, row);
      } else {
        cv_load_floats<P::kNeedPad, P::kVecIn>(r[0], row);
      }
#pragma unroll
      for (int kw = 0; kw < S::kKW; ++kw) {
        const float* wp = s_w + ((ci * S::kKH + kh) * S::kKW + kw) * P::kWPitch;
        float w[S::kTC];
        cv_load_floats<S::kTC, P::kVecW>(w, wp);
        // The staged float of output p, filter column kw.
        constexpr int kSW = P::kSplit ? S::kSW : 1;
        const int ph = P::kSplit ? kw * S::kDW % kSW : 0;
        const int off = P::kSplit ? kw * S::kDW / kSW : kw * P::kColDil;
        const int step = P::kSplit ? 1 : P::kColStep;
#pragma unroll
        for (int c = 0; c < S::kTC; ++c) {
#pragma unroll
          for (int p = 0; p < S::kTP; ++p) acc[c][p] = __fmaf_rn(r[ph][p * step + off], w[c], acc[c][p]);
        }
      }
    }
  }
}

// kTK > 1: thread sets 1 .. kTK - 1 leave their partial tiles in `red`, set 0 adds them in order.
// Returns whether this thread holds a finished tile. Every thread of the block must call it.
// Layout: [set - 1][channel][thread of the set][pixel], so a warp's accesses are contiguous.
template <class S>
__device__ __forceinline__ bool reduce_sets(float (&acc)[S::kTC][S::kTP], float* red, int tk, int lane) {
  using P = Plan<S>;
  constexpr int kSetFloats = S::kTC * P::kSetThreads * S::kTP;
  if (S::kTK == 1) return true;
  if (tk != 0) {
    float* dst = red + (tk - 1) * kSetFloats + lane * S::kTP;
#pragma unroll
    for (int c = 0; c < S::kTC; ++c) {
      float r[S::kTP];
#pragma unroll
      for (int p = 0; p < S::kTP; ++p) r[p] = acc[c][p];
      cv_store_floats<S::kTP, S::kTP % 4 == 0>(dst + c * P::kSetThreads * S::kTP, r);
    }
  }
  __syncthreads();
  if (tk != 0) return false;
  const float* src = red + lane * S::kTP;
#pragma unroll 1
  for (int k = 0; k < S::kTK - 1; ++k) {
#pragma unroll
    for (int c = 0; c < S::kTC; ++c) {
      float r[S::kTP];
      cv_load_floats<S::kTP, S::kTP % 4 == 0>(r, src + c * P::kSetThreads * S::kTP);
#pragma unroll
      for (int p = 0; p < S::kTP; ++p) acc[c][p] += r[p];
    }
    src += kSetFloats;
  }
  return true;
}

// Bias, epilogue and store of one thread's tile; resets acc to zero.
template <class S, class E>
__device__ __forceinline__ void finish(float (&acc)[S::kTC][S::kTP], const float* __restrict__ bias,
                                       float* __restrict__ output, int n, int co_base, int oy, int ox,
                                       const float* __restrict__ residual, const E& ep) {
  using P = Plan<S>;
  if (oy < S::kOH) {
#pragma unroll
    for (int c = 0; c < S::kTC; ++c) {
      const int co = co_base + c;
      if (S::kCout % P::kBlockCout != 0 && co >= S::kCout) break;
      const float b = S::kHasBias ? __ldg(bias + co) : 0.0f;
      const long long at = (((long long)n * S::kCout + co) * S::kOH + oy) * S::kOW + ox;
      store_row<S, E>(output + at, acc[c], b, ox, S::kHasResidual ? residual + at : nullptr, ep, co);
    }
  }
#pragma unroll
  for (int c = 0; c < S::kTC; ++c) {
#pragma unroll
    for (int p = 0; p < S::kTP; ++p) acc[c][p] = 0.0f;
  }
}

// The three staging pipelines (kPipeline 0, 1, 2), shared by this kernel and conv2d_mma.cuh. The
// kernel passes what differs as callables:
//   stage(in_buf, w_buf, cb, tile_y, weights): issue the copies of input channel chunk cb of tile row
//       tile_y into input buffer in_buf (and of the chunk's weights into w_buf when `weights`);
//   landed(in_buf, w_buf, weights): this thread's copies of those buffers completed (before the
//       barrier that publishes them: the tensor-core kernel rounds operands there);
//   compute(in_buf, w_buf): accumulate the staged chunk;
//   finish(tile_y): epilogue and store of tile row tile_y (resets the accumulators).
// kChunks channel chunks; kSyncBeforeFinish: finish() reuses the stage buffers (pipeline 0).
// pipeline 0: one buffer, each chunk copied then computed; 2: chunk k + 1 (input and weights) is
// copied while chunk k is computed; 1 (kChunks == 1): weights staged once, row tiles tile_y0 ..
// tile_y0 + row_tiles - 1 in turn, the next tile's input copied while this one is computed.
template <int kPipeline, int kChunks, int kTilesY, bool kSyncBeforeFinish, class Stage, class Landed,
          class Compute, class Finish>
__device__ __forceinline__ void run_pipeline(Stage&& stage, Landed&& landed, Compute&& compute,
                                             Finish&& finish, int tile_y0, int row_tiles) {
  if constexpr (kPipeline == 0) {
#pragma unroll 1
    for (int k = 0; k < kChunks; ++k) {
      if (k != 0) __syncthreads();
      stage(0, 0, k, tile_y0, true);
      copy_async_commit();
      copy_async_wait<0>();
      landed(0, 0, true);
      __syncthreads();
      compute(0, 0);
    }
    if (kSyncBeforeFinish) __syncthreads();
    finish(tile_y0);
  } else if constexpr (kPipeline == 2) {
    stage(0, 0, 0, tile_y0, true);
    copy_async_commit();
#pragma unroll 1
    for (int k = 0; k < kChunks; ++k) {
      if (k + 1 < kChunks) {
        stage((k + 1) & 1, (k + 1) & 1, k + 1, tile_y0, true);
        copy_async_commit();
        copy_async_wait<1>();
      } else {
        copy_async_wait<0>();
      }
      landed(k & 1, k & 1, true);
      __syncthreads();
      compute(k & 1, k & 1);
      __syncthreads();  // buffer k & 1 is overwritten by the copy issued in the next iteration
    }
    finish(tile_y0);
  } else {
    static_assert(kChunks == 1, "the row-tile pipeline stages all channels at once");
    stage(0, 0, 0, tile_y0, true);
    copy_async_commit();
#pragma unroll 1
    for (int r = 0; r < row_tiles; ++r) {
      const int tile_y = tile_y0 + r;
      if (tile_y >= kTilesY) break;
      if (r + 1 < row_tiles && tile_y + 1 < kTilesY) {
        stage((r + 1) & 1, 0, 0, tile_y + 1, false);
        copy_async_commit();
        copy_async_wait<1>();
      } else {
        copy_async_wait<0>();
      }
      landed(r & 1, 0, r == 0);
      __syncthreads();
      compute(r & 1, 0);
      finish(tile_y);
      __syncthreads();
    }
  }
}

}  // namespace cuinline_conv2d_detail

/// input [N][kCin][kH][kW], weight [kCout][kCin][kKH][kKW], bias [kCout] (ignored unless kHasBias),
/// output [N][kCout][kOH][kOW], residual of the output's shape (ignored unless kHasResidual; added
/// to conv + bias before the epilogue; must not overlap the output). Grid: (kTilesX * ceil(kTilesY / row_tiles), ceil(kCout / kBlockCout),
/// N); block: kThreads; dynamic shared memory: kSmemBytes. row_tiles must be 1 unless kPipeline == 1.
template <class S, class E>
__global__ void __launch_bounds__(cuinline_conv2d_detail::Plan<S>::kThreads, S::kMinBlocks)
    cuinline_conv2d(const float* __restrict__ input, const float* __restrict__ weight,
                    const float* __restrict__ bias, float* __restrict__ output, int row_tiles,
                    const float* __restrict__ residual, const cuinline_conv2d_chan chan) {
  using P = cuinline_conv2d_detail::Plan<S>;
  namespace d = cuinline_conv2d_detail;
  const E ep{chan};
  extern __shared__ __align__(16) float smem[];
  float* s_w = smem;
  float* s_in = smem + P::kWBuffers * P::kWFloats;

  const int tid = threadIdx.x;
  const int tx = tid % S::kTX;
  const int ty = (tid / S::kTX) % S::kTY;
  const int tg = (tid / (S::kTX * S::kTY)) % S::kTG;
  const int tk = tid / P::kSetThreads;
  const int lane = tid % P::kSetThreads;  // index within the thread set
  const int bx = blockIdx.x % P::kTilesX;
  const int tile_y0 = blockIdx.x / P::kTilesX * row_tiles;
  const int ox0 = bx * P::kTileCols;
  const int co0 = blockIdx.y * P::kBlockCout;
  const int n = blockIdx.z;
  const float* in_n = input + (long long)n * (S::kCin * S::kH * S::kW);
  const int ix0 = ox0 * S::kSW - S::kPW;
  const int ox = ox0 + tx * S::kTP;
  const int co_base = co0 + tg * S::kTC;

  float acc[S::kTC][S::kTP];
#pragma unroll
  for (int c = 0; c < S::kTC; ++c) {
#pragma unroll
    for (int p = 0; p < S::kTP; ++p) acc[c][p] = 0.0f;
  }

  // The reduction of the thread sets (kTK > 1) uses the stage buffers, or (row-tile pipeline) the
  // area after them.
  float* red = S::kPipeline == 1 ? smem + P::kStageFloats : smem;
  d::run_pipeline<S::kPipeline, S::kCin / S::kCiChunk, P::kTilesY, (S::kTK > 1)>(
      [&](int in_buf, int w_buf, int k, int tile_y, bool weights) {
        d::stage_input<S>(in_n, s_in + in_buf * P::kInFloats, k * S::kCiChunk,
                          tile_y * S::kTY * S::kSH - S::kPH, ix0);
        if (weights) d::stage_weights<S>(weight, s_w + w_buf * P::kWFloats, k * S::kCiChunk, co0);
      },
      [](int, int, bool) {},
      [&](int in_buf, int w_buf) {
        d::accumulate<S>(s_in + in_buf * P::kInFloats, s_w + w_buf * P::kWFloats, acc, tx, ty, tg, tk);
      },
      [&](int tile_y) {
        if (d::reduce_sets<S>(acc, red, tk, lane))
          d::finish<S, E>(acc, bias, output, n, co_base, tile_y * S::kTY + ty, ox, residual, ep);
      },
      tile_y0, row_tiles);
}

#endif  // CUINLINE_CONV2D_CUH
