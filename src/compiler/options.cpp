#include "compiler/options.hpp"

#include <cstdlib>
#include <cuinline/compiler.hpp>
#include <cuinline/error.hpp>
#include <filesystem>
#include <system_error>

#include "common/log.hpp"

namespace cuinline {
namespace detail {

namespace {

std::string_view trim(std::string_view s) {
  const char* ws = " \t\r\n\f\v";
  const auto first = s.find_first_not_of(ws);
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(ws);
  return s.substr(first, last - first + 1);
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// Options that take a value, in all the spellings NVRTC accepts; `canonical` is what the value is
// appended to.
struct ValueOption {
  std::string_view long_name;
  std::string_view short_name;
  bool short_is_attached;  // "-DX": the value may follow the short name directly
  std::string_view canonical;
};

constexpr ValueOption kValueOptions[] = {
    {"--define-macro", "-D", true, "-D"},
    {"--undefine-macro", "-U", true, "-U"},
    {"--include-path", "-I", true, "-I"},
    {"--pre-include", "-include", false, "--pre-include="},
    {"--std", "-std", false, "-std="},
    {"--ptxas-options", "-Xptxas", false, "--ptxas-options="},
    {"--maxrregcount", "-maxrregcount", false, "--maxrregcount="},
    {"--dopt", "-dopt", false, "--dopt="},
};

struct Alias {
  std::string_view spelling;
  std::string_view canonical;
};

constexpr Alias kAliases[] = {
    {"-use_fast_math", "--use_fast_math"},
    {"-lineinfo", "--generate-line-info"},
    {"-G", "--device-debug"},
    {"-w", "--disable-warnings"},
    {"-default-device", "--device-as-default-execution-space"},
};

// The target is passed to compile() separately; these would contradict or duplicate it.
constexpr std::string_view kArchOptions[] = {"-arch", "--gpu-architecture", "-gencode", "--generate-code",
                                             "-code", "--gpu-code"};

// cuinline loads exactly one whole-program CUBIN (or PTX); these ask for something else.
constexpr std::string_view kOutputOptions[] = {"-ptx",
                                               "--ptx",
                                               "-cubin",
                                               "--cubin",
                                               "-fatbin",
                                               "--fatbin",
                                               "-dlto",
                                               "--dlink-time-opt",
                                               "-gen-opt-lto",
                                               "--gen-opt-lto",
                                               "-optix-ir",
                                               "--optix-ir",
                                               "-dc",
                                               "--device-c",
                                               "-fdevice-syntax-only",
                                               "--fdevice-syntax-only",
                                               "-lto",
                                               "-ltoir"};

// Matches `s` against one spelling of a value option. Returns true when it matched; `value` is
// then the attached value (possibly empty: it is the next element).
bool match_value_option(std::string_view s, std::string_view name, bool attached, std::string_view& value) {
  if (!starts_with(s, name)) return false;
  std::string_view rest = s.substr(name.size());
  if (rest.empty()) {
    value = {};
    return true;
  }
  if (rest.front() == '=') {
    value = rest.substr(1);
    return true;
  }
  if (is_space(rest.front()) || attached) {
    value = trim(rest);
    return true;
  }
  return false;
}

std::string_view option_name(std::string_view s) {
  const auto end = s.find_first_of("= \t");
  return s.substr(0, end);
}

void reject_unsupported(std::string_view s) {
  const std::string_view name = option_name(s);
  for (std::string_view arch : kArchOptions) {
    if (name == arch) {
      throw InvalidArgument("option '" + std::string(s) +
                            "' sets the architecture; pass the target architecture to compile() instead");
    }
  }
  for (std::string_view output : kOutputOptions) {
    if (name == output) {
      throw InvalidArgument("option '" + std::string(s) +
                            "' asks for output cuinline does not produce (it loads one whole-program "
                            "CUBIN or PTX)");
    }
  }
  if (name == "-rdc" || name == "--relocatable-device-code") {
    const std::string_view value = trim(s.substr(name.size()));
    if (value != "=false") {
      throw InvalidArgument("option '" + std::string(s) +
                            "' asks for relocatable device code, which cuinline does not link");
    }
  }
}

}  // namespace

void for_each_canonical_option(const std::vector<std::string>& options, OptionSink& sink) {
  for (std::size_t i = 0; i < options.size(); ++i) {
    const std::string_view s = trim(options[i]);
    if (s.empty()) {
      throw InvalidArgument("empty compile option at position " + std::to_string(i));
    }
    bool handled = false;
    for (const ValueOption& opt : kValueOptions) {
      std::string_view value;
      if (!match_value_option(s, opt.long_name, false, value) &&
          !match_value_option(s, opt.short_name, opt.short_is_attached, value)) {
        continue;
      }
      if (value.empty()) {
        // "-D" "X": the value is the next element.
        if (i + 1 >= options.size() || trim(options[i + 1]).empty()) {
          throw InvalidArgument("compile option '" + std::string(s) + "' needs a value");
        }
        value = trim(options[++i]);
      }
      sink.option(opt.canonical, value);
      handled = true;
      break;
    }
    if (handled) continue;
    reject_unsupported(s);
    std::string_view canonical = s;
    for (const Alias& alias : kAliases) {
      if (s == alias.spelling) canonical = alias.canonical;
    }
    sink.option({}, canonical);
  }
}

const std::vector<std::string>& keyed_default_options() {
  // --no-source-include: otherwise NVRTC searches the current directory for #include "x", which
  // would make the binary depend on files the cache key does not see.
  static const std::vector<std::string> options = {"-std=c++17", "--no-source-include"};
  return options;
}

bool is_std_option(std::string_view canonical) {
  return starts_with(canonical, "-std=");
}

namespace {

bool has_cuda_headers(const std::filesystem::path& dir) {
  std::error_code ec;
  return !dir.empty() && std::filesystem::exists(dir / "cuda_fp16.h", ec);
}

// NVRTC 13 does not carry <cuda_fp16.h>/<cuda_bf16.h>; they come from the toolkit's include
// directory: the one found at build time, else the usual environment variables.
std::vector<std::string> find_toolkit_include_options() {
  std::vector<std::string> out;
#ifdef CUINLINE_CUDA_INCLUDE_DIR
  std::string_view dirs = CUINLINE_CUDA_INCLUDE_DIR;
  while (!dirs.empty()) {
    const auto end = dirs.find(';');
    const std::string dir(dirs.substr(0, end));
    if (has_cuda_headers(dir)) out.push_back("-I" + dir);
    dirs = end == std::string_view::npos ? std::string_view{} : dirs.substr(end + 1);
  }
#endif
  if (!out.empty()) return out;
  for (const char* var : {"CUDA_PATH", "CUDA_HOME"}) {
    const char* root = std::getenv(var);
    if (root != nullptr && has_cuda_headers(std::filesystem::path(root) / "include")) {
      return {"-I" + (std::filesystem::path(root) / "include").string()};
    }
  }
  if (has_cuda_headers("/usr/local/cuda/include")) return {"-I/usr/local/cuda/include"};
  logger()->debug("no CUDA toolkit include directory found; <cuda_fp16.h> and <cuda_bf16.h> are unavailable");
  return out;
}

}  // namespace
}  // namespace detail

std::vector<std::string> canonical_options(const std::vector<std::string>& options) {
  struct Collect final : detail::OptionSink {
    std::vector<std::string> out;
    void option(std::string_view prefix, std::string_view value) override {
      std::string text;
      text.reserve(prefix.size() + value.size());
      text.append(prefix).append(value);
      out.push_back(std::move(text));
    }
  } collect;
  collect.out.reserve(options.size());
  detail::for_each_canonical_option(options, collect);
  return std::move(collect.out);
}

const std::vector<std::string>& default_options() {
  static const std::vector<std::string> options = [] {
    std::vector<std::string> out = detail::keyed_default_options();
    for (std::string& include : detail::find_toolkit_include_options()) out.push_back(std::move(include));
    return out;
  }();
  return options;
}

}  // namespace cuinline
