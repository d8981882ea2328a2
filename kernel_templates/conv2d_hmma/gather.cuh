// conv2d_hmma/gather.cuh — a thread's accumulators (zeroed; fenced past wgmma waits) and the
// register gather of a k step (any layout): 16-bit loads into registers, then into shared memory.

#ifndef CUINLINE_CONV2D_HMMA_GATHER_CUH
#define CUINLINE_CONV2D_HMMA_GATHER_CUH

namespace cuinline_conv2d_hmma_detail {

#if CUINLINE_CONV2D_HMMA_WGMMA
// Every accumulator of a thread past the last wgmma wait (the compiler keeps their reads after it).
template <class S>
__device__ __forceinline__ void fence_accumulators(float (&acc)[S::kMT][S::kNT][4]) {
#pragma unroll
  for (int i = 0; i < S::kMT; ++i) {
#pragma unroll
    for (int j = 0; j < S::kNT; ++j) {
#pragma unroll
      for (int q = 0; q < 4; ++q) fence_operand(acc[i][j][q]);
    }
  }
}
#endif

// A thread's accumulators, zeroed.
template <class S>
__device__ __forceinline__ void zero_accumulators(float (&acc)[S::kMT][S::kNT][4]) {
#pragma unroll
  for (int i = 0; i < S::kMT; ++i) {
#pragma unroll
    for (int j = 0; j < S::kNT; ++j) {
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.0f;
    }
  }
}

// The raw 16 bits of an element (0 where !ok: zero padding). kPredicated (device): one predicated
// load instead of `ok ? __ldg(p) : 0`, a branch around each load until ptxas converts it. Used by the
// gather of a short reduction (kAllAtOnce: up to 64 words a thread requested at once, the seed's 120
// loads) given at least 168 registers a thread, where it takes ~25 % off NVRTC's time (optimizer and
// ptxas); elsewhere the branch form (predicated there, ptxas keeps more loads in flight and spilled
// tilings of 128 registers). p is not read where !ok either way.
#ifndef CUINLINE_CONV2D_HMMA_EMULATED
template <bool kPredicated = false, class T>
__device__ __forceinline__ unsigned load_bits(const T* p, bool ok) {
  if constexpr (kPredicated) {
    unsigned short v;
    asm("{\n  .reg .pred p;\n  setp.ne.b32 p, %2, 0;\n  mov.b16 %0, 0;\n  @p ld.global.nc.u16 %0, [%1];\n}\n"
        : "=h"(v)
        : "l"(p), "r"(ok ? 1 : 0));
    return v;
  } else {
    return ok ? static_cast<unsigned>(__ldg(reinterpret_cast<const unsigned short*>(p))) : 0u;
  }
}
#else
template <bool kPredicated = false, class T>
unsigned load_bits(const T* p, bool ok) {
  return ok ? static_cast<unsigned>(__ldg(reinterpret_cast<const unsigned short*>(p))) : 0u;
}
#endif
template <class T>
__device__ __forceinline__ float to_float(unsigned bits) {
  T h;
  h.bits = static_cast<unsigned short>(bits);
  return ew_traits<T>::to_op(h);
}
template <class T>
__device__ __forceinline__ unsigned from_float(float x) {
  return ew_traits<T>::from_op(x).bits;
}

// One thread's share of a k step, gathered into registers: A pairs (pixel r, pair j) and B pairs
// (channel r, pair j), each two consecutive k packed low-first (the order ldmatrix expects).
template <class S>
struct Fetch {
  unsigned a[Plan<S>::kARows][Plan<S>::kAPairs];
  unsigned b[Plan<S>::kBRows][Plan<S>::kBPairs];
};

// The pixel state of a thread's A rows, fixed for the block: the first input row and column its
// filter window reads (iy0 >= kH marks a pixel past the plane: every tap then reads nothing).
template <class S>
struct Pixels {
  int iy0[Plan<S>::kAPixels];
  int ix0[Plan<S>::kAPixels];
};

// The filter tap and input channel of column k (0 <= k < kBK) of k step `step`; tap_ok: the tap
// exists (two taps a step: the last step of an odd tap count has only one), ci_ok: a real channel.
template <class S>
__device__ __forceinline__ void tap_channel(int step, int k, int& kh, int& kw, bool& tap_ok, int& ci,
                                            bool& ci_ok) {
  using P = Plan<S>;
  int tap;
  if (P::kTapsPerStep == 2) {
    tap = 2 * step + k / 8;
    ci = k % 8;
  } else {
    tap = step / P::kCiSteps;
    ci = (step - tap * P::kCiSteps) * S::kBK + k;
  }
  kh = tap / S::kKW;
  kw = tap - kh * S::kKW;
  tap_ok = P::kTapsPerStep == 1 || P::kTaps % 2 == 0 || tap < P::kTaps;
  ci_ok = (P::kTapsPerStep == 1 && S::kCin % S::kBK == 0) || ci < S::kCin;
}

// One thread's share of k step `step`, into registers (zeros for padding channels, taps past the
// last, taps outside the image, pixels past the plane and channels past Cout). Offsets within an
// image or a weight row are 32-bit (an image has fewer than 2^31 elements, a weight row fewer than
// 2^22) and unsigned: where a load is off its offset may wrap, and nothing is read there.
template <class S>
__device__ __forceinline__ void fetch(Fetch<S>& f, const Pixels<S>& px,
                                      const typename S::storage* __restrict__ in_n,
                                      const typename S::storage* __restrict__ weight, int co0, int step,
                                      int am0, int ak0, int bn0, int bk0) {
  using P = Plan<S>;
  using T = typename S::storage;
  constexpr bool kPred = P::kAllAtOnce && P::kThreads * S::kMinBlocks <= 384;  // (see load_bits)
  (void)am0;
  if constexpr (P::kATrans) {
    // Column k of pixels 2 am0 and 2 am0 + 1 (low, high half).
#pragma unroll
    for (int j = 0; j < P::kAPairs; ++j) {
      int kh, kw, ci;
      bool tap_ok, ci_ok;
      tap_channel<S>(step, ak0 + j * P::kAThreadsK, kh, kw, tap_ok, ci, ci_ok);
      unsigned word = 0;
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int iy = px.iy0[e] + kh * S::kDH;
        const int ix = px.ix0[e] + kw * S::kDW;
        const bool ok = tap_ok && ci_ok && iy >= 0 && iy < S::kH && ix >= 0 && ix < S::kW;
        const unsigned at = static_cast<unsigned>(iy) * static_cast<unsigned>(P::kInY) +
                            static_cast<unsigned>(ix) * static_cast<unsigned>(P::kInX) +
                            static_cast<unsigned>(ci) * static_cast<unsigned>(P::kInC);
        word |= load_bits<kPred>(in_n + at, ok) << (16 * e);
      }
      f.a[0][j] = word;
    }
  } else {
    // Columns k, k + 1 of pixel am0 + r * kAThreadsM (one tap: kCiPad is even).
#pragma unroll
    for (int r = 0; r < P::kARows; ++r) {
#pragma unroll
      for (int j = 0; j < P::kAPairs; ++j) {
        int kh, kw, ci;
        bool tap_ok, ci_ok;
        tap_channel<S>(step, 2 * (ak0 + j * P::kAThreadsK), kh, kw, tap_ok, ci, ci_ok);
        const int iy = px.iy0[r] + kh * S::kDH;
        const int ix = px.ix0[r] + kw * S::kDW;
        const bool inside = tap_ok && iy >= 0 && iy < S::kH && ix >= 0 && ix < S::kW;
        const unsigned at = static_cast<unsigned>(iy) * static_cast<unsigned>(P::kInY) +
                            static_cast<unsigned>(ix) * static_cast<unsigned>(P::kInX) +
                            static_cast<unsigned>(ci) * static_cast<unsigned>(P::kInC);
        const bool ci1_ok = (P::kTapsPerStep == 1 && S::kCin % S::kBK == 0) || ci + 1 < S::kCin;
        f.a[r][j] = load_bits<kPred>(in_n + at, inside && ci_ok) |
                    load_bits<kPred>(in_n + (at + static_cast<unsigned>(P::kInC)), inside && ci1_ok) << 16;
      }
    }
  }
  // B: columns k, k + 1 of channel co0 + bn0 + r * kBThreadsN.
#pragma unroll
  for (int r = 0; r < P::kBRows; ++r) {
    const int co = co0 + bn0 + r * P::kBThreadsN;
    const bool co_ok = S::kCout % P::kBN == 0 || co < S::kCout;
    // A weight of fewer than 2^31 elements: one 32-bit offset (no 64-bit row pointers to keep).
    constexpr bool kWSmall = S::kCout * P::kWO < (1ll << 31);
    const T* w_co = kWSmall ? weight : weight + (co_ok ? co : 0) * P::kWO;
    const unsigned w_row = kWSmall ? static_cast<unsigned>(co) * static_cast<unsigned>(P::kWO) : 0u;
#pragma unroll
    for (int j = 0; j < P::kBPairs; ++j) {
      int kh, kw, ci;
      bool tap_ok, ci_ok;
      tap_channel<S>(step, 2 * (bk0 + j * P::kBThreadsK), kh, kw, tap_ok, ci, ci_ok);
      const bool ok = co_ok && tap_ok;
      const unsigned at = w_row + static_cast<unsigned>(kh) * static_cast<unsigned>(P::kWY) +
                          static_cast<unsigned>(kw) * static_cast<unsigned>(P::kWX) +
                          static_cast<unsigned>(ci) * static_cast<unsigned>(P::kWI);
      const bool ci1_ok = (P::kTapsPerStep == 1 && S::kCin % S::kBK == 0) || ci + 1 < S::kCin;
      f.b[r][j] = load_bits<kPred>(w_co + at, ok && ci_ok) |
                  load_bits<kPred>(w_co + (at + static_cast<unsigned>(P::kWI)), ok && ci1_ok) << 16;
    }
  }
}

template <class S>
__device__ __forceinline__ void store_stage(const Fetch<S>& f, unsigned short* s_a, int am0, int ak0, int bn0,
                                            int bk0) {
  using P = Plan<S>;
  unsigned short* s_b = s_a + P::kAElems;
#pragma unroll
  for (int r = 0; r < P::kARows; ++r) {
#pragma unroll
    for (int j = 0; j < P::kAPairs; ++j) {
      if (P::kATrans) {  // [k][pixel]: pixels 2 am0, 2 am0 + 1 of column k
        const int k = ak0 + j * P::kAThreadsK;
        *reinterpret_cast<unsigned*>(s_a + k * P::kAPitchT + 2 * am0) = f.a[r][j];
      } else {  // [pixel][k]: columns k, k + 1 of the pixel
        const int m = am0 + r * P::kAThreadsM;
        const int k = 2 * (ak0 + j * P::kAThreadsK);
        *reinterpret_cast<unsigned*>(s_a + m * P::kPitch + k) = f.a[r][j];
      }
    }
  }
#pragma unroll
  for (int r = 0; r < P::kBRows; ++r) {
#pragma unroll
    for (int j = 0; j < P::kBPairs; ++j) {
      const int n = bn0 + r * P::kBThreadsN;
      const int k = 2 * (bk0 + j * P::kBThreadsK);
      *reinterpret_cast<unsigned*>(s_b + n * P::kPitch + k) = f.b[r][j];
    }
  }
}

}  // namespace cuinline_conv2d_hmma_detail

#endif  // CUINLINE_CONV2D_HMMA_GATHER_CUH
