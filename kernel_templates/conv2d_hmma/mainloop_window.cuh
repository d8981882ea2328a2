// conv2d_hmma/mainloop_window.cuh — the window form's main loop (kWindow): a k chunk's input window
// staged once, each tap's A tile read from it in place.

#ifndef CUINLINE_CONV2D_HMMA_MAINLOOP_WINDOW_CUH
#define CUINLINE_CONV2D_HMMA_MAINLOOP_WINDOW_CUH

namespace cuinline_conv2d_hmma_detail {

// The window form's main loop (P::kWindow; see Plan): the window of k chunk 0 and the first steps'
// B tiles, then a step a k step (chunk-major: tap t of chunk c is step c kTaps + t) as in
// mainloop_async — kStages B buffers, kStages - 2 steps' copies ahead, one wgmma group in flight —
// with chunk c + 1's window copied from the second step of chunk c on, into the buffer chunk c - 1
// read: every thread waited for that chunk's last wgmma group (wgmma_wait<1> at the end of the first
// step) before the barrier of the second. It has landed by step (c + 1) kTaps (kTaps >= kStages -
// 1). A copy of 16 bytes is 8 channels of one pixel (a thread's group, tid % kChunks, is the same in
// every copy); pixels outside the image and channels past kCin are zeros. kPart: kWindowWhole (the
// copies before step 0, then the steps), kWindowFirstCopies (only those copies: window_tiles issues
// them while the previous tile's outputs are stored) or kWindowSteps (only the steps).
enum WindowPart { kWindowWhole, kWindowFirstCopies, kWindowSteps };
template <class S, WindowPart kPart = kWindowWhole>
__device__ __forceinline__ void mainloop_window(float (&acc)[S::kMT][S::kNT][4], unsigned short* s_stage,
                                                const typename S::storage* __restrict__ in_n,
                                                const typename S::storage* __restrict__ weight, int p0, int co0) {
  using P = Plan<S>;
  constexpr int kRowStep = P::kThreads / P::kChunks;
  constexpr unsigned kStageBytes = P::kStageElems * 2;
  constexpr int kAhead = P::kStages - 2;
  static_assert(P::kThreads % P::kChunks == 0, "a thread's 8-channel group is the same in every copy");
  const int tid = threadIdx.x;
  const int chunk = tid % P::kChunks;
  const int row0 = tid / P::kChunks;
  unsigned char* s_win = reinterpret_cast<unsigned char*>(s_stage) + P::kStages * kStageBytes;
  // The window's pixel (0, 0): input row oy0 kSH - kPH, column ox0 - kPW.
  const int oy0 = p0 / S::kOW;
  const int iy_base = oy0 * S::kSH - S::kPH;
  const int ix_base = p0 - oy0 * S::kOW - S::kPW;

  auto issue_b = [&](int step, int buf) {
    const int c = step / P::kTaps;
    const int tap = step - c * P::kTaps;
    const int ci = c * S::kBK + chunk * 8;
    const bool ci_ok = S::kCin % S::kBK == 0 || ci < S::kCin;
    copy_b_tile<S>(s_stage + buf * P::kStageElems, weight, co0, tap, ci, ci_ok, chunk, row0);
  };
  // A thread's copies of a window: pixels row0, row0 + kRowStep, ... (kWinCopies at most). Chunk c
  // + 1's are issued in kWinParts equal parts at taps 1 .. kWinParts of chunk c, each in that step's
  // copy group (lands kAhead steps on, by step (c + 1) kTaps at the latest), so that no step waits
  // for a whole window (4 x 130 pixels x 128 bytes for the UNet-like layer, from DRAM). UNet-like
  // layer, ms channels-last / NCHW: f16 0.0887 / 0.1169 -> 0.0865 / 0.1156, bf16 0.0883 / 0.1171 ->
  // 0.0853 / 0.1136 (H100). Chunk 0's window comes whole before step 0.
  constexpr int kWinCopies = (P::kWinPixels + kRowStep - 1) / kRowStep;
  constexpr int kWinParts = P::kTaps - kAhead < kWinCopies ? P::kTaps - kAhead : kWinCopies;
  static_assert(kWinParts >= 1, "the next chunk's window is copied within a chunk");
  auto issue_window = [&](int c, int buf, int part, int parts) {
    unsigned char* w = s_win + buf * P::kWinBytes + chunk * P::kWinGroup;
    const int ci = c * S::kBK + chunk * 8;
    const bool ci_ok = S::kCin % S::kBK == 0 || ci < S::kCin;
    const int pix_end = row0 + (part + 1) * kWinCopies / parts * kRowStep;
#pragma unroll 1
    for (int pix = row0 + part * kWinCopies / parts * kRowStep; pix < pix_end && pix < P::kWinPixels;
         pix += kRowStep) {
      const int r = pix / P::kWinCols;
      const int iy = iy_base + r;
      const int ix = ix_base + (pix - r * P::kWinCols);
      const bool ok = ci_ok && iy >= 0 && iy < S::kH && ix >= 0 && ix < S::kW;
      copy16_async<S::kCopyL2>(w + pix * 16, in_n + (ok ? ((long long)iy * S::kW + ix) * S::kCin + ci : 0), ok);
    }
  };
  // Pixel offset in the window of output pixel m of the tile (its row's first column) at tap t.
  auto win_pixel = [](int m, int tap) {
    const int mr = m / P::kWinTileCols;
    const int kh = tap / S::kKW;
    return (mr * S::kSH + kh * S::kDH) * P::kWinCols + (m - mr * P::kWinTileCols) + (tap - kh * S::kKW) * S::kDW;
  };

  if constexpr (kPart != kWindowSteps) {
    issue_window(0, 0, 0, 1);
#pragma unroll
    for (int s = 0; s < kAhead; ++s) {
      if (s < P::kSteps) issue_b(s, s);
      copy_commit();
    }
  }
  if constexpr (kPart == kWindowFirstCopies) return;
  const unsigned base = smem_address(s_stage);
  const unsigned win_base = smem_address(s_win);
#pragma unroll 1
  for (int step = 0; step < P::kSteps; ++step) {
    copy_wait<kAhead - 1>();  // this thread's copies of this step (and of the chunk's window) landed
#if CUINLINE_CONV2D_HMMA_WGMMA
    fence_async_shared();
#endif
    __syncthreads();
    const int c = step / P::kTaps;
    const int tap = step - c * P::kTaps;
    const int next = step + kAhead;
    if (next < P::kSteps) issue_b(next, next % P::kStages);
    if (P::kCiSteps > 1 && tap >= 1 && tap <= kWinParts && c + 1 < P::kCiSteps)
      issue_window(c + 1, (c + 1) % P::kWinBufs, tap - 1, kWinParts);
    copy_commit();
    const unsigned stage = base + (step % P::kStages) * kStageBytes;
    const unsigned win = win_base + (c % P::kWinBufs) * P::kWinBytes;
#if CUINLINE_CONV2D_HMMA_WGMMA
    const int warpgroup = (int)(threadIdx.x / 128);  // (kWarpsN = 1)
    wgmma_fence();
    wgmma_step<S>(
        acc,
        [&](int i, int ks) {
          const unsigned a0 = win + 2 * ks * P::kWinGroup + win_pixel(64 * (S::kMT * warpgroup + i), tap) * 16;
          return wgmma_desc_plain(a0, P::kWinGroup);
        },
        stage);
    wgmma_commit();
    wgmma_wait<1>();
#else
    // mma.sync (other archs): A rows lane % 16 of the 16 pixels of warp tile i from the window (8
    // channels of group 2 ks + lane / 16).
    const int lane = threadIdx.x % 32;
    const int wm = threadIdx.x / 32;
    accumulate_rows<S>(
        acc,
        [&](int i, int ks) {
          return win + (2 * ks + lane / 16) * P::kWinGroup + win_pixel(P::a_row0(wm, i) + lane % 16, tap) * 16;
        },
        stage);
#endif
  }
  finish_mainloop<S>(acc);
}

}  // namespace cuinline_conv2d_hmma_detail

#endif  // CUINLINE_CONV2D_HMMA_MAINLOOP_WINDOW_CUH
