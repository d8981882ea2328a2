// C functions for bench/elementwise_peers.py (ctypes): cuinline's elementwise ops on buffers the
// script owns (torch tensors' data_ptr, torch's current stream), in the same process and primary
// context, plus host-cost loops timed in C++ (cuinline's ops and a raw cuLaunchKernel of the same
// kernel). Every function returns 0 on success, else 1 (InvalidArgument) or 2 (any other error),
// with the message in cuinline_ew_last_error().
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cuinline/driver.hpp>
#include <cuinline/error.hpp>
#include <cuinline/kernel_cache.hpp>
#include <cuinline/module.hpp>
#include <cuinline/ops.hpp>
#include <string>
#include <vector>

#include "ops/elementwise/plan.hpp"

namespace {

thread_local std::string last_error;

template <class F>
int guarded(F&& f) {
  try {
    f();
    return 0;
  } catch (const cuinline::InvalidArgument& e) {
    last_error = e.what();
    return 1;
  } catch (const std::exception& e) {
    last_error = e.what();
    return 2;
  }
}

cuinline::TensorView flat(int dtype, void* p, long long n) {
  return cuinline::TensorView::contiguous(p, static_cast<cuinline::DType>(dtype), {n});
}

using LaunchFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, CUstream, void**, void**);
using SyncFn = CUresult (*)(CUstream);

void* libcuda() {
  static void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) throw cuinline::Error("dlopen libcuda.so.1 failed");
  return handle;
}

template <class Fn>
Fn cuda_symbol(const char* name) {
  void* sym = dlsym(libcuda(), name);
  if (sym == nullptr) throw cuinline::Error(std::string("no symbol ") + name + " in libcuda");
  return reinterpret_cast<Fn>(sym);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

extern "C" {

const char* cuinline_ew_last_error() {
  return last_error.c_str();
}

/// An op from its text (ops::parse_op); null on error.
void* cuinline_ew_op_new(const char* text) {
  cuinline::ops::Op* op = nullptr;
  guarded([&] { op = new cuinline::ops::Op(cuinline::ops::parse_op(text)); });
  return op;
}
void cuinline_ew_op_free(void* op) {
  delete static_cast<cuinline::ops::Op*>(op);
}

int cuinline_ew_apply(void* op, int dtype, void* in, void* out, long long n, void* stream) {
  return guarded([&] {
    cuinline::ops::apply(*static_cast<cuinline::ops::Op*>(op), flat(dtype, in, n), flat(dtype, out, n),
                         static_cast<CUstream>(stream));
  });
}

int cuinline_ew_apply_strided(void* op, int dtype, void* in, void* out, int ndim, const long long* shape,
                              const long long* in_strides, const long long* out_strides, void* stream) {
  return guarded([&] {
    if (ndim < 0 || ndim > cuinline::TensorView::kMaxDims) throw cuinline::InvalidArgument("bad ndim");
    cuinline::TensorView vin, vout;
    vin.data = in;
    vout.data = out;
    vin.dtype = vout.dtype = static_cast<cuinline::DType>(dtype);
    vin.ndim = vout.ndim = ndim;
    for (int d = 0; d < ndim; ++d) {
      vin.shape[d] = vout.shape[d] = shape[d];
      vin.strides[d] = in_strides[d];
      vout.strides[d] = out_strides[d];
    }
    cuinline::ops::apply(*static_cast<cuinline::ops::Op*>(op), vin, vout, static_cast<CUstream>(stream));
  });
}

int cuinline_ew_relu(int dtype, void* in, void* out, long long n, void* stream) {
  return guarded(
      [&] { cuinline::ops::relu(flat(dtype, in, n), flat(dtype, out, n), static_cast<CUstream>(stream)); });
}

int cuinline_ew_leaky_relu(int dtype, void* in, void* out, long long n, double slope, void* stream) {
  return guarded([&] {
    cuinline::ops::leaky_relu(flat(dtype, in, n), flat(dtype, out, n), slope, static_cast<CUstream>(stream));
  });
}

int cuinline_ew_div_leaky_relu(int dtype, void* in, void* out, long long n, double divisor, double slope,
                               void* stream) {
  return guarded([&] {
    cuinline::ops::div_leaky_relu(flat(dtype, in, n), flat(dtype, out, n), divisor, slope,
                                  static_cast<CUstream>(stream));
  });
}

/// The variant a call would use ("relu<f32,v4,i32> head=0 grid=...") into buf.
int cuinline_ew_describe(void* op, int dtype, void* in, void* out, long long n, char* buf, int len) {
  return guarded([&] {
    const auto p =
        cuinline::ops::plan(*static_cast<cuinline::ops::Op*>(op), flat(dtype, in, n), flat(dtype, out, n));
    std::snprintf(buf, static_cast<std::size_t>(len), "%s head=%lld grid=%u block=%u",
                  p.variant.name().c_str(), static_cast<long long>(p.head), p.grid, p.block);
  });
}

/// Host time per call in µs (median over `batches` batches of `calls` calls; the stream is
/// synchronized between batches, outside the timed part). which: 0 ops::relu, 1 ops::leaky_relu
/// (slope 0.01), 2 ops::div_leaky_relu(2, 0.01), 3 raw cuLaunchKernel of relu's kernel.
int cuinline_ew_host_cost(int which, int dtype, void* in, void* out, long long n, void* stream, int calls,
                          int batches, double* us_per_call) {
  return guarded([&] {
    const auto s = static_cast<CUstream>(stream);
    const auto vin = flat(dtype, in, n), vout = flat(dtype, out, n);
    const auto sync = cuda_symbol<SyncFn>("cuStreamSynchronize");
    const auto launch = cuda_symbol<LaunchFn>("cuLaunchKernel");
    CUfunction fn = nullptr;
    cuinline::ops::LaunchPlan plan;
    if (which == 3) {
      plan = cuinline::ops::plan(cuinline::ops::Op::relu(), vin, vout);
      if (plan.variant.layout != cuinline::ops::Layout::contiguous ||
          plan.variant.index != cuinline::ops::IndexWidth::i32) {
        throw cuinline::InvalidArgument("raw launch timing supports small contiguous tensors only");
      }
      const int device = cuinline::stream_device(s);
      const auto module = cuinline::default_cache().get(cuinline::ops::make_request(plan.variant),
                                                        cuinline::device_arch(device));
      fn = module.kernel(cuinline::ops::kernel_name(plan.variant)).function(device);
    }
    struct {  // ew_nary's first parameter (ew_nary_args in kernel_templates/ew_nary.cuh)
      const void* in[8];
      void* out[4];
      long long period[8];
    } operands{};
    operands.in[0] = plan.in;
    operands.out[0] = plan.out;
    unsigned un = static_cast<unsigned>(plan.numel), uh = static_cast<unsigned>(plan.head);
    int reps = 1;  // small tensors: one pass of 16 bytes per thread (see ops::detail::reps_for)
    void* args[] = {&operands, &un, &uh, &reps};
    auto one = [&] {
      switch (which) {
        case 0:
          cuinline::ops::relu(vin, vout, s);
          break;
        case 1:
          cuinline::ops::leaky_relu(vin, vout, 0.01, s);
          break;
        case 2:
          cuinline::ops::div_leaky_relu(vin, vout, 2.0, 0.01, s);
          break;
        default:
          cuinline::check_driver(launch(fn, plan.grid, 1, 1, plan.block, 1, 1, 0, s, args, nullptr),
                                 "cuLaunchKernel");
      }
    };
    one();  // warm: compile / load outside the timing
    cuinline::check_driver(sync(s), "cuStreamSynchronize");
    std::vector<double> per_call;
    for (int b = 0; b < batches; ++b) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < calls; ++i) one();
      const auto t1 = std::chrono::steady_clock::now();
      cuinline::check_driver(sync(s), "cuStreamSynchronize");
      per_call.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / calls);
    }
    *us_per_call = median(per_call);
  });
}

/// What the compiler made of the kernel a call would use (read from the loaded NVRTC cubin):
/// out5 = registers per thread, local (spill) bytes per thread, static shared bytes, max threads per
/// block, resident blocks of 256 threads per SM.
int cuinline_ew_kernel_info(void* op, int dtype, void* in, void* out, long long n, int* out5) {
  return guarded([&] {
    using AttrFn = CUresult (*)(int*, CUfunction_attribute, CUfunction);
    using OccFn = CUresult (*)(int*, CUfunction, int, std::size_t);
    const auto p =
        cuinline::ops::plan(*static_cast<cuinline::ops::Op*>(op), flat(dtype, in, n), flat(dtype, out, n));
    const auto attr = cuda_symbol<AttrFn>("cuFuncGetAttribute");
    const auto occ = cuda_symbol<OccFn>("cuOccupancyMaxActiveBlocksPerMultiprocessor");
    const int device = cuinline::current_device();
    const auto module =
        cuinline::default_cache().get(cuinline::ops::make_request(p.variant), cuinline::device_arch(device));
    const CUfunction fn = module.kernel(cuinline::ops::kernel_name(p.variant)).function(device);
    cuinline::check_driver(attr(&out5[0], CU_FUNC_ATTRIBUTE_NUM_REGS, fn), "cuFuncGetAttribute");
    cuinline::check_driver(attr(&out5[1], CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, fn), "cuFuncGetAttribute");
    cuinline::check_driver(attr(&out5[2], CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn), "cuFuncGetAttribute");
    cuinline::check_driver(attr(&out5[3], CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn), "cuFuncGetAttribute");
    cuinline::check_driver(occ(&out5[4], fn, 256, 0), "cuOccupancyMaxActiveBlocksPerMultiprocessor");
  });
}

/// The ops' map counters: launches, map hits, cache lookups.
void cuinline_ew_stats(unsigned long long* out3) {
  const auto s = cuinline::ops::stats();
  out3[0] = s.launches;
  out3[1] = s.map_hits;
  out3[2] = s.cache_lookups;
}

}  // extern "C"
