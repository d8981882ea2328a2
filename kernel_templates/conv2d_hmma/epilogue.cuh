// conv2d_hmma/epilogue.cuh — the store paths: the accumulators through shared memory in the
// output's contiguous order (fp32, or 16-bit rounded in registers), bias, residual and the
// epilogue E, coalesced vector stores.

#ifndef CUINLINE_CONV2D_HMMA_EPILOGUE_CUH
#define CUINLINE_CONV2D_HMMA_EPILOGUE_CUH

namespace cuinline_conv2d_hmma_detail {

// kVec 16-bit values (packed low-first into 32-bit words) stored as one access.
template <class T, int kVec>
__device__ __forceinline__ void store_bits(T* dst, const unsigned (&h)[kVec]) {
  if constexpr (kVec == 1) {
    *reinterpret_cast<unsigned short*>(dst) = static_cast<unsigned short>(h[0]);
  } else if constexpr (kVec == 2) {
    *reinterpret_cast<unsigned*>(dst) = h[0] | h[1] << 16;
  } else if constexpr (kVec == 4) {
    *reinterpret_cast<uint2*>(dst) = make_uint2(h[0] | h[1] << 16, h[2] | h[3] << 16);
  } else {
    *reinterpret_cast<uint4*>(dst) =
        make_uint4(h[0] | h[1] << 16, h[2] | h[3] << 16, h[4] | h[5] << 16, h[6] | h[7] << 16);
  }
}

// kVec 16-bit values (aligned to kVec) as one load, unpacked low-first.
template <class T, int kVec>
__device__ __forceinline__ void load_vec(const T* src, unsigned (&h)[kVec]) {
  if constexpr (kVec == 1) {
    h[0] = load_bits(src, true);
  } else if constexpr (kVec == 2) {
    const unsigned w = __ldg(reinterpret_cast<const unsigned*>(src));
    h[0] = w & 0xffffu, h[1] = w >> 16;
  } else {
    const uint2 w = __ldg(reinterpret_cast<const uint2*>(src));
    h[0] = w.x & 0xffffu, h[1] = w.x >> 16, h[2] = w.y & 0xffffu, h[3] = w.y >> 16;
  }
}

// kVec consecutive floats of the epilogue tile (16-byte aligned for 4, 8-byte for 2) as one read.
template <int kVec>
__device__ __forceinline__ void read_tile(const float* p, float (&v)[kVec]) {
  if constexpr (kVec == 4) {
    const float4 q = *reinterpret_cast<const float4*>(p);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
  } else if constexpr (kVec == 2) {
    const float2 q = *reinterpret_cast<const float2*>(p);
    v[0] = q.x, v[1] = q.y;
  } else {
    v[0] = p[0];
  }
}

// One element of a storage-type vector (bias) as fp32.
template <class T>
__device__ __forceinline__ float value_at(const T* p) {
  if constexpr (sizeof(T) == 4) {
    return __ldg(reinterpret_cast<const float*>(p));
  } else {
    return to_float<T>(load_bits(p, true));
  }
}
// kVec consecutive elements (aligned to kVec) as one load, in fp32.
template <class T, int kVec>
__device__ __forceinline__ void load_values(const T* src, float (&x)[kVec]) {
  if constexpr (sizeof(T) == 4) {
    const float* f = reinterpret_cast<const float*>(src);
    if constexpr (kVec == 4) {
      const float4 q = __ldg(reinterpret_cast<const float4*>(f));
      x[0] = q.x, x[1] = q.y, x[2] = q.z, x[3] = q.w;
    } else if constexpr (kVec == 2) {
      const float2 q = __ldg(reinterpret_cast<const float2*>(f));
      x[0] = q.x, x[1] = q.y;
    } else {
      x[0] = __ldg(f);
    }
  } else {
    unsigned h[kVec];
    load_vec<T, kVec>(src, h);
#pragma unroll
    for (int e = 0; e < kVec; ++e) x[e] = to_float<T>(h[e]);
  }
}
// kVec fp32 values rounded once to the storage type and stored as one access (aligned to kVec).
template <class T, int kVec>
__device__ __forceinline__ void store_values(T* dst, const float (&x)[kVec]) {
  if constexpr (sizeof(T) == 4) {
    float* f = reinterpret_cast<float*>(dst);
    if constexpr (kVec == 4) {
      *reinterpret_cast<float4*>(f) = make_float4(x[0], x[1], x[2], x[3]);
    } else if constexpr (kVec == 2) {
      *reinterpret_cast<float2*>(f) = make_float2(x[0], x[1]);
    } else {
      f[0] = x[0];
    }
  } else {
    unsigned h[kVec];
#pragma unroll
    for (int e = 0; e < kVec; ++e) h[e] = from_float<T>(x[e]);
    store_bits<T, kVec>(dst, h);
  }
}

// The epilogue's stores from the fp32 tile s_c (the block's pixels from p0, channels from co0):
// kVec consecutive outputs along the output's contiguous axis a thread and iteration. A thread's
// position along that axis is the same every iteration; the other axis steps by kSlowStep.
template <class S, class E, int kVec>
__device__ __forceinline__ void store_tile(const float* s_c, const typename S::storage* __restrict__ bias,
                                           typename S::storage* __restrict__ out_n,
                                           const typename S::storage* __restrict__ res_n, int p0, int co0,
                                           long long p_end, const E& ep) {
  using P = Plan<S>;
  using T = typename S::storage;
  constexpr int kFast = S::kOutNhwc ? P::kBN : P::kBM;  // pixels (NCHW) or channels (NHWC) of the tile
  constexpr int kSlow = S::kOutNhwc ? P::kBM : P::kBN;
  constexpr int kFastVecs = kFast / kVec;
  constexpr int kSlowStep = P::kThreads / kFastVecs;
  static_assert(P::kThreads % kFastVecs == 0 && kSlow % kSlowStep == 0, "whole rows of vectors an iteration");
  const int fast = (int)(threadIdx.x % kFastVecs) * kVec;
  const int slow0 = (int)(threadIdx.x / kFastVecs);
  // Channels-last: a thread's channels are the same every iteration, so is their bias (loaded once).
  float bias_fast[kVec];
#pragma unroll
  for (int e = 0; e < kVec; ++e) bias_fast[e] = 0.0f;
  if (S::kOutNhwc && S::kHasBias && (S::kCout % P::kBN == 0 || co0 + fast < S::kCout)) {
#pragma unroll
    for (int e = 0; e < kVec; ++e) bias_fast[e] = value_at(bias + co0 + fast + e);
  }
#pragma unroll 4
  for (int slow = slow0; slow < kSlow; slow += kSlowStep) {
    const int m = S::kOutNhwc ? slow : fast;  // first pixel of the vector
    const int c = S::kOutNhwc ? fast : slow;  // first channel
    const int p = p0 + m;
    const int co = co0 + c;
    // The whole vector lies in the plane / the channels when its first element does (kVec divides
    // the run and the tile's origin).
    if (p < p_end && (S::kCout % P::kBN == 0 || co < S::kCout)) {
      const long long at = out_offset<S>(p, co);
      float v[kVec];
      read_tile<kVec>(s_c + m * P::kCM + c * P::kCC, v);  // along the tile's contiguous axis
      const float b = !S::kOutNhwc && S::kHasBias ? value_at(bias + co) : 0.0f;
      float r[kVec];
      if (S::kHasResidual) load_values<T, kVec>(res_n + at, r);
      float y[kVec];
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        // conv + bias, rounded, then + residual, rounded (PyTorch's two adds), then the epilogue: all
        // fp32; one rounding to the storage type.
        float x = v[e];
        if (S::kHasBias) x += S::kOutNhwc ? bias_fast[e] : b;
        if (S::kHasResidual) x += r[e];
        y[e] = ep(x, S::kOutNhwc ? co + e : co);
      }
      store_values<T, kVec>(out_n + at, y);
    }
  }
}

// The type of kVec 16-bit values (one load or store).
template <int kVec>
struct StoreVec {
  using type = unsigned short;
};
template <>
struct StoreVec<2> {
  using type = unsigned;
};
template <>
struct StoreVec<4> {
  using type = uint2;
};
template <>
struct StoreVec<8> {
  using type = uint4;
};

// kHalfEpi's stores from the tile of 16-bit outputs s_h (already biased, E'd and rounded in
// registers): kVec consecutive outputs along the output's contiguous axis as one load from shared
// memory and one store (16 bytes for 8). Tile pixel m < m_end is pixel p0 + m of the plane.
template <class S, int kVec>
__device__ __forceinline__ void store_tile_half(const unsigned short* s_h, typename S::storage* __restrict__ out_n,
                                                int p0, int m_end, int co0) {
  using P = Plan<S>;
  constexpr int kFast = S::kOutNhwc ? P::kBN : P::kBM;
  constexpr int kSlow = S::kOutNhwc ? P::kBM : P::kBN;
  constexpr int kFastVecs = kFast / kVec;
  constexpr int kSlowStep = P::kThreads / kFastVecs;
  static_assert(P::kThreads % kFastVecs == 0 && kSlow % kSlowStep == 0, "whole rows of vectors an iteration");
  const int fast = (int)(threadIdx.x % kFastVecs) * kVec;
  const int slow0 = (int)(threadIdx.x / kFastVecs);
  if constexpr (S::kStoreBatch != 0) {
    // In batches of kB vectors: every shared load of a batch, then its stores (one load and its
    // store at a time, the stores waited on each load: the compiler does not move a shared load
    // above a global store through these pointers; ~8 % of the f16 NCHW seed's stall samples).
    using V = typename StoreVec<kVec>::type;
    constexpr int kIters = kSlow / kSlowStep;
    constexpr int kB = kIters < 8 ? kIters : 8;
#pragma unroll 1
    for (int it0 = 0; it0 < kIters; it0 += kB) {
      V v[kB];
#pragma unroll
      for (int b = 0; b < kB; ++b) {
        const int slow = slow0 + (it0 + b) * kSlowStep;
        const int m = S::kOutNhwc ? slow : fast;
        const int c = S::kOutNhwc ? fast : slow;
        if (it0 + b < kIters) v[b] = *reinterpret_cast<const V*>(s_h + (S::kOutNhwc ? m * P::kHPitch + c : c * P::kHPitch + m));
      }
#pragma unroll
      for (int b = 0; b < kB; ++b) {
        const int slow = slow0 + (it0 + b) * kSlowStep;
        const int m = S::kOutNhwc ? slow : fast;
        const int c = S::kOutNhwc ? fast : slow;
        const int co = co0 + c;
        if (it0 + b < kIters && m < m_end && (S::kCout % P::kBN == 0 || co < S::kCout)) {
          *reinterpret_cast<V*>(out_n + out_offset<S>(p0 + m, co)) = v[b];
        }
      }
    }
  } else {
#pragma unroll 4
  for (int slow = slow0; slow < kSlow; slow += kSlowStep) {
    const int m = S::kOutNhwc ? slow : fast;
    const int c = S::kOutNhwc ? fast : slow;
    const int p = p0 + m;
    const int co = co0 + c;
    if (m < m_end && (S::kCout % P::kBN == 0 || co < S::kCout)) {
      const unsigned short* src = s_h + (S::kOutNhwc ? m * P::kHPitch + c : c * P::kHPitch + m);
      typename S::storage* dst = out_n + out_offset<S>(p, co);
      if constexpr (kVec == 8) {
        *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
      } else if constexpr (kVec == 4) {
        *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(src);
      } else if constexpr (kVec == 2) {
        *reinterpret_cast<unsigned*>(dst) = *reinterpret_cast<const unsigned*>(src);
      } else {
        *reinterpret_cast<unsigned short*>(dst) = *src;
      }
    }
  }
  }
}

// kHalfEpi with a residual: the residual's tile into s_h, where write_half_tile reads it, kVec
// consecutive values along the output's contiguous axis a copy (store_tile_half's order and
// bounds; the places past the plane or the channels are left as they are: their outputs are never
// stored). cp.async (kVec >= 2), every copy of the thread in flight at once, waited for here; the
// caller's barrier then makes the tile visible to the block.
template <class S, int kVec>
__device__ __forceinline__ void load_tile_half(unsigned short* s_h, const typename S::storage* __restrict__ res_n,
                                               int p0, int m_end, int co0) {
  using P = Plan<S>;
  constexpr int kFast = S::kOutNhwc ? P::kBN : P::kBM;
  constexpr int kSlow = S::kOutNhwc ? P::kBM : P::kBN;
  constexpr int kFastVecs = kFast / kVec;
  constexpr int kSlowStep = P::kThreads / kFastVecs;
  static_assert(P::kThreads % kFastVecs == 0 && kSlow % kSlowStep == 0, "whole rows of vectors an iteration");
  const int fast = (int)(threadIdx.x % kFastVecs) * kVec;
  const int slow0 = (int)(threadIdx.x / kFastVecs);
#pragma unroll 4
  for (int slow = slow0; slow < kSlow; slow += kSlowStep) {
    const int m = S::kOutNhwc ? slow : fast;
    const int c = S::kOutNhwc ? fast : slow;
    const int co = co0 + c;
    if (m < m_end && (S::kCout % P::kBN == 0 || co < S::kCout)) {
      unsigned short* dst = s_h + (S::kOutNhwc ? m * P::kHPitch + c : c * P::kHPitch + m);
      const typename S::storage* src = res_n + out_offset<S>(p0 + m, co);
      if constexpr (kVec >= 2) {
        copy_async<2 * kVec>(dst, src);
      } else {
        *dst = *reinterpret_cast<const unsigned short*>(src);
      }
    }
  }
  if constexpr (kVec >= 2) {
    copy_commit();
    copy_wait<0>();
  }
}

// The place of element (r, c) — row r, column c — of the prefetched residual tile (P::kResPrefetch,
// plan.cuh): rows of kFast values unpadded, 16-byte chunk c / 8 of row r at chunk (c / 8) ^ (r % 8).
template <class S>
__device__ __forceinline__ int residual_place(int r, int c) {
  using P = Plan<S>;
  constexpr int kFast = S::kOutNhwc ? P::kBN : P::kBM;
  return r * kFast + ((c >> 3) ^ (r & 7)) * 8 + (c & 7);
}

// P::kResPrefetch: the residual's tile copied into s_r (residual_place's layout) by cp.async, 16 bytes
// a copy, issued before the main loop and committed by the caller; the main loop's last wait and
// barrier make it visible to the block. The places past the plane or the channels are not written.
template <class S>
__device__ __forceinline__ void prefetch_residual(unsigned short* s_r,
                                                  const typename S::storage* __restrict__ res_n, int p0,
                                                  int m_end, int co0) {
  using P = Plan<S>;
  constexpr int kFast = S::kOutNhwc ? P::kBN : P::kBM;
  constexpr int kSlow = S::kOutNhwc ? P::kBM : P::kBN;
  constexpr int kFastVecs = kFast / 8;
  constexpr int kSlowStep = P::kThreads / kFastVecs;
  static_assert(P::kOutVec == 8 && kFast >= 64 && P::kThreads % kFastVecs == 0 && kSlow % kSlowStep == 0,
                "16-byte copies, rows of 8 chunks or more, whole rows of chunks an iteration");
  const int fast = (int)(threadIdx.x % kFastVecs) * 8;
  const int slow0 = (int)(threadIdx.x / kFastVecs);
#pragma unroll
  for (int slow = slow0; slow < kSlow; slow += kSlowStep) {
    const int m = S::kOutNhwc ? slow : fast;
    const int c = S::kOutNhwc ? fast : slow;
    const int co = co0 + c;
    if (m < m_end && (S::kCout % P::kBN == 0 || co < S::kCout)) {
      copy_async<16>(s_r + residual_place<S>(slow, fast), res_n + out_offset<S>(p0 + m, co));
    }
  }
}

// kHalfEpi's tile: acc + bias, E and the one rounding in registers, into the 16-bit tile s_h
// ([kBM][kHPitch] channels-last, [kBN][kHPitch] NCHW). kResidual: s_h holds the residual's tile
// (load_tile_half, then a barrier), added after the bias as store_tile adds it; each value is read
// by the lane that then writes its output in the same place. kResidual with s_r: the residual is the
// prefetched tile there (prefetch_residual) instead. (The caller's barrier then orders the tile's
// reads.)
template <class S, class E, bool kResidual = false>
__device__ __forceinline__ void write_half_tile(const float (&acc)[S::kMT][S::kNT][4], unsigned short* s_h,
                                                const typename S::storage* __restrict__ bias, int co0,
                                                const E& ep, const unsigned short* s_r = nullptr) {
  using P = Plan<S>;
  using T = typename S::storage;
  const int lane = threadIdx.x % 32;
  const int wm = (threadIdx.x / 32) % S::kWarpsM;
  const int wn = (threadIdx.x / 32) / S::kWarpsM;
  // E'd, rounded value of accumulator q of tile (i, j), channel c + q % 2 (bias b[q % 2]; residual
  // bits res, where kResidual).
  auto out = [&](int i, int j, int q, const float (&b)[2], unsigned short res) {
    float x = acc[i][j][q];
    if (S::kHasBias) x += b[q % 2];
    if (kResidual) x += to_float<T>(res);
    return from_float<T>(ep(x, co0 + wn * S::kNT * 8 + j * 8 + 2 * (lane % 4) + q % 2));
  };
  // Bias of channels c, c + 1 (0 past kCout).
  auto bias_pair = [&](int c, float (&b)[2]) {
    b[0] = b[1] = 0.0f;
    if (S::kHasBias) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        if (S::kCout % P::kBN == 0 || co0 + c + e < S::kCout) {
          b[e] = to_float<T>(load_bits(bias + co0 + c + e, true));
        }
      }
    }
  };
  const int t = lane % 4;
#if CUINLINE_CONV2D_HMMA_WGMMA
  // sm_90: one stmatrix a pair of n tiles and m16 rows: matrices (j, rows g), (j, rows g + 8), (j +
  // 1, g), (j + 1, g + 8); .trans for NCHW, whose tile rows are channels. A quarter of the shared
  // stores of 32-bit writes, and for NCHW an eighth of the 16-bit ones (NCHW rows: lane 8k + x
  // addresses channel (j + k / 2) 8 + x, pixels from row0 + 8 (k % 2); channels-last rows: pixel
  // row0 + 8 (k % 2) + x, channels from (j + k / 2) 8; every row 16-byte aligned and the 8 rows of a
  // matrix on distinct bank quads: the pitch is 4 words mod 32).
  const int mat = lane / 8;
  const int mrow = lane % 8;
#pragma unroll
  for (int j = 0; j < S::kNT; j += 2) {
    const int c = wn * S::kNT * 8 + j * 8 + 2 * t;
    float b0[2], b1[2];
    bias_pair(c, b0);
    bias_pair(c + 8, b1);
#pragma unroll
    for (int i = 0; i < S::kMT; ++i) {
      const int m = P::a_row0(wm, i) + 8 * (mat % 2);
      const int cm = wn * S::kNT * 8 + (j + mat / 2) * 8;
      const unsigned at = S::kOutNhwc ? smem_address(s_h + (m + mrow) * P::kHPitch + cm)
                                      : smem_address(s_h + (cm + mrow) * P::kHPitch + m);
      // The residual in the layout stmatrix writes: ldmatrix from the same rows.
      unsigned res[4] = {0, 0, 0, 0};
      if constexpr (kResidual) {
        // (The prefetched tile: this lane's row of its matrix, as residual_place lays it out.)
        const unsigned at_r = s_r == nullptr
                                  ? at
                                  : smem_address(s_r + (S::kOutNhwc ? residual_place<S>(m + mrow, cm)
                                                                    : residual_place<S>(cm + mrow, m)));
        if (S::kOutNhwc) {
          ldmatrix_x4(res, at_r);
        } else {
          ldmatrix_x4_trans(res, at_r);
        }
      }
      unsigned r[4];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        r[h] = out(i, j, 2 * h, b0, res[h] & 0xffffu) | out(i, j, 2 * h + 1, b0, res[h] >> 16) << 16;
        r[2 + h] = out(i, j + 1, 2 * h, b1, res[2 + h] & 0xffffu) | out(i, j + 1, 2 * h + 1, b1, res[2 + h] >> 16)
                                                                           << 16;
      }
      if (S::kOutNhwc) {
        stmatrix_x4(at, r);
      } else {
        stmatrix_x4_trans(at, r);
      }
    }
  }
#else
  // Writes: channels-last, a channel pair as one 32-bit word (a warp's 8 rows x 4 pairs on 32
  // banks: the pitch is 4 words mod 32); NCHW, two 16-bit writes (rows g, channels 2t + e: 16
  // banks, two lanes a word).
  const int g = lane / 4;
#pragma unroll
  for (int j = 0; j < S::kNT; ++j) {
    const int c = wn * S::kNT * 8 + j * 8 + 2 * t;
    float b[2];
    bias_pair(c, b);
#pragma unroll
    for (int i = 0; i < S::kMT; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = P::a_row0(wm, i) + g + 8 * h;
        unsigned short res0 = 0, res1 = 0;
        if constexpr (kResidual) {
          if (s_r == nullptr) {
            res0 = S::kOutNhwc ? s_h[m * P::kHPitch + c] : s_h[c * P::kHPitch + m];
            res1 = S::kOutNhwc ? s_h[m * P::kHPitch + c + 1] : s_h[(c + 1) * P::kHPitch + m];
          } else {
            res0 = S::kOutNhwc ? s_r[residual_place<S>(m, c)] : s_r[residual_place<S>(c, m)];
            res1 = S::kOutNhwc ? s_r[residual_place<S>(m, c + 1)] : s_r[residual_place<S>(c + 1, m)];
          }
        }
        const unsigned r0 = out(i, j, 2 * h, b, res0), r1 = out(i, j, 2 * h + 1, b, res1);
        if (S::kOutNhwc) {
          *reinterpret_cast<unsigned*>(s_h + m * P::kHPitch + c) = r0 | r1 << 16;
        } else {
          s_h[c * P::kHPitch + m] = static_cast<unsigned short>(r0);
          s_h[(c + 1) * P::kHPitch + m] = static_cast<unsigned short>(r1);
        }
      }
    }
  }
#endif
}

}  // namespace cuinline_conv2d_hmma_detail

#endif  // CUINLINE_CONV2D_HMMA_EPILOGUE_CUH
