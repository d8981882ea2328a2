/* The C API: load_inline a CUDA kernel (compiled by NVRTC, cached), then an N-ary op, with the
 * error handling every call needs. Without a GPU it compiles for sm_90 and stops where a device is
 * needed, saying why. Build: examples/CMakeLists.txt (C11); docs/c-api.md walks through it. */
#include <cuinline/cuinline.h>
#include <stdio.h>

static int check(cuinline_status s, const char* what) {
  if (s != CUINLINE_SUCCESS) {
    fprintf(stderr, "%s failed (status %d): %s\n", what, (int)s, cuinline_last_error());
    return 1;
  }
  return 0;
}

int main(void) {
  const char* source =
      "extern \"C\" __global__ void saxpy(float* y, const float* x, float a, unsigned n) {\n"
      "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  if (i < n) y[i] = a * x[i] + y[i];\n"
      "}\n";
  const char* functions[] = {"saxpy"};
  cuinline_inline_options options = {0};
  options.name = "saxpy";
  options.sources = &source;
  options.num_sources = 1;
  options.functions = functions;
  options.num_functions = 1;
  options.device = -1;
  options.arch = cuinline_device_count() > 0 ? NULL : "sm_90"; /* no GPU: compile for sm_90 only */

  cuinline_module module = NULL;
  if (check(cuinline_load_inline(&options, &module), "cuinline_load_inline")) return 1;
  cuinline_cache_stats stats;
  if (check(cuinline_get_cache_stats(&stats), "cuinline_get_cache_stats")) return 1;
  printf("cuinline %s: saxpy compiled or cached (compiles %llu, disk hits %llu, memory hits %llu)\n",
         cuinline_version(), (unsigned long long)stats.compiles, (unsigned long long)stats.disk_hits,
         (unsigned long long)stats.memory_hits);

  /* A bad op is refused before anything is compiled or launched. */
  float host[4] = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  cuinline_tensor t = {host, CUINLINE_F32, 1, shape, NULL};
  if (cuinline_apply("nonsense(1)", &t, 1, &t, 1, NULL) != CUINLINE_ERROR_INVALID_ARGUMENT) return 1;
  printf("a bad op: %s\n", cuinline_last_error());

  if (cuinline_device_count() == 0) {
    printf("no GPU here: stopping before the launch\n");
    cuinline_module_release(module);
    return 0;
  }
  cuinline_kernel saxpy = NULL;
  if (check(cuinline_module_kernel(module, "saxpy", &saxpy), "cuinline_module_kernel")) return 1;
  int params = 0;
  if (check(cuinline_kernel_param_count(saxpy, &params), "cuinline_kernel_param_count")) return 1;
  printf("saxpy takes %d parameters; launch it with cuinline_kernel_launch on your device buffers\n", params);
  /* Host memory is refused with a clear error (device pointers from your allocator work). */
  if (cuinline_apply("relu", &t, 1, &t, 1, NULL) != CUINLINE_ERROR_INVALID_ARGUMENT) return 1;
  printf("host memory: %s\n", cuinline_last_error());
  cuinline_kernel_release(saxpy);
  cuinline_module_release(module);
  return 0;
}
