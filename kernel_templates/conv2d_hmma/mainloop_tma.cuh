// conv2d_hmma/mainloop_tma.cuh — the TMA form of the wgmma tiling (kTma, sm_90a): a producer warp
// copies each k step's A and B tiles with the tensor memory accelerator while the block's
// warpgroups run wgmma on the steps before, the two sides meeting on mbarriers only.

#ifndef CUINLINE_CONV2D_HMMA_MAINLOOP_TMA_CUH
#define CUINLINE_CONV2D_HMMA_MAINLOOP_TMA_CUH

namespace cuinline_conv2d_hmma_detail {

#if CUINLINE_CONV2D_HMMA_WGMMA
// One block's tile in the TMA form. The block is kThreads consumer threads (the warpgroups of the
// cp.async form's tiling, the same accumulators and epilogue) and a producer warpgroup after them,
// whose first thread issues every copy. A multiprocessor's register file is split among its four
// schedulers, each holding one warp of each warpgroup, so a block of three warpgroups starts at 168
// registers a thread (ptxas's bound for 384 threads); the producer then gives all but 40 back and
// each consumer warpgroup takes 232 (40 + 2 x 232 = 504 of a scheduler's 512 a lane). (One
// consumer warpgroup, an m64 tile: two blocks a multiprocessor at 128 registers, no moves.) A tile
// is kBM consecutive pixels of the plane. With a box (kTma 1) they make a box of whole output rows
// (kBM % kOW == 0) or of one row's part (kOW % kBM == 0); at stride 1 its input for filter tap (kh,
// kw) is the box of the input from row oh0 - kPH + kh kDH, column ow0 - kPW + kw kDW (in_map: the
// channels-last input as a 4-d tensor {C, W, H, N}, box {kBK, box columns, box rows, 1}, zeros
// outside the image). With im2col (kTmaIm2col) in_map walks the output positions of the whole
// batch — the input position of filter tap (0, 0) from (-kPW, -kPH) by the strides, row by row,
// image by image — and a copy takes kBM of them from the tile's first pixel on, each read at the
// tap's offset (kw kDW, kh kDH): any plane and stride (a tile's pixels past its image are the next
// image's, computed and not stored). The copy writes the A tile: a 128-byte row a pixel in the
// flattened order, the 128-byte swizzle of the cp.async form. B is the box {kBK, kBN} of w_map (the
// channels-last weight as a 2-d tensor {kKH kKW kCin, kCout}: rows past kCout are zeros). Step k's copies
// complete on full[k % kStages]; each consumer warp arrives on empty[s] once its warpgroup's wgmma of the
// step that read buffer s are done (wgmma_wait<1> after the next step's are issued), and the producer waits
// for that before it copies into s again. The k steps and their wgmma are the cp.async form's, in the same
// order: the same sums, so the same bits. kSplit (the split form, cuinline_conv2d_hmma_tma_split): blockIdx.z
// is image x split.slices + slice, the block computes its slice's k steps (block_tile's division of them),
// and only the last block of a tile to arrive (split_reduce, among the consumers) runs the epilogue, on the
// sum of the slices.
struct ConsumerBarrier {
  template <int kThreads>
  struct Of {
    __device__ __forceinline__ void operator()() const { named_barrier(1, kThreads); }
  };
};
template <class S, class E, bool kSplit = false>
__device__ __forceinline__ void tma_tile(unsigned char* smem, const cuinline_tensor_map* in_map,
                                         const cuinline_tensor_map* w_map,
                                         const typename S::storage* __restrict__ bias,
                                         typename S::storage* __restrict__ output,
                                         const typename S::storage* __restrict__ residual, const E& ep,
                                         const SplitK split = SplitK{}) {
  using P = Plan<S>;
  constexpr int kStages = P::kStages;
  constexpr unsigned kStageBytes = P::kStageElems * 2;
  constexpr unsigned kABytes = P::kAElems * 2;
  const unsigned base = smem_address(smem);
  // full[s] at kBarOffset + 8 s, empty[s] kStages barriers on.
  const unsigned full = base + P::kBarOffset;
  const unsigned empty = full + 8 * kStages;
  const int tid = (int)threadIdx.x;
  const int lane = tid % 32;
  const int p0 = (int)blockIdx.x * P::kBM;
  const int co0 = (int)blockIdx.y * P::kBN;
  const int n = (int)(kSplit ? blockIdx.z / split.slices : blockIdx.z);
  const int slice = kSplit ? (int)blockIdx.z - n * split.slices : 0;
  // (The slices' steps: as even as the division makes them.)
  const int step_begin = kSplit ? slice * P::kSteps / split.slices : 0;
  const int steps = kSplit ? (slice + 1) * P::kSteps / split.slices - step_begin : P::kSteps;
  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(full + 8 * s, 1);
      mbarrier_init(empty + 8 * s, P::kWarps);
    }
    mbarrier_init_fence();
  }
  __syncthreads();

  if (tid >= P::kThreads) {  // the producer warpgroup: its first thread issues every copy
    if constexpr (S::kWarpsM == 8) warpgroup_registers_dec<40>();
    if (tid == P::kThreads) {
      tma_prefetch_map(in_map);
      tma_prefetch_map(w_map);
      const int oh0 = p0 / S::kOW;
      const int ow0 = p0 - oh0 * S::kOW;
      // (im2col: the input position of the tile's first pixel under filter tap (0, 0).)
      const int x0 = ow0 * S::kSW - S::kPW, y0 = oh0 * S::kSH - S::kPH;
#pragma unroll 1
      for (int k = 0; k < steps; ++k) {
        const int s = k % kStages;
        if (k >= kStages) mbarrier_wait(empty + 8 * s, (unsigned)(k / kStages - 1) & 1u);
        const int step = step_begin + k;
        const int tap = step / P::kCiSteps;
        const int ci = (step - tap * P::kCiSteps) * S::kBK;
        const int kh = tap / S::kKW;
        const int kw = tap - kh * S::kKW;
        const unsigned stage = base + s * kStageBytes;
        mbarrier_arrive_expect_tx(full + 8 * s, kStageBytes);
        if constexpr (P::kTmaIm2col) {
          tma_load_im2col_4d(stage, in_map, full + 8 * s, ci, x0, y0, n, (unsigned short)(kw * S::kDW),
                             (unsigned short)(kh * S::kDH));
        } else {
          tma_load_4d(stage, in_map, full + 8 * s, ci, ow0 - S::kPW + kw * S::kDW, oh0 - S::kPH + kh * S::kDH,
                      n);
        }
        tma_load_2d(stage + kABytes, w_map, full + 8 * s, tap * S::kCin + ci, co0);
      }
    }
    return;
  }

  if constexpr (S::kWarpsM == 8) warpgroup_registers_inc<232>();
  float acc[S::kMT][S::kNT][4];
  zero_accumulators<S>(acc);
  const int warpgroup = tid / 128;
#pragma unroll 1
  for (int k = 0; k < steps; ++k) {
    const int s = k % kStages;
    mbarrier_wait(full + 8 * s, (unsigned)(k / kStages) & 1u);
    const unsigned stage = base + s * kStageBytes;
    wgmma_fence();
    wgmma_step<S>(
        acc,
        [&](int i, int ks) {
          return wgmma_desc<P::kRowBytes>(stage + (S::kMT * warpgroup + i) * 64 * P::kRowBytes + ks * 32);
        },
        stage + kABytes);
    wgmma_commit();
    wgmma_wait<1>();
    // Step k - 1's wgmma are done: its buffer is free.
    if (k > 0 && lane == 0) mbarrier_arrive(empty + 8 * ((k - 1) % kStages));
  }
  wgmma_wait<0>();
  fence_accumulators<S>(acc);
  // Every consumer's wgmma reads are done before the epilogue's tile overwrites the buffers (the
  // producer's copies all landed: every step's full barrier was waited for).
  named_barrier(1, P::kThreads);
  if constexpr (kSplit) {
    if (split.slices > 1) {
      const long long tile = ((long long)n * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
      if (!split_reduce<S>(acc, smem, split, slice, tile, ConsumerBarrier::Of<P::kThreads>{})) return;
    }
  }

  // The epilogue of block_tile's kHalfEpi path, among the consumer threads.
  using T = typename S::storage;
  T* out_n = output + (long long)n * P::kOutN;
  unsigned short* s_h = reinterpret_cast<unsigned short*>(smem);
  if constexpr (S::kHasResidual) {
    load_tile_half<S, P::kOutVec>(s_h, residual + (long long)n * P::kOutN, p0, (int)(P::kPixels - p0), co0);
    named_barrier(1, P::kThreads);
  }
  write_half_tile<S, E, S::kHasResidual>(acc, s_h, bias, co0, ep);
  named_barrier(1, P::kThreads);
  store_tile_half<S, P::kOutVec>(s_h, out_n, p0, (int)(P::kPixels - p0), co0);
}
#endif

}  // namespace cuinline_conv2d_hmma_detail

#endif  // CUINLINE_CONV2D_HMMA_MAINLOOP_TMA_CUH
