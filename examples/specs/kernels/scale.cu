// A user kernel warmed by examples/specs/custom.json: y = a * x, N elements per thread.
#include "scale_common.cuh"

template <class T, int N>
__global__ void scale(const T* __restrict__ x, T* __restrict__ y, T a, long long n) {
  long long i = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) * N;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    if (i + k < n) y[i + k] = scale_value(x[i + k], a);
  }
}

extern "C" __global__ void fill(float* y, float value, long long n) {
  long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = value * SCALE_FILL_FACTOR;
}
