// conv2d_stage.cuh — the staging copy in front of the f16 / bf16 tensor-core conv (conv2d_hmma.cuh).
//
// That kernel's fast main loop copies its tiles with cp.async, 16 bytes (8 channels) a copy, from a
// channels-last input and weight whose channel count is a multiple of 8. Any other f16 / bf16 call
// (an NCHW input or weight, or fewer / odd channels) is first copied by this kernel into a workspace
// in exactly that form — [image][pixel][cp] for the input and [Cout][tap][cp] for the weight, the
// real channels followed by zeros up to cp (Cin rounded up to 8) — and the conv then runs as the
// channels-last variant with cp input channels (the zero channels add exact zeros). This is what
// cuDNN does for NCHW half-precision convolutions; here it is one extra kernel over the input's
// bytes instead of a 16-bit gather a tap and channel in the conv's main loop.
//
// Shape-generic: the extents, the source layout and the load path are kernel parameters, so one
// module (conv2d_hmma.cpp's make_hmma_stage_request: this header, one kernel) and one cache entry an
// arch serve every staged variant; the conv variants' modules hold only the conv. The values are
// raw 16-bit words, so f16 and bf16 share it.
//
// A tile is 4096 / tc pixels x tc channels of one image: each thread loads two channels (c, c + 1)
// of 8 neighbouring pixels — one 16-byte load a channel where the source is NCHW with a pixel count
// that is a multiple of 8 and 16-byte aligned (the host's `vec`), else 16-bit loads — packs them
// into 32-bit pairs in shared memory [pixel][pair], and after one barrier stores 8 channels of one
// pixel as one 16-byte store (the destination row, cp channels, is a multiple of 16 bytes; the
// workspace is 256-byte aligned). tc (64, 32, 16 or 8: the largest dividing cp) is the host's
// choice, a kernel argument: a power of two, so a thread's pair, pixel group and store lane are
// shifts and masks, and a thread always stores two vectors (512 a tile). One copy of the tile code
// serves all four (with a template instantiation for each tc the module took 202 ms of NVRTC, with
// one 58 ms, CPU build host). The only divisions by run-time values, a block's image and tile, are
// multiplications by host-computed reciprocals (FastDiv), once a block.
//
// cuinline_conv2d_stage_tf32 (the same module): the staging copy of the f32 variants on the TF32 wgmma
// kernel — the same tiles and arguments over 32-bit values, each rounded to TF32 as it is copied.
//
// No standard or toolkit headers.

#ifndef CUINLINE_CONV2D_STAGE_CUH
#define CUINLINE_CONV2D_STAGE_CUH

namespace cuinline_conv2d_stage_detail {

constexpr int kThreads = 256;
// Shared memory of the largest tile: (4096 / tc) pixels x (tc / 2 + 1) words, at tc = 8.
constexpr int kSmemWords = 512 * 5;

// n / d for 0 <= n < 2^31 and d >= 1: (n * mul) >> (32 + shift), with mul = ceil(2^(31 + l) / d),
// shift = l - 1, l = ceil(log2 d) (Granlund and Montgomery); mul = 0 stands for d = 1. Computed by
// the host (conv2d_hmma.cpp's fast_div_of).
struct FastDiv {
  unsigned mul;
  unsigned shift;
};

__device__ __forceinline__ unsigned divide(unsigned n, FastDiv f) {
  return f.mul == 0u ? n : __umulhi(n, f.mul) >> f.shift;
}

}  // namespace cuinline_conv2d_stage_detail

/// One tensor's copy: images x [channels][pixels] (or [pixels][channels] where nhwc) at src ->
/// images x [pixels][cp] at dst. The host's mirror is conv2d_impl::StageTensor (conv2d_internal.hpp),
/// member for member.
struct cuinline_conv2d_stage_tensor {
  const unsigned short* src;  ///< image 0 of the source
  unsigned short* dst;        ///< image 0 of the copy
  long long pixels;           ///< H x W of the input, KH x KW of the weight
  int channels;               ///< Cin (cp: the kernel's argument)
  int nhwc;                   ///< 1: the source is channels-last
  int vec;                    ///< 1: 16-byte loads (NCHW, pixels % 8 == 0, src 16-byte aligned)
  unsigned blocks;            ///< this tensor's blocks: images x tiles (0: not copied)
  unsigned tiles;             ///< tiles an image: tiles_c x pixel tiles
  unsigned tiles_c;           ///< channel tiles an image: cp / tc
  cuinline_conv2d_stage_detail::FastDiv by_tiles;    ///< / tiles
  cuinline_conv2d_stage_detail::FastDiv by_tiles_c;  ///< / tiles_c
};
static_assert(sizeof(cuinline_conv2d_stage_tensor) == 64, "the host's conv2d_impl::StageTensor");

namespace cuinline_conv2d_stage_detail {

// Channel ch of pixels pb .. pb + 7 as raw 16-bit values (zeros past the channels and the pixels).
__device__ __forceinline__ void load8(const cuinline_conv2d_stage_tensor& t,
                                      const unsigned short* __restrict__ src, int ch, long long pb,
                                      unsigned (&v)[8]) {
  if (ch >= t.channels) {
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = 0u;
    return;
  }
  if (t.vec) {  // pixels % 8 == 0 and pb % 8 == 0: the 8 pixels are all in the plane or none is
    if (pb < t.pixels) {
      const uint4 q = __ldg(reinterpret_cast<const uint4*>(src + ch * t.pixels + pb));
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
  const long long stride_c = t.nhwc ? 1 : t.pixels;  // element strides of the source
  const long long stride_p = t.nhwc ? t.channels : 1;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const long long p = pb + i;
    v[i] = p < t.pixels ? static_cast<unsigned>(__ldg(src + ch * stride_c + p * stride_p)) : 0u;
  }
}

// Where block b of tensor t (b < t.blocks) copies: image b / tiles, then pixel tile and channel tile
// (the channel tile varies fastest: neighbouring blocks write neighbouring parts of the same rows) of
// tp pixels x tc channels; src and dst are the image's (in 16-bit units, whatever the values are).
struct TileOf {
  int c0;        // first channel
  long long p0;  // first pixel
  const unsigned short* src;
  unsigned short* dst;
};
__device__ __forceinline__ TileOf tile_of(const cuinline_conv2d_stage_tensor& t, int cp, int tc, int tp, unsigned b,
                                          int words) {
  const unsigned n = divide(b, t.by_tiles);
  const unsigned r = b - n * t.tiles;
  const unsigned pt = divide(r, t.by_tiles_c);
  TileOf o;
  o.c0 = static_cast<int>(r - pt * t.tiles_c) * tc;
  o.p0 = static_cast<long long>(pt) * tp;
  o.src = t.src + static_cast<long long>(n) * t.channels * t.pixels * words;
  o.dst = t.dst + static_cast<long long>(n) * t.pixels * cp * words;
  return o;
}

// The tensor block blockIdx.x copies — the input's first blocks, then the weight's — and its block
// within it; false past both. (A field-by-field choice: no pointer into the parameter space.)
__device__ __forceinline__ bool block_of(const cuinline_conv2d_stage_tensor& input,
                                         const cuinline_conv2d_stage_tensor& weight,
                                         cuinline_conv2d_stage_tensor& t, unsigned& b) {
  b = blockIdx.x;
  const bool w = b >= input.blocks;
  t = w ? weight : input;
  if (w) b -= input.blocks;
  return b < t.blocks;
}

// Block b of tensor t (b < t.blocks): the tile tile_of gives.
__device__ __forceinline__ void copy_tile(const cuinline_conv2d_stage_tensor& t, int cp, int tc, unsigned b,
                                          unsigned* s) {
  const int pairs = tc >> 1;        // channel pairs a tile: a thread's pair is tid % pairs
  const int lp = __ffs(pairs) - 1;  // log2 pairs
  const int tp = 2048 >> lp;        // pixels a tile: 8 x kThreads / pairs
  const int pitch = pairs + 1;      // 32-bit words a pixel in shared memory
  const TileOf at = tile_of(t, cp, tc, tp, b, 1);
  const int c0 = at.c0;
  const long long p0 = at.p0;
  const unsigned short* __restrict__ src = at.src;
  unsigned short* __restrict__ dst = at.dst;
  const int tid = threadIdx.x;
  const int pair = tid & (pairs - 1);
  const int g = tid >> lp;
  unsigned lo[8], hi[8];
  load8(t, src, c0 + 2 * pair, p0 + 8 * g, lo);
  load8(t, src, c0 + 2 * pair + 1, p0 + 8 * g, hi);
#pragma unroll
  for (int i = 0; i < 8; ++i) s[(8 * g + i) * pitch + pair] = lo[i] | hi[i] << 16;
  __syncthreads();
  const int lv = lp - 2;  // log2 of the 16-byte stores a pixel (tc / 8)
  const int v = tid & ((1 << lv) - 1);
#pragma unroll
  for (int k = 0; k < 2; ++k) {  // 512 stores a tile: two a thread
    const int pp = (tid >> lv) + k * (kThreads >> lv);
    const long long p = p0 + pp;
    if (p < t.pixels) {
      const unsigned* w = s + pp * pitch + 4 * v;
      *reinterpret_cast<uint4*>(dst + p * cp + c0 + 8 * v) = make_uint4(w[0], w[1], w[2], w[3]);
    }
  }
}

}  // namespace cuinline_conv2d_stage_detail

/// Blocks [0, input.blocks) copy the input, the next weight.blocks the weight; cp is Cin rounded up
/// to 8 and tc (64, 32, 16 or 8, dividing cp) the channels of a tile, both the host's.
/// Block: 256 threads; no dynamic shared memory.
__global__ void __launch_bounds__(cuinline_conv2d_stage_detail::kThreads)
    cuinline_conv2d_stage(cuinline_conv2d_stage_tensor input, cuinline_conv2d_stage_tensor weight, int cp,
                          int tc) {
  namespace d = cuinline_conv2d_stage_detail;
  __shared__ unsigned s[d::kSmemWords];
  cuinline_conv2d_stage_tensor t;
  unsigned b;
  if (d::block_of(input, weight, t, b)) d::copy_tile(t, cp, tc, b, s);
}

namespace cuinline_conv2d_stage_detail {

// The TF32 form's shared memory: (4096 / tc) pixels x (tc + 1) words, largest at tc = 8.
constexpr int kSmemWords32 = 512 * 9;

// x rounded to TF32 (to nearest, ties away from zero, as cuBLAS / cuDNN round TF32 operands): the
// 32-bit pattern with the low 13 mantissa bits zero.
__device__ __forceinline__ unsigned round_tf32(unsigned x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned r;
  asm("{\n  .reg .f32 f;\n  mov.b32 f, %1;\n  cvt.rna.tf32.f32 %0, f;\n}\n" : "=r"(r) : "r"(x));
  return r;
#elif defined(__CUDA_ARCH__)
  return x;  // (no TF32 before sm_80: the module compiles there, this kernel is never launched)
#else
  // The host emulation (tests/test_conv2d_stage_emulated.cpp): half a TF32 ulp added to the
  // magnitude, then truncated (ties away from zero; a carry into the exponent rounds up to Inf);
  // Inf stays, NaN becomes the canonical NaN.
  if ((x & 0x7f800000u) == 0x7f800000u) return (x & 0x007fffffu) != 0u ? 0x7fffffffu : x;
  return (x + 0x1000u) & 0xffffe000u;
#endif
}

// copy_tile over 32-bit values: the same tile (tp = 4096 / tc pixels x tc channels, the host's
// hmma_stage_tiles), 16 values a thread loaded along the source's contiguous axis (pixels for NCHW,
// channels for channels-last), rounded to TF32, through shared memory [pixel][tc + 1 words], then
// stored as 16-byte runs of 4 channels (a row of cp values is a multiple of 32 bytes, the workspace
// 256-byte aligned).
__device__ __forceinline__ void copy_tile32(const cuinline_conv2d_stage_tensor& t, int cp, int tc, unsigned b,
                                            unsigned* s) {
  const int lc = __ffs(tc) - 1;  // log2 tc
  const int lp = 12 - lc;        // log2 of the tile's pixels
  const int tp = 1 << lp;
  const int pitch = tc + 1;
  const TileOf at = tile_of(t, cp, tc, tp, b, 2);
  const int c0 = at.c0;
  const long long p0 = at.p0;
  const unsigned* __restrict__ src = reinterpret_cast<const unsigned*>(at.src);
  unsigned* __restrict__ dst = reinterpret_cast<unsigned*>(at.dst);
  const int tid = threadIdx.x;
#pragma unroll 4
  for (int i = 0; i < 16; ++i) {
    const int e = i * kThreads + tid;
    const int c = t.nhwc ? e & (tc - 1) : e >> lp;
    const int p = t.nhwc ? e >> lc : e & (tp - 1);
    const int ch = c0 + c;
    const long long px = p0 + p;
    unsigned v = 0u;
    if (ch < t.channels && px < t.pixels) {
      v = round_tf32(__ldg(src + (t.nhwc ? px * t.channels + ch : ch * t.pixels + px)));
    }
    s[p * pitch + c] = v;
  }
  __syncthreads();
  const int lv = lc - 2;  // log2 of the 16-byte stores a pixel (tc / 4)
#pragma unroll
  for (int k = 0; k < 4; ++k) {  // 1024 stores a tile: four a thread
    const int e = k * kThreads + tid;
    const int pp = e >> lv;
    const int v = e & ((1 << lv) - 1);
    const long long p = p0 + pp;
    if (p < t.pixels) {
      const unsigned* w = s + pp * pitch + 4 * v;
      *reinterpret_cast<uint4*>(dst + p * cp + c0 + 4 * v) = make_uint4(w[0], w[1], w[2], w[3]);
    }
  }
}

}  // namespace cuinline_conv2d_stage_detail

/// The staging copy of the f32 variants on the TF32 wgmma kernel (conv2d_hmma.cuh with float
/// storage): the same arguments and tiles as cuinline_conv2d_stage over 32-bit values (the tensors'
/// src / dst point at floats), every value rounded to TF32 on the way (the tensor cores would
/// truncate it), zeros past the channels. cp is Cin rounded up to 8, tc (64, 32, 16 or 8) divides it.
__global__ void __launch_bounds__(cuinline_conv2d_stage_detail::kThreads)
    cuinline_conv2d_stage_tf32(cuinline_conv2d_stage_tensor input, cuinline_conv2d_stage_tensor weight, int cp,
                               int tc) {
  namespace d = cuinline_conv2d_stage_detail;
  __shared__ unsigned s[d::kSmemWords32];
  cuinline_conv2d_stage_tensor t;
  unsigned b;
  if (d::block_of(input, weight, t, b)) d::copy_tile32(t, cp, tc, b, s);
}

#endif  // CUINLINE_CONV2D_STAGE_CUH
