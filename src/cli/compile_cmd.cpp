// cuinline compile FILE.cu: one file to CUBIN (or PTX), like nvcc -cubin, with NVRTC's log and the
// numbered source lines it points at on failure.

#include <nvrtc.h>

#include <cstdio>
#include <cuinline/compiler.hpp>
#include <cuinline/driver.hpp>
#include <cuinline/error.hpp>
#include <memory>
#include <regex>
#include <set>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/spec.hpp"
#include "cli/util.hpp"

namespace cuinline::cli {
namespace {

Arch target_arch(const std::string& text) {
  if (!text.empty()) {
    try {
      return Arch::parse(text);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(std::string("--arch: ") + e.what());
    }
  }
  if (device_count() == 0) {
    throw Error("no GPU to take the architecture from (" +
                (driver_available() ? std::string("no device") : driver_unavailable_reason()) +
                "); pass --arch, e.g. --arch sm_90");
  }
  return device_arch(0);
}

void check_nvrtc(nvrtcResult result, const char* what) {
  if (result != NVRTC_SUCCESS) {
    throw Error(std::string(what) + ": " + nvrtcGetErrorString(result));
  }
}

// PTX for the virtual arch of `arch`: compile() produces CUBIN, so this one goes to NVRTC directly,
// with the same options cuinline uses.
CompiledProgram compile_to_ptx(const CompileRequest& request, const Arch& arch) {
  std::vector<std::string> options = canonical_options(request.options);
  for (const auto& option : default_options()) options.push_back(option);
  options.push_back("-arch=" + arch.virtual_name());

  nvrtcProgram raw = nullptr;
  check_nvrtc(nvrtcCreateProgram(&raw, request.source.c_str(), request.name.c_str(), 0, nullptr, nullptr),
              "nvrtcCreateProgram");
  struct Destroy {
    void operator()(nvrtcProgram* p) const noexcept { nvrtcDestroyProgram(p); }
  };
  std::unique_ptr<nvrtcProgram, Destroy> program(&raw);
  for (const auto& expression : request.name_expressions) {
    check_nvrtc(nvrtcAddNameExpression(raw, expression.c_str()), "nvrtcAddNameExpression");
  }
  std::vector<const char*> argv;
  for (const auto& option : options) argv.push_back(option.c_str());
  nvrtcResult result = nvrtcCompileProgram(raw, static_cast<int>(argv.size()), argv.data());
  std::size_t log_size = 0;
  nvrtcGetProgramLogSize(raw, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 0) nvrtcGetProgramLog(raw, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  if (result != NVRTC_SUCCESS) {
    throw CompileError("compiling " + request.name + " to PTX for " + arch.virtual_name() + ": " +
                           nvrtcGetErrorString(result),
                       static_cast<int>(result), request.name, log, options,
                       number_source_lines(request.source));
  }
  CompiledProgram out;
  out.kind = BinaryKind::ptx;
  out.arch = arch;
  out.program_name = request.name;
  out.log = log;
  std::size_t ptx_size = 0;
  check_nvrtc(nvrtcGetPTXSize(raw, &ptx_size), "nvrtcGetPTXSize");
  out.binary.resize(ptx_size);
  check_nvrtc(nvrtcGetPTX(raw, out.binary.data()), "nvrtcGetPTX");
  for (const auto& expression : request.name_expressions) {
    const char* lowered = nullptr;
    check_nvrtc(nvrtcGetLoweredName(raw, expression.c_str(), &lowered), "nvrtcGetLoweredName");
    out.lowered_names.emplace_back(expression, lowered ? lowered : "");
  }
  return out;
}

// The numbered source lines the log's "name(LINE): error" diagnostics point at.
std::string referenced_lines(const CompileError& e) {
  std::set<long> lines;
  std::regex diagnostic(R"(\((\d+)\): (error|warning|catastrophic error))");
  for (std::sregex_iterator it(e.log().begin(), e.log().end(), diagnostic), end; it != end; ++it) {
    lines.insert(std::stol((*it)[1].str()));
  }
  std::istringstream numbered(e.numbered_source());
  std::string line, out;
  for (long n = 1; std::getline(numbered, line); ++n) {
    if (lines.count(n)) out += line + "\n";
  }
  return out;
}

}  // namespace

int run_compile(const CompileOptions& options) {
  std::filesystem::path file(options.file);
  CompileRequest request;
  request.name = options.file;  // diagnostics read "FILE.cu(12): error: ..."
  request.source = read_text_file(file, "compile");
  if (request.source.empty()) throw InvalidArgument("compile: '" + options.file + "' is empty");
  request.name_expressions = options.kernels;
  for (const auto& define : options.defines) request.options.push_back("-D" + define);
  for (const auto& dir : options.include_dirs) request.options.push_back("-I" + dir);
  // nvcc finds "quoted" includes next to the file; NVRTC only sees a string, so say where it was.
  std::filesystem::path dir = file.parent_path().empty() ? std::filesystem::path(".") : file.parent_path();
  request.options.push_back("-I" + dir.string());
  for (const auto& option : options.options) {
    // "-X=--use_fast_math" reaches us as "=--use_fast_math".
    request.options.push_back(option.size() > 1 && option[0] == '=' ? option.substr(1) : option);
  }
  Arch arch = target_arch(options.arch);

  CompiledProgram program;
  try {
    program = options.ptx ? compile_to_ptx(request, arch) : compile(request, arch);
  } catch (const CompileError& e) {
    // The library's message already carries the log and the numbered lines around the first
    // error; add what is missing when it does not.
    std::string what = e.what();
    std::fprintf(stderr, "%s\n", what.c_str());
    if (!e.log().empty() && what.find(e.log()) == std::string::npos) {
      std::fprintf(stderr, "%s\n", e.log().c_str());
      std::string lines = referenced_lines(e);
      if (!lines.empty()) std::fprintf(stderr, "\nsource lines referenced above:\n%s", lines.c_str());
    }
    return kExitFailure;
  }
  if (!program.log.empty()) std::fprintf(stderr, "%s\n", program.log.c_str());

  bool ptx = program.kind == BinaryKind::ptx;
  std::string output = options.output;
  if (output.empty()) output = file.stem().string() + (ptx ? ".ptx" : ".cubin");
  std::size_t size = program.binary.size();
  if (ptx && size > 0 && program.binary.back() == '\0') --size;  // a .ptx file holds the text only
  // A new file renamed over the output: a symlink someone planted at OUT is replaced, not written through.
  write_output_file(output, std::string_view(program.binary.data(), size));
  if (ptx && !options.ptx) {
    std::fprintf(stderr, "note: %s is newer than this NVRTC supports: wrote PTX for %s instead of CUBIN\n",
                 arch.name().c_str(), program.arch.virtual_name().c_str());
  }
  std::printf("wrote %s (%zu bytes, %s %s)\n", output.c_str(), size, ptx ? "PTX" : "CUBIN",
              ptx ? program.arch.virtual_name().c_str() : program.arch.name().c_str());
  for (const auto& [expression, lowered] : program.lowered_names) {
    std::printf("  %s -> %s\n", expression.c_str(), lowered.c_str());
  }
  return kExitOk;
}

}  // namespace cuinline::cli
