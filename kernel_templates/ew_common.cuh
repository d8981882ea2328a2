// ew_common.cuh — storage types of the elementwise kernels and their exact conversions to and
// from the "opmath" type (float for f16/bf16/f32, double for f64), with no standard or toolkit
// headers. The conversions are the instructions PyTorch's c10::Half / c10::BFloat16 use on the
// GPU (cvt.f32.f16, cvt.rn.f16.f32, cvt.rn.bf16.f32: round to nearest even), so results match
// bit for bit, NaN payloads included.
#ifndef CUINLINE_EW_COMMON_CUH
#define CUINLINE_EW_COMMON_CUH

struct ew_half {
  unsigned short bits;
};
struct ew_bf16 {
  unsigned short bits;
};

// ew_traits<S>: `op` is the type a step computes in; to_op / from_op convert (from_op rounds once).
template <class S>
struct ew_traits;

template <>
struct ew_traits<float> {
  typedef float op;
  static __device__ __forceinline__ float to_op(float x) { return x; }
  static __device__ __forceinline__ float from_op(float x) { return x; }
};

template <>
struct ew_traits<double> {
  typedef double op;
  static __device__ __forceinline__ double to_op(double x) { return x; }
  static __device__ __forceinline__ double from_op(double x) { return x; }
};

template <>
struct ew_traits<ew_half> {
  typedef float op;
  static __device__ __forceinline__ float to_op(ew_half x) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits));
    return f;
  }
  static __device__ __forceinline__ ew_half from_op(float f) {
    ew_half h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
    return h;
  }
};

template <>
struct ew_traits<ew_bf16> {
  typedef float op;
  static __device__ __forceinline__ float to_op(ew_bf16 x) {
    return __uint_as_float(static_cast<unsigned int>(x.bits) << 16);
  }
  static __device__ __forceinline__ ew_bf16 from_op(float f) {
    ew_bf16 h;
#if __CUDA_ARCH__ >= 800
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
#else
    // c10::BFloat16's portable rounding (round to nearest even; NaN -> 0x7fc0).
    const unsigned int u = __float_as_uint(f);
    h.bits = (f != f) ? 0x7fc0u : static_cast<unsigned short>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
#endif
    return h;
  }
};

// A raw type of B bytes, so a vector of W elements moves as one access (16 bytes: ld.global.v4.u32).
template <int B>
struct ew_raw;
template <>
struct ew_raw<2> {
  typedef unsigned short type;
};
template <>
struct ew_raw<4> {
  typedef unsigned int type;
};
template <>
struct ew_raw<8> {
  typedef uint2 type;
};
template <>
struct ew_raw<16> {
  typedef uint4 type;
};

// The per-output-channel operands of a conv2d epilogue (ops::conv2d's channel_operands): up to 4
// vectors of kCout storage values, passed by value as every conv2d kernel's last argument (unused,
// and all null, where the epilogue reads none).
struct cuinline_conv2d_chan {
  const void* p[4];
};

// Element co of a channel operand of storage type S, converted exactly to opmath (a read-only load).
template <class S>
__device__ __forceinline__ typename ew_traits<S>::op ew_channel_value(const void* p, int co);
template <>
__device__ __forceinline__ float ew_channel_value<float>(const void* p, int co) {
  return __ldg(static_cast<const float*>(p) + co);
}
template <>
__device__ __forceinline__ double ew_channel_value<double>(const void* p, int co) {
  return __ldg(static_cast<const double*>(p) + co);
}
template <>
__device__ __forceinline__ float ew_channel_value<ew_half>(const void* p, int co) {
  return ew_traits<ew_half>::to_op(ew_half{__ldg(static_cast<const unsigned short*>(p) + co)});
}
template <>
__device__ __forceinline__ float ew_channel_value<ew_bf16>(const void* p, int co) {
  return ew_traits<ew_bf16>::to_op(ew_bf16{__ldg(static_cast<const unsigned short*>(p) + co)});
}

#endif  // CUINLINE_EW_COMMON_CUH
