// Asks the library for one kernel variant the way it does at run time, in a fresh process, and
// prints where it came from and the cache counters. test_cli uses it to check that `cuinline warm`
// wrote exactly the entries the library looks up.
//
//   cli_cache_probe op OP DTYPE VECTOR_WIDTH i32|i64 ARCH
//   cli_cache_probe conv2d CIN H W COUT KH KW BIAS(0|1) EPILOGUE ARCH
//   cli_cache_probe inline FILE.cu NAME ARCH EXPRESSION...
// Output: "tier=disk compiles=0 disk_hits=1 memory_hits=0 kernel=<lowered name> unauthenticated=0".
// Needs no GPU.

#include <cstdio>
#include <cuinline/conv2d.hpp>
#include <cuinline/load_inline.hpp>
#include <cuinline/module.hpp>
#include <cuinline/ops.hpp>
#include <exception>
#include <fstream>
#include <sstream>
#include <string>

namespace {

void print(const cuinline::Module& module, cuinline::CacheTier tier, const cuinline::KernelCache& cache) {
  auto stats = cache.stats();
  std::string kernel =
      module.program().lowered_names.empty() ? "" : module.program().lowered_names.front().second;
  std::printf("tier=%s compiles=%llu disk_hits=%llu memory_hits=%llu kernel=%s unauthenticated=%llu\n",
              cuinline::to_string(tier), static_cast<unsigned long long>(stats.compiles),
              static_cast<unsigned long long>(stats.disk_hits),
              static_cast<unsigned long long>(stats.memory_hits), kernel.c_str(),
              static_cast<unsigned long long>(stats.unauthenticated_entries));
}

int usage() {
  std::fprintf(stderr,
               "usage: cli_cache_probe op OP DTYPE VECTOR_WIDTH i32|i64 ARCH\n"
               "       cli_cache_probe conv2d CIN H W COUT KH KW BIAS EPILOGUE ARCH\n"
               "       cli_cache_probe inline FILE.cu NAME ARCH EXPRESSION...\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace cuinline;
  try {
    if (argc < 2) return usage();
    std::string mode = argv[1];
    KernelCache& cache = default_cache();
    CacheTier tier = CacheTier::compiled;
    if (mode == "op" && argc == 7) {
      ops::Variant variant;
      variant.op = ops::parse_op(argv[2]);
      variant.dtype = *parse_dtype(argv[3]);
      variant.vector_width = std::stoi(argv[4]);
      variant.index = std::string(argv[5]) == "i64" ? ops::IndexWidth::i64 : ops::IndexWidth::i32;
      variant.layout = ops::Layout::contiguous;
      Module module = cache.get(ops::make_request(variant), Arch::parse(argv[6]), &tier);
      print(module, tier, cache);
    } else if (mode == "conv2d" && argc == 11) {
      auto variant = ops::make_conv2d_variant(
          std::stoi(argv[2]), std::stoi(argv[3]), std::stoi(argv[4]), std::stoi(argv[5]), std::stoi(argv[6]),
          std::stoi(argv[7]), ops::Conv2dParams{}, std::string(argv[8]) == "1", ops::parse_op(argv[9]));
      // Planned for the arch as a call on such a GPU plans it (its Conv2dTarget).
      const Arch arch = Arch::parse(argv[10]);
      Module module = cache.get(ops::make_request(ops::conv2d_variant_for_arch(variant, arch)), arch, &tier);
      print(module, tier, cache);
    } else if (mode == "inline" && argc >= 6) {
      std::ifstream in(argv[2]);
      std::ostringstream source;
      source << in.rdbuf();
      InlineOptions options;
      options.cuda_sources = {source.str()};
      options.name = argv[3];
      options.arch = Arch::parse(argv[4]);
      for (int i = 5; i < argc; ++i) options.name_expressions.push_back(argv[i]);
      Module module = load_inline(options);
      print(module, module.tier(), cache);
    } else {
      return usage();
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cli_cache_probe: %s\n", e.what());
    return 1;
  }
}
