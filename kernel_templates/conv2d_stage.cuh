// conv2d_stage.cuh — the staging copy in front of the f16 / bf16 tensor-core conv (conv2d_hmma.cuh).
//
// That kernel's fast main loop copies its tiles with cp.async, 16 bytes (8 channels) a copy, from a
// channels-last input and weight whose channel count is a multiple of 8. Any other f16 / bf16 call
// (an NCHW input or weight, or fewer / odd channels) is first copied by this kernel into a workspace
// in exactly that form — [image][pixel][kCp] for the input and [Cout][tap][kCp] for the weight, the
// kCin real channels followed by zeros up to kCp (kCin rounded up to 8) — and the conv then runs as
// the channels-last variant with kCp input channels (the zero channels add exact zeros). This is what
// cuDNN does for NCHW half-precision convolutions; here it is one extra kernel over the input's
// bytes instead of a 16-bit gather a tap and channel in the conv's main loop.
//
// A tile is kTP pixels x kTC channels of one image: each thread loads two channels (c, c + 1) of 8
// neighbouring pixels — one 16-byte load a channel where the source is NCHW with kP % 8 == 0 and
// 16-byte aligned, else 16-bit loads — packs them into 32-bit pairs in shared memory [pixel][pair],
// and after one barrier stores 8 channels of one pixel as one 16-byte store (the destination row,
// kCp channels, is a multiple of 16 bytes; the workspace is 256-byte aligned).
//
// Required members of S (`static constexpr int`): kCin, kH, kW, kKH, kKW, kCp (kCin rounded up to 8),
// kInNhwc, kWNhwc (the source layouts, 0 or 1), kStageInput, kStageWeight (0 or 1: which of the two
// this variant copies). No standard or toolkit headers.

#ifndef CUINLINE_CONV2D_STAGE_CUH
#define CUINLINE_CONV2D_STAGE_CUH

namespace cuinline_conv2d_stage_detail {

constexpr int kThreads = 256;

// One tensor's copy: kImages x [kC][kP] (or [kP][kC] when kSrcNhwc) -> kImages x [kP][kCp].
template <int kC_, long long kP_, int kCp_, int kSrcNhwc>
struct Copy {
  static constexpr int kC = kC_;
  static constexpr long long kP = kP_;
  static constexpr int kCp = kCp_;
  // Channels a tile: the largest of 64, 32, 16, 8 that divides kCp (kThreads / (kTC / 2) whole pixel groups).
  static constexpr int kTC = kCp % 64 == 0 ? 64 : kCp % 32 == 0 ? 32 : kCp % 16 == 0 ? 16 : 8;
  static constexpr int kPairs = kTC / 2;
  static constexpr int kGroups = kThreads / kPairs;  // groups of 8 pixels a tile
  static constexpr int kTP = 8 * kGroups;             // pixels a tile
  static constexpr long long kTilesP = (kP + kTP - 1) / kTP;
  static constexpr int kTilesC = kCp / kTC;
  static constexpr long long kTiles = kTilesP * kTilesC;  // tiles an image
  static constexpr int kPitch = kPairs + 1;               // 32-bit words a pixel in shared memory
  static constexpr int kSmemWords = kTP * kPitch;
  static constexpr bool kVec = !kSrcNhwc && kP % 8 == 0;
  static constexpr long long kSrcImage = (long long)kC * kP;
  static constexpr long long kDstImage = kP * kCp;
  static constexpr long long kStrideC = kSrcNhwc ? 1 : kP;  // element strides of the source
  static constexpr long long kStrideP = kSrcNhwc ? kC : 1;
  static_assert(kCp % 8 == 0 && kCp >= kC && kCp - kC < 8, "kCp: kC rounded up to 8");
  static_assert(kCp % kTC == 0 && kTC % 8 == 0 && kThreads % kPairs == 0, "tile");
};

// Channel ch of pixels pb .. pb + 7 as raw 16-bit values (zeros past the channels and the pixels).
template <class C>
__device__ __forceinline__ void load8(const unsigned short* __restrict__ src, int ch, long long pb, bool vec,
                                      unsigned (&v)[8]) {
  if (ch >= C::kC) {
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = 0u;
    return;
  }
  if (C::kVec && vec) {  // kP % 8 == 0 and pb % 8 == 0: the 8 pixels are all in the plane or none is
    if (pb < C::kP) {
      const uint4 q = __ldg(reinterpret_cast<const uint4*>(src + ch * C::kStrideC + pb));
      const unsigned w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        v[2 * i] = w[i] & 0xffffu;
        v[2 * i + 1] = w[i] >> 16;
      }
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = 0u;
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const long long p = pb + i;
    v[i] = p < C::kP ? static_cast<unsigned>(__ldg(src + ch * C::kStrideC + p * C::kStrideP)) : 0u;
  }
}

// Tile `tile` of one image: src_n -> dst_n.
template <class C>
__device__ __forceinline__ void copy_tile(const unsigned short* __restrict__ src_n, unsigned short* __restrict__ dst_n,
                                          long long tile, bool vec, unsigned* s) {
  const int tid = threadIdx.x;
  const int tc = (int)(tile % C::kTilesC);
  const long long p0 = (tile / C::kTilesC) * C::kTP;
  const int c0 = tc * C::kTC;
  const int pair = tid % C::kPairs;
  const int g = tid / C::kPairs;
  unsigned lo[8], hi[8];
  load8<C>(src_n, c0 + 2 * pair, p0 + 8 * g, vec, lo);
  load8<C>(src_n, c0 + 2 * pair + 1, p0 + 8 * g, vec, hi);
#pragma unroll
  for (int i = 0; i < 8; ++i) s[(8 * g + i) * C::kPitch + pair] = lo[i] | hi[i] << 16;
  __syncthreads();
  constexpr int kVecs = C::kTC / 8;  // 16-byte stores a pixel
  constexpr int kStep = kThreads / kVecs;
  const int v = tid % kVecs;
#pragma unroll 4
  for (int pp = tid / kVecs; pp < C::kTP; pp += kStep) {
    const long long p = p0 + pp;
    if (p < C::kP) {
      const unsigned* w = s + pp * C::kPitch + 4 * v;
      *reinterpret_cast<uint4*>(dst_n + p * C::kCp + c0 + 8 * v) = make_uint4(w[0], w[1], w[2], w[3]);
    }
  }
}

template <class S>
struct Stage {
  using In = Copy<S::kCin, (long long)S::kH * S::kW, S::kCp, S::kInNhwc>;
  using W = Copy<S::kCin, (long long)S::kKH * S::kKW, S::kCp, S::kWNhwc>;
  static constexpr int kSmemWords = In::kSmemWords > W::kSmemWords ? In::kSmemWords : W::kSmemWords;
  static_assert(S::kStageInput || S::kStageWeight, "nothing to stage");
};

}  // namespace cuinline_conv2d_stage_detail

/// Blocks [0, n_images * In::kTiles) copy the input into in_ws (when kStageInput), the next
/// kCout * W::kTiles blocks the weight into w_ws (when kStageWeight; kCout = the launch's w_images).
/// Block: 256 threads; no dynamic shared memory.
template <class S>
__global__ void __launch_bounds__(cuinline_conv2d_stage_detail::kThreads)
    cuinline_conv2d_stage(const unsigned short* __restrict__ input, unsigned short* __restrict__ in_ws,
                          const unsigned short* __restrict__ weight, unsigned short* __restrict__ w_ws,
                          int n_images) {
  namespace d = cuinline_conv2d_stage_detail;
  using St = d::Stage<S>;
  __shared__ unsigned s[St::kSmemWords];
  long long b = blockIdx.x;
  if (S::kStageInput) {
    using C = typename St::In;
    const long long blocks = (long long)n_images * C::kTiles;
    if (b < blocks) {
      const long long n = b / C::kTiles;
      const bool vec = (reinterpret_cast<unsigned long long>(input) & 15ull) == 0;
      d::copy_tile<C>(input + n * C::kSrcImage, in_ws + n * C::kDstImage, b - n * C::kTiles, vec, s);
      return;
    }
    b -= blocks;
  }
  if (S::kStageWeight) {
    using C = typename St::W;
    const long long o = b / C::kTiles;
    const bool vec = (reinterpret_cast<unsigned long long>(weight) & 15ull) == 0;
    d::copy_tile<C>(weight + o * C::kSrcImage, w_ws + o * C::kDstImage, b - o * C::kTiles, vec, s);
  }
}

#endif  // CUINLINE_CONV2D_STAGE_CUH
