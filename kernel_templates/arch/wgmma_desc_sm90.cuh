// arch/wgmma_desc_sm90.cuh — wgmma matrix descriptors (sm_90a): integer arithmetic only, so the
// host-emulated tests compile them as they are.

#ifndef CUINLINE_ARCH_WGMMA_DESC_SM90_CUH
#define CUINLINE_ARCH_WGMMA_DESC_SM90_CUH

namespace cuinline_arch {

// A matrix descriptor of a K-major tile in the swizzled layout with rows of kRowBytes (32, 64, 128),
// starting at shared address addr: start address, leading byte offset 16 (unused by the swizzled
// K-major layouts), stride byte offset 8 rows (the next 8-row core-matrix group), swizzle mode
// (1: 128-byte, 2: 64-byte, 3: 32-byte).
template <int kRowBytes>
__device__ __forceinline__ unsigned long long wgmma_desc(unsigned addr) {
  constexpr unsigned long long kMode = kRowBytes == 128 ? 1 : kRowBytes == 64 ? 2 : 3;
  return static_cast<unsigned long long>((addr & 0x3FFFF) >> 4) | (1ull << 16) |
         (static_cast<unsigned long long>(8 * kRowBytes >> 4) << 32) | (kMode << 62);
}
// A descriptor of a K-major tile without swizzle (the halo tiling's A): 8 x 16-byte core matrices,
// row r of a core matrix 16 r bytes from its start, the next 8 rows 128 bytes on (stride byte
// offset), the k 8..15 core matrix `lbo` bytes from the k 0..7 one (leading byte offset, < 256 KiB).
__device__ __forceinline__ unsigned long long wgmma_desc_plain(unsigned addr, unsigned lbo) {
  return static_cast<unsigned long long>((addr & 0x3FFFF) >> 4) |
         (static_cast<unsigned long long>((lbo & 0x3FFFF) >> 4) << 16) | (static_cast<unsigned long long>(128 >> 4) << 32);
}

}  // namespace cuinline_arch

#endif  // CUINLINE_ARCH_WGMMA_DESC_SM90_CUH
