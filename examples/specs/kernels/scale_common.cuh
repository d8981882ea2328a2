#pragma once
template <class T>
__device__ __forceinline__ T scale_value(T x, T a) { return a * x; }
