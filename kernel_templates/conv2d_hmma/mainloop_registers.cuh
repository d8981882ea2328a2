// conv2d_hmma/mainloop_registers.cuh — the main loop through registers (every layout).

#ifndef CUINLINE_CONV2D_HMMA_MAINLOOP_REGISTERS_CUH
#define CUINLINE_CONV2D_HMMA_MAINLOOP_REGISTERS_CUH

namespace cuinline_conv2d_hmma_detail {

// The main loop through registers (every layout): step k + 1's loads are in flight during step k's
// mma, then stored to the other of two buffers; one barrier a step.
template <class S>
__device__ __forceinline__ void mainloop_registers(float (&acc)[S::kMT][S::kNT][4], unsigned short* s_stage,
                                                   unsigned a_row, unsigned b_row,
                                                   const typename S::storage* __restrict__ in_n,
                                                   const typename S::storage* __restrict__ weight, int p0,
                                                   int co0) {
  using P = Plan<S>;
  const int tid = threadIdx.x;
  // This thread's gather coordinates: A pixel am0 (+ r * kAThreadsM), pair ak0 (+ j * kAThreadsK),
  // or with kATrans pixels 2 am0, 2 am0 + 1, column ak0 (+ j * kAThreadsK); B channel bn0 (+ r *
  // kBThreadsN), pair bk0 (+ j * kBThreadsK).
  const int am0 = P::kATrans ? tid % P::kAThreadsM : tid / P::kAThreadsK;
  const int ak0 = P::kATrans ? tid / P::kAThreadsM : tid % P::kAThreadsK;
  const int bk0 = tid % P::kBThreadsK;
  const int bn0 = tid / P::kBThreadsK;
  Pixels<S> px;
#pragma unroll
  for (int r = 0; r < P::kAPixels; ++r) {
    window_origin<S>(p0 + (P::kATrans ? 2 * am0 + r : am0 + r * P::kAThreadsM), px.iy0[r], px.ix0[r]);
  }
  constexpr unsigned kStageBytes = P::kStageElems * 2;
  if constexpr (P::kAllAtOnce) {
    // Every step's loads in flight together, staged in buffers 0 .. kSteps - 1.
    Fetch<S> fs[P::kSteps];
#pragma unroll
    for (int step = 0; step < P::kSteps; ++step) fetch<S>(fs[step], px, in_n, weight, co0, step, am0, ak0, bn0, bk0);
#pragma unroll
    for (int step = 0; step < P::kSteps; ++step)
      store_stage<S>(fs[step], s_stage + step * P::kStageElems, am0, ak0, bn0, bk0);
    __syncthreads();
#pragma unroll 1
    for (int step = 0; step < P::kSteps; ++step)
      accumulate<S>(acc, a_row + step * kStageBytes, b_row + step * kStageBytes);
    __syncthreads();  // every warp's reads of the stages are done before the epilogue reuses them
    return;
  }
  Fetch<S> f;
  fetch<S>(f, px, in_n, weight, co0, 0, am0, ak0, bn0, bk0);
  store_stage<S>(f, s_stage, am0, ak0, bn0, bk0);
  __syncthreads();
#pragma unroll 1
  for (int step = 0; step < P::kSteps; ++step) {
    const int buf = step & 1;
    // Step + 1's buffer was last read in step - 1, before the barrier that ended it.
    if (step + 1 < P::kSteps) fetch<S>(f, px, in_n, weight, co0, step + 1, am0, ak0, bn0, bk0);
    accumulate<S>(acc, a_row + buf * kStageBytes, b_row + buf * kStageBytes);
    if (step + 1 < P::kSteps) store_stage<S>(f, s_stage + (buf ^ 1) * P::kStageElems, am0, ak0, bn0, bk0);
    __syncthreads();
  }
}

}  // namespace cuinline_conv2d_hmma_detail

#endif  // CUINLINE_CONV2D_HMMA_MAINLOOP_REGISTERS_CUH
