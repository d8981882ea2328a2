// Which driver calls may a library make while the caller's stream is being captured into a CUDA
// graph? For each capture mode (global, thread-local, relaxed) and each call cuinline's launch path
// or its compile-on-miss path might make, this program begins a capture on a non-blocking stream,
// makes the call (from the capturing thread, and separately from a second thread while the first
// captures), then records a kernel and ends the capture, and reports the call's result and whether
// the capture survived. It also times the per-call host cost of the queries the launch path uses.
//
// Standalone (links libcuda and NVRTC directly; the library dlopens libcuda instead):
//   g++ -O2 -std=c++17 bench/capture_probe.cpp -I/usr/local/cuda/include -L/usr/local/cuda/lib64 \
//       -lcuda -lnvrtc -lpthread -o capture_probe && ./capture_probe
// Results: docs/graphs.md.
#include <cuda.h>
#include <nvrtc.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

#define CHECK(x)                                                            \
  do {                                                                      \
    CUresult r_ = (x);                                                      \
    if (r_ != CUDA_SUCCESS) {                                               \
      const char* n_ = nullptr;                                             \
      cuGetErrorName(r_, &n_);                                              \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, n_);   \
      std::exit(1);                                                         \
    }                                                                       \
  } while (0)

const char* name_of(CUresult r) {
  const char* n = nullptr;
  if (cuGetErrorName(r, &n) != CUDA_SUCCESS || n == nullptr) return "?";
  return n;
}

std::vector<char> compile_cubin() {
  const char* src = "extern \"C\" __global__ void k(float* p, int n) { int i = blockIdx.x * blockDim.x + "
                    "threadIdx.x; if (i < n) p[i] = p[i] * 2.0f + 1.0f; }\n";
  nvrtcProgram prog;
  nvrtcCreateProgram(&prog, src, "k.cu", 0, nullptr, nullptr);
  const char* opts[] = {"-arch=sm_90"};
  if (nvrtcCompileProgram(prog, 1, opts) != NVRTC_SUCCESS) {
    std::fprintf(stderr, "nvrtc failed\n");
    std::exit(1);
  }
  size_t n = 0;
  nvrtcGetCUBINSize(prog, &n);
  std::vector<char> cubin(n);
  nvrtcGetCUBIN(prog, cubin.data());
  nvrtcDestroyProgram(&prog);
  return cubin;
}

struct Env {
  CUcontext ctx = nullptr;
  CUstream stream = nullptr;
  CUlibrary lib = nullptr;
  CUkernel kernel = nullptr;
  CUdeviceptr buf = 0;
  std::vector<char> cubin;
  int n = 1024;
};
Env env;

void record_kernel(CUstream s) {
  void* args[] = {&env.buf, &env.n};
  CHECK(cuLaunchKernel(reinterpret_cast<CUfunction>(env.kernel), 4, 1, 1, 256, 1, 1, 0, s, args, nullptr));
}

struct Probe {
  const char* name;
  std::function<CUresult()> call;
};

std::vector<Probe> probes() {
  std::vector<Probe> p;
  p.push_back({"cuStreamGetDevice", [] { CUdevice d; return cuStreamGetDevice(env.stream, &d); }});
  p.push_back({"cuStreamGetCtx", [] { CUcontext c; return cuStreamGetCtx(env.stream, &c); }});
  p.push_back({"cuStreamGetCtx_v2", [] { CUcontext c; CUgreenCtx g; return cuStreamGetCtx_v2(env.stream, &c, &g); }});
  p.push_back({"cuStreamGetId", [] { unsigned long long id; return cuStreamGetId(env.stream, &id); }});
  p.push_back({"cuStreamGetFlags", [] { unsigned f; return cuStreamGetFlags(env.stream, &f); }});
  p.push_back({"cuStreamGetPriority", [] { int f; return cuStreamGetPriority(env.stream, &f); }});
  p.push_back({"cuStreamIsCapturing", [] { CUstreamCaptureStatus s; return cuStreamIsCapturing(env.stream, &s); }});
  p.push_back({"cuStreamGetCaptureInfo", [] {
                 CUstreamCaptureStatus s;
                 cuuint64_t id;
                 return cuStreamGetCaptureInfo(env.stream, &s, &id, nullptr, nullptr, nullptr, nullptr);
               }});
  p.push_back({"cuCtxGetCurrent", [] { CUcontext c; return cuCtxGetCurrent(&c); }});
  p.push_back({"cuCtxGetDevice", [] { CUdevice d; return cuCtxGetDevice(&d); }});
  p.push_back({"cuDeviceGetAttribute", [] {
                 int v;
                 return cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0);
               }});
  p.push_back({"cuPointerGetAttributes", [] {
                 CUpointer_attribute a[] = {CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                            CU_POINTER_ATTRIBUTE_RANGE_SIZE};
                 int ord = -1;
                 unsigned type = 0;
                 size_t size = 0;
                 void* d[] = {&ord, &type, &size};
                 return cuPointerGetAttributes(3, a, d, env.buf);
               }});
  p.push_back({"cuPointerGetAttributes(host ptr)", [] {
                 static int host = 0;
                 CUpointer_attribute a[] = {CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_MEMORY_TYPE};
                 int ord = -1;
                 unsigned type = 0;
                 void* d[] = {&ord, &type};
                 return cuPointerGetAttributes(2, a, d, reinterpret_cast<CUdeviceptr>(&host));
               }});
  p.push_back({"cuKernelGetFunction", [] { CUfunction f; return cuKernelGetFunction(&f, env.kernel); }});
  p.push_back({"cuKernelGetAttribute", [] {
                 int v;
                 return cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, env.kernel, 0);
               }});
  p.push_back({"cuKernelSetAttribute(max dyn smem)", [] {
                 return cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 64 * 1024, env.kernel, 0);
               }});
  p.push_back({"cuKernelGetParamInfo", [] {
                 size_t o, s;
                 return cuKernelGetParamInfo(env.kernel, 0, &o, &s);
               }});
  p.push_back({"cuOccupancyMaxActiveBlocksPerMultiprocessor", [] {
                 CUfunction f;
                 CUresult r = cuKernelGetFunction(&f, env.kernel);
                 if (r != CUDA_SUCCESS) return r;
                 int b;
                 return cuOccupancyMaxActiveBlocksPerMultiprocessor(&b, f, 256, 0);
               }});
  p.push_back({"cuLibraryLoadData(cubin)+GetKernel+Unload", [] {
                 CUlibrary lib;
                 CUresult r = cuLibraryLoadData(&lib, env.cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
                 if (r != CUDA_SUCCESS) return r;
                 CUkernel k;
                 r = cuLibraryGetKernel(&k, lib, "k");
                 CUresult u = cuLibraryUnload(lib);
                 return r != CUDA_SUCCESS ? r : u;
               }});
  p.push_back({"cuLibraryLoadData(cubin) only", [] {
                 CUlibrary lib;
                 CUresult r = cuLibraryLoadData(&lib, env.cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
                 static std::vector<CUlibrary> leak;  // unloaded never: only the load is probed
                 if (r == CUDA_SUCCESS) leak.push_back(lib);
                 return r;
               }});
  p.push_back({"cuModuleLoadData(cubin)", [] {
                 CUmodule m;
                 CUresult r = cuModuleLoadData(&m, env.cubin.data());
                 if (r == CUDA_SUCCESS) cuModuleUnload(m);
                 return r;
               }});
  p.push_back({"cuLaunchKernel(CUkernel)+GetFunction", [] {
                 CUfunction f;
                 CUresult r = cuKernelGetFunction(&f, env.kernel);
                 return r;
               }});
  p.push_back({"cuLibraryGetKernel", [] { CUkernel k; return cuLibraryGetKernel(&k, env.lib, "k"); }});
  p.push_back({"cuLibraryUnload(fresh library)", [] {
                 CUlibrary lib;
                 CUresult r = cuLibraryLoadData(&lib, env.cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
                 if (r != CUDA_SUCCESS) return r;
                 return cuLibraryUnload(lib);
               }});
  p.push_back({"fresh library: load+GetKernel+GetFunction+launch into the capture", [] {
                 CUlibrary lib;
                 CUresult r = cuLibraryLoadData(&lib, env.cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
                 if (r != CUDA_SUCCESS) return r;
                 static std::vector<CUlibrary> keep;
                 keep.push_back(lib);
                 CUkernel k;
                 if ((r = cuLibraryGetKernel(&k, lib, "k")) != CUDA_SUCCESS) return r;
                 CUfunction f;
                 if ((r = cuKernelGetFunction(&f, k)) != CUDA_SUCCESS) return r;
                 void* args[] = {&env.buf, &env.n};
                 return cuLaunchKernel(f, 4, 1, 1, 256, 1, 1, 0, env.stream, args, nullptr);
               }});
  p.push_back({"fresh library: load+GetKernel, launch CUkernel (lazy load at launch)", [] {
                 CUlibrary lib;
                 CUresult r = cuLibraryLoadData(&lib, env.cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
                 if (r != CUDA_SUCCESS) return r;
                 static std::vector<CUlibrary> keep;
                 keep.push_back(lib);
                 CUkernel k;
                 if ((r = cuLibraryGetKernel(&k, lib, "k")) != CUDA_SUCCESS) return r;
                 void* args[] = {&env.buf, &env.n};
                 return cuLaunchKernel(reinterpret_cast<CUfunction>(k), 4, 1, 1, 256, 1, 1, 0, env.stream, args,
                                       nullptr);
               }});
  p.push_back({"cuCtxGetDevice_v2(ctx)", [] { CUdevice d; return cuCtxGetDevice_v2(&d, env.ctx); }});
  p.push_back({"cuCtxPushCurrent+GetDevice+Pop", [] {
                 CUresult r = cuCtxPushCurrent(env.ctx);
                 if (r != CUDA_SUCCESS) return r;
                 CUdevice d;
                 r = cuCtxGetDevice(&d);
                 CUcontext c;
                 CUresult q = cuCtxPopCurrent(&c);
                 return r != CUDA_SUCCESS ? r : q;
               }});
  p.push_back({"cuDevicePrimaryCtxRetain(retained)", [] {
                 CUcontext c;
                 CUresult r = cuDevicePrimaryCtxRetain(&c, 0);
                 if (r == CUDA_SUCCESS) cuDevicePrimaryCtxRelease(0);
                 return r;
               }});
  p.push_back({"cuDeviceTotalMem+GetName", [] {
                 size_t t;
                 CUresult r = cuDeviceTotalMem(&t, 0);
                 char name[64];
                 return r != CUDA_SUCCESS ? r : cuDeviceGetName(name, 63, 0);
               }});
  p.push_back({"cuStreamQuery(capturing)", [] { return cuStreamQuery(env.stream); }});
  p.push_back({"cuMemAlloc", [] {
                 CUdeviceptr d;
                 CUresult r = cuMemAlloc(&d, 4096);
                 if (r == CUDA_SUCCESS) cuMemFree(d);
                 return r;
               }});
  p.push_back({"cuStreamSynchronize(other stream)", [] { return cuStreamSynchronize(nullptr); }});
  return p;
}

const char* mode_name(CUstreamCaptureMode m) {
  switch (m) {
    case CU_STREAM_CAPTURE_MODE_GLOBAL:
      return "global";
    case CU_STREAM_CAPTURE_MODE_THREAD_LOCAL:
      return "thread_local";
    default:
      return "relaxed";
  }
}

// Begin capture, call (here or on another thread), record a kernel, end capture.
void run_one(const Probe& p, CUstreamCaptureMode mode, bool other_thread) {
  CHECK(cuCtxSetCurrent(env.ctx));
  CHECK(cuStreamBeginCapture(env.stream, mode));
  CUresult r;
  if (other_thread) {
    std::thread t([&] {
      cuCtxSetCurrent(env.ctx);
      r = p.call();
    });
    t.join();
  } else {
    r = p.call();
  }
  CUstreamCaptureStatus st;
  cuStreamIsCapturing(env.stream, &st);
  void* args[] = {&env.buf, &env.n};
  CUresult rk = cuLaunchKernel(reinterpret_cast<CUfunction>(env.kernel), 4, 1, 1, 256, 1, 1, 0, env.stream, args,
                               nullptr);
  CUgraph g = nullptr;
  CUresult re = cuStreamEndCapture(env.stream, &g);
  CUresult ri = CUDA_ERROR_UNKNOWN;
  if (re == CUDA_SUCCESS && g != nullptr) {
    CUgraphExec e;
    ri = cuGraphInstantiateWithFlags(&e, g, 0);
    if (ri == CUDA_SUCCESS) cuGraphExecDestroy(e);
    cuGraphDestroy(g);
  }
  std::printf("| %s | %s | %s | %s | %s | %s |\n", p.name, mode_name(mode), other_thread ? "other" : "capturing",
              name_of(r), st == CU_STREAM_CAPTURE_STATUS_ACTIVE ? "active" : "INVALIDATED",
              re == CUDA_SUCCESS && ri == CUDA_SUCCESS && rk == CUDA_SUCCESS ? "ok" : name_of(re != CUDA_SUCCESS ? re : rk));
  // A failed capture can leave a sticky error on the stream's capture state; clear by syncing.
  cuStreamSynchronize(env.stream);
}

template <class F>
double time_us(F&& f, int n = 20000) {
  for (int i = 0; i < 1000; ++i) f();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) f();
  auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / n;
}

}  // namespace

int main() {
  CHECK(cuInit(0));
  CUdevice dev;
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuDevicePrimaryCtxRetain(&env.ctx, dev));
  CHECK(cuCtxSetCurrent(env.ctx));
  CHECK(cuStreamCreate(&env.stream, CU_STREAM_NON_BLOCKING));
  env.cubin = compile_cubin();
  CHECK(cuLibraryLoadData(&env.lib, env.cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  CHECK(cuLibraryGetKernel(&env.kernel, env.lib, "k"));
  CHECK(cuMemAlloc(&env.buf, env.n * 4));
  int version = 0;
  cuDriverGetVersion(&version);
  std::printf("driver %d\n\n| call | mode | thread | call result | capture after call | end+instantiate |\n"
              "|---|---|---|---|---|---|\n", version);
  for (const Probe& p : probes()) {
    for (CUstreamCaptureMode m :
         {CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, CU_STREAM_CAPTURE_MODE_RELAXED}) {
      run_one(p, m, false);
      run_one(p, m, true);
    }
  }
  // Host cost of the queries, outside capture.
  std::printf("\nhost cost per call (us), outside capture:\n");
  CUdevice d;
  CUcontext c;
  unsigned long long id;
  std::printf("cuStreamGetDevice %.3f\n", time_us([&] { cuStreamGetDevice(env.stream, &d); }));
  std::printf("cuStreamGetCtx %.3f\n", time_us([&] { cuStreamGetCtx(env.stream, &c); }));
  std::printf("cuStreamGetId %.3f\n", time_us([&] { cuStreamGetId(env.stream, &id); }));
  std::printf("cuCtxGetCurrent %.3f\n", time_us([&] { cuCtxGetCurrent(&c); }));
  std::printf("cuCtxGetDevice_v2 %.3f\n", time_us([&] { cuCtxGetDevice_v2(&d, env.ctx); }));
  CUstreamCaptureStatus cs;
  std::printf("cuStreamIsCapturing %.3f\n", time_us([&] { cuStreamIsCapturing(env.stream, &cs); }));
  CUpointer_attribute a[] = {CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                             CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  int ord;
  unsigned type;
  CUdeviceptr start;
  size_t size;
  void* data[] = {&ord, &type, &start, &size};
  std::printf("cuPointerGetAttributes(4 attrs) %.3f\n",
              time_us([&] { cuPointerGetAttributes(4, a, data, env.buf + 16); }));
  std::printf("  -> ordinal %d type %u start+%lld size %zu\n", ord, type, (long long)(env.buf - start), size);
  std::printf("cuLaunchKernel %.3f\n", time_us([&] { record_kernel(env.stream); }, 5000));
  cuStreamSynchronize(env.stream);
  // Freed memory and peer queries.
  CUdeviceptr freed;
  CHECK(cuMemAlloc(&freed, 1 << 20));
  CHECK(cuMemFree(freed));
  CUresult rf = cuPointerGetAttributes(4, a, data, freed);
  std::printf("freed pointer: %s ordinal %d type %u\n", name_of(rf), ord, type);
  int count = 0;
  cuDeviceGetCount(&count);
  std::printf("devices: %d\n", count);
  return 0;
}
