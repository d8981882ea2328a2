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

// Slice s's partial of this thread's tile (split_reduce's layout) into acc (kFirst) or added to it:
// the thread's float4s kGroup at a time, each group's loads all issued before its first add (one at
// a time, the sum was a chain of vecs x slices L2 round trips: ncu, H200, 25 us of a 31 us kernel of
// 8 slices x 16 float4s). kGroup: as many as the accumulators (live throughout) and the loads in
// flight keep within about 192 registers.
template <class S, bool kFirst>
__device__ __forceinline__ void split_add_slice(float (&acc)[S::kMT][S::kNT][4], const float4* tile_parts, int s,
                                                int tid) {
  using P = Plan<S>;
  constexpr int kVecs = S::kMT * S::kNT;  // float4s a thread
  constexpr int kGroupMost = (192 - kVecs * 4) / 4;
  constexpr int kGroup = kVecs <= kGroupMost ? kVecs : kGroupMost >= 16 ? 16 : kGroupMost >= 8 ? 8 : 4;
  static_assert(kVecs % kGroup == 0, "whole groups");
#pragma unroll
  for (int g = 0; g < kVecs; g += kGroup) {
    float4 part[kGroup];
#pragma unroll
    for (int q = 0; q < kGroup; ++q) part[q] = __ldcg(tile_parts + ((long long)s * kVecs + g + q) * P::kThreads + tid);
#pragma unroll
    for (int q = 0; q < kGroup; ++q) {
      float* a = acc[(g + q) / S::kNT][(g + q) % S::kNT];
      if (kFirst) {
        a[0] = part[q].x, a[1] = part[q].y, a[2] = part[q].z, a[3] = part[q].w;
      } else {
        a[0] += part[q].x, a[1] += part[q].y, a[2] += part[q].z, a[3] += part[q].w;
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
  // The sum, in slice order (split_add_slice): slice 0's partial as it is, then each next slice's
  // added. The slices' loop is not unrolled: unrolled over the most slices with each load predicated,
  // the sum was most of the split kernel's compile (NVRTC for sm_90 on the dev host, a 128-channel
  // 3 x 3's split kernel: 764 ms, 288 without the sum).
  split_add_slice<S, true>(acc, tile_parts, 0, tid);
#pragma unroll 1
  for (int s = 1; s < split.slices; ++s) split_add_slice<S, false>(acc, tile_parts, s, tid);
  if (tid == 0) split.counters[tile] = 0u;  // (the launch zeroes them too; a replayed graph's memset)
  return true;
}

}  // namespace cuinline_conv2d_hmma_detail

#endif  // CUINLINE_CONV2D_HMMA_SPLIT_CUH
