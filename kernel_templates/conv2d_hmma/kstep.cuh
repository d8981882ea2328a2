// conv2d_hmma/kstep.cuh — one k step from shared tiles (ldmatrix + mma.sync, TF32 m16n8k8, wgmma),
// the end of a cp.async main loop, the B tile copy, and the pixel origins and output offsets the
// main loops and the epilogue share.

#ifndef CUINLINE_CONV2D_HMMA_KSTEP_CUH
#define CUINLINE_CONV2D_HMMA_KSTEP_CUH

namespace cuinline_conv2d_hmma_detail {

// acc += the staged step. a_row / b_row: this lane's ldmatrix row addresses (bytes, shared space) of
// its warp's first A and B tiles at k = 0.
template <class S>
__device__ __forceinline__ void accumulate(float (&acc)[S::kMT][S::kNT][4], unsigned a_row, unsigned b_row) {
  using P = Plan<S>;
#pragma unroll
  for (int ks = 0; ks < S::kBK / 16; ++ks) {
    unsigned a[S::kMT][4];
    unsigned b[S::kNT / 2][4];
#pragma unroll
    for (int i = 0; i < S::kMT; ++i) {
      if (P::kATrans) {
        ldmatrix_x4_trans(a[i], a_row + (ks * 16 * P::kAPitchT + i * 16) * 2);
      } else {
        ldmatrix_x4(a[i], a_row + (i * 16 * P::kPitch + ks * 16) * 2);
      }
    }
#pragma unroll
    for (int jj = 0; jj < S::kNT / 2; ++jj) ldmatrix_x4(b[jj], b_row + (jj * 16 * P::kPitch + ks * 16) * 2);
#pragma unroll
    for (int i = 0; i < S::kMT; ++i) {
#pragma unroll
      for (int j = 0; j < S::kNT; ++j) {
        Mma<typename S::storage>::run(acc[i][j], a[i], b[j / 2][2 * (j % 2)], b[j / 2][2 * (j % 2) + 1]);
      }
    }
  }
}

// acc += the staged step in the wgmma tiling's swizzled tiles (stage: their shared address), by
// ldmatrix and mma.sync: the wgmma tiling compiled for an arch without wgmma. Warp wm computes rows
// 64 i + 16 wm (Plan::a_row0) x all kBN channels.
// One k step of mma.sync from shared tiles (the wgmma tilings' form for other archs): lane's A row
// address of warp tile i and k16 slice ks from a_row(i, ks) (ldmatrix.x4: rows lane % 16, channels
// 8 (lane / 16) on), B from the swizzled [kBN][kBK] tile at b_stage.
template <class S, class ARow>
__device__ __forceinline__ void accumulate_rows(float (&acc)[S::kMT][S::kNT][4], const ARow& a_row, unsigned b_stage) {
  using P = Plan<S>;
  const int lane = threadIdx.x % 32;
  const int wn = (threadIdx.x / 32) / S::kWarpsM;
#pragma unroll
  for (int ks = 0; ks < S::kBK / 16; ++ks) {
    unsigned a[S::kMT][4];
    unsigned b[S::kNT / 2][4];
#pragma unroll
    for (int i = 0; i < S::kMT; ++i) ldmatrix_x4(a[i], a_row(i, ks));
#pragma unroll
    for (int jj = 0; jj < S::kNT / 2; ++jj) {
      const int n = wn * S::kNT * 8 + jj * 16 + lane % 8 + lane / 16 * 8;
      ldmatrix_x4(b[jj], b_stage + n * P::kRowBytes + P::swz(n, 2 * ks + (lane / 8) % 2) * 16);
    }
#pragma unroll
    for (int i = 0; i < S::kMT; ++i) {
#pragma unroll
      for (int j = 0; j < S::kNT; ++j) {
        Mma<typename S::storage>::run(acc[i][j], a[i], b[j / 2][2 * (j % 2)], b[j / 2][2 * (j % 2) + 1]);
      }
    }
  }
}
// The cp.async form's: A from the swizzled [kBM][kBK] tile at the start of the stage.
template <class S>
__device__ __forceinline__ void accumulate_swizzled(float (&acc)[S::kMT][S::kNT][4], unsigned stage) {
  using P = Plan<S>;
  const int lane = threadIdx.x % 32;
  const int wm = (threadIdx.x / 32) % S::kWarpsM;
  accumulate_rows<S>(
      acc,
      [&](int i, int ks) {
        const int r = P::a_row0(wm, i) + lane % 16;
        return stage + r * P::kRowBytes + P::swz(r, 2 * ks + lane / 16) * 16;
      },
      stage + P::kAElems * 2);
}

// The float (TF32) form of accumulate_swizzled, for archs without wgmma: mma.sync m16n8k8 with its
// fragments read as 32-bit words from the swizzled tiles (element k of row r at byte r kRowBytes +
// swz(r, k / 4) 16 + (k % 4) 4). Warp wm computes rows 64 i + 16 wm (Plan::a_row0) x all kBN
// channels, the wgmma accumulator layout.
template <class S>
__device__ __forceinline__ void accumulate_swizzled_tf32(float (&acc)[S::kMT][S::kNT][4], unsigned stage) {
  using P = Plan<S>;
  const int lane = threadIdx.x % 32;
  const int wm = (threadIdx.x / 32) % S::kWarpsM;
  const int g = lane / 4, t = lane % 4;
  const unsigned b_stage = stage + P::kAElems * 2;
  auto at = [&](unsigned tile, int r, int k) {
    return tile + r * P::kRowBytes + P::swz(r, k / 4) * 16 + (k % 4) * 4;
  };
#pragma unroll
  for (int ks = 0; ks < S::kBK / 8; ++ks) {
    const int k0 = 8 * ks + t;
    unsigned a[S::kMT][4];
#pragma unroll
    for (int i = 0; i < S::kMT; ++i) {
      const int r = P::a_row0(wm, i) + g;
      a[i][0] = lds32(at(stage, r, k0));
      a[i][1] = lds32(at(stage, r + 8, k0));
      a[i][2] = lds32(at(stage, r, k0 + 4));
      a[i][3] = lds32(at(stage, r + 8, k0 + 4));
    }
#pragma unroll
    for (int j = 0; j < S::kNT; ++j) {
      const int n = j * 8 + g;
      const unsigned b0 = lds32(at(b_stage, n, k0));
      const unsigned b1 = lds32(at(b_stage, n, k0 + 4));
#pragma unroll
      for (int i = 0; i < S::kMT; ++i) MmaTf32::run(acc[i][j], a[i], b0, b1);
    }
  }
}

// x rounded to TF32 (cvt.rna: to nearest, ties away from zero; the 32-bit pattern with the low 13
// mantissa bits zero), as the staging copy (conv2d_stage.cuh) and cuBLAS / cuDNN round TF32 operands.
__device__ __forceinline__ unsigned tf32_bits(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
#elif defined(__CUDA_ARCH__)
  return __float_as_uint(x);  // (no TF32 before sm_80: the module compiles there, is never launched)
#else
  // The host emulation (tests/test_conv2d_hmma_emulated.cpp): half a TF32 ulp added to the magnitude,
  // then truncated; Inf stays, NaN becomes the canonical NaN.
  unsigned u;
  __builtin_memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) == 0x7f800000u) return (u & 0x007fffffu) != 0u ? 0x7fffffffu : u;
  return (u + 0x1000u) & 0xffffe000u;
#endif
}
__device__ __forceinline__ float float_of_bits(unsigned u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
#endif
}

// The pointwise form's float main loop step: acc += the staged step at shared address `stage` (A
// [kBK][kAPitchT / 2] words, pixels contiguous; B [kBN][kPitch / 2] words, k contiguous) by mma.sync
// m16n8k8, each fp32 word rounded to TF32 as it is read. Warp (wm, wn) computes pixels (wm kMT + i)
// 16 .. of tile i x channels wn kNT 8 + 8 j ..; per k8 slice the B fragments of the warp's n tiles
// are read once, the A fragments one m tile at a time.
template <class S>
__device__ __forceinline__ void accumulate_pointwise_tf32(float (&acc)[S::kMT][S::kNT][4], unsigned stage) {
  using P = Plan<S>;
  const int lane = threadIdx.x % 32;
  const int wm = (threadIdx.x / 32) % S::kWarpsM;
  const int wn = (threadIdx.x / 32) / S::kWarpsM;
  const int g = lane / 4, t = lane % 4;
  constexpr int kAWords = P::kAPitchT / 2;  // a k row of A
  constexpr int kBWords = P::kPitch / 2;    // a channel row of B
  const unsigned a_base = stage + (t * kAWords + wm * S::kMT * 16 + g) * 4;
  const unsigned b_base = stage + P::kAElems * 2 + ((wn * S::kNT * 8 + g) * kBWords + t) * 4;
#pragma unroll
  for (int ks = 0; ks < S::kBK / 8; ++ks) {
    unsigned b[S::kNT][2];
#pragma unroll
    for (int j = 0; j < S::kNT; ++j) {
      const unsigned at = b_base + (j * 8 * kBWords + ks * 8) * 4;
      b[j][0] = tf32_bits(float_of_bits(lds32(at)));
      b[j][1] = tf32_bits(float_of_bits(lds32(at + 16)));
    }
#pragma unroll
    for (int i = 0; i < S::kMT; ++i) {
      // a0 (pixel g, k t), a1 (pixel g + 8), a2 (k t + 4), a3 (both)
      const unsigned at = a_base + (ks * 8 * kAWords + i * 16) * 4;
      const unsigned a[4] = {tf32_bits(float_of_bits(lds32(at))), tf32_bits(float_of_bits(lds32(at + 32))),
                             tf32_bits(float_of_bits(lds32(at + 4 * kAWords * 4))),
                             tf32_bits(float_of_bits(lds32(at + 4 * kAWords * 4 + 32)))};
#pragma unroll
      for (int j = 0; j < S::kNT; ++j) MmaTf32::run(acc[i][j], a, b[j][0], b[j][1]);
    }
  }
}

#if CUINLINE_CONV2D_HMMA_WGMMA
// One k step of wgmma (sm_90a) for this thread's warpgroup: B from the swizzled [kBN][kBK] tile at
// b_stage, A of m64 tile i and k16 slice ks through descriptor a_desc(i, ks). (The caller fences
// before and commits after.)
template <class S, class ADesc>
__device__ __forceinline__ void wgmma_step(float (&acc)[S::kMT][S::kNT][4], const ADesc& a_desc, unsigned b_stage) {
  using P = Plan<S>;
#pragma unroll
  for (int ks = 0; ks < P::kKSlices; ++ks) {
    const unsigned long long b = wgmma_desc<P::kRowBytes>(b_stage + ks * 32);
#pragma unroll
    for (int i = 0; i < S::kMT; ++i) Wgmma<typename S::storage, P::kBN>::run(acc[i], a_desc(i, ks), b);
  }
}
#endif

// The end of a cp.async main loop: every wgmma group done and its accumulators fenced, then (past
// the empty copy groups left) a barrier: every warp's reads of the buffers are done before the
// epilogue reuses them.
template <class S>
__device__ __forceinline__ void finish_mainloop(float (&acc)[S::kMT][S::kNT][4]) {
#if CUINLINE_CONV2D_HMMA_WGMMA
  if constexpr (Plan<S>::kWgmma) {
    wgmma_wait<0>();
    fence_accumulators<S>(acc);
  }
#endif
  (void)acc;
  copy_wait<0>();
  __syncthreads();
}

// The B tile of one k step (weight rows co0 .. co0 + kBN - 1, channels ci .. ci + 7 of filter tap
// `tap`: this thread's 16-byte chunk `chunk` of rows row0, row0 + kThreads / kChunks, ...) by
// cp.async into s_b: padded rows, or the wgmma tiling's swizzled ones; zeros where !ci_ok or past
// kCout. (mainloop_async keeps its own copy of this loop, and of wgmma_step's and finish_mainloop's:
// written through these helpers its PTX changed and the UNet-like layer without the window form ran
// 2-3 % slower, 0.0895 -> 0.0912 ms channels-last; H200.)
template <class S>
__device__ __forceinline__ void copy_b_tile(unsigned short* s_b, const typename S::storage* __restrict__ weight,
                                            int co0, int tap, int ci, bool ci_ok, int chunk, int row0) {
  using P = Plan<S>;
  constexpr int kRowStep = P::kThreads / P::kChunks;
  constexpr int kBRowsAsync = (P::kBN + kRowStep - 1) / kRowStep;
#pragma unroll
  for (int r = 0; r < kBRowsAsync; ++r) {
    const int n = row0 + r * kRowStep;
    if (P::kBN % kRowStep == 0 || n < P::kBN) {
      const int co = co0 + n;
      const bool ok = ci_ok && (S::kCout % P::kBN == 0 || co < S::kCout);
      const typename S::storage* src = weight + (ok ? co * P::kWO + (long long)tap * S::kCin + ci : 0);
      copy16_async<S::kCopyL2>(s_b + n * P::kTilePitch + (P::kWgmma ? P::swz(n, chunk) : chunk) * 8, src, ok);
    }
  }
}

// The first input row and column of pixel p's filter window (iy0 = kH past the plane: every tap
// then reads outside the image).
template <class S>
__device__ __forceinline__ void window_origin(int p, int& iy0, int& ix0) {
  const int oy = p / S::kOW;
  const int ox = p - oy * S::kOW;
  iy0 = p < Plan<S>::kPixels ? oy * S::kSH - S::kPH : S::kH;
  ix0 = ox * S::kSW - S::kPW;
}
// The same for pixel pg of the batch's images x kPixels (batch tiles), and the offset of its image
// in the input (past the last image: iy0 = kH, nothing read).
template <class S>
__device__ __forceinline__ void batch_origin(int pg, int images, int& iy0, int& ix0, long long& image) {
  using P = Plan<S>;
  const int n = pg / (int)P::kPixels;
  window_origin<S>(pg - n * (int)P::kPixels, iy0, ix0);
  if (n >= images) iy0 = S::kH;
  image = (long long)n * P::kInN;
}
// Element offset of output (or residual) pixel p, channel co, from the first image's origin (batch
// tiles: p counts the batch's pixels; channels-last, that is one plane of N x kPixels).
template <class S>
__device__ __forceinline__ long long out_offset(int p, int co) {
  using P = Plan<S>;
  if constexpr (P::kBatchTiles && !S::kOutNhwc) {
    const int n = p / (int)P::kPixels;
    return n * P::kOutN + (p - n * (int)P::kPixels) * P::kOutP + co * P::kOutC;
  } else {
    return p * P::kOutP + co * P::kOutC;
  }
}

}  // namespace cuinline_conv2d_hmma_detail

#endif  // CUINLINE_CONV2D_HMMA_KSTEP_CUH
