// ew_ops.cuh — the elementwise steps, each a function S -> S on a storage value that computes in
// opmath and rounds once to S, exactly as the PyTorch CUDA op of the same name (eager mode).
//
// A rendered op is a functor `struct <Name> { __device__ S operator()(S x) const; }` whose body is
// a sequence `x = ew_relu(x); x = ew_leaky_relu(x, 0x1.47ae14p-7f); ...` (constants baked in as
// hex float literals). Reusing it in another kernel (e.g. a conv2d epilogue on float
// accumulators): include "ew_ops.cuh" in the rendered program and paste
// cuinline::detail::render_op_functor(op, DType::f32, "E") (src/templates/render.hpp) before the
// kernel; E then has exactly the signature `__device__ float operator()(float) const`.
#ifndef CUINLINE_EW_OPS_CUH
#define CUINLINE_EW_OPS_CUH

#include "ew_common.cuh"

__device__ __forceinline__ float ew_fmax(float a, float b) {
  return fmaxf(a, b);
}
__device__ __forceinline__ double ew_fmax(double a, double b) {
  return fmax(a, b);
}
__device__ __forceinline__ float ew_fmin(float a, float b) {
  return fminf(a, b);
}
__device__ __forceinline__ double ew_fmin(double a, double b) {
  return fmin(a, b);
}

// torch.relu = clamp_min(x, 0): a NaN input is returned as is (its bits), else max(x, 0).
template <class S>
__device__ __forceinline__ S ew_relu(S x) {
  typedef ew_traits<S> T;
  const typename T::op v = T::to_op(x);
  if (v != v) return x;
  return T::from_op(ew_fmax(v, typename T::op(0)));
}

// F.leaky_relu: x > 0 ? x : x * slope (slope in opmath).
template <class S>
__device__ __forceinline__ S ew_leaky_relu(S x, typename ew_traits<S>::op slope) {
  typedef ew_traits<S> T;
  const typename T::op v = T::to_op(x);
  return T::from_op(v > typename T::op(0) ? v : v * slope);
}

// torch.clamp(x, lo, hi): NaN returned as is, else min(max(x, lo), hi) (bounds in opmath).
template <class S>
__device__ __forceinline__ S ew_clamp(S x, typename ew_traits<S>::op lo, typename ew_traits<S>::op hi) {
  typedef ew_traits<S> T;
  const typename T::op v = T::to_op(x);
  if (v != v) return x;
  return T::from_op(ew_fmin(ew_fmax(v, lo), hi));
}

template <class S>
__device__ __forceinline__ S ew_add(S x, typename ew_traits<S>::op a) {
  return ew_traits<S>::from_op(ew_traits<S>::to_op(x) + a);
}
template <class S>
__device__ __forceinline__ S ew_sub(S x, typename ew_traits<S>::op a) {
  return ew_traits<S>::from_op(ew_traits<S>::to_op(x) - a);
}
// Also division by a scalar: PyTorch multiplies by the reciprocal, rounded to opmath on the host.
template <class S>
__device__ __forceinline__ S ew_mul(S x, typename ew_traits<S>::op a) {
  return ew_traits<S>::from_op(ew_traits<S>::to_op(x) * a);
}

// Steps with a tensor operand (N-ary chains): both operands to opmath, one rounding, like the
// PyTorch op on two tensors of the same dtype (torch.div of two tensors is a true division).
template <class S>
__device__ __forceinline__ S ew_add_tensor(S x, S y) {
  return ew_traits<S>::from_op(ew_traits<S>::to_op(x) + ew_traits<S>::to_op(y));
}
template <class S>
__device__ __forceinline__ S ew_sub_tensor(S x, S y) {
  return ew_traits<S>::from_op(ew_traits<S>::to_op(x) - ew_traits<S>::to_op(y));
}
template <class S>
__device__ __forceinline__ S ew_mul_tensor(S x, S y) {
  return ew_traits<S>::from_op(ew_traits<S>::to_op(x) * ew_traits<S>::to_op(y));
}
template <class S>
__device__ __forceinline__ S ew_div_tensor(S x, S y) {
  return ew_traits<S>::from_op(ew_traits<S>::to_op(x) / ew_traits<S>::to_op(y));
}

// torch.where(c != 0, x, other) on storage values: a select, no arithmetic (bits kept, NaN
// payloads included). The condition is true where nonzero: NaN is true, -0.0 false (tensor.bool()).
template <class S>
__device__ __forceinline__ S ew_where(S c, S x, S other) {
  typedef ew_traits<S> T;
  return T::to_op(c) != typename T::op(0) ? x : other;
}

#endif  // CUINLINE_EW_OPS_CUH
