#include <nvrtc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cuinline/compiler.hpp>
#include <cuinline/error.hpp>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/log.hpp"
#include "compiler/diagnostics.hpp"
#include "compiler/options.hpp"

namespace cuinline {

namespace {

std::string result_name(nvrtcResult result) {
  const char* text = nvrtcGetErrorString(result);
  return text != nullptr ? std::string(text) : "nvrtcResult " + std::to_string(static_cast<int>(result));
}

struct ProgramDeleter {
  void operator()(_nvrtcProgram* raw) const noexcept {
    nvrtcProgram program = raw;
    const nvrtcResult result = nvrtcDestroyProgram(&program);
    if (result != NVRTC_SUCCESS) {
      try {
        logger()->warn("nvrtcDestroyProgram failed ({})", result_name(result));
      } catch (...) {
      }
    }
  }
};
// The one owner of an nvrtcProgram: destroyed on every path out of compile(), throws included.
using ProgramPtr = std::unique_ptr<_nvrtcProgram, ProgramDeleter>;

// What compile() asks NVRTC for, given the requested target.
struct Plan {
  Arch arch;  // the arch the binary is built for
  BinaryKind kind = BinaryKind::cubin;
  std::string arch_option;
  std::string label;  // for messages: "sm_90", or "compute_121 (PTX for sm_130)"
};

std::string supported_list() {
  std::string out;
  for (const Arch& arch : nvrtc_supported_archs()) {
    if (!out.empty()) out += ' ';
    out += arch.name();
  }
  return out;
}

std::string version_text() {
  const NvrtcVersion v = nvrtc_version();
  return std::to_string(v.major) + "." + std::to_string(v.minor);
}

Plan plan_target(const Arch& target) {
  if ((target.suffix == 'a' && target.number() < 90) || (target.suffix == 'f' && target.number() < 100)) {
    throw InvalidArgument("arch " + target.name() +
                          " does not exist: arch-specific ('a') targets start at sm_90, family ('f') "
                          "targets at sm_100");
  }
  if (target.suffix != '\0' && target.suffix != 'a' && target.suffix != 'f') {
    throw InvalidArgument("arch " + target.name() + " has an unknown suffix");
  }
  const std::vector<Arch>& supported = nvrtc_supported_archs();
  if (!supported.empty() && target.number() > supported.back().number()) {
    // Newer than this NVRTC knows: PTX for the newest virtual arch, which the driver JIT-compiles.
    const Arch newest{supported.back().major, supported.back().minor, '\0'};
    logger()->info("arch {} is newer than NVRTC {} supports; compiling PTX for {}", target.name(),
                   version_text(), newest.virtual_name());
    return {newest, BinaryKind::ptx, "--gpu-architecture=" + newest.virtual_name(),
            newest.virtual_name() + " (PTX for " + target.name() + ")"};
  }
  for (const Arch& arch : supported) {
    if (arch.number() == target.number()) {
      return {target, BinaryKind::cubin, "--gpu-architecture=" + target.name(), target.name()};
    }
  }
  throw InvalidArgument("arch " + target.name() + " is not supported by NVRTC " + version_text() +
                        "; supported: " + supported_list());
}

std::string program_log(nvrtcProgram program) {
  std::size_t size = 0;
  if (nvrtcGetProgramLogSize(program, &size) != NVRTC_SUCCESS || size <= 1) return {};
  std::string log(size, '\0');
  if (nvrtcGetProgramLog(program, log.data()) != NVRTC_SUCCESS) return {};
  return detail::tidy_log(std::move(log));
}

std::string join(const std::vector<std::string>& options) {
  std::string out;
  for (const std::string& option : options) {
    if (!out.empty()) out += ' ';
    out += option;
  }
  return out;
}

// NVRTC creates a lock of its own on a process's first compile without synchronizing that creation:
// two threads making the first compiles at once race on it (ThreadSanitizer in the stress test's
// workers, NVRTC 13.0). So the process's first compile runs alone; NVRTC serializes a process's
// compiles anyway, so no caller waits longer for it than it would have.
nvrtcResult compile_program(nvrtcProgram program, int count, const char* const* options) {
  static std::atomic<bool> started{false};
  if (started.load(std::memory_order_acquire)) return nvrtcCompileProgram(program, count, options);
  static std::mutex first;
  const std::lock_guard<std::mutex> lock(first);
  const nvrtcResult result = nvrtcCompileProgram(program, count, options);
  started.store(true, std::memory_order_release);
  return result;
}

// State for one compile(), so every error can carry the same facts.
class Compilation {
 public:
  Compilation(const CompileRequest& request, Plan plan, std::vector<std::string> options)
      : request_(request), plan_(std::move(plan)), options_(std::move(options)) {}

  CompiledProgram run() {
    const auto start = std::chrono::steady_clock::now();
    ProgramPtr program = create();
    for (const std::string& expression : request_.name_expressions) {
      const nvrtcResult result = nvrtcAddNameExpression(program.get(), expression.c_str());
      if (result != NVRTC_SUCCESS) {
        fail(result, headline() + ": adding name expression '" + expression + "' failed (" +
                         result_name(result) + ")");
      }
    }

    std::vector<const char*> option_ptrs;
    option_ptrs.reserve(options_.size());
    for (const std::string& option : options_) option_ptrs.push_back(option.c_str());
    const nvrtcResult result =
        compile_program(program.get(), static_cast<int>(option_ptrs.size()), option_ptrs.data());
    std::string log = program_log(program.get());
    if (result == NVRTC_ERROR_INVALID_OPTION) fail_option(result, log);
    if (result != NVRTC_SUCCESS) {
      fail(result,
           detail::describe_compile_failure(headline() + " failed (" + result_name(result) + ")", log,
                                            request_),
           log);
    }

    CompiledProgram out;
    out.kind = plan_.kind;
    out.arch = plan_.arch;
    out.program_name = request_.name;
    out.lowered_names.reserve(request_.name_expressions.size());
    for (const std::string& expression : request_.name_expressions) {
      const char* lowered = nullptr;
      const nvrtcResult lr = nvrtcGetLoweredName(program.get(), expression.c_str(), &lowered);
      if (lr != NVRTC_SUCCESS || lowered == nullptr) {
        fail(lr,
             headline() + ": name expression '" + expression + "' has no lowered name (" + result_name(lr) +
                 ")",
             log);
      }
      out.lowered_names.emplace_back(expression, lowered);
    }
    out.binary = binary(program.get(), log);
    out.log = std::move(log);

    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    logger()->debug("compiled '{}' for {} in {:.1f} ms ({} bytes)", request_.name, plan_.label, ms,
                    out.binary.size());
    if (!out.log.empty()) logger()->debug("NVRTC log for '{}':\n{}", request_.name, out.log);
    return out;
  }

 private:
  std::string headline() const { return "compiling '" + request_.name + "' for " + plan_.label; }

  [[noreturn]] void fail(nvrtcResult result, const std::string& message, std::string log = {}) const {
    throw CompileError(message, static_cast<int>(result), request_.name, std::move(log), options_,
                       number_source_lines(request_.source));
  }

  [[noreturn]] void fail_option(nvrtcResult result, const std::string& log) const {
    // Name the option NVRTC complains about: the first one the log quotes whole, else the first
    // whose name (before '=') it mentions.
    std::string culprit;
    for (const std::string& option : options_) {
      if (log.find(option) != std::string::npos) {
        culprit = option;
        break;
      }
    }
    for (const std::string& option : options_) {
      if (!culprit.empty()) break;
      if (log.find(option.substr(0, option.find('='))) != std::string::npos) culprit = option;
    }
    std::string message = headline() + ": NVRTC rejected " +
                          (culprit.empty() ? std::string("an option") : "option '" + culprit + "'") + " (" +
                          result_name(result) + "):\n" + log + "\noptions: " + join(options_) + "\n";
    fail(result, message, log);
  }

  ProgramPtr create() const {
    std::vector<const char*> contents;
    std::vector<const char*> names;
    contents.reserve(request_.headers.size());
    names.reserve(request_.headers.size());
    for (const Header& header : request_.headers) {
      contents.push_back(header.content.c_str());
      names.push_back(header.name.c_str());
    }
    nvrtcProgram raw = nullptr;
    const nvrtcResult result =
        nvrtcCreateProgram(&raw, request_.source.c_str(), request_.name.c_str(),
                           static_cast<int>(contents.size()), contents.data(), names.data());
    ProgramPtr program(raw);
    if (result != NVRTC_SUCCESS || raw == nullptr) {
      fail(result, headline() + ": nvrtcCreateProgram failed (" + result_name(result) + ")");
    }
    return program;
  }

  std::vector<char> binary(nvrtcProgram program, const std::string& log) const {
    const bool ptx = plan_.kind == BinaryKind::ptx;
    std::size_t size = 0;
    nvrtcResult result = ptx ? nvrtcGetPTXSize(program, &size) : nvrtcGetCUBINSize(program, &size);
    if (result == NVRTC_SUCCESS && size == 0) result = NVRTC_ERROR_INTERNAL_ERROR;
    std::vector<char> out(size);
    if (result == NVRTC_SUCCESS)
      result = ptx ? nvrtcGetPTX(program, out.data()) : nvrtcGetCUBIN(program, out.data());
    if (result != NVRTC_SUCCESS) {
      fail(result,
           headline() + ": getting the " + (ptx ? "PTX" : "CUBIN") + " failed (" + result_name(result) + ")",
           log);
    }
    if (ptx && out.back() != '\0') out.push_back('\0');
    return out;
  }

  const CompileRequest& request_;
  Plan plan_;
  std::vector<std::string> options_;
};

bool is_blank(const std::string& text) {
  return text.find_first_not_of(" \t\r\n\f\v") == std::string::npos;
}

}  // namespace

NvrtcVersion nvrtc_version() {
  static const NvrtcVersion version = [] {
    NvrtcVersion v;
    const nvrtcResult result = nvrtcVersion(&v.major, &v.minor);
    if (result != NVRTC_SUCCESS) {
      throw CompileError("querying the NVRTC version failed (" + result_name(result) + ")",
                         static_cast<int>(result), {}, {}, {}, {});
    }
    return v;
  }();
  return version;
}

const std::vector<Arch>& nvrtc_supported_archs() {
  static const std::vector<Arch> archs = [] {
    int count = 0;
    nvrtcResult result = nvrtcGetNumSupportedArchs(&count);
    std::vector<int> numbers(count > 0 ? static_cast<std::size_t>(count) : 0);
    if (result == NVRTC_SUCCESS && count > 0) result = nvrtcGetSupportedArchs(numbers.data());
    if (result != NVRTC_SUCCESS) {
      throw CompileError("querying the architectures NVRTC supports failed (" + result_name(result) + ")",
                         static_cast<int>(result), {}, {}, {}, {});
    }
    std::vector<Arch> out;
    out.reserve(numbers.size());
    for (int number : numbers) out.push_back(Arch{number / 10, number % 10, '\0'});
    std::sort(out.begin(), out.end());
    return out;
  }();
  return archs;
}

std::optional<std::string> CompiledProgram::lowered_name(std::string_view expression) const {
  for (const auto& [name, lowered] : lowered_names) {
    if (name == expression) return lowered;
  }
  return std::nullopt;
}

Arch compile_target(const CompileRequest& request, const Arch& target) {
  if (!request.arch_specific || target.suffix != '\0' || target.number() < 90) return target;
  return Arch{target.major, target.minor, 'a'};
}

CompiledProgram compile(const CompileRequest& request, const Arch& requested) {
  const Arch target = compile_target(request, requested);
  if (request.name.empty()) throw InvalidArgument("compile: the program name is empty");
  if (is_blank(request.source)) {
    throw InvalidArgument("compiling '" + request.name + "': the source is empty");
  }
  for (const Header& header : request.headers) {
    if (header.name.empty()) throw InvalidArgument("compiling '" + request.name + "': a header has no name");
  }
  for (const std::string& expression : request.name_expressions) {
    if (is_blank(expression)) {
      throw InvalidArgument("compiling '" + request.name + "': a name expression is empty");
    }
  }
  std::vector<std::string> user_options = canonical_options(request.options);
  Plan plan = plan_target(target);

  bool user_sets_std = false;
  for (const std::string& option : user_options)
    user_sets_std = user_sets_std || detail::is_std_option(option);
  std::vector<std::string> options;
  options.reserve(1 + default_options().size() + user_options.size());
  options.push_back(plan.arch_option);
  for (const std::string& option : default_options()) {
    if (!(user_sets_std && detail::is_std_option(option))) options.push_back(option);
  }
  for (std::string& option : user_options) options.push_back(std::move(option));

  return Compilation(request, std::move(plan), std::move(options)).run();
}

}  // namespace cuinline
