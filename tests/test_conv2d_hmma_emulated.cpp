// The f16 / bf16 tensor-core conv2d kernel (kernel_templates/conv2d_hmma.cuh) run on the host: each
// block's threads are lanes (fibers, tests/emulated_lanes.hpp: a barrier for __syncthreads, one a
// warp for the warp-wide instructions), ldmatrix.x4 (.trans) and mma.sync m16n8k16 emulated from
// the PTX ISA's layouts, so the kernel's gather, shared-memory layout, fragment addressing and
// epilogue are checked against a float64 reference without a GPU. The shape constants of each case
// are the host plan's (checked against conv2d_tiling at run time); outputs are poisoned (NaN)
// first. Cases: the issue's shapes at small images, odd channel counts, every layout combination,
// stride, dilation, non-square filters, a residual, channels beyond one block column. The cp.async
// main loop (channels-last input and weight) runs with its copies landing at their wait (the latest
// they may) and at issue (the earliest), and compiled for an unaligned input (the register gather
// the host picks then) or an unaligned output (one element a store), run on pointers misaligned
// that way. Every global read must fall inside a tensor of the call.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <cuinline/conv2d.hpp>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "elementwise_reference.hpp"
#include "emulated_lanes.hpp"
#include "ops/conv2d/tiling.hpp"

#define CUINLINE_CONV2D_HMMA_EMULATED 1
#define __device__
#define __global__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(threads, blocks)

namespace {

struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};
Dim3 blockIdx, gridDim;
// (Lane i of a block is its thread i.)
#define threadIdx (Dim3{static_cast<unsigned>(cuinline::test::lanes::lane_index()), 0, 0})


}  // namespace

struct uint2 {
  unsigned x, y;
};
struct uint4 {
  unsigned x, y, z, w;
};
struct float2 {
  float x, y;
};
struct float4 {
  float x, y, z, w;
};
inline float2 make_float2(float x, float y) {
  return {x, y};
}
inline float4 make_float4(float x, float y, float z, float w) {
  return {x, y, z, w};
}
inline uint2 make_uint2(unsigned x, unsigned y) {
  return {x, y};
}
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) {
  return {x, y, z, w};
}
struct ew_half {
  unsigned short bits;
};
struct ew_bf16 {
  unsigned short bits;
};
template <class T>
struct ew_traits;
struct cuinline_conv2d_chan {  // as ew_common.cuh's
  const void* p[4];
};
template <>
struct ew_traits<ew_half> {
  static float to_op(ew_half h) { return cuinline::test::half_to_float(h.bits); }
  static ew_half from_op(float x) { return {cuinline::test::float_to_half(x)}; }
};
template <>
struct ew_traits<ew_bf16> {
  static float to_op(ew_bf16 h) { return cuinline::test::bf16_to_float(h.bits); }
  static ew_bf16 from_op(float x) { return {cuinline::test::float_to_bf16(x)}; }
};
// The tensors of the running case: every global read must fall inside one of them.
struct Extent {
  const void* begin;
  std::size_t bytes;
};
std::vector<Extent> g_tensors;
inline bool in_a_tensor(const void* p, std::size_t bytes) {
  for (const Extent& e : g_tensors) {
    const auto* b = static_cast<const unsigned char*>(e.begin);
    const auto* q = static_cast<const unsigned char*>(p);
    if (q >= b && q + bytes <= b + e.bytes) return true;
  }
  return false;
}
inline unsigned short __ldg(const unsigned short* p) {
  EXPECT_TRUE(in_a_tensor(p, 2)) << "a read outside every tensor";
  return *p;
}
inline unsigned __ldg(const unsigned* p) {
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 4, 0u) << "a 4-byte load must be aligned";
  EXPECT_TRUE(in_a_tensor(p, 4)) << "a read outside every tensor";
  return *p;
}
inline uint2 __ldg(const uint2* p) {
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 8, 0u) << "an 8-byte load must be aligned";
  EXPECT_TRUE(in_a_tensor(p, 8)) << "a read outside every tensor";
  return *p;
}
inline float __ldg(const float* p) {
  EXPECT_TRUE(in_a_tensor(p, 4)) << "a read outside every tensor";
  return *p;
}
inline float2 __ldg(const float2* p) {
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 8, 0u) << "an 8-byte load must be aligned";
  EXPECT_TRUE(in_a_tensor(p, 8)) << "a read outside every tensor";
  return *p;
}
inline float4 __ldg(const float4* p) {
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 16, 0u) << "a 16-byte load must be aligned";
  EXPECT_TRUE(in_a_tensor(p, 16)) << "a read outside every tensor";
  return *p;
}
// The split form's workspace accesses (blocks run one after another here: a plain load, store and
// increment; no fence needed).
inline void __stcg(float4* p, float4 v) {
  *p = v;
}
inline float4 __ldcg(const float4* p) {
  return *p;
}
inline unsigned atomicAdd(unsigned* p, unsigned v) {
  const unsigned old = *p;
  *p = old + v;
  return old;
}
inline void __threadfence() {}

#include "emulated_sm80.hpp"
using cuinline_emulated_sm80::Block;
using cuinline_emulated_sm80::g_block;

namespace cuinline_conv2d_hmma_detail {

using namespace cuinline_emulated_sm80;  // (the kernel calls the arch instructions unqualified)

#ifdef CUINLINE_CONV2D_WGMMA_EMULATED
// wgmma.mma_async m64nNk16, emulated from the PTX ISA: the descriptors (start address >> 4 in bits
// 0-13, stride byte offset >> 4 in bits 32-45, swizzle mode in bits 62-63) are decoded here and the
// K-major swizzled layouts read as the ISA defines them: row r of the 64 (or N) rows at start + (r /
// 8) * stride + (r % 8) * row bytes, element k 2k bytes further, the address's bits [4, 7) XOR'd
// with its bits [7, 10) (masked to the swizzle's width). A thread's accumulators d[j][q] are row
// 16 (warp % 4) + lane / 4 + 8 (q / 2), column 8 j + 2 (lane % 4) + q % 2. An operation reads its
// tiles at the opposite end from the copies: at once where the copies land at their wait (catches
// a read before its copies landed), at its group's wait where the copies land at issue (catches a
// copy into a buffer a wgmma in flight still reads).
struct WgmmaOp {
  unsigned long long a, b;
  int n;
  float* d;
  bool bf16;
  int elem;  // bytes an operand: 2, or 4 (TF32: k8)
};
// A thread's wgmma operations: not yet committed, its committed groups, and whether it fenced
// (by thread, set up for each block).
struct ThreadWgmma {
  std::vector<WgmmaOp> uncommitted;
  std::vector<std::vector<WgmmaOp>> groups;
  bool fenced = false;
};
std::vector<ThreadWgmma> g_wgmma;
inline ThreadWgmma& my_wgmma() {
  return g_wgmma[cuinline::test::lanes::lane_index()];
}

// An operand of `elem` bytes at shared byte `at`.
inline double wgmma_value(unsigned at, int elem, bool bf16) {
  if (!in_smem(at, static_cast<unsigned>(elem))) return 0;
  if (elem == 4) return load_smem<float>(at);
  const unsigned short h = load_smem<unsigned short>(at);
  return bf16 ? operand_value<ew_bf16>(h) : operand_value<ew_half>(h);
}
inline double wgmma_element(unsigned long long desc, int row, int k, bool bf16, int elem) {
  const unsigned start = static_cast<unsigned>(desc & 0x3FFF) << 4;
  const unsigned stride = static_cast<unsigned>((desc >> 32) & 0x3FFF) << 4;
  const unsigned mode = static_cast<unsigned>(desc >> 62);
  if (mode == 0) {
    // No swizzle (the halo tiling's A): 8 x 16-byte core matrices, row r % 8 at 16 (r % 8) bytes,
    // the 8-row groups `stride` apart, the k 8..15 core matrix the leading byte offset further.
    const unsigned leading = static_cast<unsigned>((desc >> 16) & 0x3FFF) << 4;
    const int per_core = 16 / elem;  // k values a 16-byte core-matrix row holds
    const unsigned at =
        start + (row / 8) * stride + (k / per_core) * leading + (row % 8) * 16 + elem * (k % per_core);
    return wgmma_value(at, elem, bf16);
  }
  const unsigned row_bytes = mode == 1 ? 128 : mode == 2 ? 64 : 32;
  const unsigned logical = start + (row / 8) * stride + (row % 8) * row_bytes + elem * k;
  const unsigned physical = logical ^ (((logical >> 7) & (row_bytes / 16 - 1)) << 4);
  return wgmma_value(physical, elem, bf16);
}
// The thread's accumulators: each A row and B column it needs read once (its 2 rows, its n / 4
// columns), then the sums in k order.
inline void wgmma_perform(const WgmmaOp& op) {
  const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4;
  const int ks = 32 / op.elem;  // k16, or k8 for TF32
  if (op.n % 8 != 0 || op.n > 256) {
    ADD_FAILURE() << "wgmma n" << op.n << ": a multiple of 8 up to 256";
    return;
  }
  double a[2][16], b[256 / 4][16];
  for (int h = 0; h < 2; ++h) {
    for (int k = 0; k < ks; ++k) a[h][k] = wgmma_element(op.a, 16 * warp + lane / 4 + 8 * h, k, op.bf16, op.elem);
  }
  for (int c = 0; c < op.n / 4; ++c) {
    const int col = 8 * (c / 2) + 2 * (lane % 4) + c % 2;
    for (int k = 0; k < ks; ++k) b[c][k] = wgmma_element(op.b, col, k, op.bf16, op.elem);
  }
  for (int j = 0; j < op.n / 8; ++j) {
    for (int q = 0; q < 4; ++q) {
      const double* ar = a[q / 2];
      const double* bc = b[2 * j + q % 2];
      double sum = op.d[4 * j + q];
      for (int k = 0; k < ks; ++k) sum += ar[k] * bc[k];
      op.d[4 * j + q] = static_cast<float>(sum);
    }
  }
}
template <class T, int kN>
struct Wgmma {
  static void run(float (&d)[kN / 8][4], unsigned long long a, unsigned long long b) {
    EXPECT_TRUE(my_wgmma().fenced) << "wgmma.fence before the first wgmma of a batch";
    const WgmmaOp op{a, b, kN, &d[0][0], std::is_same_v<T, ew_bf16>, static_cast<int>(sizeof(T))};
    if (!g_copies_at_issue) {
      wgmma_perform(op);
    } else {
      my_wgmma().uncommitted.push_back(op);
    }
  }
};
inline void wgmma_fence() {
  my_wgmma().fenced = true;
}
inline void wgmma_commit() {
  ThreadWgmma& mine = my_wgmma();
  mine.groups.push_back(std::move(mine.uncommitted));
  mine.uncommitted.clear();
  mine.fenced = false;
}
template <int kPending>
inline void wgmma_wait() {
  std::vector<std::vector<WgmmaOp>>& groups = my_wgmma().groups;
  while (groups.size() > static_cast<std::size_t>(kPending)) {
    for (const WgmmaOp& op : groups.front()) wgmma_perform(op);
    groups.erase(groups.begin());
  }
}
inline void fence_async_shared() {}
inline void fence_operand(float&) {}
// stmatrix.x4 (sm_90): a lane's word j is row lane / 4, columns 2 (lane % 4), + 1 (low, high) of
// matrix j, whose row x goes to the address lane 8j + x gives; .trans stores column x there instead.
inline void stmatrix_x4_any(unsigned addr, const unsigned (&r)[4], bool trans) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  Block& b = *g_block;
  if (addr % 16 != 0) ADD_FAILURE() << "stmatrix row addresses are 16-byte aligned: " << addr;
  unsigned(&words)[32][6] = exchange_words(b, warp);
  words[lane][0] = addr;
  b.warp[warp]->arrive_and_wait();
  const int g = lane / 4, t = lane % 4;
  for (int j = 0; j < 4; ++j) {
    for (int e = 0; e < 2; ++e) {
      const unsigned short h = static_cast<unsigned short>(r[j] >> (16 * e));
      const unsigned at = trans ? words[8 * j + 2 * t + e][0] + 2 * g : words[8 * j + g][0] + 2 * (2 * t + e);
      if (!in_smem(at, 2)) continue;
      b.smem[at] = static_cast<unsigned char>(h);
      b.smem[at + 1] = static_cast<unsigned char>(h >> 8);
    }
  }
}
inline void stmatrix_x4(unsigned addr, const unsigned (&r)[4]) {
  stmatrix_x4_any(addr, r, false);
}
inline void stmatrix_x4_trans(unsigned addr, const unsigned (&r)[4]) {
  stmatrix_x4_any(addr, r, true);
}
#endif  // CUINLINE_CONV2D_WGMMA_EMULATED

}  // namespace cuinline_conv2d_hmma_detail

#include "../kernel_templates/conv2d_hmma.cuh"

namespace {

using cuinline::DType;
using namespace cuinline::ops;

// The output channels of the running case (the epilogue checks the channel it is given).
int g_cout = 0;
// div(2) | add(in1) | leaky_relu(0.125) with a per-channel operand in1 (chan.p[0], fp32 here), as
// the rendered epilogue computes it: the kernel must hand every value its own output channel (the
// reference checks every stored one). Channels past kCout of a tile's padding are computed and not
// stored; the rendered epilogue reads the operand at the last channel for them, so does this one.
struct Epilogue {
  cuinline_conv2d_chan chan;
  float operator()(float x, int co) const {
    EXPECT_GE(co, 0) << "epilogue channel";
    const int c = co < g_cout - 1 ? co : g_cout - 1;
    x = x / 2.0f;
    x = x + static_cast<const float*>(chan.p[0])[c];
    return x > 0.0f ? x : x * 0.125f;
  }
};
// The per-channel operand: exact multiples of 1/4 in [-0.75, 0.75].
float channel_shift(int co) {
  return static_cast<float>(co % 7 - 3) * 0.25f;
}

#define HMMA_CASE(name, T, cin, h, w, cout, kh, kw, sh, sw, ph, pw, dh, dw, bias, res, in, wl, out, wm, wn, \
                  mt, nt, cipad, bk, minb)                                                                  \
  struct name {                                                                                             \
    typedef T storage;                                                                                      \
    static constexpr int kCin = cin, kH = h, kW = w, kCout = cout, kKH = kh, kKW = kw, kSH = sh, kSW = sw,  \
                         kPH = ph, kPW = pw, kDH = dh, kDW = dw, kHasBias = bias, kHasResidual = res,       \
                         kInNhwc = in, kWNhwc = wl, kOutNhwc = out, kWarpsM = wm, kWarpsN = wn, kMT = mt,   \
                         kNT = nt, kCiPad = cipad, kBK = bk, kMinBlocks = minb, kInAligned = 1,             \
                         kOutAligned = 1, kAsyncDepth = 0, kCopyL2 = 0, kWgmma = 0, kHalo = 0, kWindow = 0, \
                         kWindowTiles = 0, kPointwise = 0, kBatchTiles = 0, kHaloWeightBatch = 1,           \
                         kStoreBatch = 0, kTma = 0;                                                         \
    static constexpr int kOH = (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1;                                   \
    static constexpr int kOW = (w + 2 * pw - dw * (kw - 1) - 1) / sw + 1;                                   \
  };

// (the tiling columns are the host plan's; EmulatedKernelMatchesTheReference checks them)
// (At most 19 columns wide: none is planned for the halo tiling, which needs 32 output columns.)
HMMA_CASE(Seed, ew_half, 8, 20, 19, 64, 3, 3, 1, 1, 0, 0, 1, 1, 1, 0, 0, 0, 0, 2, 2, 4, 4, 8, 16, 2)
HMMA_CASE(SeedNhwcReg, ew_bf16, 8, 20, 19, 64, 3, 3, 1, 1, 0, 0, 1, 1, 1, 0, 1, 1, 1, 2, 2, 4, 4, 8, 16, 4)
HMMA_CASE(Resnet, ew_half, 64, 12, 12, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 2, 2, 2, 4, 64, 64, 3)
HMMA_CASE(ResnetNhwcReg, ew_bf16, 64, 12, 12, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 4, 64, 64, 3)
HMMA_CASE(Unet, ew_half, 128, 10, 13, 128, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 1, 0, 1, 4, 2, 2, 4, 128, 32, 2)
HMMA_CASE(Wide1x1, ew_bf16, 128, 10, 13, 200, 1, 1, 1, 1, 0, 0, 1, 1, 0, 1, 0, 1, 0, 2, 4, 4, 4, 128, 32, 1)
HMMA_CASE(Stem5x5, ew_half, 3, 17, 15, 5, 5, 5, 2, 2, 2, 2, 1, 1, 1, 0, 1, 1, 0, 4, 1, 2, 2, 8, 16, 4)
HMMA_CASE(Rect, ew_bf16, 5, 9, 11, 24, 3, 5, 2, 1, 1, 2, 1, 1, 1, 1, 0, 1, 1, 4, 1, 2, 4, 8, 16, 4)
HMMA_CASE(Dilated, ew_half, 24, 14, 14, 40, 3, 3, 1, 1, 2, 2, 2, 2, 0, 0, 1, 0, 0, 2, 2, 2, 4, 32, 32, 3)
HMMA_CASE(Odd, ew_half, 40, 9, 9, 33, 1, 3, 1, 1, 0, 1, 1, 1, 1, 1, 0, 0, 1, 2, 2, 2, 4, 48, 16, 3)
HMMA_CASE(Tiny, ew_bf16, 1, 4, 3, 1, 2, 2, 1, 1, 0, 0, 1, 1, 1, 0, 0, 0, 0, 4, 1, 2, 2, 8, 16, 4)
HMMA_CASE(Mixed, ew_half, 17, 7, 6, 7, 2, 3, 1, 2, 1, 0, 2, 1, 1, 1, 1, 1, 1, 4, 1, 2, 2, 32, 32, 4)
HMMA_CASE(AsyncPaddedReg, ew_bf16, 24, 11, 10, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 0, 4, 1, 2, 4, 32, 32, 4)
HMMA_CASE(UnetNhwcReg, ew_half, 128, 10, 13, 136, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 2, 2, 4, 4, 128, 64, 2)
HMMA_CASE(NchwOutReg, ew_bf16, 16, 8, 16, 48, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 0, 2, 2, 2, 4, 16, 16, 3)

// The wgmma tiling (the cp.async form: channels-last input and weight, Cin % 8 == 0, aligned) of a
// case planned for the register gather (its ...Reg twin, which the unaligned runs use): one
// warpgroup of mt 64-pixel tiles x 8 nt channels, k step bk, `depth` buffers. Emulated as mma.sync
// on the swizzled tiles (what other archs run), and as wgmma in test_conv2d_wgmma_emulated.
// (minb: the planner's blocks a multiprocessor; one warpgroup: what its accumulators + 32 registers
// and its shared memory allow.)
#define WGMMA_CASE(name, base, wm, mt, nt, bk, depth, minb)                                               \
  struct name : base {                                                                                  \
    static constexpr int kWarpsM = wm, kWarpsN = 1, kMT = mt, kNT = nt, kBK = bk, kMinBlocks = minb,    \
                         kAsyncDepth = depth, kWgmma = 1;                                               \
  };
WGMMA_CASE(SeedNhwc, SeedNhwcReg, 4, 2, 8, 16, 4, 5)
WGMMA_CASE(ResnetNhwc, ResnetNhwcReg, 8, 1, 8, 64, 4, 1)
// (AsyncPadded's 6 x 5 plane and NchwOut's 8 x 16 are batch tiles' planes: kBatchTiles below.)
WGMMA_CASE(AsyncPaddedTiles, AsyncPaddedReg, 4, 2, 4, 32, 4, 5)
WGMMA_CASE(UnetNhwc, UnetNhwcReg, 8, 2, 16, 64, 4, 1)
WGMMA_CASE(NchwOutTiles, NchwOutReg, 4, 2, 8, 16, 4, 5)
struct AsyncPadded : AsyncPaddedTiles {
  static constexpr int kBatchTiles = 1, kNotPlanned = 1;
};
struct NchwOut : NchwOutTiles {
  static constexpr int kBatchTiles = 1, kNotPlanned = 1;
};
// A large filter (5 x 5 over 32 channels: 25 k steps) with up to 64 channels a block: two warpgroups
// of two m64 tiles each (256 pixels), 48 output channels of a 64-channel block, padding.
HMMA_CASE(LongNhwcReg, ew_half, 32, 9, 20, 48, 5, 5, 1, 1, 1, 2, 1, 1, 1, 0, 1, 1, 0, 4, 2, 2, 4, 32, 32, 2)
WGMMA_CASE(LongNhwc, LongNhwcReg, 8, 2, 8, 32, 4, 1)
// Batch tiles (kBatchTiles: output planes of at most 128 pixels with a long reduction; the host plans
// them for TF32 only, f16 / bf16 small planes take per-image m64 tiles — these 16-bit cases keep the
// template's batch-tile paths covered, kNotPlanned): one warpgroup of 128 pixels that run across the
// batch's images (check_case runs 3 images: a tile
// holds parts of several, and the last tile runs past the batch). A 7 x 7 plane, 64 channels x 9
// taps, 48 of a 64-channel block, channels-last out; and a 5 x 6 plane over 32 channels with a
// residual (the fp32 tile's stores) into an NCHW output (2-output stores that stay in an image),
// 72 of 128 channels.
HMMA_CASE(SmallPlaneReg, ew_half, 64, 7, 7, 48, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 2, 2, 2, 4, 64, 64, 3)
struct SmallPlane : SmallPlaneReg {
  static constexpr int kWarpsM = 4, kWarpsN = 1, kMT = 2, kNT = 8, kBK = 64, kMinBlocks = 2, kAsyncDepth = 4,
                       kWgmma = 1, kBatchTiles = 1, kNotPlanned = 1;
};
HMMA_CASE(SmallPlaneResReg, ew_bf16, 32, 5, 6, 72, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 2, 2, 2, 4, 32, 32, 3)
struct SmallPlaneRes : SmallPlaneResReg {
  static constexpr int kWarpsM = 4, kWarpsN = 1, kMT = 2, kNT = 16, kBK = 32, kMinBlocks = 2, kAsyncDepth = 4,
                       kWgmma = 1, kBatchTiles = 1, kNotPlanned = 1;
};
// Per-image tiles no larger than the plane (output planes of at most 64 pixels that take no batch
// tiles: 1 x 1 filters): one warpgroup of one m64 tile, pixels 49 .. 63 (30 .. 63) of it past the
// plane. ResNet-50's last-stage 1 x 1 over a 7 x 7 plane, 384 channels (6 k steps of 64), 72 of a
// 128-channel block, channels-last out; and a 5 x 6 plane over 256 channels (4 steps) with a
// residual into an NCHW output, bf16.
HMMA_CASE(DeepSmall1x1Reg, ew_half, 384, 7, 7, 72, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 1, 1, 1, 4, 2, 2, 4, 384, 32, 2)
WGMMA_CASE(DeepSmall1x1, DeepSmall1x1Reg, 4, 1, 16, 64, 4, 2)
HMMA_CASE(DeepSmall1x1ResReg, ew_bf16, 256, 5, 6, 40, 1, 1, 1, 1, 0, 0, 1, 1, 0, 1, 1, 1, 0, 2, 2, 4, 4, 256, 64, 2)
WGMMA_CASE(DeepSmall1x1Res, DeepSmall1x1ResReg, 4, 1, 8, 64, 4, 3)
// The residual copied while the main loop runs (kResPrefetch: k steps that leave cp.async buffers
// unused, the tile in its own swizzled place). A 1 x 1 over 64 channels (one k step of 64, three
// buffers) on a 9 x 13 plane (a partial 128-pixel tile), 136 output channels (two 128-channel blocks,
// the second partial), bias and a residual, channels-last output, bf16; and over 128 channels (two
// steps) on an 8 x 17 plane into 64 NCHW channels (the tile's rows are channels), f16.
HMMA_CASE(Res1x1Reg, ew_bf16, 64, 9, 13, 136, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 1, 2, 2, 4, 4, 64, 64, 2)
struct Res1x1 : Res1x1Reg {
  static constexpr int kWarpsM = 4, kWarpsN = 1, kMT = 2, kNT = 16, kBK = 64, kMinBlocks = 2, kAsyncDepth = 3,
                       kWgmma = 1, kNotPlanned = 1;
};
HMMA_CASE(Res1x1NchwReg, ew_half, 128, 8, 17, 64, 1, 1, 1, 1, 0, 0, 1, 1, 0, 1, 1, 1, 0, 2, 2, 4, 4, 128, 64, 2)
struct Res1x1Nchw : Res1x1NchwReg {
  static constexpr int kWarpsM = 4, kWarpsN = 1, kMT = 2, kNT = 8, kBK = 64, kMinBlocks = 2, kAsyncDepth = 3,
                       kWgmma = 1, kNotPlanned = 1;
};
// The split form (kSplitK: the reduction cut into slices, each a block; the last block of a tile to
// arrive sums the partials in slice order and runs the epilogue): a 3 x 3 filter over 64 channels
// in k steps of 32 (18 steps; 4 slices of 4, 5, 4 and 5 steps) on a 6 x 7 plane (one m64 tile), 40
// of a 64-channel block, bias and a residual into an NCHW output. Not the host's plan (kNotPlanned:
// 18 k steps have a split form only under a forced CUINLINE_CONV2D_SPLIT_K, and conv2d_tiling is
// the plain kernel's). run_case runs it with g_split_slices slices, the
// blocks in the order g_split_reverse gives.
HMMA_CASE(SplitPlaneReg, ew_half, 64, 6, 7, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 2, 2, 2, 4, 64, 64, 3)
struct SplitPlane : SplitPlaneReg {
  static constexpr int kWarpsM = 4, kWarpsN = 1, kMT = 1, kNT = 8, kBK = 32, kMinBlocks = 2, kAsyncDepth = 4,
                       kWgmma = 1, kSplitK = 1, kNotPlanned = 1;
};
int g_split_slices = 1;
bool g_split_reverse = false;
std::vector<unsigned char> g_split_output;  // the output's bytes after the last split run

// One warpgroup for a long reduction (the planner's before two; a tuning candidate,
// CUINLINE_CONV2D_HMMA_TILE="4,1,..."): only run through the kernel (check_case skips the plan
// comparison for it).
struct UnetOneGroup : UnetNhwc {
  static constexpr int kWarpsM = 4, kMT = 2;
};

// The halo tiling (kHalo: up to 8 input channels, column stride 1, no residual, at least 32 output
// columns): one warpgroup of mt 64-column tiles of one output row x 8 nt channels, every step at
// once; any layout (cp.async for a channels-last input of 8 channels, else the 16-bit gather).
#define HALO_CASE(name, T, cin, h, w, cout, kh, kw, sh, ph, pw, dh, dw, bias, in, wl, out, mt, nt, minb)    \
  HMMA_CASE(name##Base, T, cin, h, w, cout, kh, kw, sh, 1, ph, pw, dh, dw, bias, 0, in, wl, out, 4, 1, mt, nt, 8, \
            16, minb)                                                                                       \
  struct name : name##Base {                                                                                \
    static constexpr int kAsyncDepth = 1, kWgmma = 1, kHalo = 1, kStoreBatch = out ? 0 : 1;                 \
  };
// The seed's shape at 6 x 40 (one 64-column tile), NCHW: no staging copy.
HALO_CASE(SeedHalo, ew_half, 8, 6, 40, 64, 3, 3, 1, 0, 0, 1, 1, 1, 0, 0, 0, 1, 8, 7)
// Channels-last, 8 channels (cp.async), 68 columns in one 128-column tile.
HALO_CASE(SeedHaloNhwc, ew_bf16, 8, 5, 70, 64, 3, 3, 1, 0, 0, 1, 1, 1, 1, 1, 1, 2, 8, 5)
// RGB: a channels-last input of 3 channels (gathered), NCHW weight, 5 x 3 filter (15 taps: the
// zeros), row stride 2, padding (2, 1), dilation (1, 2), 24 channels.
HALO_CASE(RgbHalo, ew_half, 3, 9, 41, 24, 5, 3, 2, 2, 1, 1, 2, 0, 1, 0, 1, 1, 4, 8)
// NCHW, 48 columns (whole 16-byte runs: copied and transposed on sm_90) with 3 columns of padding
// (the window starts 5 columns past an 8-column run), dilated columns, channels-last output.
HALO_CASE(PaddedHalo, ew_bf16, 6, 5, 48, 40, 3, 3, 1, 1, 3, 1, 2, 1, 0, 0, 1, 1, 8, 7)
// An NCHW output of odd rows (103 columns, two m64 tiles: one value a store, channel rows starting
// at every 2-byte offset), row stride 2, 40 of 64 channels, an NCHW input gathered.
HALO_CASE(OddHalo, ew_bf16, 5, 9, 103, 40, 3, 3, 2, 1, 1, 1, 1, 1, 0, 0, 0, 2, 8, 5)
// The seed's case with its epilogue's stores not in batches (CUINLINE_CONV2D_STORE_BATCH=0; the
// halo form's NCHW output batches them) and its weights gathered a chunk at a time
// (CUINLINE_CONV2D_HALO_WBATCH=0).
struct SeedHaloUnbatched : SeedHalo {
  static constexpr int kStoreBatch = 0, kHaloWeightBatch = 0;
};
// Two 128-column tiles a row (150 wide), 100 channels (a partial 128-channel block), NCHW in and
// out, dilated rows.
HALO_CASE(WideHalo, ew_bf16, 5, 5, 150, 100, 3, 3, 1, 1, 1, 2, 1, 1, 0, 1, 0, 2, 16, 2)

// The window form (kWindow: the cp.async wgmma tiling with more than 8 input channels, column stride
// 1, output rows of a multiple of 64 columns): the tile's input window copied once a k chunk, each
// tap's A tile read from it in place; `depth` B buffers.
#define WINDOW_CASE(name, T, cin, h, w, cout, kh, kw, sh, ph, pw, dh, dw, bias, out, wm, mt, nt, cipad, bk, depth) \
  HMMA_CASE(name##Base, T, cin, h, w, cout, kh, kw, sh, 1, ph, pw, dh, dw, bias, 0, 1, 1, out, wm, 1, mt, nt,    \
            cipad, bk, 1)                                                                                      \
  struct name : name##Base {                                                                                   \
    static constexpr int kAsyncDepth = depth, kWgmma = 1, kWindow = 1, kWindowTiles = cipad / bk > 1 ? 1 : 0; \
  };
// The UNet-like layer at 6 x 64: two warpgroups, 256 pixels (4 output rows) x 128 channels, two
// 64-channel chunks (both window buffers, the second copied in 7 parts), the second tile past the
// last output row.
WINDOW_CASE(UnetWindow, ew_half, 128, 6, 64, 128, 3, 3, 1, 1, 1, 1, 1, 1, 1, 8, 2, 16, 128, 64, 4)
// One 64-channel chunk (one window buffer), 3 x 2 filter with dilated rows, 128 output columns (one
// row a tile), NCHW output.
WINDOW_CASE(RowWindow, ew_bf16, 64, 5, 129, 64, 3, 2, 1, 2, 0, 2, 1, 0, 0, 8, 1, 8, 64, 64, 4)
// 40 channels (three 16-channel chunks, the last half zeros: the window buffers reused), row stride
// 2 (two output rows a tile), 40 output channels of a 64-channel block.
WINDOW_CASE(ChunkWindow, ew_half, 40, 7, 64, 40, 3, 3, 2, 1, 1, 1, 1, 1, 1, 8, 1, 8, 48, 16, 4)

// TF32 (float storage; f32 variants in precision tf32 on an sm90 target): the cp.async wgmma tiling
// of the staged channels-last copy (Cin a multiple of 8 here, as the staging copy pads it), k steps
// of bk floats, `depth` buffers. Emulated as mma.sync m16n8k8 from the swizzled tiles (the form for
// archs without wgmma) and as wgmma m64nNk8 in test_conv2d_wgmma_emulated.
#define TF32_CASE(name, cin, h, w, cout, kh, kw, sh, sw, ph, pw, dh, dw, bias, res, out, wm, mt, nt, bk, depth, \
                  minb)                                                                                       \
  HMMA_CASE(name##Base, float, cin, h, w, cout, kh, kw, sh, sw, ph, pw, dh, dw, bias, res, 1, 1, out, wm, 1, mt, \
            nt, cin, bk, minb)                                                                                \
  struct name : name##Base {                                                                                  \
    static constexpr int kAsyncDepth = depth, kWgmma = 1;                                                     \
  };
// 16 channels (k steps of 16), a 3 x 3 filter padded: one warpgroup of two m64 tiles x 64 channels,
// NCHW output (float4 stores along the plane), bias.
TF32_CASE(Tf32Conv, 16, 12, 20, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 0, 4, 2, 8, 16, 4, 4)
// 40 channels (k steps of 8: the 32-byte swizzle), a 5 x 3 filter with dilated columns and row stride
// 2, 72 output channels of a 128-channel block (two m64 tiles a warpgroup), a residual, channels-last
// output.
// (Both this 6 x 13 plane and Tf32Small's 9 x 9 run on batch tiles: one warpgroup.)
TF32_CASE(Tf32WideTiles, 40, 11, 13, 72, 5, 3, 2, 1, 2, 2, 1, 2, 1, 1, 1, 4, 2, 16, 8, 4, 2)
struct Tf32Wide : Tf32WideTiles {
  static constexpr int kBatchTiles = 1;
};
// A 5 x 5 filter over 32 channels (k steps of 32: the 128-byte swizzle; one warpgroup), 24 output
// channels of a 32-channel block, NCHW output of 9 x 9 (one float a store), no bias.
TF32_CASE(Tf32SmallTiles, 32, 13, 13, 24, 5, 5, 1, 1, 0, 0, 1, 1, 0, 0, 0, 4, 2, 4, 32, 4, 2)
struct Tf32Small : Tf32SmallTiles {
  static constexpr int kBatchTiles = 1;
};

// The pointwise form (kPointwise: 1 x 1, stride 1, no padding, an NCHW input of whole 16-byte runs,
// aligned): A copied by cp.async as the input lays it out ([k][pixel]), B as the weight does; the
// mma.sync tilings (16-bit: ldmatrix.trans; float: m16n8k8 with the operands rounded to TF32 as they
// are read, precision tf32); channel blocks fastest along x; four buffers, cp.async.ca.
#define PW_CASE(name, T, cin, h, w, cout, bias, res, wl, out, wm, wn, mt, nt, cipad, bk, minb)                 \
  HMMA_CASE(name##Base, T, cin, h, w, cout, 1, 1, 1, 1, 0, 0, 1, 1, bias, res, 0, wl, out, wm, wn, mt, nt, cipad, \
            bk, minb)                                                                                          \
  struct name : name##Base {                                                                                   \
    static constexpr int kPointwise = 1, kAsyncDepth = 4, kCopyL2 = 0;                                      \
  };
// f16, 32 -> 40 channels (a partial 64-channel block), a plane of 120 (a partial 128-pixel tile).
PW_CASE(PwHalf, ew_half, 32, 6, 20, 40, 1, 0, 0, 0, 4, 2, 2, 4, 32, 32, 2)
// bf16, 48 channels (k steps of 16: three), 136 output channels (two 128-channel blocks, the second
// partial), a residual, channels-last weight and output.
PW_CASE(PwBf16, ew_bf16, 48, 4, 34, 136, 1, 1, 1, 1, 2, 4, 4, 4, 48, 16, 2)
// f32 in TF32, 24 channels (k steps of 8), 20 output channels of a 32-channel block, channels-last out.
PW_CASE(PwTf32, float, 24, 5, 8, 20, 1, 0, 0, 1, 4, 1, 2, 4, 24, 8, 4)
// f32 in TF32, 40 channels, 136 output channels (two 128-channel blocks), a residual, NCHW out.
PW_CASE(PwTf32Wide, float, 40, 9, 16, 136, 0, 1, 0, 0, 2, 4, 4, 4, 40, 8, 2)

// A case compiled for an input (and weight) that is not 16-byte aligned, or an output not aligned to
// the vector stores: what the host plans for such pointers (Conv2dVariant::inputs_aligned,
// output_aligned).
// (kMin: the planner's blocks a multiprocessor for the register gather, where they differ from the
// cp.async variant's: 2 for the seed's short reduction against 4.)
template <class S, int kMin = S::kMinBlocks>
struct InputMisaligned : S {
  static constexpr int kInAligned = 0;
  static constexpr int kMinBlocks = kMin;
};
template <class S>
struct OutputMisaligned : S {
  static constexpr int kOutAligned = 0;
};

template <class S>
Conv2dVariant variant_of() {
  Conv2dParams p{S::kSH, S::kSW, S::kPH, S::kPW, S::kDH, S::kDW};
  Conv2dVariant v = make_conv2d_variant(S::kCin, S::kH, S::kW, S::kCout, S::kKH, S::kKW, p, S::kHasBias != 0,
                                        Op::chain({Step::div(2.0), Step::add_input(1), Step::leaky_relu(0.125)}));
  v.has_residual = S::kHasResidual != 0;
  using T = typename S::storage;
  v.dtype = std::is_same_v<T, float> ? DType::f32 : std::is_same_v<T, ew_half> ? DType::f16 : DType::bf16;
  if (v.dtype == DType::f32) v.precision = Conv2dPrecision::tf32;
  v.input_layout = S::kInNhwc ? Conv2dLayout::nhwc : Conv2dLayout::nchw;
  v.weight_layout = S::kWNhwc ? Conv2dLayout::nhwc : Conv2dLayout::nchw;
  v.output_layout = S::kOutNhwc ? Conv2dLayout::nhwc : Conv2dLayout::nchw;
  v.inputs_aligned = S::kInAligned != 0;
  v.output_aligned = S::kOutAligned != 0;
  return v;
}

// A storage element of `x` and the value of one (f16 / bf16 bits, or a float as it is).
template <class T>
T storage_of(DType dt, float x) {
  if constexpr (std::is_same_v<T, float>) {
    (void)dt;
    return x;
  } else {
    return T{static_cast<unsigned short>(cuinline::test::from_op(dt, x))};
  }
}
template <class T>
double value_of(DType dt, const T& e) {
  if constexpr (std::is_same_v<T, float>) {
    (void)dt;
    return e;
  } else {
    return cuinline::test::to_op(dt, e.bits);
  }
}
// A NaN of the storage type (the poison of outputs).
template <class T>
T poison_value() {
  if constexpr (std::is_same_v<T, float>) {
    return std::numeric_limits<float>::quiet_NaN();
  } else {
    return T{0xffff};
  }
}
template <class T>
bool is_poison(const T& e) {
  if constexpr (std::is_same_v<T, float>) {
    std::uint32_t bits;
    std::memcpy(&bits, &e, 4);
    return bits == 0x7fc00000u;
  } else {
    return e.bits == 0xffff;
  }
}

// How a case runs: cp.async copies landing at their wait or at once; the input, or the output,
// misaligned by one element (for a case compiled for it: S::kInAligned, S::kOutAligned = 0).
enum class Mode { copies_at_wait, copies_at_issue, misaligned_input, misaligned_output };

// Whether case S is not the host's plan of its shape (S::kNotPlanned).
template <class S, class = void>
struct NotPlanned : std::false_type {};
template <class S>
struct NotPlanned<S, std::void_t<decltype(S::kNotPlanned)>> : std::true_type {};
// Whether case S is in the split form (S::kSplitK).
template <class S, class = void>
struct SplitCase : std::false_type {};
template <class S>
struct SplitCase<S, std::void_t<decltype(S::kSplitK)>> : std::true_type {};

template <class S>
void run_case(std::uint64_t seed, Mode mode) {
  cuinline_conv2d_hmma_detail::g_copies_at_issue = mode == Mode::copies_at_issue;
  using P = cuinline_conv2d_hmma_detail::Plan<S>;
  using T = typename S::storage;
  const Conv2dVariant v = variant_of<S>();
  SCOPED_TRACE(v.name());
  // The constants are the host plan's (except a tuning candidate's, UnetOneGroup, and the 16-bit
  // batch-tile cases: kNotPlanned).
  const HmmaTiling t = conv2d_tiling(v).as_hmma();
  constexpr bool kF32 = std::is_same_v<T, float>;
  EXPECT_EQ(t.pointwise(), P::kPointwise);
  ASSERT_TRUE(kF32 ? (t.tf32_wgmma() || t.pointwise()) && !t.half_mma() : t.half_mma());
  if constexpr (!std::is_same_v<S, UnetOneGroup> && !NotPlanned<S>::value) {
    EXPECT_EQ(t.warps_m, S::kWarpsM);
    EXPECT_EQ(t.warps_n, S::kWarpsN);
    EXPECT_EQ(t.m_tiles, S::kMT);
    EXPECT_EQ(t.n_tiles, S::kNT);
    EXPECT_EQ(t.ci_chunk, S::kBK);
    EXPECT_EQ(t.min_blocks, S::kMinBlocks);
    EXPECT_EQ(t.shared_bytes, static_cast<unsigned>(P::kSmemBytes));
    EXPECT_EQ(t.tiles_x, P::kTilesX);
    EXPECT_EQ(t.tiles_y, P::kTilesY);
    EXPECT_EQ(t.wgmma(), S::kWgmma != 0);
    EXPECT_EQ(t.halo(), S::kHalo != 0);
    EXPECT_EQ(t.window(), S::kWindow != 0);
    EXPECT_EQ(t.batch_tiles(), P::kBatchTiles);
    if (t.wgmma() || t.pointwise()) EXPECT_EQ(t.stages, P::kStages);
    EXPECT_EQ(S::kOH, v.out_height());
    EXPECT_EQ(S::kOW, v.out_width());
    EXPECT_EQ(S::kCiPad, kF32 ? (S::kCin + 7) / 8 * 8 : S::kCin <= 8 ? 8 : (S::kCin + 15) / 16 * 16);
    EXPECT_EQ(t.stage_channels, kF32 && !P::kPointwise ? S::kCiPad : 0);
  }
  SCOPED_TRACE(mode == Mode::copies_at_issue     ? "copies land at issue"
               : mode == Mode::misaligned_input  ? "input misaligned"
               : mode == Mode::misaligned_output ? "output misaligned"
                                                 : "copies land at their wait");
  ASSERT_EQ(mode == Mode::misaligned_input, S::kInAligned == 0);
  ASSERT_EQ(mode == Mode::misaligned_output, S::kOutAligned == 0);
  if (mode == Mode::misaligned_output) EXPECT_EQ(P::kOutVec, 1);

  const DType dt = v.dtype;
  const int batch = P::kBatchTiles ? 3 : 2;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto random = [&](std::size_t n, std::vector<T>& bits, std::vector<double>& values) {
    bits.resize(n);
    values.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      bits[i] = storage_of<T>(dt, normal(rng));
      values[i] = value_of(dt, bits[i]);
    }
  };
  // Element offsets in each tensor's layout.
  auto x_at = [](int n, int c, int y, int x) {
    return S::kInNhwc ? ((std::size_t(n) * S::kH + y) * S::kW + x) * S::kCin + c
                      : ((std::size_t(n) * S::kCin + c) * S::kH + y) * S::kW + x;
  };
  auto w_at = [](int o, int c, int y, int x) {
    return S::kWNhwc ? ((std::size_t(o) * S::kKH + y) * S::kKW + x) * S::kCin + c
                     : ((std::size_t(o) * S::kCin + c) * S::kKH + y) * S::kKW + x;
  };
  auto y_at = [](int n, int c, int y, int x) {
    return S::kOutNhwc ? ((std::size_t(n) * S::kOH + y) * S::kOW + x) * S::kCout + c
                       : ((std::size_t(n) * S::kCout + c) * S::kOH + y) * S::kOW + x;
  };
  std::vector<T> xb, wb, bb, rb;
  std::vector<double> xv, wv, bv, rv;
  const std::size_t out_size = std::size_t(batch) * S::kCout * S::kOH * S::kOW;
  random(std::size_t(batch) * S::kCin * S::kH * S::kW + 1, xb, xv);
  // The input starts at element 0 (aligned: std::vector's 16 bytes) or 1 (2 bytes off).
  const int shift = mode == Mode::misaligned_input ? 1 : 0;
  xv.erase(mode == Mode::misaligned_input ? xv.begin() : xv.end() - 1);
  random(std::size_t(S::kCout) * S::kCin * S::kKH * S::kKW, wb, wv);
  random(S::kCout, bb, bv);
  random(out_size, rb, rv);
  // The output starts at element 0 or (misaligned_output) 1; element 0 must then stay poisoned.
  const int out_shift = mode == Mode::misaligned_output ? 1 : 0;
  std::vector<T> yb(out_size + out_shift, poison_value<T>());  // NaN
  g_tensors = {{xb.data() + shift, (xb.size() - 1) * sizeof(T)}, {wb.data(), wb.size() * sizeof(T)}};
  if (S::kHasBias) g_tensors.push_back({bb.data(), bb.size() * sizeof(T)});
  if (S::kHasResidual) g_tensors.push_back({rb.data(), rb.size() * sizeof(T)});

  // The launch's grid: kTilesX x ceil(kTilesY / row_tiles) blocks along x. The halo form's blocks
  // compute 3 tiles each here (every gridDim.x-th; the last ones fewer where they do not divide): its
  // loop, the next tile's window copied while this one's is stored.
  // Batch tiles: the blocks along x cover the batch's pixels, one along z; row_tiles is the batch.
  // The window form's tiles in turn (kWindowTiles): 3 a block too, along x (ceil(kTilesX / 3) blocks).
  const int row_tiles = P::kHalo || P::kWindowTiles ? 3 : P::kBatchTiles ? batch : 1;
  std::vector<float> shift_v(S::kCout);
  for (int co = 0; co < S::kCout; ++co) shift_v[static_cast<std::size_t>(co)] = channel_shift(co);
  const cuinline_conv2d_chan chan{{shift_v.data(), nullptr, nullptr, nullptr}};
  g_cout = S::kCout;
  const unsigned grid_x =
      P::kBatchTiles    ? static_cast<unsigned>((batch * P::kPixels + P::kBM - 1) / P::kBM)
      : P::kWindowTiles ? static_cast<unsigned>((P::kTilesX + row_tiles - 1) / row_tiles)
                        : static_cast<unsigned>(P::kTilesX * ((P::kTilesY + row_tiles - 1) / row_tiles));
  // The split form: z is image x slices + slice; a workspace of the partial tiles and the tiles'
  // counters (zero, as the launch leaves them).
  constexpr bool kSplit = SplitCase<S>::value;
  const int slices = kSplit ? g_split_slices : 1;
  const unsigned grid_z = P::kBatchTiles ? 1u : static_cast<unsigned>(batch * slices);
  // (The pointwise form's channel blocks are part of x: one block column.)
  const unsigned grid_y = P::kPointwise ? 1u : static_cast<unsigned>((S::kCout + P::kBN - 1) / P::kBN);
  const std::size_t split_tiles = std::size_t(grid_x) * grid_y * batch;
  std::vector<float> partials(kSplit ? split_tiles * slices * P::kBM * P::kBN : 0, std::nanf(""));
  std::vector<unsigned> counters(kSplit ? split_tiles : 0, 0u);
  for (unsigned zi = 0; zi < grid_z; ++zi) {
    const unsigned z = P::kHalo || (kSplit && g_split_reverse) ? grid_z - 1 - zi : zi;
    for (unsigned by = 0; by < grid_y; ++by) {
      for (unsigned i = 0; i < grid_x; ++i) {
        // (The halo form's blocks from the last: a store past a row's end into the next row, already
        // written, is caught.)
        const unsigned bx = P::kHalo ? grid_x - 1 - i : i;
        Block block;
        block.smem.assign(P::kSmemBytes, 0xA5);  // garbage where nothing was staged
        block.block = std::make_unique<cuinline::test::lanes::LaneBarrier>(P::kThreads);
        for (int w = 0; w < P::kWarps; ++w) {
          block.warp.push_back(std::make_unique<cuinline::test::lanes::LaneBarrier>(32));
        }
        g_block = &block;
        blockIdx = {bx, by, z};
        gridDim = {grid_x, grid_y, grid_z};
        cuinline_conv2d_hmma_detail::g_copies.assign(P::kThreads, {});
#ifdef CUINLINE_CONV2D_WGMMA_EMULATED
        cuinline_conv2d_hmma_detail::g_wgmma.assign(P::kThreads, {});
#endif
        cuinline::test::lanes::run_lanes(P::kThreads, [&] {
          if constexpr (kSplit) {
            cuinline_conv2d_hmma_split<S, Epilogue>(xb.data() + shift, wb.data(), S::kHasBias ? bb.data() : nullptr,
                                                    yb.data() + out_shift, slices,
                                                    S::kHasResidual ? rb.data() : nullptr, chan,
                                                    slices > 1 ? partials.data() : nullptr,
                                                    slices > 1 ? counters.data() : nullptr);
          } else {
            cuinline_conv2d_hmma<S, Epilogue>(xb.data() + shift, wb.data(), S::kHasBias ? bb.data() : nullptr,
                                              yb.data() + out_shift, row_tiles,
                                              S::kHasResidual ? rb.data() : nullptr, chan);
          }
        });
      }
    }
  }

  // The pointwise form in TF32 rounds each operand to TF32 as it reads it: so does the reference
  // (exact products of the rounded values), which a kernel that left a value unrounded, or truncated
  // it, misses by far more than fp32 sums.
  if (P::kPointwise && kF32) {
    for (std::vector<double>* vals : {&xv, &wv}) {
      for (double& e : *vals) e = cuinline_conv2d_hmma_detail::float_of_bits(cuinline_conv2d_hmma_detail::tf32_bits(static_cast<float>(e)));
    }
  }
  double num = 0, den = 0;
  std::int64_t unwritten = 0;
  for (int n = 0; n < batch; ++n)
    for (int co = 0; co < S::kCout; ++co)
      for (int oy = 0; oy < S::kOH; ++oy)
        for (int ox = 0; ox < S::kOW; ++ox) {
          double acc = S::kHasBias ? bv[co] : 0.0;
          for (int ci = 0; ci < S::kCin; ++ci)
            for (int ky = 0; ky < S::kKH; ++ky)
              for (int kx = 0; kx < S::kKW; ++kx) {
                const int iy = oy * S::kSH - S::kPH + ky * S::kDH, ix = ox * S::kSW - S::kPW + kx * S::kDW;
                if (iy >= 0 && iy < S::kH && ix >= 0 && ix < S::kW)
                  acc += xv[x_at(n, ci, iy, ix)] * wv[w_at(co, ci, ky, kx)];
              }
          if (S::kHasResidual) acc += rv[y_at(n, co, oy, ox)];
          acc /= 2;
          acc += channel_shift(co);
          acc = acc > 0 ? acc : acc * 0.125;
          const double got = value_of(dt, yb[out_shift + y_at(n, co, oy, ox)]);
          unwritten += std::isnan(got) ? 1 : 0;
          num += (got - acc) * (got - acc);
          den += acc * acc;
        }
  EXPECT_EQ(unwritten, 0);
  if (out_shift) EXPECT_TRUE(is_poison(yb[0])) << "a store before the output";
  if constexpr (kSplit) {
    // Every tile's last block reset its counter (the next launch, or a graph's replay, starts at 0);
    // with slices, every block wrote its partial tile (the workspace starts as NaNs).
    for (unsigned c : counters) EXPECT_EQ(c, 0u) << "a split-K counter left set";
    std::size_t unwritten_partials = 0;
    for (float f : partials) unwritten_partials += std::isnan(f) ? 1 : 0;
    if (slices > 1) EXPECT_EQ(unwritten_partials, 0u);
    g_split_output.assign(reinterpret_cast<const unsigned char*>(yb.data()),
                          reinterpret_cast<const unsigned char*>(yb.data() + yb.size()));
  }
  // One rounding to the dtype (the sums are exact products added in fp32): about 2e-4 (f16) and
  // 1.6e-3 (bf16); the GPU test's bounds. f32 (the emulation's products exact): fp32 sums only.
  const double err = std::sqrt(num / den);
  EXPECT_LE(err, dt == DType::f32 ? 1e-6 : dt == DType::f16 ? 2e-3 : 1.6e-2);
  std::printf("  %-92s rel L2 %.2e\n", v.name().c_str(), err);
}

// Runs case S in `mode`. With wgmma emulated (test_conv2d_wgmma_emulated) only the wgmma tilings
// run: the others (the mma.sync register gather, the pointwise form) contain no wgmma code, so they
// are the same program as in this file's own binary, which runs them (and are not instantiated there).
template <class S>
void check_case(std::uint64_t seed, Mode mode = Mode::copies_at_wait) {
#ifdef CUINLINE_CONV2D_WGMMA_EMULATED
  if constexpr (!cuinline_conv2d_hmma_detail::Plan<S>::kWgmma) {
    (void)seed;
    (void)mode;
  } else
#endif
  {
    run_case<S>(seed, mode);
  }
}

TEST(Conv2dHmmaEmulated, EmulatedKernelMatchesTheReference) {
  std::uint64_t seed = 20261124;
  check_case<Seed>(seed++);
  check_case<SeedNhwc>(seed++);
  check_case<Resnet>(seed++);
  check_case<ResnetNhwc>(seed++);
  check_case<Unet>(seed++);
  check_case<Wide1x1>(seed++);
  check_case<Stem5x5>(seed++);
  check_case<Rect>(seed++);
  check_case<Dilated>(seed++);
  check_case<Odd>(seed++);
  check_case<Tiny>(seed++);
  check_case<Mixed>(seed++);
  check_case<AsyncPadded>(seed++);
  check_case<UnetNhwc>(seed++);
  check_case<NchwOut>(seed++);
  check_case<UnetOneGroup>(seed++);
  check_case<LongNhwc>(seed++);
  check_case<SmallPlane>(seed++);
  check_case<SmallPlaneRes>(seed++);
  check_case<DeepSmall1x1>(seed++);
  check_case<DeepSmall1x1Res>(seed++);
  check_case<Res1x1>(seed++);
  check_case<Res1x1Nchw>(seed++);
  check_case<SeedHalo>(seed++);
  check_case<SeedHaloNhwc>(seed++);
  check_case<RgbHalo>(seed++);
  check_case<WideHalo>(seed++);
  check_case<PaddedHalo>(seed++);
  check_case<OddHalo>(seed++);
  check_case<SeedHaloUnbatched>(seed++);
  check_case<UnetWindow>(seed++);
  check_case<RowWindow>(seed++);
  check_case<ChunkWindow>(seed++);
  check_case<Tf32Conv>(seed++);
  check_case<Tf32Wide>(seed++);
  check_case<Tf32Small>(seed++);
  check_case<PwHalf>(seed++);
  check_case<PwBf16>(seed++);
  check_case<PwTf32>(seed++);
  check_case<PwTf32Wide>(seed++);
}

// The cp.async main loop (channels-last input and weight, channels a multiple of 8) with the copies
// landing as early as they may; the register gather compiled for an unaligned input; scalar stores
// compiled for an unaligned output.
// The split form: whole tiles (one slice), then 4 slices with the blocks arriving in grid order
// and in reverse (the last block of a tile slice 3, then slice 0): each against the float64
// reference, and the two split runs equal bit for bit (the partials summed in slice order whoever
// sums them). With wgmma emulated its copies also land at once.
TEST(Conv2dHmmaEmulated, SplitKSlicesMatchTheReferenceInAnyArrivalOrder) {
  using cuinline_conv2d_hmma_detail::Plan;
  static_assert(Plan<SplitPlane>::kSteps == 18 && Plan<SplitPlane>::kTilesX == 1);
  const std::uint64_t seed = 77;
  g_split_slices = 1;
  check_case<SplitPlane>(seed);
  g_split_slices = 4;
  g_split_reverse = false;
  check_case<SplitPlane>(seed);
  const std::vector<unsigned char> in_order = g_split_output;
  g_split_reverse = true;
  check_case<SplitPlane>(seed, Mode::copies_at_issue);
  EXPECT_EQ(g_split_output, in_order);
  g_split_reverse = false;
  g_split_slices = 1;
  cuinline_conv2d_hmma_detail::g_copies_at_issue = false;
}

TEST(Conv2dHmmaEmulated, CopyTimingAndTheUnalignedVariants) {
  using cuinline_conv2d_hmma_detail::Plan;
  static_assert(Plan<SeedNhwc>::kAsync);
  static_assert(Plan<ResnetNhwc>::kAsync);
  static_assert(Plan<AsyncPadded>::kAsync);
  static_assert(!Plan<Mixed>::kAsync);
  static_assert(!Plan<InputMisaligned<SeedNhwcReg, 2>>::kAsync);
  // The f16 / bf16 wgmma tiling rounds in registers, a residual read from the 16-bit tile, and
  // stores 8 outputs (kHalfEpi); the mma.sync tilings go through the fp32 tile.
  static_assert(Plan<SeedNhwc>::kHalfEpi && Plan<UnetNhwc>::kHalfEpi && Plan<NchwOut>::kHalfEpi &&
                Plan<ResnetNhwc>::kHalfEpi && Plan<AsyncPadded>::kHalfEpi && Plan<DeepSmall1x1Res>::kHalfEpi &&
                !Plan<Seed>::kHalfEpi && !Plan<Resnet>::kHalfEpi);
  static_assert(Plan<ResnetNhwc>::kOutVec == 8 && Plan<OutputMisaligned<SmallPlaneRes>>::kOutVec == 1);
  // The residual prefetched where the k steps leave buffers (and the output 16-byte aligned); else
  // copied after the main loop.
  static_assert(Plan<Res1x1>::kResPrefetch && Plan<Res1x1Nchw>::kResPrefetch &&
                !Plan<DeepSmall1x1Res>::kResPrefetch && !Plan<OutputMisaligned<Res1x1>>::kResPrefetch &&
                !Plan<ResnetNhwc>::kResPrefetch);
  static_assert(Plan<NchwOut>::kOutVec == 8 && Plan<UnetNhwc>::kOutVec == 8 && Plan<OutputMisaligned<SeedNhwc>>::kOutVec == 1);
  static_assert(Plan<Seed>::kOutVec == 2 && Plan<SeedNhwc>::kOutVec == 8 && Plan<Resnet>::kOutVec == 4 &&
                Plan<Unet>::kOutVec == 4 && Plan<Odd>::kOutVec == 1 && Plan<OutputMisaligned<Resnet>>::kOutVec == 1);
  std::uint64_t seed = 1;
  check_case<SeedNhwc>(seed++, Mode::copies_at_issue);
  check_case<ResnetNhwc>(seed++, Mode::copies_at_issue);
  check_case<AsyncPadded>(seed++, Mode::copies_at_issue);
  check_case<UnetNhwc>(seed++, Mode::copies_at_issue);
  check_case<NchwOut>(seed++, Mode::copies_at_issue);
  check_case<UnetOneGroup>(seed++, Mode::copies_at_issue);
  check_case<LongNhwc>(seed++, Mode::copies_at_issue);
  check_case<SmallPlane>(seed++, Mode::copies_at_issue);
  check_case<OutputMisaligned<SmallPlaneRes>>(seed++, Mode::misaligned_output);
  check_case<DeepSmall1x1>(seed++, Mode::copies_at_issue);
  check_case<OutputMisaligned<DeepSmall1x1Res>>(seed++, Mode::misaligned_output);
  check_case<Res1x1>(seed++, Mode::copies_at_issue);
  check_case<Res1x1Nchw>(seed++, Mode::copies_at_issue);
  check_case<OutputMisaligned<Res1x1>>(seed++, Mode::misaligned_output);
  check_case<InputMisaligned<DeepSmall1x1Reg>>(seed++, Mode::misaligned_input);
  check_case<InputMisaligned<DeepSmall1x1ResReg>>(seed++, Mode::misaligned_input);
  check_case<OutputMisaligned<NchwOut>>(seed++, Mode::misaligned_output);
  check_case<InputMisaligned<SeedNhwcReg, 2>>(seed++, Mode::misaligned_input);
  check_case<InputMisaligned<ResnetNhwcReg>>(seed++, Mode::misaligned_input);
  check_case<InputMisaligned<AsyncPaddedReg>>(seed++, Mode::misaligned_input);
  check_case<OutputMisaligned<SeedNhwc>>(seed++, Mode::misaligned_output);
  check_case<OutputMisaligned<Resnet>>(seed++, Mode::misaligned_output);
  check_case<OutputMisaligned<Unet>>(seed++, Mode::misaligned_output);
  // The halo tiling: copies landing at once; a channels-last input of 8 channels misaligned (the
  // gather); an NCHW output whose rows (38 columns) take 2-output stores, misaligned (one a store).
  static_assert(Plan<SeedHaloNhwc>::kOutVec == 8 && Plan<SeedHalo>::kOutVec == 2 && Plan<WideHalo>::kOutVec == 2);
  // An NCHW input of whole 16-byte rows, aligned: copied (and, on sm_90, transposed); else gathered.
  static_assert(Plan<SeedHalo>::kInNchwCopy && Plan<PaddedHalo>::kInNchwCopy && Plan<PaddedHalo>::kLeft == 5 &&
                !Plan<WideHalo>::kInNchwCopy && !Plan<InputMisaligned<SeedHalo, 8>>::kInNchwCopy);
  check_case<SeedHaloNhwc>(seed++, Mode::copies_at_issue);
  check_case<InputMisaligned<SeedHaloNhwc>>(seed++, Mode::misaligned_input);
  check_case<OutputMisaligned<SeedHalo>>(seed++, Mode::misaligned_output);
  check_case<PaddedHalo>(seed++, Mode::copies_at_issue);
  check_case<InputMisaligned<SeedHalo, 8>>(seed++, Mode::misaligned_input);  // (no NCHW copy buffers)
  // Batched epilogue stores (the halo form's NCHW output) and weight gather: an odd-width output
  // (one value a store), copies landing at once, outputs 2 bytes off; and unbatched.
  static_assert(Plan<OddHalo>::kOutVec == 1);
  check_case<OddHalo>(seed++, Mode::copies_at_issue);
  check_case<OutputMisaligned<OddHalo>>(seed++, Mode::misaligned_output);
  check_case<OutputMisaligned<SeedHaloUnbatched>>(seed++, Mode::misaligned_output);
  // The window form: copies landing at once (a window copied into a buffer whose wgmma group is in
  // flight would fail); an NCHW output misaligned.
  static_assert(Plan<UnetWindow>::kWinBufs == 2 && Plan<RowWindow>::kWinBufs == 1 && Plan<ChunkWindow>::kWinTileRows == 2);
  check_case<UnetWindow>(seed++, Mode::copies_at_issue);
  check_case<ChunkWindow>(seed++, Mode::copies_at_issue);
  check_case<OutputMisaligned<RowWindow>>(seed++, Mode::misaligned_output);
  // TF32 (float storage): float4 stores where the output is 16-byte aligned along runs of 4, else
  // one float a store; copies landing at once.
  static_assert(Plan<Tf32Conv>::kOutVec == 4 && Plan<Tf32Wide>::kOutVec == 4 && Plan<Tf32Small>::kOutVec == 1 &&
                Plan<OutputMisaligned<Tf32Conv>>::kOutVec == 1 && !Plan<Tf32Conv>::kHalfEpi && Plan<Tf32Conv>::kElem == 4);
  check_case<Tf32Conv>(seed++, Mode::copies_at_issue);
  check_case<Tf32Wide>(seed++, Mode::copies_at_issue);
  check_case<OutputMisaligned<Tf32Conv>>(seed++, Mode::misaligned_output);
  // The pointwise form: copies landing at once; outputs one element a store.
  static_assert(Plan<PwHalf>::kAsync && Plan<PwTf32Wide>::kAsync && Plan<PwHalf>::kOutVec == 4 &&
                Plan<PwBf16>::kOutVec == 4 && Plan<PwTf32>::kOutVec == 4 && Plan<PwHalf>::kCoBlocks == 1 &&
                Plan<PwBf16>::kCoBlocks == 2 && Plan<PwTf32Wide>::kTilesX == 4);
  check_case<PwHalf>(seed++, Mode::copies_at_issue);
  check_case<PwBf16>(seed++, Mode::copies_at_issue);
  check_case<PwTf32Wide>(seed++, Mode::copies_at_issue);
  check_case<OutputMisaligned<PwHalf>>(seed++, Mode::misaligned_output);
  check_case<OutputMisaligned<PwTf32>>(seed++, Mode::misaligned_output);
  cuinline_conv2d_hmma_detail::g_copies_at_issue = false;
}

}  // namespace
