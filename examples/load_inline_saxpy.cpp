// load_inline for C++: CUDA source in a string, compiled with NVRTC for this GPU, cached in
// memory and on disk, launched on a stream. Without a GPU it compiles for sm_90 and stops there.
#include <cstdio>
#include <cuinline/cuinline.hpp>
#include <vector>

int main() {
  cuinline::InlineOptions opts;
  opts.name = "saxpy";
  opts.cuda_sources = {R"(
    extern "C" __global__ void saxpy(float* y, const float* x, float a, unsigned n) {
      unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) y[i] = a * x[i] + y[i];
    })"};
  opts.functions = {"saxpy"};
  opts.verbose = true;
  if (cuinline::device_count() == 0) {
    opts.arch = cuinline::Arch::parse("sm_90");  // offline: warm the cache, no GPU needed
    cuinline::Module m = cuinline::load_inline(opts);
    std::printf("no GPU (%s); compiled %zu bytes of %s CUBIN\n",
                cuinline::driver_unavailable_reason().c_str(), m.program().binary.size(),
                m.program().arch.name().c_str());
    return 0;
  }
  cuinline::Kernel saxpy = cuinline::load_inline(opts).kernel("saxpy");

  const unsigned n = 1 << 20;
  std::vector<float> x(n, 1.0f), y(n, 2.0f);
  cuinline::DeviceBuffer dx(n * sizeof(float)), dy(n * sizeof(float));
  dx.copy_from_host(x.data(), dx.bytes());
  dy.copy_from_host(y.data(), dy.bytes());
  cuinline::Stream stream;
  saxpy.launch({cuinline::Dim3((n + 255) / 256), cuinline::Dim3(256), 0, stream}, dy.ptr(), dx.ptr(), 3.0f,
               n);
  stream.synchronize();
  dy.copy_to_host(y.data(), dy.bytes());
  std::printf("y[0] = %g (expected 5)\n", y[0]);
  return y[0] == 5.0f ? 0 : 1;
}
