// conv2d_hmma/split.cuh — the split form's reduction (kSplitK): a block's fp32 partial tile to the
// workspace, and the last block of a tile to arrive sums the partials in slice order.

#ifndef CUINLINE_CONV2D_HMMA_SPLIT_CUH
#define CUINLINE_CONV2D_HMMA_SPLIT_CUH

namespace cuinline_conv2d_hmma_detail {

// A split launch's workspace (conv2d_launch.cpp's launch_split): partials, tiles x slices x kBM x
// kBN floats (a slice's tile as its threads hold it: float4 q of thread t at q kThreads + t, so a
// warp's accesses are 512 contiguous bytes); counters, one a tile, zero before the launch. Any
// number of slices (the host cuts at most kSplitKMaxSlices).

struct SplitK {
  float* partials;
  unsigned* counters;
  int slices;
};

// A barrier of every thread that holds accumulators: the block's (the TMA form's consumer
// warpgroups pass their own, mainloop_tma.cuh).
struct BlockBarrier {
  __device__ __forceinline__ void operator()() const { __syncthreads(); }
};

// The sum's rounds (split_reduce): the float4s of this thread's tile (split_reduce's layout) that
// a round loads — kGroup of them, of each of kRound consecutive slices — all issued before the
// round's first add (one load at a time, the sum was a chain of vecs x slices L2 round trips: ncu,
// H200, 25 us of a 31 us kernel of 8 slices x 16 float4s). As many as the accumulators (live
// throughout) and the loads in flight keep within about 192 registers: two warpgroups' 32 float4s
// a thread take 16 a round of one slice, one warpgroup's 16 all of two slices, 8 all of four.
template <class S>
struct SplitRounds {
  static constexpr int kVecs = S::kMT * S::kNT;  // float4s a thread
  static constexpr int kMost = (192 - kVecs * 4) / 4;
  static constexpr int kGroup = kVecs <= kMost ? kVecs : kMost >= 16 ? 16 : kMost >= 8 ? 8 : 4;
  static constexpr int kRound = kVecs * 4 <= kMost ? 4 : kVecs * 2 <= kMost ? 2 : 1;
  static_assert(kVecs % kGroup == 0, "whole groups");
};

// Slices s .. s + kSlices - 1 of the sum, in order: slice s's partial into acc where kFirst (the
// first term as it is, not added to zero), else added; the others added.
template <class S, bool kFirst, int kSlices>
__device__ __forceinline__ void split_add_slices(float (&acc)[S::kMT][S::kNT][4], const float4* tile_parts, int s,
                                                 int tid) {
  using P = Plan<S>;
  using R = SplitRounds<S>;
#pragma unroll
  for (int g = 0; g < R::kVecs; g += R::kGroup) {
    float4 part[kSlices][R::kGroup];
#pragma unroll
    for (int k = 0; k < kSlices; ++k) {
#pragma unroll
      for (int q = 0; q < R::kGroup; ++q) {
        part[k][q] = __ldcg(tile_parts + ((long long)(s + k) * R::kVecs + g + q) * P::kThreads + tid);
      }
    }
#pragma unroll
    for (int k = 0; k < kSlices; ++k) {
#pragma unroll
      for (int q = 0; q < R::kGroup; ++q) {
        float* a = acc[(g + q) / S::kNT][(g + q) % S::kNT];
        if (kFirst && k == 0) {
          a[0] = part[k][q].x, a[1] = part[k][q].y, a[2] = part[k][q].z, a[3] = part[k][q].w;
        } else {
          a[0] += part[k][q].x, a[1] += part[k][q].y, a[2] += part[k][q].z, a[3] += part[k][q].w;
        }
      }
    }
  }
}

// Block `slice` of tile `tile` (linear over the grid's x, y and images) after its k steps: writes
// its accumulators, and returns true in the block that arrives last at the tile, with acc the sum
// of every slice's partial in the order 0, 1, ..., slices - 1 (the same bits whichever block is
// last; the first term as it is, not added to zero, so one slice would give its own bits), its
// tile's counter reset to zero; false in the others, which store nothing. A block-wide decision
// (every thread returns the same), so the epilogue's barriers are reached by the whole block. The
// shared memory's first word carries it (after the main loop's last barrier, before the epilogue's).
// `barrier`: a barrier of the threads that hold the accumulators (kThreads of them, the first).
template <class S, class Barrier = BlockBarrier>
__device__ __forceinline__ bool split_reduce(float (&acc)[S::kMT][S::kNT][4], unsigned char* smem,
                                             const SplitK& split, int slice, long long tile,
                                             const Barrier& barrier = Barrier{}) {
  using P = Plan<S>;
  constexpr int kVecs = S::kMT * S::kNT;  // float4s a thread
  const int tid = (int)threadIdx.x;
  float4* tile_parts = reinterpret_cast<float4*>(split.partials) + tile * split.slices * kVecs * P::kThreads;
  float4* mine = tile_parts + (long long)slice * kVecs * P::kThreads + tid;
#pragma unroll
  for (int i = 0; i < S::kMT; ++i) {
#pragma unroll
    for (int j = 0; j < S::kNT; ++j) {
      __stcg(mine + (i * S::kNT + j) * P::kThreads, make_float4(acc[i][j][0], acc[i][j][1], acc[i][j][2], acc[i][j][3]));
    }
  }
  // Every thread's partial is visible device-wide before the block counts itself in (the
  // threadFenceReduction pattern); the block that then sees slices - 1 arrivals before its own
  // reads them all from L2.
  __threadfence();
  barrier();
  unsigned* s_last = reinterpret_cast<unsigned*>(smem);
  if (tid == 0) *s_last = atomicAdd(split.counters + tile, 1u) == (unsigned)(split.slices - 1) ? 1u : 0u;
  barrier();
  const bool last = *s_last != 0u;
  barrier();  // every thread has read the word before the epilogue writes the shared memory
  if (!last) return false;
  __threadfence();
  // The sum, in slice order (split_add_slices): slice 0's partial as it is, then each next slice's
  // added, kRound slices a round while that many are left. The slices' loops are not unrolled:
  // unrolled over the most slices with each load predicated, the sum was most of the split kernel's
  // compile (NVRTC for sm_90 on the dev host, a 128-channel 3 x 3's split kernel: 764 ms, 288
  // without the sum).
  constexpr int kRound = SplitRounds<S>::kRound;
  int s = kRound;
  if (split.slices >= kRound) {
    split_add_slices<S, true, kRound>(acc, tile_parts, 0, tid);
#pragma unroll 1
    for (; s + kRound <= split.slices; s += kRound) split_add_slices<S, false, kRound>(acc, tile_parts, s, tid);
  } else {
    split_add_slices<S, true, 1>(acc, tile_parts, 0, tid);
    s = 1;
  }
#pragma unroll 1
  for (; s < split.slices; ++s) split_add_slices<S, false, 1>(acc, tile_parts, s, tid);
  if (tid == 0) split.counters[tile] = 0u;  // (the launch zeroes them too; a replayed graph's memset)
  return true;
}

}  // namespace cuinline_conv2d_hmma_detail

#endif  // CUINLINE_CONV2D_HMMA_SPLIT_CUH
