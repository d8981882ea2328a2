// conv2d_hmma/split.cuh — the split form's reduction (kSplitK): a block's fp32 partial tile to the
// workspace, and the last block of a tile to arrive sums the partials in slice order.

#ifndef CUINLINE_CONV2D_HMMA_SPLIT_CUH
#define CUINLINE_CONV2D_HMMA_SPLIT_CUH

namespace cuinline_conv2d_hmma_detail {

// A split launch's workspace (conv2d_launch.cpp's launch_split): partials, tiles x slices x kBM x
// kBN floats (a slice's tile as its threads hold it: float4 q of thread t at q kThreads + t, so a
// warp's accesses are 512 contiguous bytes); counters, one a tile, zero before the launch.
// The most slices a launch cuts a reduction into (conv2d_internal.hpp's kSplitKMaxSlices, which
// static_asserts against this): split_reduce's sum is unrolled over them.
constexpr int kSplitMaxSlices = 8;

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
  // The sum: every slice's loads of a chunk of the thread's float4s issued before the first add,
  // then added in slice order. Chunk by chunk, each load waiting on the one before it, the
  // reduction was a chain of vecs x slices L2 round trips (ncu, H200: 25 us of a 31 us kernel of
  // 8 slices x 16 float4s). The chunk: as many float4s as keep the sums made so far and the loads in
  // flight within about 192 registers (the accumulators are dead from their store on; each sum
  // overwrites its own).
  constexpr int kChunk = kVecs * 4 + kSplitMaxSlices * 4 * 4 <= 192 ? 4 : kVecs * 4 + kSplitMaxSlices * 4 * 2 <= 192 ? 2 : 1;
  static_assert(kVecs % kChunk == 0, "whole chunks");
#pragma unroll
  for (int c = 0; c < kVecs; c += kChunk) {
    float4 part[kChunk][kSplitMaxSlices];
#pragma unroll
    for (int q = 0; q < kChunk; ++q) {
#pragma unroll
      for (int s = 0; s < kSplitMaxSlices; ++s) {
        if (s < split.slices) part[q][s] = __ldcg(tile_parts + ((long long)s * kVecs + c + q) * P::kThreads + tid);
      }
    }
#pragma unroll
    for (int q = 0; q < kChunk; ++q) {
      float4 sum = part[q][0];
#pragma unroll
      for (int s = 1; s < kSplitMaxSlices; ++s) {
        if (s < split.slices) sum.x += part[q][s].x, sum.y += part[q][s].y, sum.z += part[q][s].z, sum.w += part[q][s].w;
      }
      const int i = (c + q) / S::kNT, j = (c + q) % S::kNT;
      acc[i][j][0] = sum.x, acc[i][j][1] = sum.y, acc[i][j][2] = sum.z, acc[i][j][3] = sum.w;
    }
  }
  if (tid == 0) split.counters[tile] = 0u;  // (the launch zeroes them too; a replayed graph's memset)
  return true;
}

}  // namespace cuinline_conv2d_hmma_detail

#endif  // CUINLINE_CONV2D_HMMA_SPLIT_CUH
