// conv2d_hmma/mainloop_halo.cuh — the halo form (kHalo: up to 8 input channels, column stride 1,
// one warpgroup): the input rows a tile reads staged once, its shared memory and steps.

#ifndef CUINLINE_CONV2D_HMMA_MAINLOOP_HALO_CUH
#define CUINLINE_CONV2D_HMMA_MAINLOOP_HALO_CUH

namespace cuinline_conv2d_hmma_detail {

// The halo tiling's main loop (P::kHalo: up to 8 input channels, column stride 1, one warpgroup):
// the block's kBM output columns ox0.. of output row oy need input rows oy * kSH - kPH + r (r <
// kHaloRows) and columns ox0 - kPW + x (x < kHaloCols), each pixel's 8 channels 16 bytes: that
// window is staged once (cp.async from a channels-last input of 8 channels on aligned pointers, else
// gathered 16-bit loads: NCHW, or fewer channels), and so is every step's B tile; then the whole
// reduction runs at once. The A tile of tap t (kh, kw) is the window from pixel kh kDH kHaloCols + kw
// kDW on — consecutive output columns are consecutive 16-byte pixels — so wgmma reads it through a
// plain K-major descriptor (8-row groups 128 bytes apart) whose second k half, tap t + 1, is
// `off(t + 1) - off(t)` pixels further (the leading byte offset), or the 1 KiB of zeros past the
// last tap. The input is read once a block instead of once a tap (the seed: 3 rows x 130 pixels
// against 10 taps x 128), and an NCHW input needs no staging copy.
template <class S>
__device__ __forceinline__ int halo_offset(int tap) {  // pixels into the window of tap's A tile
  return tap / S::kKW * S::kDH * Plan<S>::kHaloPitch + tap % S::kKW * S::kDW;
}
// 8 channels (zeros past kCin and where !ok) from src (channel 0's element) with channel stride
// kStride, as 4 words (channel 2k in word k's low half).
template <class S, long long kStride>
__device__ __forceinline__ void gather8_words(const typename S::storage* src, bool ok, unsigned (&w)[4]) {
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const unsigned lo = 2 * k < S::kCin ? load_bits(src + (ok ? 2 * k * kStride : 0), ok) : 0u;
    const unsigned hi = 2 * k + 1 < S::kCin ? load_bits(src + (ok ? (2 * k + 1) * kStride : 0), ok) : 0u;
    w[k] = lo | hi << 16;
  }
}
// The same, as 16 bytes into shared memory.
template <class S, long long kStride>
__device__ __forceinline__ void gather8(unsigned short* dst, const typename S::storage* src, bool ok) {
  unsigned w[4];
  gather8_words<S, kStride>(src, ok, w);
  *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
}
// The halo form's shared memory and steps. A block computes tiles first .. last - 1 in turn (the
// launch's row_tiles a block): every step's weights (and the zeros) are staged once; each tile's
// window is copied while the previous tile's outputs are stored.
template <class S>
struct Halo {
  using P = Plan<S>;
  using T = typename S::storage;
  unsigned short* s_b;     // B: step s, row n (channel co0 + n), chunk c (tap 2s + c), swizzled
  unsigned short* s_h;     // the 16-bit output tile
  unsigned short* s_a;     // the window (row 0, with its slack)
  unsigned short* s_zero;  // 1 KiB of zeros (an odd tap count)
  unsigned short* s_nchw;  // an NCHW input's copied runs (kInNchwCopy)
  static constexpr bool kInCopy = S::kInNhwc && S::kCin == 8 && S::kInAligned;
  static constexpr bool kWCopy = S::kWNhwc && S::kCin == 8 && S::kInAligned;
#if CUINLINE_CONV2D_HMMA_WGMMA
  static constexpr bool kTranspose = P::kInNchwCopy;
#else
  static constexpr bool kTranspose = false;
#endif

  __device__ __forceinline__ explicit Halo(unsigned char* smem)
      : s_b(reinterpret_cast<unsigned short*>(smem)),
        s_h(reinterpret_cast<unsigned short*>(smem + P::kHaloB)),
        s_a(reinterpret_cast<unsigned short*>(smem + P::kHaloB + P::kHaloOut)),
        s_zero(reinterpret_cast<unsigned short*>(smem + P::kHaloB + P::kHaloOut + P::kHaloA)),
        s_nchw(reinterpret_cast<unsigned short*>(smem + P::kHaloB + P::kHaloOut + P::kHaloA + P::kHaloZero)) {}

  // Every step's B tile and the zeros (copies uncommitted).
  __device__ __forceinline__ void load_weights(const T* __restrict__ weight, int co0) const {
    const int tid = threadIdx.x;
    if constexpr (!kWCopy && S::kHaloWeightBatch != 0) {
      // The gather in batches of kBatch chunks a thread, every load of a batch issued before the
      // first store: the block's first tile waits for about one load latency a batch instead of
      // one a chunk (the seed's 5 chunks a thread of 8 16-bit loads; as one chunk at a time the
      // block's start was ~15 % of the NCHW seed's stall samples on an H100).
      constexpr int kTotal = P::kSteps * P::kBN * 2;
      constexpr int kIters = (kTotal + P::kThreads - 1) / P::kThreads;
      constexpr int kBatch = kIters < 5 ? kIters : 5;
#pragma unroll 1
      for (int it0 = 0; it0 < kIters; it0 += kBatch) {
        unsigned w[kBatch][4];
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
          const int i = tid + (it0 + b) * P::kThreads;
          const int step = i / (P::kBN * 2);
          const int n = (i / 2) % P::kBN;
          const int tap = 2 * step + i % 2;
          const int co = co0 + n;
          const bool ok = i < kTotal && (P::kTaps % 2 == 0 || tap < P::kTaps) &&
                          (S::kCout % P::kBN == 0 || co < S::kCout);
          const int kh = tap / S::kKW, kw = tap % S::kKW;
          gather8_words<S, P::kWI>(weight + (ok ? co * P::kWO + kh * P::kWY + kw * P::kWX : 0), ok, w[b]);
        }
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
          const int i = tid + (it0 + b) * P::kThreads;
          if (i < kTotal) {
            const int n = (i / 2) % P::kBN;
            *reinterpret_cast<uint4*>(s_b + i / (P::kBN * 2) * P::kBN * 16 + n * 16 + P::swz(n, i % 2) * 8) =
                make_uint4(w[b][0], w[b][1], w[b][2], w[b][3]);
          }
        }
      }
    } else {
#pragma unroll 1
    for (int i = tid; i < P::kSteps * P::kBN * 2; i += P::kThreads) {
      const int step = i / (P::kBN * 2);
      const int n = (i / 2) % P::kBN;
      const int c = i % 2;
      const int tap = 2 * step + c;
      const int co = co0 + n;
      const bool ok = (P::kTaps % 2 == 0 || tap < P::kTaps) && (S::kCout % P::kBN == 0 || co < S::kCout);
      unsigned short* dst = s_b + step * P::kBN * 16 + n * 16 + P::swz(n, c) * 8;
      if constexpr (kWCopy) {
        copy16_async<0>(dst, weight + (ok ? co * P::kWO + tap * 8 : 0), ok);
      } else {
        const int kh = tap / S::kKW, kw = tap % S::kKW;
        gather8<S, P::kWI>(dst, weight + (ok ? co * P::kWO + kh * P::kWY + kw * P::kWX : 0), ok);
      }
    }
    }
    if constexpr (P::kHaloZero > 0) {
#pragma unroll 1
      for (int i = tid; i < P::kHaloZero / 16; i += P::kThreads) {
        *reinterpret_cast<uint4*>(s_zero + i * 8) = make_uint4(0u, 0u, 0u, 0u);
      }
    }
  }

  // Tile `tile`'s window (copies uncommitted; an NCHW input's runs, transposed by ready()).
  __device__ __forceinline__ void load_window(const T* __restrict__ in_n, int tile) const {
    const int tid = threadIdx.x;
    const int oy = tile / P::kSegs;
    const int ox0 = (tile - oy * P::kSegs) * P::kBM;
    if constexpr (kTranspose) {
      // Rows of 8-column runs of each channel from column xa0, a multiple of 8: a run is all in the
      // image or all outside.
      constexpr int kGroups = P::kStageCols / 8;
      const int xa0 = ox0 - S::kPW - P::kLeft;
#pragma unroll 1
      for (int i = tid; i < P::kHaloRows * 8 * kGroups; i += P::kThreads) {
        const int row = i / (8 * kGroups);  // (row, channel, group)
        const int c = (i / kGroups) % 8;
        const int iy = oy * S::kSH - S::kPH + row;
        const int ix = xa0 + 8 * (i % kGroups);
        const bool ok = c < S::kCin && iy >= 0 && iy < S::kH && ix >= 0 && ix < S::kW;
        copy16_async<0>(s_nchw + i * 8, in_n + (ok ? c * P::kInC + iy * P::kInY + ix : 0), ok);
      }
    } else {
#pragma unroll 1
      for (int i = tid; i < P::kHaloRows * P::kHaloCols; i += P::kThreads) {
        const int row = i / P::kHaloCols, x = i % P::kHaloCols;
        const int iy = oy * S::kSH - S::kPH + row;
        const int ix = ox0 - S::kPW + x;
        const bool ok = iy >= 0 && iy < S::kH && ix >= 0 && ix < S::kW;
        const long long at = ok ? iy * P::kInY + ix * P::kInX : 0;
        unsigned short* dst = s_a + (row * P::kHaloPitch + P::kHaloLead + x) * 8;
        if constexpr (kInCopy) {
          copy16_async<0>(dst, in_n + at, ok);
        } else {
          gather8<S, P::kInC>(dst, in_n + at, ok);
        }
      }
    }
  }

  // The committed copies landed (and an NCHW window transposed), visible to every warp and to the
  // tensor cores.
  __device__ __forceinline__ void ready() const {
    copy_wait<0>();
#if CUINLINE_CONV2D_HMMA_WGMMA
    if constexpr (kTranspose) {
      // 8 x 8 matrices (8 channels x 8 columns of a row): ldmatrix.trans gives lane l column l / 4's
      // channels 2 (l % 4), + 1, which stmatrix stores as row l / 4 (a 16-byte pixel) of the window.
      // A warp moves 4 matrices an instruction (the last repeated past the end: identical stores).
      constexpr int kGroups = P::kStageCols / 8;
      constexpr int kMatrices = P::kHaloRows * kGroups;
      __syncthreads();
      const int tid = threadIdx.x;
      const int lane = tid % 32;
#pragma unroll 1
      for (int q0 = tid / 32 * 4; q0 < kMatrices; q0 += P::kThreads / 8) {
        const int q = q0 + lane / 8 < kMatrices ? q0 + lane / 8 : kMatrices - 1;
        const int row = q / kGroups, g = q % kGroups;
        unsigned r[4];
        ldmatrix_x4_trans(r, smem_address(s_nchw + ((row * 8 + lane % 8) * P::kStageCols + 8 * g)));
        const int col = P::kHaloLead + 8 * g - P::kLeft + lane % 8;  // (in the slack where < kHaloLead)
        stmatrix_x4(smem_address(s_a + (row * P::kHaloPitch + col) * 8), r);
      }
    }
    fence_async_shared();  // the copies and the stores, visible to the tensor cores' reads
#endif
    __syncthreads();
  }

  // acc += the tile's whole reduction (acc: this thread's accumulators, the wgmma layout). Ends with
  // this thread's reads of shared memory done.
  __device__ __forceinline__ void compute(float (&acc)[S::kMT][S::kNT][4]) const {
    const unsigned b_base = smem_address(s_b);
    const unsigned a_base = smem_address(s_a) + P::kHaloLead * 16;
    const unsigned zero = smem_address(s_zero);
#if CUINLINE_CONV2D_HMMA_WGMMA
    wgmma_fence();
#pragma unroll
    for (int step = 0; step < P::kSteps; ++step) {
      const unsigned long long b = wgmma_desc<32>(b_base + step * P::kBN * 32);
      const int t0 = 2 * step, t1 = 2 * step + 1;
#pragma unroll
      for (int i = 0; i < S::kMT; ++i) {
        const unsigned a0 = a_base + (64 * i + halo_offset<S>(t0)) * 16;
        const unsigned lbo = t1 < P::kTaps ? (halo_offset<S>(t1) - halo_offset<S>(t0)) * 16 : zero - a0;
        Wgmma<T, P::kBN>::run(acc[i], wgmma_desc_plain(a0, lbo), b);
      }
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_accumulators<S>(acc);
#else
    // mma.sync (other archs): warp w's rows 64 i + 16 w (the wgmma accumulator layout); ldmatrix rows
    // of tap t0 (lanes 0-15) and t1 (lanes 16-31, or the zeros).
    const int lane = threadIdx.x % 32;
    const int wm = threadIdx.x / 32;
#pragma unroll
    for (int step = 0; step < P::kSteps; ++step) {
      const int t0 = 2 * step, t1 = 2 * step + 1;
      const unsigned b_step = b_base + step * P::kBN * 32;
      unsigned a[S::kMT][4];
      unsigned b[S::kNT / 2][4];
#pragma unroll
      for (int i = 0; i < S::kMT; ++i) {
        const int r = P::a_row0(wm, i) + lane % 16;
        const unsigned row = lane < 16      ? a_base + (r + halo_offset<S>(t0)) * 16
                             : t1 < P::kTaps ? a_base + (r + halo_offset<S>(t1)) * 16
                                             : zero + (lane % 8) * 16;
        ldmatrix_x4(a[i], row);
      }
#pragma unroll
      for (int jj = 0; jj < S::kNT / 2; ++jj) {
        const int n = jj * 16 + lane % 8 + lane / 16 * 8;
        ldmatrix_x4(b[jj], b_step + n * 32 + P::swz(n, (lane / 8) % 2) * 16);
      }
#pragma unroll
      for (int i = 0; i < S::kMT; ++i) {
#pragma unroll
        for (int j = 0; j < S::kNT; ++j) {
          Mma<T>::run(acc[i][j], a[i], b[j / 2][2 * (j % 2)], b[j / 2][2 * (j % 2) + 1]);
        }
      }
    }
#endif
  }
};

}  // namespace cuinline_conv2d_hmma_detail

#endif  // CUINLINE_CONV2D_HMMA_MAINLOOP_HALO_CUH
