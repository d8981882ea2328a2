/* cuinline.h — the C API of cuinline, for engines not written in C++ (Rust, Go, Python through
 * ctypes / cffi, C). Plain C11; no C++ type or exception crosses it. Same library, same cache, same
 * kernels as the C++ API (include/cuinline/cuinline.hpp).
 *
 * Conventions:
 *  - every function returns a cuinline_status; on failure cuinline_last_error() gives the message
 *    (thread-local, valid until the calling thread's next cuinline call);
 *  - handles are opaque pointers, released with their *_release function (NULL is accepted);
 *  - a stream is a CUstream passed as void* (NULL: the legacy default stream of the current
 *    device); PyTorch's torch.cuda.current_stream().cuda_stream works as is;
 *  - device pointers are void*; strides are in elements.
 * docs/c-api.md has a complete example. */
#ifndef CUINLINE_CUINLINE_H
#define CUINLINE_CUINLINE_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define CUINLINE_C_API __declspec(dllexport)
#else
#define CUINLINE_C_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cuinline_status {
  CUINLINE_SUCCESS = 0,
  CUINLINE_ERROR_INVALID_ARGUMENT = 1, /* bad input: nothing was compiled, cached or launched */
  CUINLINE_ERROR_COMPILE = 2,          /* NVRTC rejected the program (the message holds its log) */
  CUINLINE_ERROR_DRIVER = 3,           /* a CUDA driver call failed, or there is no driver */
  CUINLINE_ERROR_CACHE = 4,            /* an explicit cache-management call failed */
  CUINLINE_ERROR_OUT_OF_MEMORY = 5,
  CUINLINE_ERROR_INTERNAL = 6
} cuinline_status;

typedef enum cuinline_dtype {
  CUINLINE_F32 = 0,
  CUINLINE_F16 = 1,
  CUINLINE_BF16 = 2,
  CUINLINE_F64 = 3
} cuinline_dtype;

/* A device tensor: pointer, dtype, up to 8 dimensions, strides in elements. strides == NULL means
 * contiguous (row-major). A 0-dim tensor (ndim 0) is a scalar. */
typedef struct cuinline_tensor {
  void* data;
  int dtype; /* a cuinline_dtype value (an int, so that any value a caller passes can be checked) */
  int ndim;
  const int64_t* shape;
  const int64_t* strides;
} cuinline_tensor;

typedef struct cuinline_cache_stats {
  uint64_t memory_hits;
  uint64_t disk_hits;
  uint64_t compiles;
  uint64_t compile_failures;
  uint64_t disk_writes;
  uint64_t disk_write_failures;
  uint64_t evictions;
  uint64_t rejected_entries;
} cuinline_cache_stats;

typedef struct cuinline_module_s* cuinline_module;
typedef struct cuinline_kernel_s* cuinline_kernel;

/** The message of the calling thread's last failed call ("" if none). */
CUINLINE_C_API const char* cuinline_last_error(void);
/** cuinline's version, e.g. "0.1.0". */
CUINLINE_C_API const char* cuinline_version(void);
/** Number of CUDA devices (0 without a driver); never fails. */
CUINLINE_C_API int cuinline_device_count(void);

/* ---- configuration (process-wide; the default cache is configured on first use) ------------- */
/** Configures the process's default cache before its first use (afterwards: INVALID_ARGUMENT).
 *  directory: NULL keeps CUINLINE_CACHE_DIR / the default; max_bytes: 0 keeps the default (1 GiB);
 *  disk_enabled: 0 for the memory tier only. */
CUINLINE_C_API cuinline_status cuinline_configure_cache(const char* directory, uint64_t max_bytes, int disk_enabled);
/** Adds the fleet-wide remote tier (Redis, docs/RELIABILITY.md) to the default cache before its first
 *  use, as CUINLINE_REMOTE_CACHE and CUINLINE_CACHE_KEY_FILE do. url: "redis://[user:password@]host:port[/db]"
 *  or "unix:///path/to/redis.sock"; key_file: the fleet key file (NULL keeps CUINLINE_CACHE_KEY_FILE).
 *  A build without hiredis, a URL that does not parse or a key file that is missing or not private
 *  leaves the remote tier off with one warning (the local tiers work as before). Composes with
 *  cuinline_configure_cache. */
CUINLINE_C_API cuinline_status cuinline_configure_remote_cache(const char* url, const char* key_file);
/** Log level: "trace", "debug", "info", "warn", "error", "critical", "off" (default warn, or the
 *  CUINLINE_LOG_LEVEL environment variable's). Messages below it are dropped. */
CUINLINE_C_API cuinline_status cuinline_set_log_level(const char* level);

/* The levels a log sink receives (include/cuinline/log.hpp's LogLevel). */
typedef enum cuinline_log_level {
  CUINLINE_LOG_TRACE = 0,
  CUINLINE_LOG_DEBUG = 1,
  CUINLINE_LOG_INFO = 2,
  CUINLINE_LOG_WARN = 3,
  CUINLINE_LOG_ERROR = 4,
  CUINLINE_LOG_CRITICAL = 5,
  CUINLINE_LOG_OFF = 6
} cuinline_log_level;
/* Receives one message: level (a cuinline_log_level value), the text (NUL-terminated, no trailing
 * newline, valid during the call only) and its length, and the user_data given to
 * cuinline_set_log_sink. Called from cuinline's threads too, one message at a time. */
typedef void (*cuinline_log_fn)(int level, const char* message, size_t length, void* user_data);
/** Sends every message that passes the log level to fn (NULL: back to stderr, the default). Must not
 *  be called from inside fn (INVALID_ARGUMENT). */
CUINLINE_C_API cuinline_status cuinline_set_log_sink(cuinline_log_fn fn, void* user_data);
/** Counters of the default cache. */
CUINLINE_C_API cuinline_status cuinline_get_cache_stats(cuinline_cache_stats* out);

/* ---- when a call waits for a compile (include/cuinline/jit.hpp, docs/jit.md) ------------------ */
typedef enum cuinline_jit_policy {
  CUINLINE_JIT_ASYNC = 0,  /* a never-seen chain runs on the generic kernel while its specialized kernel
                              compiles in the background (inside a graph capture: as SYNC) */
  CUINLINE_JIT_SYNC = 1,   /* wait for the specialized kernel */
  CUINLINE_JIT_GENERIC = 2 /* always the generic kernel where there is one; nothing compiled */
} cuinline_jit_policy;

typedef struct cuinline_jit_stats {
  uint64_t generic_launches;
  uint64_t submitted;
  uint64_t pending;
  uint64_t swaps;
  uint64_t background_failures;
  uint64_t sync_waits;
} cuinline_jit_stats;

/** The process's policy (policy: a cuinline_jit_policy value; others are INVALID_ARGUMENT). */
CUINLINE_C_API cuinline_status cuinline_set_jit_policy(int policy);
/** The policy of the calling thread's calls until it is set again (-1: back to the process's). */
CUINLINE_C_API cuinline_status cuinline_set_thread_jit_policy(int policy);
/** The process's policy. */
CUINLINE_C_API int cuinline_get_jit_policy(void);
/** Starts NVRTC's one-time start-up in the background and returns at once, after loading the
    generic kernels' libraries there where the process already has the CUDA driver loaded
    (cuinline::prewarm). */
CUINLINE_C_API void cuinline_prewarm(void);
/** Blocks until every background specialization submitted so far has finished (call before a capture). */
CUINLINE_C_API cuinline_status cuinline_wait_for_specializations(void);
CUINLINE_C_API cuinline_status cuinline_get_jit_stats(cuinline_jit_stats* out);

/* ---- load_inline: source → module → kernel → launch ----------------------------------------- */
typedef struct cuinline_inline_options {
  const char* name;              /* program name for diagnostics; NULL: "inline" */
  const char* const* sources;    /* CUDA sources, concatenated */
  int num_sources;
  const char* const* functions;  /* kernels that must exist (extern "C" or plain names) */
  int num_functions;
  const char* const* name_expressions; /* template instantiations, e.g. "scale<float, 4>" */
  int num_name_expressions;
  const char* const* options;    /* extra NVRTC options */
  int num_options;
  const char* const* header_names;    /* headers given as content: names ... */
  const char* const* header_contents; /* ... and contents */
  int num_headers;
  int device;                    /* -1: the current device */
  const char* arch;              /* NULL: the device's arch; "sm_90" compiles with no GPU */
} cuinline_inline_options;

/** Compiles (or fetches from the cache) and returns a module. */
CUINLINE_C_API cuinline_status cuinline_load_inline(const cuinline_inline_options* options, cuinline_module* out);
CUINLINE_C_API void cuinline_module_release(cuinline_module module);
/** The kernel named by a plain name or a requested name expression (loads the module). */
CUINLINE_C_API cuinline_status cuinline_module_kernel(cuinline_module module, const char* name, cuinline_kernel* out);
CUINLINE_C_API void cuinline_kernel_release(cuinline_kernel kernel);
/** Parameter count (-1: the driver cannot tell). */
CUINLINE_C_API cuinline_status cuinline_kernel_param_count(cuinline_kernel kernel, int* out);
/** Launches with args[i] pointing at argument i (the count is checked where the driver can tell). */
CUINLINE_C_API cuinline_status cuinline_kernel_launch(cuinline_kernel kernel, const unsigned grid[3], const unsigned block[3],
                                                      unsigned shared_bytes, void* stream, void** args, size_t num_args);

/* ---- ready-made ops --------------------------------------------------------------------------- */
/** outputs = op(inputs) — an op as text, as `cuinline run` / parse_op read it: "relu",
 *  "div(2)|leaky_relu(0.01)", "add(in1)|relu", "expr([a, b] a / (1.0f + expf(-a)) * b)",
 *  "expr(x > 0 ? x : x * s; s=0.01)". 1-8 inputs, 1-4 outputs, PyTorch broadcasting. */
CUINLINE_C_API cuinline_status cuinline_apply(const char* op, const cuinline_tensor* inputs, int num_inputs,
                                              const cuinline_tensor* outputs, int num_outputs, void* stream);
/* ---- conv2d ----------------------------------------------------------------------------------
 * output = epilogue(conv2d(input, weight) + bias [+ residual]), in one kernel (include/cuinline/conv2d.hpp).
 * One dtype for all tensors: f32, f16, bf16 or f64 (computed in double). Each 4-D tensor may have any
 * strides: read in place where contiguous NCHW or channels-last NHWC, through a compact copy
 * otherwise; input, residual and output may instead be 3-D, F.conv2d's unbatched [C, H, W].
 *
 * The parameters are one struct that grows at its end, so later versions add fields without new
 * function names. `size` is sizeof(cuinline_conv2d_params) as the caller compiled it:
 *  - a smaller size from an older header is accepted: the fields it lacks take their zero value,
 *    which for every field is its default (a field added later keeps the old behaviour at zero);
 *  - a size smaller than the first version's, or a larger one (a newer header) whose bytes past
 *    the fields this library knows are not all zero, is refused with INVALID_ARGUMENT.
 * Zero the whole struct first (= {0}, memset, or CUINLINE_CONV2D_PARAMS_INIT), then set size and
 * the fields you need. */
typedef struct cuinline_conv2d_params {
  size_t size;                             /* sizeof(cuinline_conv2d_params) */
  const cuinline_tensor* input;            /* [N, Cin, H, W] or [Cin, H, W] */
  const cuinline_tensor* weight;           /* [Cout, Cin / groups, KH, KW] */
  const cuinline_tensor* output;           /* [N, Cout, OH, OW] (PyTorch's output extents) */
  const cuinline_tensor* bias;             /* [Cout]; NULL: none */
  const cuinline_tensor* residual;         /* the output's shape, added before the epilogue; NULL: none */
  const int* stride;                       /* {h, w}; NULL: {1, 1} */
  const int* padding;                      /* {h, w}; NULL: {0, 0} */
  const int* dilation;                     /* {h, w}; NULL: {1, 1} */
  int groups;                              /* F.conv2d's groups (dividing Cin and Cout); 0: 1 */
  int num_channel_operands;                /* 0-4, as many as the epilogue reads */
  const cuinline_tensor* channel_operands; /* the epilogue's in1, in2, ... (see below) */
  const char* epilogue;                    /* op text ("relu", "div(2)|leaky_relu(0.01)"); NULL, "": none */
  const char* precision;                   /* "fp32" (NULL), "tf32", "tf32x3" */
  void* stream;                            /* CUstream; NULL: the legacy default stream */
} cuinline_conv2d_params;

/* A cuinline_conv2d_params with size set and every other field at its default. */
#define CUINLINE_CONV2D_PARAMS_INIT \
  { sizeof(cuinline_conv2d_params), NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, 0, NULL, NULL, NULL, NULL }

/** The conv2d of `params`. Per-channel operands: operand k is the epilogue's in<k+1> ("relu|add(in1)":
 *  relu(conv) + b2) or its expression's input k + 1 ("expr([x, m] x * m)"), each of the conv's dtype
 *  and shape [Cout], [Cout, 1, 1] or [1, Cout, 1, 1] (PyTorch's (Cout, 1, 1) parameters; any stride).
 *  Bad input (a size as above, a NULL tensor that is required, shapes, dtypes, text) is refused with
 *  INVALID_ARGUMENT before anything is compiled or launched. */
CUINLINE_C_API cuinline_status cuinline_conv2d_run(const cuinline_conv2d_params* params);

/* The earlier conv2d entry points, kept for compatibility; deprecated: use cuinline_conv2d_run.
 * Each is cuinline_conv2d_run with the same arguments in the struct (stride/padding/dilation may be
 * NULL as there); their groups must be positive. */
/** Deprecated: cuinline_conv2d_run with groups 1 and no per-channel operands. */
CUINLINE_C_API cuinline_status cuinline_conv2d(const cuinline_tensor* input, const cuinline_tensor* weight,
                                               const cuinline_tensor* bias, const cuinline_tensor* residual,
                                               const cuinline_tensor* output, const int stride[2],
                                               const int padding[2], const int dilation[2], const char* epilogue,
                                               const char* precision, void* stream);
/** Deprecated: cuinline_conv2d_run with no per-channel operands. */
CUINLINE_C_API cuinline_status cuinline_conv2d_grouped(const cuinline_tensor* input, const cuinline_tensor* weight,
                                                       const cuinline_tensor* bias, const cuinline_tensor* residual,
                                                       const cuinline_tensor* output, const int stride[2],
                                                       const int padding[2], const int dilation[2], int groups,
                                                       const char* epilogue, const char* precision, void* stream);
/** Deprecated: cuinline_conv2d_run. */
CUINLINE_C_API cuinline_status cuinline_conv2d_ex(const cuinline_tensor* input, const cuinline_tensor* weight,
                                                  const cuinline_tensor* bias, const cuinline_tensor* residual,
                                                  const cuinline_tensor* output, const int stride[2],
                                                  const int padding[2], const int dilation[2], int groups,
                                                  const char* epilogue, const cuinline_tensor* channel_operands,
                                                  int num_channel_operands, const char* precision, void* stream);

/* ---- row reductions over the last dimension (include/cuinline/reductions.hpp, docs/reductions.md) --
 * One dtype for every tensor (f32, f16, bf16 accumulate in float; f64 in double). input: any shape,
 * rows (all dimensions but the last) evenly spaced, last dimension contiguous; output (and residual):
 * the input's shape, non-overlapping rows, last dimension contiguous; output may be the input (in
 * place). weight / bias: 1-D of the row length, contiguous, or NULL (absent: 1 and 0). eps: finite,
 * >= 0. Empty tensors are a no-op. */
/** torch.softmax(input, -1) / torch.log_softmax(input, -1). */
CUINLINE_C_API cuinline_status cuinline_softmax(const cuinline_tensor* input, const cuinline_tensor* output,
                                                void* stream);
CUINLINE_C_API cuinline_status cuinline_log_softmax(const cuinline_tensor* input, const cuinline_tensor* output,
                                                    void* stream);
/** F.rms_norm(input, (n,), weight, eps). */
CUINLINE_C_API cuinline_status cuinline_rms_norm(const cuinline_tensor* input, const cuinline_tensor* weight,
                                                 const cuinline_tensor* output, double eps, void* stream);
/** residual = input + residual; output = rms_norm(residual, weight, eps) (vLLM's fused_add_rms_norm;
 *  output may be input). */
CUINLINE_C_API cuinline_status cuinline_add_rms_norm(const cuinline_tensor* input, const cuinline_tensor* residual,
                                                     const cuinline_tensor* weight, const cuinline_tensor* output,
                                                     double eps, void* stream);
/** F.layer_norm(input, (n,), weight, bias, eps). */
CUINLINE_C_API cuinline_status cuinline_layer_norm(const cuinline_tensor* input, const cuinline_tensor* weight,
                                                   const cuinline_tensor* bias, const cuinline_tensor* output,
                                                   double eps, void* stream);

/* Any row reduction, with fused elementwise chains: one struct that grows at its end, under the
 * size rule of cuinline_conv2d_params (set size = sizeof(cuinline_rows_params), zero the rest
 * first: = {0}, memset, or CUINLINE_ROWS_PARAMS_INIT). `prologue` is op text applied to every
 * input element as it is loaded ("mul(0.125)": softmax(x * 0.125)), before add_rms_norm's add;
 * `epilogue` op text applied to every output element before it is stored, its in1..in7 the
 * `epilogue_inputs` (each of the output's shape and dtype, its own row stride, last dimension
 * contiguous, overlapping no written tensor): "mul(in1)" is rms_norm(x, w) * gate. Both are
 * chains of the elementwise steps, each rounded to the dtype as the eager op. */
typedef struct cuinline_rows_params {
  size_t size;                            /* sizeof(cuinline_rows_params) */
  const char* op;                         /* "softmax", "log_softmax", "rms_norm", "add_rms_norm", "layer_norm" */
  const cuinline_tensor* input;
  const cuinline_tensor* output;          /* may be input (in place) */
  const cuinline_tensor* weight;          /* the norms' [n]; NULL: absent (1) */
  const cuinline_tensor* bias;            /* layer_norm's [n]; NULL: absent (0) */
  const cuinline_tensor* residual;        /* add_rms_norm's, read and written */
  double eps;                             /* the norms' */
  const char* prologue;                   /* op text; NULL, "": none */
  const char* epilogue;                   /* op text; NULL, "": none */
  int num_epilogue_inputs;                /* 0-7, as many as the epilogue reads */
  const cuinline_tensor* epilogue_inputs; /* the epilogue's in1, in2, ... */
  void* stream;                           /* CUstream; NULL: the legacy default stream */
} cuinline_rows_params;

/* A cuinline_rows_params with size set and every other field at its default. */
#define CUINLINE_ROWS_PARAMS_INIT \
  { sizeof(cuinline_rows_params), NULL, NULL, NULL, NULL, NULL, NULL, 0.0, NULL, NULL, 0, NULL, NULL }

/** The row reduction of `params`; bad input (the size, the op's name, tensors, text) is refused with
 *  INVALID_ARGUMENT before anything is compiled or launched. */
CUINLINE_C_API cuinline_status cuinline_rows_run(const cuinline_rows_params* params);

#ifdef __cplusplus
}
#endif

#endif /* CUINLINE_CUINLINE_H */
