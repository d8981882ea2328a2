// The C API (include/cuinline/cuinline.h): thin wrappers over the C++ API. Every entry point
// catches everything; the message of the last failure is kept per thread. The op wrappers build
// their TensorViews on the stack: no allocation beyond what the C++ call makes.
#include "cuinline/cuinline.h"

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <cstring>
#include <cuinline/jit.hpp>
#include <cuinline/conv2d.hpp>
#include <cuinline/cuinline.hpp>
#include <cuinline/ops.hpp>
#include <cuinline/reductions.hpp>
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

// The first versions of the params structs end with `stream`; a later version appends fields.
constexpr std::size_t kConv2dParamsFirstSize = offsetof(cuinline_conv2d_params, stream) + sizeof(void*);
constexpr std::size_t kRowsParamsFirstSize = offsetof(cuinline_rows_params, stream) + sizeof(void*);

// The caller's struct as this library's version of it (cuinline.h: the size rule): a smaller one from
// an older header with its missing fields zero (their defaults); a larger one from a newer header only
// if every byte this library does not know is zero.
template <class Params>
Params read_params(const Params* given, const char* call, const char* type, std::size_t first_size) {
  if (given == nullptr) invalid(std::string(call) + ": null params");
  const std::size_t size = given->size;
  if (size < first_size) {
    invalid(std::string(call) + ": params.size is " + std::to_string(size) + ", less than the first version's " +
            std::to_string(first_size) + " bytes: set it to sizeof(" + type + ")");
  }
  const auto* bytes = reinterpret_cast<const unsigned char*>(given);
  for (std::size_t at = sizeof(Params); at < size; ++at) {
    if (bytes[at] != 0) {
      invalid(std::string(call) + ": params.size is " + std::to_string(size) + " and byte " + std::to_string(at) +
              " is not zero, but this library knows the first " + std::to_string(sizeof(Params)) +
              " bytes only: a field of a newer cuinline.h is set (use a newer libcuinline, or leave it zero)");
    }
  }
  Params p;
  std::memset(&p, 0, sizeof p);
  std::memcpy(&p, given, size < sizeof p ? size : sizeof p);
  return p;
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

cuinline_status cuinline_set_log_sink(cuinline_log_fn fn, void* user_data) {
  return guarded([&] {
    if (fn == nullptr) return cuinline::set_log_sink(nullptr);
    // The message as a NUL-terminated copy: the view the C++ sink gets is not terminated.
    cuinline::set_log_sink([fn, user_data](cuinline::LogLevel level, std::string_view message) {
      const std::string text(message);
      fn(static_cast<int>(level), text.c_str(), text.size(), user_data);
    });
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

cuinline_status cuinline_conv2d_run(const cuinline_conv2d_params* params) {
  return guarded([&] {
    const cuinline_conv2d_params p =
        read_params(params, "cuinline_conv2d_run", "cuinline_conv2d_params", kConv2dParamsFirstSize);
    if (p.num_channel_operands < 0 || p.num_channel_operands > cuinline::ops::kMaxConv2dChannelOperands) {
      invalid("cuinline_conv2d_run: num_channel_operands must be 0-" +
              std::to_string(cuinline::ops::kMaxConv2dChannelOperands) + ", got " +
              std::to_string(p.num_channel_operands));
    }
    if (p.num_channel_operands > 0 && p.channel_operands == nullptr) {
      invalid("cuinline_conv2d_run: channel_operands is NULL but num_channel_operands is " +
              std::to_string(p.num_channel_operands));
    }
    std::vector<cuinline::TensorView> operands;
    for (int k = 0; k < p.num_channel_operands; ++k) {
      operands.push_back(view_of(&p.channel_operands[k], "conv2d channel operand"));
    }
    cuinline::ops::Conv2dParams cp;
    cp.groups = p.groups == 0 ? 1 : p.groups;
    if (p.stride) cp.stride_h = p.stride[0], cp.stride_w = p.stride[1];
    if (p.padding) cp.pad_h = p.padding[0], cp.pad_w = p.padding[1];
    if (p.dilation) cp.dilation_h = p.dilation[0], cp.dilation_w = p.dilation[1];
    const cuinline::ops::Op epi =
        p.epilogue == nullptr || *p.epilogue == '\0' ? cuinline::ops::Op::chain({}) : op_of(p.epilogue);
    const cuinline::ops::Conv2dPrecision prec = p.precision == nullptr
                                                    ? cuinline::ops::Conv2dPrecision::fp32
                                                    : cuinline::ops::parse_conv2d_precision(p.precision);
    cuinline::ops::conv2d(view_of(p.input, "conv2d input"), view_of(p.weight, "conv2d weight"),
                          p.bias ? view_of(p.bias, "conv2d bias") : cuinline::TensorView{},
                          view_of(p.output, "conv2d output"), cp, epi, static_cast<CUstream>(p.stream), prec,
                          p.residual ? view_of(p.residual, "conv2d residual") : cuinline::TensorView{},
                          operands);
  });
}

cuinline_status cuinline_conv2d(const cuinline_tensor* input, const cuinline_tensor* weight, const cuinline_tensor* bias,
                                const cuinline_tensor* residual, const cuinline_tensor* output, const int stride[2],
                                const int padding[2], const int dilation[2], const char* epilogue,
                                const char* precision, void* stream) {
  return cuinline_conv2d_ex(input, weight, bias, residual, output, stride, padding, dilation, 1, epilogue,
                            nullptr, 0, precision, stream);
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
  // groups 0 is the struct's default (1); here, as before the struct, it is refused.
  const cuinline_status checked = guarded([&] {
    if (groups < 1) invalid("cuinline_conv2d: groups must be positive, got " + std::to_string(groups));
  });
  if (checked != CUINLINE_SUCCESS) return checked;
  cuinline_conv2d_params p = CUINLINE_CONV2D_PARAMS_INIT;
  p.input = input, p.weight = weight, p.output = output, p.bias = bias, p.residual = residual;
  p.stride = stride, p.padding = padding, p.dilation = dilation, p.groups = groups;
  p.channel_operands = channel_operands, p.num_channel_operands = num_channel_operands;
  p.epilogue = epilogue, p.precision = precision, p.stream = stream;
  return cuinline_conv2d_run(&p);
}

cuinline_status cuinline_softmax(const cuinline_tensor* input, const cuinline_tensor* output, void* stream) {
  return guarded([&] {
    cuinline::ops::softmax(view_of(input, "softmax input"), view_of(output, "softmax output"),
                           static_cast<CUstream>(stream));
  });
}

cuinline_status cuinline_log_softmax(const cuinline_tensor* input, const cuinline_tensor* output, void* stream) {
  return guarded([&] {
    cuinline::ops::log_softmax(view_of(input, "log_softmax input"), view_of(output, "log_softmax output"),
                               static_cast<CUstream>(stream));
  });
}

cuinline_status cuinline_rms_norm(const cuinline_tensor* input, const cuinline_tensor* weight,
                                  const cuinline_tensor* output, double eps, void* stream) {
  return guarded([&] {
    cuinline::ops::rms_norm(view_of(input, "rms_norm input"),
                            weight ? view_of(weight, "rms_norm weight") : cuinline::TensorView{},
                            view_of(output, "rms_norm output"), eps, static_cast<CUstream>(stream));
  });
}

cuinline_status cuinline_add_rms_norm(const cuinline_tensor* input, const cuinline_tensor* residual,
                                      const cuinline_tensor* weight, const cuinline_tensor* output, double eps,
                                      void* stream) {
  return guarded([&] {
    cuinline::ops::add_rms_norm(view_of(input, "add_rms_norm input"), view_of(residual, "add_rms_norm residual"),
                                weight ? view_of(weight, "add_rms_norm weight") : cuinline::TensorView{},
                                view_of(output, "add_rms_norm output"), eps, static_cast<CUstream>(stream));
  });
}

cuinline_status cuinline_layer_norm(const cuinline_tensor* input, const cuinline_tensor* weight,
                                    const cuinline_tensor* bias, const cuinline_tensor* output, double eps,
                                    void* stream) {
  return guarded([&] {
    cuinline::ops::layer_norm(view_of(input, "layer_norm input"),
                              weight ? view_of(weight, "layer_norm weight") : cuinline::TensorView{},
                              bias ? view_of(bias, "layer_norm bias") : cuinline::TensorView{},
                              view_of(output, "layer_norm output"), eps, static_cast<CUstream>(stream));
  });
}

cuinline_status cuinline_rows_run(const cuinline_rows_params* params) {
  return guarded([&] {
    using cuinline::ops::RowOp;
    const cuinline_rows_params p =
        read_params(params, "cuinline_rows_run", "cuinline_rows_params", kRowsParamsFirstSize);
    const std::string name = p.op == nullptr ? "" : p.op;
    const RowOp ops[] = {RowOp::softmax, RowOp::log_softmax, RowOp::rms_norm, RowOp::add_rms_norm,
                         RowOp::layer_norm};
    const RowOp* op = std::find_if(std::begin(ops), std::end(ops),
                                   [&](RowOp o) { return name == cuinline::ops::to_string(o); });
    if (op == std::end(ops)) {
      invalid("cuinline_rows_run: op '" + name +
              "' is none of softmax, log_softmax, rms_norm, add_rms_norm, layer_norm");
    }
    if (p.num_epilogue_inputs < 0 || p.num_epilogue_inputs > cuinline::ops::kMaxInputs - 1) {
      invalid("cuinline_rows_run: num_epilogue_inputs must be 0-" + std::to_string(cuinline::ops::kMaxInputs - 1) +
              ", got " + std::to_string(p.num_epilogue_inputs));
    }
    if (p.num_epilogue_inputs > 0 && p.epilogue_inputs == nullptr) {
      invalid("cuinline_rows_run: epilogue_inputs is NULL but num_epilogue_inputs is " +
              std::to_string(p.num_epilogue_inputs));
    }
    cuinline::ops::RowFusion fusion;
    if (p.prologue != nullptr && *p.prologue != '\0') fusion.prologue = op_of(p.prologue);
    if (p.epilogue != nullptr && *p.epilogue != '\0') fusion.epilogue = op_of(p.epilogue);
    for (int k = 0; k < p.num_epilogue_inputs; ++k) {
      fusion.epilogue_inputs.push_back(view_of(&p.epilogue_inputs[k], "rows epilogue input"));
    }
    const auto opt = [](const cuinline_tensor* t, const char* what) {
      return t != nullptr ? view_of(t, what) : cuinline::TensorView{};
    };
    const cuinline::TensorView in = view_of(p.input, "rows input"), out = view_of(p.output, "rows output");
    const cuinline::TensorView w = opt(p.weight, "rows weight"), b = opt(p.bias, "rows bias");
    const cuinline::TensorView r = opt(p.residual, "rows residual");
    const auto s = static_cast<CUstream>(p.stream);
    switch (*op) {
      case RowOp::softmax:
      case RowOp::log_softmax:
        if (w.data != nullptr || b.data != nullptr || r.data != nullptr) {
          invalid(name + ": takes no weight, bias or residual");
        }
        return *op == RowOp::softmax ? cuinline::ops::softmax(in, out, fusion, s)
                                     : cuinline::ops::log_softmax(in, out, fusion, s);
      case RowOp::rms_norm:
        if (b.data != nullptr || r.data != nullptr) invalid("rms_norm: takes no bias or residual");
        return cuinline::ops::rms_norm(in, w, out, p.eps, fusion, s);
      case RowOp::add_rms_norm:
        if (b.data != nullptr) invalid("add_rms_norm: takes no bias");
        return cuinline::ops::add_rms_norm(in, view_of(p.residual, "add_rms_norm residual"), w, out, p.eps,
                                           fusion, s);
      case RowOp::layer_norm:
        if (r.data != nullptr) invalid("layer_norm: takes no residual");
        return cuinline::ops::layer_norm(in, w, b, out, p.eps, fusion, s);
    }
  });
}

}  // extern "C"
