// arch/mma_sm80.cuh — warp-wide tensor-core instructions of sm_80 and newer: mma.sync (f16, bf16
// m16n8k16; tf32 m16n8k8) and ldmatrix. Needs ew_half and ew_bf16 declared (ew_common.cuh).

#ifndef CUINLINE_ARCH_MMA_SM80_CUH
#define CUINLINE_ARCH_MMA_SM80_CUH

namespace cuinline_arch {

// The mma of a storage type: d += a * b on one m16n8k16 tile (A row-major 16x16, B column-major
// 16x8, fp32 accumulators).
template <class T>
struct Mma;
template <>
struct Mma<ew_half> {
  static __device__ __forceinline__ void run(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                             unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};
template <>
struct Mma<ew_bf16> {
  static __device__ __forceinline__ void run(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                             unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

// TF32 m16n8k8 (float storage on archs without wgmma): A row-major 16x8 (a0 row g, k t; a1 row g +
// 8; a2, a3 k t + 4), B column-major 8x8 (b0 k t, column g; b1 k t + 4), fp32 accumulators; g = lane
// / 4, t = lane % 4.
struct MmaTf32 {
  static __device__ __forceinline__ void run(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                             unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

// Four 8x8 matrices of 16-bit elements: lanes 8j .. 8j + 7 give the row addresses of matrix j; a
// lane receives row lane / 4, columns 2 (lane % 4) and 2 (lane % 4) + 1 of each.
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// The same, transposed: a lane receives rows 2 (lane % 4) and 2 (lane % 4) + 1, column lane / 4.
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

}  // namespace cuinline_arch

#endif  // CUINLINE_ARCH_MMA_SM80_CUH
