// arch/tma_sm90.cuh — the tensor memory accelerator and mbarriers of sm_90: a tensor map passed as a
// kernel parameter, tiled bulk copies of a box of it into shared memory that complete on an
// mbarrier, the mbarrier operations a producer / consumer pipeline needs, and (sm_90a) the moving of
// registers between warpgroups. Compile for sm_90 or later only (setmaxnreg: sm_90a).

#ifndef CUINLINE_ARCH_TMA_SM90_CUH
#define CUINLINE_ARCH_TMA_SM90_CUH

// A CUtensorMap (cuda.h's opaque 128-byte, 64-byte aligned object), made on the host by
// cuTensorMapEncodeTiled or cuTensorMapEncodeIm2col and passed by value as a __grid_constant__ kernel
// parameter.
struct alignas(64) cuinline_tensor_map {
  unsigned long long opaque[16];
};

namespace cuinline_arch {

// mbarrier at shared address `bar`, expecting `count` arrivals a phase.
__device__ __forceinline__ void mbarrier_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Makes the initialized mbarriers visible to the other threads and to the async proxy (the copies
// that complete on them); a barrier of the block follows.
__device__ __forceinline__ void mbarrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// One arrival on `bar`.
__device__ __forceinline__ void mbarrier_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// One arrival on `bar` that also expects `bytes` more of the phase's bulk copies.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// Waits until the phase of parity `parity` of `bar` has completed.
__device__ __forceinline__ void mbarrier_wait(unsigned bar, unsigned parity) {
  asm volatile(
      "{\n.reg .pred done;\n"
      "cuinline_mbarrier_wait:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra cuinline_mbarrier_wait;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

// The box of `map` at (x, y) (2-d) or (c, x, y, n) (4-d), innermost first, into shared memory at
// `dst`, completing `bar`'s expected bytes. Coordinates outside the tensor read zeros.
__device__ __forceinline__ void tma_load_2d(unsigned dst, const cuinline_tensor_map* map, unsigned bar, int x, int y) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::
          "r"(dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(x), "r"(y), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void tma_load_4d(unsigned dst, const cuinline_tensor_map* map, unsigned bar, int c, int x,
                                            int y, int n) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6];\n" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(c), "r"(x), "r"(y), "r"(n), "r"(bar)
      : "memory");
}
// The im2col copy of an im2col map (cuTensorMapEncodeIm2col over a 4-d {C, W, H, N} tensor): the
// map's pixels-per-column pixels from (x, y, n) on, each the map's channels-per-pixel channels from
// c, in the order of the map's bounding box (x fastest, by the map's element strides, then y, then
// n), each read at (x + dx, y + dy): a filter tap's input for consecutive output pixels. Positions
// outside the tensor read zeros.
__device__ __forceinline__ void tma_load_im2col_4d(unsigned dst, const cuinline_tensor_map* map, unsigned bar,
                                                   int c, int x, int y, int n, unsigned short dx,
                                                   unsigned short dy) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes "
      "[%0], [%1, {%2, %3, %4, %5}], [%6], {%7, %8};\n" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(c), "r"(x), "r"(y), "r"(n), "r"(bar), "h"(dx),
      "h"(dy)
      : "memory");
}
// Brings a tensor map (a kernel parameter) into the cache ahead of its first copy.
__device__ __forceinline__ void tma_prefetch_map(const cuinline_tensor_map* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(map)) : "memory");
}
// setmaxnreg (sm_90a): the executing warpgroup gives registers back to the multiprocessor's pool
// (dec) or takes them from it (inc), to kRegs a thread; every warp of the warpgroup executes it.
template <int kRegs>
__device__ __forceinline__ void warpgroup_registers_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void warpgroup_registers_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
// A barrier of the first `threads` threads of the block (named barrier `id`, 1-15; 0 is
// __syncthreads'), threads a multiple of 32.
__device__ __forceinline__ void named_barrier(unsigned id, unsigned threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace cuinline_arch

#endif  // CUINLINE_ARCH_TMA_SM90_CUH
