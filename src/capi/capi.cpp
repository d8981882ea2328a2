// The C API (include/cuinline/cuinline.h): thin wrappers over the C++ API. Every entry point
// catches everything; the message of the last failure is kept per thread. The op wrappers build
// their TensorViews on the stack: no allocation beyond what the C++ call makes.
#include "cuinline/cuinline.h"

#include <cuinline/jit.hpp>
#include <cuinline/conv2d.hpp>
#include <cuinline/cuinline.hpp>
#include <cuinline/ops.hpp>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <vector>

struct cuinline_module_s {
  cuinline::Module module;
};
struct cuinline_kernel_s {
  cuinline::Kernel kernel;
};

namespace {

thread_local std::string last_error;

void fail_text(const char* message) {
  last_error = message;
}

template <class F>
cuinline_status guarded(F&& f) noexcept {
  try {
    f();
    return CUINLINE_SUCCESS;
  } catch (const cuinline::InvalidArgument& e) {
    fail_text(e.what());
    return CUINLINE_ERROR_INVALID_ARGUMENT;
  } catch (const cuinline::CompileError& e) {
    last_error = std::string(e.what()) + "\n" + e.log();
    return CUINLINE_ERROR_COMPILE;
  } catch (const cuinline::DriverError& e) {
    fail_text(e.what());
    return CUINLINE_ERROR_DRIVER;
  } catch (const cuinline::CacheError& e) {
    fail_text(e.what());
    return CUINLINE_ERROR_CACHE;
  } catch (const std::bad_alloc&) {
    fail_text("out of host memory");
    return CUINLINE_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    fail_text(e.what());
    return CUINLINE_ERROR_INTERNAL;
  } catch (...) {
    fail_text("unknown error");
    return CUINLINE_ERROR_INTERNAL;
  }
}

[[noreturn]] void invalid(const std::string& what) {
  throw cuinline::InvalidArgument(what);
}

cuinline::TensorView view_of(const cuinline_tensor* t, const char* what) {
  if (t == nullptr) invalid(std::string(what) + ": null tensor descriptor");
  if (t->ndim < 0 || t->ndim > cuinline::TensorView::kMaxDims) {
    invalid(std::string(what) + ": " + std::to_string(t->ndim) + " dimensions (0 to 8 are supported)");
  }
  if (t->ndim > 0 && t->shape == nullptr) invalid(std::string(what) + ": null shape");
  if (t->dtype < CUINLINE_F32 || t->dtype > CUINLINE_F64) {
    invalid(std::string(what) + ": unknown dtype " + std::to_string(static_cast<int>(t->dtype)));
  }
  cuinline::TensorView v;
  v.data = t->data;
  v.dtype = static_cast<cuinline::DType>(t->dtype);
  v.ndim = t->ndim;
  std::int64_t stride = 1;
  for (int d = t->ndim - 1; d >= 0; --d) {
    if (t->shape[d] < 0) invalid(std::string(what) + ": negative extent");
    v.shape[d] = t->shape[d];
    v.strides[d] = t->strides ? t->strides[d] : stride;
    stride *= t->shape[d] > 0 ? t->shape[d] : 1;
  }
  return v;
}

cuinline::ops::Op op_of(const char* text) {
  if (text == nullptr) invalid("null op text");
  return cuinline::ops::parse_op(text);
}

std::vector<std::string> strings(const char* const* list, int count, const char* what) {
  if (count < 0 || (count > 0 && list == nullptr)) invalid(std::string(what) + ": null list or negative count");
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) {
    if (list[i] == nullptr) invalid(std::string(what) + ": null string at " + std::to_string(i));
    out.emplace_back(list[i]);
  }
  return out;
}

// The configuration the C calls build up before the default cache is first used: each call changes
// its own fields and hands the whole to configure_default_cache, so the calls compose.
std::mutex capi_config_mutex;
std::optional<cuinline::CacheConfig> capi_config;

cuinline::CacheConfig& pending_config() {
  if (!capi_config) capi_config = cuinline::CacheConfig::from_environment();
  return *capi_config;
}

}  // namespace

extern "C" {

const char* cuinline_last_error(void) {
  return last_error.c_str();
}

const char* cuinline_version(void) {
  return CUINLINE_VERSION_STRING;
}

int cuinline_device_count(void) {
  return cuinline::device_count();
}

cuinline_status cuinline_configure_cache(const char* directory, uint64_t max_bytes, int disk_enabled) {
  return guarded([&] {
    std::lock_guard<std::mutex> lock(capi_config_mutex);
    cuinline::CacheConfig config = pending_config();
    if (directory != nullptr) {
      if (*directory == '\0') invalid("cuinline_configure_cache: empty directory");
      config.directory = directory;
    }
    if (max_bytes != 0) config.max_bytes = max_bytes;
    config.disk_enabled = disk_enabled != 0;
    if (!cuinline::configure_default_cache(config)) {
      invalid("cuinline_configure_cache: the default cache is already in use; configure it before the first call");
    }
    pending_config() = std::move(config);
  });
}

cuinline_status cuinline_configure_remote_cache(const char* url, const char* key_file) {
  return guarded([&] {
    if (url == nullptr || *url == '\0') invalid("cuinline_configure_remote_cache: empty URL");
    if (key_file != nullptr && *key_file == '\0') invalid("cuinline_configure_remote_cache: empty key file");
    std::lock_guard<std::mutex> lock(capi_config_mutex);
    cuinline::CacheConfig config = pending_config();
    config.remote.url = url;
    if (key_file != nullptr) config.remote.key_file = key_file;
    if (!cuinline::configure_default_cache(config)) {
      invalid("cuinline_configure_remote_cache: the default cache is already in use; configure it before the "
              "first call");
    }
    pending_config() = std::move(config);
  });
}

cuinline_status cuinline_set_log_level(const char* level) {
  return guarded([&] {
    if (level == nullptr) invalid("null log level");
    const auto l = cuinline::parse_log_level(level);
    if (!l) {
      invalid(std::string("unknown log level '") + level +
              "' (trace, debug, info, warn, error, critical, off)");
    }
    cuinline::set_log_level(*l);
  });
}

cuinline_status cuinline_get_cache_stats(cuinline_cache_stats* out) {
  return guarded([&] {
    if (out == nullptr) invalid("null stats pointer");
    const cuinline::CacheStats s = cuinline::default_cache().stats();
    *out = {s.memory_hits, s.disk_hits, s.compiles, s.compile_failures, s.disk_writes, s.disk_write_failures,
            s.evictions, s.rejected_entries};
  });
}

namespace {
thread_local std::optional<cuinline::ScopedJitPolicy> thread_jit_policy;

cuinline::JitPolicy checked_policy(int policy) {
  if (policy < CUINLINE_JIT_ASYNC || policy > CUINLINE_JIT_GENERIC) {
    invalid("unknown JIT policy " + std::to_string(policy) + " (CUINLINE_JIT_ASYNC, _SYNC or _GENERIC)");
  }
  return static_cast<cuinline::JitPolicy>(policy);
}
}  // namespace

cuinline_status cuinline_set_jit_policy(int policy) {
  return guarded([&] { cuinline::set_jit_policy(checked_policy(policy)); });
}

cuinline_status cuinline_set_thread_jit_policy(int policy) {
  return guarded([&] {
    if (policy == -1) {
      thread_jit_policy.reset();
      return;
    }
    const cuinline::JitPolicy p = checked_policy(policy);
    thread_jit_policy.reset();
    thread_jit_policy.emplace(p);
  });
}

int cuinline_get_jit_policy(void) {
  return static_cast<int>(cuinline::jit_policy());
}

void cuinline_prewarm(void) {
  cuinline::prewarm();
}

cuinline_status cuinline_wait_for_specializations(void) {
  return guarded([] { cuinline::wait_for_specializations(); });
}

cuinline_status cuinline_get_jit_stats(cuinline_jit_stats* out) {
  return guarded([&] {
    if (out == nullptr) invalid("null stats pointer");
    const cuinline::JitStats s = cuinline::jit_stats();
    *out = {s.generic_launches, s.submitted, s.pending, s.swaps, s.background_failures, s.sync_waits};
  });
}

cuinline_status cuinline_load_inline(const cuinline_inline_options* options, cuinline_module* out) {
  return guarded([&] {
    if (options == nullptr || out == nullptr) invalid("cuinline_load_inline: null options or result pointer");
    *out = nullptr;
    cuinline::InlineOptions o;
    if (options->name != nullptr) o.name = options->name;
    o.cuda_sources = strings(options->sources, options->num_sources, "sources");
    o.functions = strings(options->functions, options->num_functions, "functions");
    o.name_expressions = strings(options->name_expressions, options->num_name_expressions, "name expressions");
    o.extra_options = strings(options->options, options->num_options, "options");
    const auto names = strings(options->header_names, options->num_headers, "header names");
    const auto contents = strings(options->header_contents, options->num_headers, "header contents");
    for (std::size_t i = 0; i < names.size(); ++i) o.headers.push_back({names[i], contents[i]});
    if (options->device >= 0) o.device = options->device;
    if (options->arch != nullptr) o.arch = cuinline::Arch::parse(options->arch);
    auto m = std::make_unique<cuinline_module_s>();
    m->module = cuinline::load_inline(o);
    *out = m.release();
  });
}

void cuinline_module_release(cuinline_module module) {
  delete module;
}

cuinline_status cuinline_module_kernel(cuinline_module module, const char* name, cuinline_kernel* out) {
  return guarded([&] {
    if (module == nullptr || name == nullptr || out == nullptr) invalid("cuinline_module_kernel: null argument");
    *out = nullptr;
    auto k = std::make_unique<cuinline_kernel_s>();
    k->kernel = module->module.kernel(name);
    *out = k.release();
  });
}

void cuinline_kernel_release(cuinline_kernel kernel) {
  delete kernel;
}

cuinline_status cuinline_kernel_param_count(cuinline_kernel kernel, int* out) {
  return guarded([&] {
    if (kernel == nullptr || out == nullptr) invalid("cuinline_kernel_param_count: null argument");
    *out = kernel->kernel.param_count();
  });
}

cuinline_status cuinline_kernel_launch(cuinline_kernel kernel, const unsigned grid[3], const unsigned block[3],
                                       unsigned shared_bytes, void* stream, void** args, size_t num_args) {
  return guarded([&] {
    if (kernel == nullptr || grid == nullptr || block == nullptr) invalid("cuinline_kernel_launch: null argument");
    if (num_args > 0 && args == nullptr) invalid("cuinline_kernel_launch: null argument array");
    cuinline::LaunchConfig cfg;
    cfg.grid = cuinline::Dim3(grid[0], grid[1], grid[2]);
    cfg.block = cuinline::Dim3(block[0], block[1], block[2]);
    cfg.shared_bytes = shared_bytes;
    cfg.stream = static_cast<CUstream>(stream);
    kernel->kernel.launch_raw(cfg, args, num_args, nullptr);
  });
}

cuinline_status cuinline_apply(const char* op, const cuinline_tensor* inputs, int num_inputs,
                               const cuinline_tensor* outputs, int num_outputs, void* stream) {
  return guarded([&] {
    if (num_inputs < 1 || num_inputs > cuinline::ops::kMaxInputs || num_outputs < 1 ||
        num_outputs > cuinline::ops::kMaxOutputs || inputs == nullptr || outputs == nullptr) {
      invalid("cuinline_apply: " + std::to_string(num_inputs) + " inputs and " + std::to_string(num_outputs) +
              " outputs (1-8 and 1-4, non-null arrays)");
    }
    const cuinline::ops::Op parsed = op_of(op);
    cuinline::TensorView in[cuinline::ops::kMaxInputs], out[cuinline::ops::kMaxOutputs];
    for (int i = 0; i < num_inputs; ++i) in[i] = view_of(&inputs[i], "input");
    for (int i = 0; i < num_outputs; ++i) out[i] = view_of(&outputs[i], "output");
    const auto s = static_cast<CUstream>(stream);
    if (num_inputs == 1 && num_outputs == 1) {
      cuinline::ops::apply(parsed, in[0], out[0], s);  // the one-input ops (their warm variants and stats)
    } else {
      cuinline::ops::apply(parsed, cuinline::ops::TensorList(in, static_cast<std::size_t>(num_inputs)),
                           cuinline::ops::TensorList(out, static_cast<std::size_t>(num_outputs)), s);
    }
  });
}

cuinline_status cuinline_conv2d(const cuinline_tensor* input, const cuinline_tensor* weight, const cuinline_tensor* bias,
                                const cuinline_tensor* residual, const cuinline_tensor* output, const int stride[2],
                                const int padding[2], const int dilation[2], const char* epilogue,
                                const char* precision, void* stream) {
  return cuinline_conv2d_grouped(input, weight, bias, residual, output, stride, padding, dilation, 1, epilogue,
                                 precision, stream);
}

cuinline_status cuinline_conv2d_grouped(const cuinline_tensor* input, const cuinline_tensor* weight,
                                        const cuinline_tensor* bias, const cuinline_tensor* residual,
                                        const cuinline_tensor* output, const int stride[2], const int padding[2],
                                        const int dilation[2], int groups, const char* epilogue, const char* precision,
                                        void* stream) {
  return cuinline_conv2d_ex(input, weight, bias, residual, output, stride, padding, dilation, groups, epilogue, nullptr,
                            0, precision, stream);
}

cuinline_status cuinline_conv2d_ex(const cuinline_tensor* input, const cuinline_tensor* weight,
                                   const cuinline_tensor* bias, const cuinline_tensor* residual,
                                   const cuinline_tensor* output, const int stride[2], const int padding[2],
                                   const int dilation[2], int groups, const char* epilogue,
                                   const cuinline_tensor* channel_operands, int num_channel_operands,
                                   const char* precision, void* stream) {
  return guarded([&] {
    if (num_channel_operands < 0 || num_channel_operands > cuinline::ops::kMaxConv2dChannelOperands) {
      invalid("cuinline_conv2d_ex: num_channel_operands must be 0-" +
              std::to_string(cuinline::ops::kMaxConv2dChannelOperands) + ", got " +
              std::to_string(num_channel_operands));
    }
    if (num_channel_operands > 0 && channel_operands == nullptr) {
      invalid("cuinline_conv2d_ex: channel_operands is NULL but num_channel_operands is " +
              std::to_string(num_channel_operands));
    }
    std::vector<cuinline::TensorView> operands;
    for (int k = 0; k < num_channel_operands; ++k) {
      operands.push_back(view_of(&channel_operands[k], "conv2d channel operand"));
    }
    cuinline::ops::Conv2dParams p;
    p.groups = groups;
    if (stride) p.stride_h = stride[0], p.stride_w = stride[1];
    if (padding) p.pad_h = padding[0], p.pad_w = padding[1];
    if (dilation) p.dilation_h = dilation[0], p.dilation_w = dilation[1];
    const cuinline::ops::Op epi =
        epilogue == nullptr || *epilogue == '\0' ? cuinline::ops::Op::chain({}) : op_of(epilogue);
    const cuinline::ops::Conv2dPrecision prec =
        precision == nullptr ? cuinline::ops::Conv2dPrecision::fp32 : cuinline::ops::parse_conv2d_precision(precision);
    cuinline::ops::conv2d(view_of(input, "conv2d input"), view_of(weight, "conv2d weight"),
                          bias ? view_of(bias, "conv2d bias") : cuinline::TensorView{}, view_of(output, "conv2d output"),
                          p, epi, static_cast<CUstream>(stream), prec,
                          residual ? view_of(residual, "conv2d residual") : cuinline::TensorView{}, operands);
  });
}

}  // extern "C"
