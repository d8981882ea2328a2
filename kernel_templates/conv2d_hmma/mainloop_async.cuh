// conv2d_hmma/mainloop_async.cuh — the cp.async main loop (16-byte aligned channels-last input and
// weight; the pointwise form's NCHW input): mma.sync, or wgmma on sm_90a.

#ifndef CUINLINE_CONV2D_HMMA_MAINLOOP_ASYNC_CUH
#define CUINLINE_CONV2D_HMMA_MAINLOOP_ASYNC_CUH

namespace cuinline_conv2d_hmma_detail {

// The main loop through cp.async (P::kAsync: 16-byte aligned pointers): kStages buffers in a ring,
// step k + kStages - 1's copies issued while step k computes. Thread `tid` copies chunk tid %
// kChunks of A rows tid / kChunks + r * (kThreads / kChunks) and the same of the B rows. Chunks of
// channels >= kCin (kCin % 8 == 0: a chunk is all real or all padding) and of taps outside the image
// are zero-filled. The wgmma tiling computes k steps [step_begin, step_end) (the split form: a
// slice of the reduction, kWhole false; else all of them).
template <class S, bool kWhole = true>
__device__ __forceinline__ void mainloop_async(float (&acc)[S::kMT][S::kNT][4], unsigned short* s_stage,
                                               unsigned a_row, unsigned b_row,
                                               const typename S::storage* __restrict__ in_n,
                                               const typename S::storage* __restrict__ weight, int p0,
                                               int co0, int images = 1, int step_begin = 0,
                                               int step_end = Plan<S>::kSteps) {
  using P = Plan<S>;
  constexpr int kRowStep = P::kThreads / P::kChunks;  // rows a pass of the block covers
  constexpr int kARowsAsync = P::kBM / kRowStep;
  constexpr int kBRowsAsync = (P::kBN + kRowStep - 1) / kRowStep;
  static_assert(P::kThreads % P::kChunks == 0 && (P::kPointwise || P::kBM % kRowStep == 0), "whole A rows a pass");
  const int tid = threadIdx.x;
  const int chunk = tid % P::kChunks;
  const int row0 = tid / P::kChunks;
  int iy0[kARowsAsync], ix0[kARowsAsync];
  long long image[P::kBatchTiles ? kARowsAsync : 1] = {};  // (batch tiles: each row's image)
  if constexpr (P::kBatchTiles) {
#pragma unroll
    for (int r = 0; r < kARowsAsync; ++r) batch_origin<S>(p0 + row0 + r * kRowStep, images, iy0[r], ix0[r], image[r]);
  } else if constexpr (!P::kPointwise) {
#pragma unroll
    for (int r = 0; r < kARowsAsync; ++r) window_origin<S>(p0 + row0 + r * kRowStep, iy0[r], ix0[r]);
  }
  (void)images;
  constexpr unsigned kStageBytes = P::kStageElems * 2;
  // The pointwise form's A tile: kBK rows (input channels) of kBM pixels, kPwChunks 16-byte copies a
  // row, thread tid taking copies tid, tid + kThreads, ... of the tile (consecutive threads along a
  // row: a warp's copies are 512 contiguous bytes of one or two channels). A chunk lies wholly in or
  // past the plane (kPixels % kChunkElems == 0); channels past kCin are zeros.
  constexpr int kPwChunks = P::kBM * P::kElem / 16;
  constexpr int kPwCopies = P::kPointwise ? S::kBK * kPwChunks / P::kThreads : 0;

  auto issue = [&](int step, int buf) {
    // Two taps a step (kCin == 8): chunk c is tap 2 step + c (zeros past the last tap).
    const int tap = P::kTapsPerStep == 2 ? 2 * step + chunk : step / P::kCiSteps;
    const int ci = P::kTapsPerStep == 2 ? 0 : (step - tap * P::kCiSteps) * S::kBK + chunk * P::kChunkElems;
    const int kh = tap / S::kKW;
    const int kw = tap - kh * S::kKW;
    const bool ci_ok =
        P::kTapsPerStep == 2 ? P::kTaps % 2 == 0 || tap < P::kTaps : S::kCin % S::kBK == 0 || ci < S::kCin;
    unsigned short* s_a = s_stage + buf * P::kStageElems;
    unsigned short* s_b = s_a + P::kAElems;
    // Chunk `chunk` of tile row `row`: padded rows, or the wgmma tiling's swizzled ones.
    auto at = [&](int row) { return row * P::kTilePitch + (P::kWgmma ? P::swz(row, chunk) : chunk) * 8; };
    if constexpr (P::kPointwise) {
#pragma unroll
      for (int r = 0; r < kPwCopies; ++r) {
        const int q = tid + r * P::kThreads;
        const int k = q / kPwChunks;
        const int c = q - k * kPwChunks;
        const int ca = step * S::kBK + k;  // (one tap: the step's channels)
        const int p = p0 + c * P::kChunkElems;
        const bool ok = (S::kCin % S::kBK == 0 || ca < S::kCin) && (P::kPixels % P::kBM == 0 || p < P::kPixels);
        const typename S::storage* src = in_n + (ok ? (long long)ca * P::kPixels + p : 0);
        copy16_async<S::kCopyL2>(s_a + k * P::kAPitchT + c * 8, src, ok);
      }
    } else {
#pragma unroll
      for (int r = 0; r < kARowsAsync; ++r) {
        const int iy = iy0[r] + kh * S::kDH;
        const int ix = ix0[r] + kw * S::kDW;
        const bool ok = ci_ok && iy >= 0 && iy < S::kH && ix >= 0 && ix < S::kW;
        const long long at_image = P::kBatchTiles ? image[P::kBatchTiles ? r : 0] : 0;
        const typename S::storage* src = in_n + (ok ? at_image + (iy * S::kW + ix) * (long long)S::kCin + ci : 0);
        copy16_async<S::kCopyL2>(s_a + at(row0 + r * kRowStep), src, ok);
      }
    }
#pragma unroll
    for (int r = 0; r < kBRowsAsync; ++r) {
      const int n = row0 + r * kRowStep;
      if (P::kBN % kRowStep == 0 || n < P::kBN) {
        const int co = co0 + n;
        const bool ok = ci_ok && (S::kCout % P::kBN == 0 || co < S::kCout);
        const typename S::storage* src = weight + (ok ? co * P::kWO + (long long)tap * S::kCin + ci : 0);
        copy16_async<S::kCopyL2>(s_b + at(n), src, ok);
      }
    }
  };
  if constexpr (P::kWgmma) {
    // kStages - 2 steps' copies ahead, and one wgmma group in flight: step k's copies go into the
    // buffer of step k - 2, whose wgmma every thread has waited for (wgmma_wait<1> at the end of
    // step k - 1) before the barrier of step k. A whole reduction of fewer than kStages steps has a
    // buffer a step and one left over, none written twice: every step's copies are issued at once
    // (one memory latency, not one a step). (ResNet-50's 1 x 1 128 -> 512 + residual on 28², two
    // steps in three buffers, f16, H200: 0.0346 -> 0.0336 ms at batch 32, 0.0084 -> 0.0080 at batch
    // 1; with kSteps == kStages too, its 1 x 1 256 -> 64 on 56² moved by -6 % to +6 % with the batch,
    // so those keep two steps ahead.)
    constexpr int kAhead = kWhole && P::kSteps < P::kStages ? P::kSteps : P::kStages - 2;
    // (k counts the block's steps from step_begin: buffer k % kStages.)
    const int steps = step_end - step_begin;
#pragma unroll
    for (int s = 0; s < kAhead; ++s) {
      if (s < steps) issue(step_begin + s, s);
      copy_commit();
    }
    const unsigned base = smem_address(s_stage);
    const int warpgroup = (int)(threadIdx.x / 128);  // (kWarpsN = 1)
    (void)warpgroup;
#pragma unroll 1
    for (int k = 0; k < steps; ++k) {
      copy_wait<kAhead - 1>();  // this thread's copies of this step have landed
#if CUINLINE_CONV2D_HMMA_WGMMA
      fence_async_shared();     // ... and are visible to the tensor cores' reads
#endif
      __syncthreads();
      const int next = k + kAhead;
      if (next < steps) issue(step_begin + next, next % P::kStages);
      copy_commit();
      const unsigned stage = base + (k % P::kStages) * kStageBytes;
#if CUINLINE_CONV2D_HMMA_WGMMA
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < P::kKSlices; ++ks) {
        const unsigned long long b = wgmma_desc<P::kRowBytes>(stage + P::kAElems * 2 + ks * 32);
#pragma unroll
        for (int i = 0; i < S::kMT; ++i) {
          const unsigned a_tile = stage + (S::kMT * warpgroup + i) * 64 * P::kRowBytes;
          const unsigned long long a = wgmma_desc<P::kRowBytes>(a_tile + ks * 32);
          Wgmma<typename S::storage, P::kBN>::run(acc[i], a, b);
        }
      }
      wgmma_commit();
      wgmma_wait<1>();
#else
      if constexpr (P::kElem == 4) {
        accumulate_swizzled_tf32<S>(acc, stage);
      } else {
        accumulate_swizzled<S>(acc, stage);
      }
#endif
    }
#if CUINLINE_CONV2D_HMMA_WGMMA
    wgmma_wait<0>();
    fence_accumulators<S>(acc);
#endif
    copy_wait<0>();   // (only empty groups are left)
    __syncthreads();  // every warp's reads of the stages are done before the epilogue reuses them
    (void)a_row, (void)b_row;
  } else {
    // (Not instantiated for the wgmma tiling: less for NVRTC, and no unreachable code. All the steps:
    // the split form is the wgmma tiling's.)
    (void)step_begin, (void)step_end;
#pragma unroll
    for (int s = 0; s < P::kAsyncStages - 1; ++s) {
      if (s < P::kSteps) issue(s, s);
      copy_commit();
    }
#pragma unroll 1
    for (int step = 0; step < P::kSteps; ++step) {
      // One group committed a step: all but the newest kStages - 2 done means this step's landed.
      copy_wait<P::kAsyncStages - 2>();
      __syncthreads();
      // Into the buffer step - 1 read (every warp is past it now).
      const int next = step + P::kAsyncStages - 1;
      if (next < P::kSteps) issue(next, next % P::kAsyncStages);
      copy_commit();
      const int buf = step % P::kAsyncStages;
      if constexpr (P::kElem == 4) {
        accumulate_pointwise_tf32<S>(acc, smem_address(s_stage) + buf * kStageBytes);
      } else {
        accumulate<S>(acc, a_row + buf * kStageBytes, b_row + buf * kStageBytes);
      }
    }
    copy_wait<0>();   // (only empty groups are left)
    __syncthreads();  // every warp's reads of the stages are done before the epilogue reuses them
  }
}

}  // namespace cuinline_conv2d_hmma_detail

#endif  // CUINLINE_CONV2D_HMMA_MAINLOOP_ASYNC_CUH
