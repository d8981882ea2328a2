// The `cuinline` command: warm, cache, key, compile, info, run, bench (docs/cli.md).
// Exit status: 0 ok; 1 a failure (compile error, failed variants, bad cache entries left, no GPU);
// 2 a usage error (bad option, malformed spec, unreadable input) — found before anything is done.

#include <CLI/CLI.hpp>
#include <cuinline/jit.hpp>
#include <cstdio>
#include <cuinline/error.hpp>
#include <cuinline/version.hpp>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "cli/commands.hpp"
#include "cli/util.hpp"

namespace {

using namespace cuinline::cli;

void add_cache_dir(CLI::App* app, std::string& dir) {
  app->add_option("--cache-dir", dir,
                  "Cache directory (default: $CUINLINE_CACHE_DIR, else ~/.cache/cuinline)")
      ->check([](const std::string& v) {
        return v.empty() ? std::string("an empty directory name (leave --cache-dir out for the default)")
                         : std::string();
      });
}

// The words of the command line that no command took, by the command they were given to.
void collect_unknown_words(const CLI::App* app, const std::string& path,
                           std::vector<std::pair<std::string, std::string>>& out, const CLI::App*& first_app) {
  for (const std::string& word : app->remaining(false)) {
    if (word == "--") continue;
    if (out.empty()) first_app = app;
    out.emplace_back(path, word);
  }
  for (const CLI::App* sub : app->get_subcommands()) collect_unknown_words(sub, path + " " + sub->get_name(), out, first_app);
}

// CLI11 checks required options and subcommands before the words it did not take, so it would
// answer "warm --bogus" with "--spec is required" and "cache bogus" with "A subcommand is required":
// every unknown word is named first. Returns false when there is none.
bool report_unknown_words(const CLI::App& app) {
  std::vector<std::pair<std::string, std::string>> words;
  const CLI::App* first_app = nullptr;
  collect_unknown_words(&app, "cuinline", words, first_app);
  if (words.empty()) return false;
  std::string commands;
  for (const CLI::App* sub : first_app->get_subcommands([](const CLI::App*) { return true; }))
    commands += (commands.empty() ? "" : ", ") + sub->get_name();
  for (const auto& [path, word] : words) {
    const std::string shown = escape_control(word);
    if (!word.empty() && word[0] == '-') {
      std::fprintf(stderr, "cuinline: error: `%s`: unknown option '%s'\n", path.c_str(), shown.c_str());
    } else if (!commands.empty() && path == words.front().first) {
      std::fprintf(stderr, "cuinline: error: `%s`: unknown command '%s' (commands: %s)\n", path.c_str(), shown.c_str(),
                   commands.c_str());
    } else {
      std::fprintf(stderr, "cuinline: error: `%s`: unexpected argument '%s'\n", path.c_str(), shown.c_str());
    }
  }
  std::fprintf(stderr, "see `%s --help`\n", words.front().first.c_str());
  return true;
}

int dispatch(int argc, char** argv) {
  CLI::App app{"cuinline " CUINLINE_VERSION_STRING
               ": compile, cache and run CUDA kernels with NVRTC (docs/cli.md)"};
  app.require_subcommand(1);
  app.allow_extras(false);
  app.set_version_flag("--version", std::string(CUINLINE_VERSION_STRING));

  WarmOptions warm;
  bool no_progress = false;
  auto* warm_cmd = app.add_subcommand("warm", "Compile every variant of a spec into the disk cache");
  warm_cmd->add_option("--spec", warm.spec_file, "Spec file (JSON, docs/spec-format.md)")->required();
  warm_cmd->add_option("--arch", warm.archs, "Target archs, e.g. sm_80,sm_90 (default: the present GPUs')")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->check([](const std::string& v) {
        return v.empty() ? std::string("an empty architecture in the list (e.g. --arch sm_80,sm_90)") : std::string();
      });
  warm_cmd->add_option("-j,--jobs", warm.jobs, "Parallel compiles (default: the number of cores)")
      ->check(CLI::Range(1, 4096));
  add_cache_dir(warm_cmd, warm.cache_dir);
  warm_cmd->add_flag("--dry-run", warm.dry_run,
                     "List the variants and whether they are cached; compile nothing");
  warm_cmd->add_flag("--no-progress", no_progress, "One line per variant even on a terminal");
  warm_cmd->add_flag("--remote", warm.remote,
                     "Fill the remote (Redis) cache too: $CUINLINE_REMOTE_CACHE, $CUINLINE_CACHE_KEY_FILE");
  warm_cmd->add_option("--max-variants", warm.max_variants,
                       "Refuse a spec of more variants × archs than this (default 100000; counted from the spec's lists before "
                       "anything is built; the conv2d copy modules, at most one of each kind a spec, are not variants)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{100000000}));
  warm_cmd->add_flag("--allow-outside-paths", warm.allow_outside_paths,
                     "Let the spec's .cu files and headers, what they #include and the files its options name "
                     "(-I, --pre-include, ...) lie outside the spec's directory");
  warm_cmd->add_option("--signing-key", warm.signing_key,
                       "Ed25519 private key that signs the entries of a team cache and the remote cache "
                       "(default: $CUINLINE_CACHE_SIGNING_KEY; `cuinline key generate` makes one)");

  CacheOptions cache;
  auto* cache_cmd = app.add_subcommand("cache", "Inspect and maintain the disk cache");
  cache_cmd->require_subcommand(1);
  auto* list_cmd = cache_cmd->add_subcommand("list", "Entries: key, kernels, arch, size, last use");
  list_cmd->add_flag("--json", cache.json, "JSON output");
  auto* stats_cmd = cache_cmd->add_subcommand("stats", "Entry count, size, cap, breakdown by arch");
  stats_cmd->add_flag("--json", cache.json, "JSON output");
  auto* verify_cmd = cache_cmd->add_subcommand("verify", "Check every entry; report corrupt or foreign ones");
  verify_cmd->add_flag("--fix", cache.fix, "Remove the bad entries and stale temporary files");
  auto* prune_cmd = cache_cmd->add_subcommand("prune", "Evict least-recently-used entries down to a size");
  prune_cmd
      ->add_option("--max-bytes", cache.max_bytes, "Size to prune to: bytes, or with K/M/G (KiB/MiB/GiB)")
      ->required();
  auto* clear_cmd = cache_cmd->add_subcommand("clear", "Remove every entry");
  clear_cmd->add_flag("-y,--yes", cache.yes, "Do not ask for confirmation");
  auto* pull_cmd = cache_cmd->add_subcommand("pull", "Copy every valid remote (Redis) entry into the disk cache");
  stats_cmd->add_flag("--remote", cache.remote, "The remote (Redis) tier: $CUINLINE_REMOTE_CACHE");
  verify_cmd->add_flag("--remote", cache.remote,
                       "Check the tag and checksum of every remote entry (SCAN); --fix deletes the bad ones");
  for (auto* sub : {list_cmd, stats_cmd, verify_cmd, prune_cmd, clear_cmd, pull_cmd})
    add_cache_dir(sub, cache.cache_dir);
  for (auto* sub : {verify_cmd, pull_cmd}) {
    sub->add_option("--trusted-keys", cache.trusted_keys,
                    "Public keys whose signatures are accepted (default: $CUINLINE_CACHE_TRUSTED_KEYS)");
  }

  KeyOptions key;
  auto* key_cmd = app.add_subcommand("key", "The Ed25519 key pair that signs cache entries");
  key_cmd->require_subcommand(1);
  auto* key_generate_cmd = key_cmd->add_subcommand(
      "generate", "Create a private key file (mode 0600, never replacing a file) and print its public line");
  key_generate_cmd->add_option("file", key.file, "The private key file to create")->required();
  key_generate_cmd
      ->add_option("--id", key.id, "Key id the signed entries carry, e.g. ci-2026-11 ([A-Za-z0-9._-])")
      ->required();
  key_generate_cmd->add_option("--comment", key.comment, "Comment of the public line (default: user@host)");
  auto* key_public_cmd = key_cmd->add_subcommand("public", "Print the public line of a private key file");
  key_public_cmd->add_option("file", key.file, "The private key file")->required();

  CompileOptions compile;
  auto* compile_cmd = app.add_subcommand("compile", "Compile a .cu file to CUBIN (or PTX) with NVRTC");
  compile_cmd->add_option("file", compile.file, "CUDA source file")->required();
  compile_cmd
      ->add_option("-k,--kernel", compile.kernels, "Kernel name or name expression, e.g. 'scale<float, 4>'")
      ->allow_extra_args(false);
  compile_cmd->add_option("--arch", compile.arch, "Target arch, e.g. sm_90 (default: GPU 0's)");
  compile_cmd->add_option("-D,--define", compile.defines, "Macro: NAME or NAME=VALUE")
      ->allow_extra_args(false);
  compile_cmd->add_option("-I,--include-path", compile.include_dirs, "Include directory")
      ->allow_extra_args(false);
  compile_cmd->add_option("-X,--nvrtc-option", compile.options, "Extra NVRTC option, e.g. -X --use_fast_math")
      ->allow_extra_args(false);
  compile_cmd->add_option("-o,--output", compile.output,
                          "Output file (default: FILE.cubin / FILE.ptx), replaced by a new file (a symlink there is not followed)");
  compile_cmd->add_flag("--ptx", compile.ptx, "Emit PTX for the arch's virtual architecture");

  InfoOptions info;
  auto* info_cmd = app.add_subcommand("info", "Versions, GPUs, cache directory and size");
  add_cache_dir(info_cmd, info.cache_dir);

  RunOptions run;
  std::string shape;
  auto* run_cmd =
      app.add_subcommand("run", "Run an op on the GPU, check it against a CPU reference, time it");
  run_cmd
      ->add_option("op", run.op,
                   "relu, leaky_relu, div_leaky_relu, an op string such as 'clamp(0,6)', conv2d, or a row "
                   "reduction: softmax, log_softmax, rms_norm, add_rms_norm, layer_norm")
      ->required();
  run_cmd->add_option("--dtype", run.dtype, "f32, f16, bf16 or f64");
  run_cmd->add_option("--shape", shape, "e.g. 4096x393216, NxCxHxW for conv2d, ROWSxCOLS for a row reduction");
  run_cmd->add_option("--eps", run.eps, "rms_norm, add_rms_norm, layer_norm: eps (default 1e-6; layer_norm 1e-5)");
  run_cmd->add_option("--prologue", run.prologue,
                      "A row reduction: a chain fused before it, on each input element, e.g. 'mul(0.125)'");
  run_cmd->add_option("--epilogue", run.epilogue,
                      "A row reduction: a chain fused after it, on each output element; in1, in2, ... are extra "
                      "tensors of the output's shape, e.g. 'mul(in1)'");
  run_cmd->add_option("--inputs", run.inputs,
                      "An N-ary op's input shapes, one per input: e.g. 8192x28672,28672 ('scalar': a 0-dim tensor)");
  run_cmd->add_option("--outputs", run.outputs, "An N-ary op's outputs (default: the op's)")->check(CLI::Range(1, 4));
  run_cmd->add_option("--slope", run.slope, "LeakyReLU slope");
  run_cmd->add_option("--divisor", run.divisor, "Divisor (div_leaky_relu, conv2d)");
  run_cmd->add_option("--precision", run.precision, "conv2d arithmetic: fp32 (default), tf32 or tf32x3");
  run_cmd->add_option("--layout", run.layout,
                      "conv2d tensors: nchw (default) or nhwc (channels-last, as PyTorch's torch.channels_last)");
  run_cmd->add_option("--filters", run.filters, "conv2d filters KxKHxKW (default 64x3x3)");
  run_cmd->add_option("--stride", run.stride, "conv2d stride: S or SHxSW (default 1)");
  run_cmd->add_option("--padding", run.padding, "conv2d zero padding: P or PHxPW (default 0)");
  run_cmd->add_option("--dilation", run.dilation, "conv2d dilation: D or DHxDW (default 1)");
  run_cmd->add_option("--groups", run.groups, "conv2d groups, as F.conv2d's (default 1; C for depthwise)");
  run_cmd->add_option("--repeat", run.repeat, "Timed launches")->check(CLI::Range(1, 100000));
  run_cmd->add_option("--device", run.device, "GPU ordinal")->check(CLI::NonNegativeNumber);

  BenchOptions bench;
  auto* bench_cmd = app.add_subcommand(
      "bench", "Run the standard ops and sizes and print a table; or time one op over --inputs beside a copy");
  bench_cmd->add_option("op", bench.op, "An op over several inputs, e.g. 'add(in1)|relu' (with --inputs)");
  bench_cmd->add_option("--inputs", bench.inputs, "The op's input shapes, one per input: e.g. 8192x28672,28672");
  bench_cmd->add_option("--outputs", bench.outputs, "The op's outputs (default: the op's)")->check(CLI::Range(1, 4));
  bench_cmd->add_option("--dtype", bench.dtype, "With an op: f32, f16, bf16 or f64");
  bench_cmd->add_option("--repeat", bench.repeat, "Timed launches per op")->check(CLI::Range(1, 100000));
  bench_cmd->add_option("--device", bench.device, "GPU ordinal")->check(CLI::NonNegativeNumber);
  bench_cmd->add_flag("--quick", bench.quick, "Smaller sizes");
  bench_cmd->add_flag("--compile", bench.compile,
                      "Where compiles' time goes: each family's variants compiled --repeat times (default 5) with a "
                      "new constant, split into NVRTC's front end / NVVM / ptxas (and the load with a GPU)");
  bench_cmd->add_option("--arch", bench.arch, "With --compile: the target arch, e.g. sm_90 (default: the GPU's)");
  bench_cmd->add_option("--family", bench.families,
                        "With --compile: families, comma-separated (elementwise, nary, conv2d, reductions; default all)");
  // run and bench time the specialized kernels: their calls wait for them unless asked otherwise.
  std::string jit_policy = "sync";
  const char* jit_help =
      "What a call does before its specialized kernel is loaded (docs/jit.md): sync (wait: the timings "
      "are the specialized kernel's), async (the generic kernel meanwhile) or generic (only the generic kernel)";
  for (auto* cmd : {run_cmd, bench_cmd}) {
    cmd->add_option("--jit-policy", jit_policy, jit_help)->check(CLI::IsMember({"async", "sync", "generic"}));
  }

  // An unknown first word is named ("cuinline bogus"), not answered with "a subcommand is required".
  if (argc > 1 && argv[1][0] != '-') {
    const std::string first = argv[1];
    bool known = false;
    for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; })) known = known || sub->get_name() == first;
    if (!known) {
      std::fprintf(
          stderr,
          "cuinline: error: unknown command '%s' (commands: warm, cache, key, compile, info, run, bench; see "
          "--help)\n",
          first.c_str());
      return kExitUsage;
    }
  }
  // "--arch ,,," would leave the option without a value and take the next word as one: name the
  // list itself, before parsing.
  for (int i = 1; i < argc; ++i) {
    std::string value;
    const std::string a = argv[i];
    if (a == "--arch" && i + 1 < argc) value = argv[i + 1];
    if (a.rfind("--arch=", 0) == 0) value = a.substr(7);
    if (value.empty() && a != "--arch") continue;
    bool empty_item = value.empty() || value.front() == ',' || value.back() == ',' || value.find(",,") != std::string::npos;
    if (empty_item) {
      std::fprintf(stderr, "cuinline: error: --arch '%s': an empty architecture in the list (e.g. --arch sm_80,sm_90)\n",
                   value.c_str());
      return kExitUsage;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0 && report_unknown_words(app)) return kExitUsage;
    int code = app.exit(e);  // prints help/version or the error
    return code == 0 ? kExitOk : kExitUsage;
  }

  if (*warm_cmd) {
    warm.progress = !no_progress;
    return run_warm(warm);
  }
  if (*list_cmd) return run_cache_list(cache);
  if (*stats_cmd) return cache.remote ? run_cache_stats_remote(cache) : run_cache_stats(cache);
  if (*verify_cmd) return cache.remote ? run_cache_verify_remote(cache) : run_cache_verify(cache);
  if (*pull_cmd) return run_cache_pull(cache);
  if (*prune_cmd) return run_cache_prune(cache);
  if (*clear_cmd) return run_cache_clear(cache);
  if (*key_generate_cmd) return run_key_generate(key);
  if (*key_public_cmd) return run_key_public(key);
  if (*compile_cmd) return run_compile(compile);
  if (*info_cmd) return run_info(info);
  if (*run_cmd || *bench_cmd) {
    cuinline::set_jit_policy(jit_policy == "async"     ? cuinline::JitPolicy::async
                             : jit_policy == "generic" ? cuinline::JitPolicy::generic
                                                       : cuinline::JitPolicy::sync);
  }
  if (*run_cmd) {
    if (!shape.empty()) run.shape = parse_shape(shape);
    return run_op(run);
  }
  if (*bench_cmd && !bench.compile && (bench_cmd->count("--arch") > 0 || bench_cmd->count("--family") > 0)) {
    std::fprintf(stderr, "cuinline: error: bench: --arch and --family go with --compile\n");
    return kExitUsage;
  }
  if (*bench_cmd && bench.compile && (!bench.op.empty() || bench.inputs)) {
    std::fprintf(stderr, "cuinline: error: bench --compile times the families' compiles; it takes no op or --inputs\n");
    return kExitUsage;
  }
  if (*bench_cmd && bench.compile) {
    if (bench_cmd->count("--repeat") == 0) bench.repeat = 5;
    return run_bench_compile(bench);
  }
  if (*bench_cmd) return run_bench(bench);
  return kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return dispatch(argc, argv);
  } catch (const cuinline::InvalidArgument& e) {
    std::fprintf(stderr, "cuinline: error: %s\n", e.what());
    return kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuinline: error: %s\n", e.what());
    return kExitFailure;
  }
}
