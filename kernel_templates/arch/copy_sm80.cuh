// arch/copy_sm80.cuh — shared-memory addresses and cp.async (sm_80 and newer): 16-byte copies
// from global to shared memory, their commit groups and waits.

#ifndef CUINLINE_ARCH_COPY_SM80_CUH
#define CUINLINE_ARCH_COPY_SM80_CUH

namespace cuinline_arch {

// A 32-bit word of shared memory at shared address addr.
__device__ __forceinline__ unsigned lds32(unsigned addr) {
  unsigned v;
  asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr));
  return v;
}

__device__ __forceinline__ unsigned smem_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, asynchronously; zeros where !valid (src must still be a valid address).
// kL2Only: cached in L2 only (.cg), else in L1 too (.ca: neighbouring taps re-read the same input).
template <int kL2Only>
__device__ __forceinline__ void copy16_async(void* dst, const void* src, bool valid) {
  if (kL2Only) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_address(dst)), "l"(src),
                 "r"(valid ? 16 : 0));
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_address(dst)), "l"(src),
                 "r"(valid ? 16 : 0));
  }
}
// kBytes (4, 8 or 16) global -> shared, asynchronously, cached in L1 and L2 (.ca); both addresses
// aligned to kBytes.
template <int kBytes>
__device__ __forceinline__ void copy_async(void* dst, const void* src) {
  static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16, "cp.async copies 4, 8 or 16 bytes");
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(smem_address(dst)), "l"(src), "n"(kBytes));
}
__device__ __forceinline__ void copy_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
// Waits until at most kPending of this thread's newest copy groups are still in flight.
template <int kPending>
__device__ __forceinline__ void copy_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

}  // namespace cuinline_arch

#endif  // CUINLINE_ARCH_COPY_SM80_CUH
