// conv2d_hmma/tiles.cuh — what one block computes: a tile (main loop, then epilogue), the window
// form's tiles in turn, the halo form's tiles in turn.

#ifndef CUINLINE_CONV2D_HMMA_TILES_CUH
#define CUINLINE_CONV2D_HMMA_TILES_CUH

namespace cuinline_conv2d_hmma_detail {

// One block's tile of kBM pixels of the flattened plane x kBN channels (every form but the halo's).
// kSplit (the split form, cuinline_conv2d_hmma_split): blockIdx.z is image x split.slices + slice;
// the block computes its slice's k steps, and only the last block of a tile to arrive
// (split_reduce) runs the epilogue, on the sum of the slices.
template <class S, class E, bool kSplit = false>
__device__ __forceinline__ void block_tile(unsigned char* smem, const typename S::storage* __restrict__ input,
                                           const typename S::storage* __restrict__ weight,
                                           const typename S::storage* __restrict__ bias,
                                           typename S::storage* __restrict__ output,
                                           const typename S::storage* __restrict__ residual, int images,
                                           const E& ep, const SplitK split = SplitK{}) {
  using P = Plan<S>;
  using T = typename S::storage;
  unsigned short* s_stage = reinterpret_cast<unsigned short*>(smem);

  const int tid = threadIdx.x;
  const int lane = tid % 32;
  const int warp = tid / 32;
  const int wm = warp % S::kWarpsM;
  const int wn = warp / S::kWarpsM;
  const int p0 = (int)(P::kPointwise ? blockIdx.x / P::kCoBlocks : blockIdx.x) * P::kBM;
  const int co0 = (int)(P::kPointwise ? blockIdx.x % P::kCoBlocks : blockIdx.y) * P::kBN;
  // (batch tiles: p0 counts the batch's pixels)
  const long long n = P::kBatchTiles ? 0 : kSplit ? blockIdx.z / split.slices : blockIdx.z;
  const int slice = kSplit ? (int)(blockIdx.z - n * split.slices) : 0;
  const T* in_n = input + n * P::kInN;
  const long long p_end = P::kBatchTiles ? (long long)images * P::kPixels : P::kPixels;

  // ldmatrix row addresses: A tile i rows (lane % 16), k half lane / 16; B tiles 2jj, 2jj + 1 rows
  // lane % 8 (+ 8 for lanes 16-31), k half (lane / 8) % 2.
  const unsigned base = smem_address(s_stage);
  // kATrans: matrix lane / 8 of an A tile is k rows (lane / 16) * 8 .. + 7, pixels ((lane / 8) % 2) * 8
  // .. + 7 (a0: pixels 0-7 x k 0-7, a1: pixels 8-15, a2: k 8-15, a3: both), read transposed.
  const unsigned a_row =
      P::kATrans
          ? base + ((lane / 16 * 8 + lane % 8) * P::kAPitchT + wm * S::kMT * 16 + (lane / 8) % 2 * 8) * 2
          : base + ((wm * S::kMT * 16 + lane % 16) * P::kPitch + lane / 16 * 8) * 2;
  const unsigned b_row =
      base + (P::kAElems + (wn * S::kNT * 8 + lane % 8 + lane / 16 * 8) * P::kPitch + (lane / 8) % 2 * 8) * 2;

  // The residual's tile, copied while the main loop runs where its buffers leave room (plan.cuh's
  // kResPrefetch; the plain kernel only): its copies are the oldest group the main loop waits for.
  unsigned short* s_r = reinterpret_cast<unsigned short*>(smem + P::kResOffset);
  constexpr bool kPrefetch = !kSplit && P::kResPrefetch;
  if constexpr (kPrefetch) {
    prefetch_residual<S>(s_r, residual + n * P::kOutN, p0, (int)(p_end - p0), co0);
    copy_commit();
  }
  float acc[S::kMT][S::kNT][4];
  zero_accumulators<S>(acc);
  // One main loop: cp.async where the layouts allow it and the host found both pointers 16-byte
  // aligned (S::kInAligned), else the register gather.
  if constexpr (P::kWindow) {
    mainloop_window<S>(acc, s_stage, in_n, weight, p0, co0);
    (void)a_row, (void)b_row;
  } else if constexpr (kSplit) {
    // (The slices' steps: as even as the division makes them.)
    mainloop_async<S, false>(acc, s_stage, a_row, b_row, in_n, weight, p0, co0, images,
                             slice * P::kSteps / split.slices, (slice + 1) * P::kSteps / split.slices);
  } else if constexpr (P::kAsync) {
    mainloop_async<S>(acc, s_stage, a_row, b_row, in_n, weight, p0, co0, images);
  } else {
    mainloop_registers<S>(acc, s_stage, a_row, b_row, in_n, weight, p0, co0);
  }
  if constexpr (kSplit) {
    if (split.slices > 1) {
      const long long tile = (n * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
      if (!split_reduce<S>(acc, smem, split, slice, tile)) return;
    }
  }

  T* out_n = output + n * P::kOutN;
  // Epilogue: accumulator q of tile (i, j) is pixel g + 8 (q / 2), channel 2t + q % 2. (The last
  // barrier of the main loop ended every read of the stage buffers.)
  if constexpr (P::kHalfEpi) {
    // The f16 / bf16 wgmma tiling: acc + bias (+ the residual), E and the one rounding in registers
    // (the order and arithmetic of store_tile), the 16-bit results into a tile of the storage type — half
    // the shared-memory bytes of the fp32 tile, which made the seed L1-bound (ncu, H200: L1 84 %,
    // DRAM 34 %) — then kOutVec outputs a load and store.
    unsigned short* s_h = reinterpret_cast<unsigned short*>(smem);
    if constexpr (kPrefetch) {
      write_half_tile<S, E, true>(acc, s_h, bias, co0, ep, s_r);
    } else {
      if constexpr (S::kHasResidual) {
        load_tile_half<S, P::kOutVec>(s_h, residual + n * P::kOutN, p0, (int)(p_end - p0), co0);
        __syncthreads();
      }
      write_half_tile<S, E, S::kHasResidual>(acc, s_h, bias, co0, ep);
    }
    __syncthreads();
    store_tile_half<S, P::kOutVec>(s_h, out_n, p0, (int)(p_end - p0), co0);
  } else {
    // (Not instantiated for kHalfEpi.)
    float* s_c = reinterpret_cast<float*>(smem);
    {
      const int g = lane / 4;
      const int t = lane % 4;
#pragma unroll
      for (int i = 0; i < S::kMT; ++i) {
#pragma unroll
        for (int j = 0; j < S::kNT; ++j) {
          if (S::kOutNhwc) {  // channels 2t, 2t + 1 are neighbours: one float2 a pixel row
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int m = P::a_row0(wm, i) + g + 8 * h;
              const int c = wn * S::kNT * 8 + j * 8 + 2 * t;
              *reinterpret_cast<float2*>(s_c + m * P::kCM + c) =
                  make_float2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
            }
          } else {
#pragma unroll
            for (int q = 0; q < 4; ++q) {
              const int m = P::a_row0(wm, i) + g + 8 * (q / 2);
              const int c = wn * S::kNT * 8 + j * 8 + 2 * t + q % 2;
              s_c[m * P::kCM + c * P::kCC] = acc[i][j][q];
            }
          }
        }
      }
    }
    __syncthreads();
    const T* res_n = S::kHasResidual ? residual + n * P::kOutN : residual;
    // kOutVec outputs a store (1 where the host found the output not aligned to the vector; every
    // vector's offset is a multiple of kOutVec).
    store_tile<S, E, P::kOutVec>(s_c, bias, out_n, res_n, p0, co0, p_end, ep);
  }
}

// The window form with kWindowTiles: a block computes tiles L, L + G, L + 2G, ... (up to row_tiles)
// of the batch's N x kTilesX pixel tiles (image-major) of its kBN output channels (blockIdx.y), L
// its linear index along x and z and G = gridDim.x x gridDim.z the blocks (gridDim.x = ceil(kTilesX
// / row_tiles), gridDim.z = N). The next tile's window of chunk 0 and first B tiles are copied
// while this tile's outputs are rounded and stored (its output tile in a place of its own), so that
// a tile's first step does not wait for its window from DRAM.
template <class S, class E>
__device__ __forceinline__ void window_tiles(unsigned char* smem, const typename S::storage* __restrict__ input,
                                             const typename S::storage* __restrict__ weight,
                                             const typename S::storage* __restrict__ bias,
                                             typename S::storage* __restrict__ output, int row_tiles, const E& ep) {
  using P = Plan<S>;
  unsigned short* s_stage = reinterpret_cast<unsigned short*>(smem);
  unsigned short* s_h = reinterpret_cast<unsigned short*>(smem + P::kWinOutOffset);
  const int co0 = (int)blockIdx.y * P::kBN;
  const long long stride = (long long)gridDim.x * gridDim.z;
  const long long first = blockIdx.x + (long long)gridDim.x * blockIdx.z;
  const long long total = (long long)P::kTilesX * gridDim.z;
  const long long end = first + row_tiles * stride < total ? first + row_tiles * stride : total;
  float acc[S::kMT][S::kNT][4];
  if (first < end) {
    mainloop_window<S, kWindowFirstCopies>(acc, s_stage, input + first / P::kTilesX * P::kInN, weight,
                                           (int)(first % P::kTilesX) * P::kBM, co0);
  }
#pragma unroll 1
  for (long long t = first; t < end; t += stride) {
    const int p0 = (int)(t % P::kTilesX) * P::kBM;
    zero_accumulators<S>(acc);
    // (Its last barrier: every warp's reads of the buffers are done.)
    mainloop_window<S, kWindowSteps>(acc, s_stage, input + t / P::kTilesX * P::kInN, weight, p0, co0);
    const long long next = t + stride;
    if (next < end) {
      mainloop_window<S, kWindowFirstCopies>(acc, s_stage, input + next / P::kTilesX * P::kInN, weight,
                                             (int)(next % P::kTilesX) * P::kBM, co0);
    }
    write_half_tile<S, E>(acc, s_h, bias, co0, ep);
    __syncthreads();
    store_tile_half<S, P::kOutVec>(s_h, output + t / P::kTilesX * P::kOutN, p0, (int)(P::kPixels - p0), co0);
  }
}

// The halo form: a block computes tiles L, L + G, L + 2G, ... (up to row_tiles) of the batch's
// N x kTilesY tiles (image-major), L its linear index along x and z and G = gridDim.x x gridDim.z
// the blocks (gridDim.x = ceil(kTilesY / row_tiles), gridDim.z = N): the blocks resident at a time
// hold consecutive tiles of a few images, the order of the flattened tiling. (Consecutive tiles a
// block: seed NCHW 0.191 ms; tiles x, x + gridDim.x, ... of image z: 0.163 — output rows scattered
// over ~40 images at a time; H200.) Every step's weights are staged once, each tile's window copied
// while the previous tile's outputs are stored.
template <class S, class E>
__device__ __forceinline__ void halo_tiles(unsigned char* smem, const typename S::storage* __restrict__ input,
                                           const typename S::storage* __restrict__ weight,
                                           const typename S::storage* __restrict__ bias,
                                           typename S::storage* __restrict__ output, int co0, int row_tiles,
                                           const E& ep) {
  using P = Plan<S>;
  const Halo<S> h(smem);
  const long long stride = (long long)gridDim.x * gridDim.z;
  const long long first = blockIdx.x + (long long)gridDim.x * blockIdx.z;
  const long long total = (long long)P::kTilesY * gridDim.z;
  const long long end = first + row_tiles * stride < total ? first + row_tiles * stride : total;
  h.load_weights(weight, co0);
  if (first < end) h.load_window(input + first / P::kTilesY * P::kInN, (int)(first % P::kTilesY));
  copy_commit();
#pragma unroll 1
  for (long long t = first; t < end; t += stride) {
    h.ready();  // (its barrier also ends the previous tile's reads of the output tile)
    float acc[S::kMT][S::kNT][4];
    zero_accumulators<S>(acc);
    h.compute(acc);
    __syncthreads();  // every warp's reads of the window are done
    const long long next = t + stride;
    if (next < end) h.load_window(input + next / P::kTilesY * P::kInN, (int)(next % P::kTilesY));
    copy_commit();
    write_half_tile<S, E>(acc, h.s_h, bias, co0, ep);
    __syncthreads();
    const int tile = (int)(t % P::kTilesY);
    const int oy = tile / P::kSegs;
    const int ox0 = (tile - oy * P::kSegs) * P::kBM;
    store_tile_half<S, P::kOutVec>(h.s_h, output + t / P::kTilesY * P::kOutN, oy * S::kOW + ox0, S::kOW - ox0,
                                   co0);
  }
}

}  // namespace cuinline_conv2d_hmma_detail

#endif  // CUINLINE_CONV2D_HMMA_TILES_CUH
