#pragma once
// The subcommands of `cuinline`. Each returns the process exit status; InvalidArgument escaping
// from one is a usage error (exit 2), any other cuinline::Error a failure (exit 1) — see main.cpp.

#include <cstdint>
#include <cuinline/cache.hpp>
#include <optional>
#include <string>
#include <vector>

namespace cuinline::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

struct WarmOptions {
  std::string spec_file;
  std::vector<std::string> archs;  ///< empty: the archs of the present GPUs
  int jobs = 0;                    ///< 0: the number of cores
  std::string cache_dir;           ///< empty: the environment's (CUINLINE_CACHE_DIR, ...)
  bool dry_run = false;
  bool progress = true;  ///< false: one line per variant even on a terminal
  std::size_t max_variants = 100000;  ///< bound on variants × archs (cli::kDefaultMaxVariants)
  bool allow_outside_paths = false;   ///< a spec may read files outside its directory (spec_confine.hpp)
  bool remote = false;  ///< fill the remote (Redis) tier as well (remote_cmd.cpp)
  std::string signing_key;  ///< sign the entries of a team cache / Redis (else $CUINLINE_CACHE_SIGNING_KEY)
};
int run_warm(const WarmOptions& options);

struct CacheOptions {
  std::string cache_dir;
  bool json = false;      ///< list/stats: machine-readable output
  bool fix = false;       ///< verify: remove bad entries
  std::string max_bytes;  ///< prune: "500M", "1GiB", "123456"
  bool yes = false;       ///< clear: do not ask
  bool remote = false;    ///< stats/verify: the remote (Redis) tier instead of the disk
  std::string trusted_keys;  ///< verify/pull: the trusted public keys (else $CUINLINE_CACHE_TRUSTED_KEYS)
};
int run_cache_list(const CacheOptions& options);
int run_cache_stats(const CacheOptions& options);
int run_cache_verify(const CacheOptions& options);
int run_cache_prune(const CacheOptions& options);
int run_cache_clear(const CacheOptions& options);
// The remote tier (remote_cmd.cpp), configured by CUINLINE_REMOTE_CACHE and CUINLINE_CACHE_KEY_FILE.
int run_cache_stats_remote(const CacheOptions& options);
int run_cache_verify_remote(const CacheOptions& options);
int run_cache_pull(const CacheOptions& options);

/// The settings of the cache commands: the environment's, with --cache-dir and --trusted-keys.
CacheConfig cache_command_config(const CacheOptions& options);

struct KeyOptions {
  std::string file;                    ///< the private key file
  std::string id;                      ///< generate: the key id entries will carry
  std::optional<std::string> comment;  ///< generate: the public line's comment (default user@host)
};
/// Creates a private key file (0600, never replacing a file) and prints its public line.
int run_key_generate(const KeyOptions& options);
/// Prints the public line of a private key file.
int run_key_public(const KeyOptions& options);

struct CompileOptions {
  std::string file;
  std::vector<std::string> kernels;  ///< name expressions or plain names
  std::string arch;                  ///< empty: the GPU's
  std::vector<std::string> defines;  ///< "NAME" or "NAME=VALUE"
  std::vector<std::string> include_dirs;
  std::vector<std::string> options;  ///< extra NVRTC options (-Xnvrtc)
  std::string output;                ///< empty: <file stem>.cubin / .ptx
  bool ptx = false;
};
int run_compile(const CompileOptions& options);

struct InfoOptions {
  std::string cache_dir;
};
int run_info(const InfoOptions& options);

struct RunOptions {
  std::string op;
  std::string dtype = "f32";
  std::vector<std::int64_t> shape;  ///< empty: the op's standard size
  double slope = 0.01;
  double divisor = 2.0;
  std::optional<std::string> precision;  ///< conv2d only: fp32 (when not given), tf32 or tf32x3
  std::optional<std::string> layout;     ///< conv2d only: nchw (when not given) or nhwc (channels-last)
  std::optional<std::string> filters;    ///< conv2d only: KxKHxKW (when not given 64x3x3)
  std::optional<std::string> stride, padding, dilation;  ///< conv2d only: "2" or "2x1" (h x w)
  std::optional<int> groups;             ///< conv2d only: F.conv2d's groups (when not given 1)
  std::optional<double> eps;             ///< rms_norm, add_rms_norm, layer_norm (when not given 1e-6, 1e-6, 1e-5)
  std::optional<std::string> prologue, epilogue;  ///< row reductions: fused chains (op text)
  std::optional<std::string> inputs;     ///< N-ary: "8192x28672,28672" (one shape per input)
  int outputs = 0;                       ///< N-ary: 0 = the op's (op.outputs())
  int repeat = 20;
  int device = 0;
};
int run_op(const RunOptions& options);

struct BenchOptions {
  int repeat = 20;
  int device = 0;
  bool quick = false;  ///< smaller sizes
  std::string op;      ///< empty: the standard table; else this op over `inputs` beside a copy
  std::string dtype = "f32";
  std::optional<std::string> inputs;
  int outputs = 0;
  bool compile = false;  ///< where compiles' time goes (bench_compile.cpp) instead of kernels' time
  std::string arch;      ///< --compile's target (empty: GPU `device`'s)
  std::string families = "elementwise,nary,conv2d,reductions";  ///< --compile's families
};
int run_bench(const BenchOptions& options);
/// cuinline bench --compile: each family's variants compiled `repeat` times with a new constant,
/// split into NVRTC's front end / NVVM / ptxas (and the module load with a GPU). Exit 2 on a bad
/// --family or --arch.
int run_bench_compile(const BenchOptions& options);

/// An N-ary op as `cuinline run OP --inputs ...` / `cuinline bench OP --inputs ...` name it. Parsed
/// and planned (ops::make_request on fake tensors) before any GPU is touched: bad shapes, too many
/// inputs or an op that needs more inputs than given throw InvalidArgument (exit 2).
struct NaryRun {
  std::string op_text;
  std::string dtype;
  std::string inputs;  ///< "8192x28672,28672"; "1" is a one-element tensor, "scalar" a 0-dim one
  int outputs = 0;
  int repeat = 20;
  int device = 0;
  bool bench = false;  ///< bench: the L2 flushed before each timed call, a copy beside it
};
int run_nary(const NaryRun& run);

/// "8192x28672,28672" → {{8192, 28672}, {28672}}; "scalar" → {} (0-dim). Throws InvalidArgument.
std::vector<std::vector<std::int64_t>> parse_input_shapes(const std::string& text);

}  // namespace cuinline::cli
