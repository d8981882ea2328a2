// Bad input everywhere (docs/RELIABILITY.md §4): API arguments, options, sources, headers, archs,
// cache keys, entries and cache settings. Each case must end in a cuinline::Error of the expected
// type whose message names the bad value — never a crash, a hang, another exception type, a
// cache write of anything that failed. Cases with no expected type are observations (accepted, or
// any cuinline::Error). The test prints every case as a row of the table in RELIABILITY.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "cuinline/cuinline.hpp"
#include "hardening_support.hpp"
#include "stress_kernels.hpp"
#include "test_support.hpp"

namespace cuinline {
namespace {

using namespace test;

struct Case {
  const char* area;
  const char* input;  // what is wrong, for the table
  std::function<void(KernelCache&)> run;
  const char* expected_type;  // "InvalidArgument", "CompileError", "DriverError", "CacheError"
  std::string needle;         // must appear in what()
};

const char* type_of(const std::exception& e) {
  if (dynamic_cast<const InvalidArgument*>(&e)) return "InvalidArgument";
  if (dynamic_cast<const CompileError*>(&e)) return "CompileError";
  if (dynamic_cast<const DriverError*>(&e)) return "DriverError";
  if (dynamic_cast<const CacheError*>(&e)) return "CacheError";
  if (dynamic_cast<const Error*>(&e)) return "Error";
  return "not a cuinline::Error";
}

// A table cell: '|' would end it.
std::string markdown_cell(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

InlineOptions base(KernelCache& cache) {
  InlineOptions o;
  o.name = "probe";
  o.cuda_sources = {test::kStressTemplate};
  o.name_expressions = {"stress_t<1>"};
  o.arch = Arch::parse("sm_90");
  o.cache = &cache;
  return o;
}

// Runs `change` on a valid InlineOptions, then load_inline.
std::function<void(KernelCache&)> inline_with(std::function<void(InlineOptions&)> change) {
  return [change](KernelCache& cache) {
    InlineOptions o = base(cache);
    change(o);
    load_inline(o);
  };
}

std::function<void(KernelCache&)> compile_with(std::function<void(CompileRequest&, Arch&)> change) {
  return [change](KernelCache&) {
    CompileRequest r = stress_request(1);
    Arch arch = Arch::parse("sm_90");
    change(r, arch);
    compile(r, arch);
  };
}

std::vector<Case> cases() {
  using O = InlineOptions;
  return {
      {"load_inline", "no source", inline_with([](O& o) { o.cuda_sources.clear(); }), "InvalidArgument",
       "empty"},
      {"load_inline", "sources all whitespace", inline_with([](O& o) {
         o.cuda_sources = {" \n\t", ""};
       }),
       "InvalidArgument", "empty"},
      {"load_inline", "source with a NUL byte in it",
       inline_with([](O& o) { o.cuda_sources = {std::string("__global__ void k() {}\0junk", 27)}; }), "", ""},
      {"load_inline", "define name `1BAD NAME`", inline_with([](O& o) { o.defines["1BAD NAME"] = "1"; }),
       "InvalidArgument", "1BAD NAME"},
      {"load_inline", "define value with a newline", inline_with([](O& o) { o.defines["X"] = "1\n#error"; }),
       "InvalidArgument", "newline"},
      {"load_inline", "empty function name", inline_with([](O& o) { o.functions = {""}; }), "InvalidArgument",
       "empty"},
      {"load_inline", "empty name expression", inline_with([](O& o) { o.name_expressions = {""}; }),
       "InvalidArgument", "empty"},
      {"load_inline", "function not in the source", inline_with([](O& o) { o.functions = {"nope"}; }),
       "CompileError", "nope"},
      {"load_inline", "name expression `stress_t<<<1>`",
       inline_with([](O& o) { o.name_expressions = {"stress_t<<<1>"}; }), "CompileError", "stress_t<<<1>"},
      {"load_inline", "header with no name", inline_with([](O& o) {
         o.headers = {{"", "int x;"}};
       }),
       "InvalidArgument", "no name"},
      {"load_inline", "header file that does not exist",
       inline_with([](O& o) { o.header_files = {"/nonexistent/h.cuh"}; }), "InvalidArgument", "h.cuh"},
      {"load_inline", "header file that is a directory", inline_with([](O& o) { o.header_files = {"/tmp"}; }),
       "InvalidArgument", "tmp"},
      {"load_inline", "no arch and no driver (host without GPU)",
       [](KernelCache& cache) {
         if (driver_available()) throw DriverError(CUDA_ERROR_NO_DEVICE, "skipped: a driver is present");
         InlineOptions o = base(cache);
         o.arch.reset();
         load_inline(o);
       },
       "DriverError", ""},
      {"options", "empty option", inline_with([](O& o) { o.extra_options = {""}; }), "InvalidArgument",
       "empty"},
      {"options", "`-arch=sm_80` (the arch is a separate argument)",
       inline_with([](O& o) { o.extra_options = {"-arch=sm_80"}; }), "InvalidArgument", "-arch=sm_80"},
      {"options", "`--gpu-architecture=compute_90`",
       inline_with([](O& o) { o.extra_options = {"--gpu-architecture=compute_90"}; }), "InvalidArgument",
       "--gpu-architecture"},
      {"options", "`-ptx` (output kind)", inline_with([](O& o) { o.extra_options = {"-ptx"}; }), "", "-ptx"},
      {"options", "unknown `--no-such-option-xyz`",
       inline_with([](O& o) { o.extra_options = {"--no-such-option-xyz"}; }), "", "--no-such-option-xyz"},
      {"options", "`-D` with no macro", inline_with([](O& o) { o.extra_options = {"-D"}; }),
       "InvalidArgument", "-D"},
      {"source", "syntax error", inline_with([](O& o) { o.cuda_sources = {"__global__ void k( {"}; }),
       "CompileError", "probe"},
      {"source", "#error", inline_with([](O& o) { o.cuda_sources = {"#error stop here\n"}; }), "CompileError",
       "stop here"},
      {"source", "#include of a missing header",
       inline_with([](O& o) { o.cuda_sources = {"#include \"missing.cuh\"\n"}; }), "CompileError",
       "missing.cuh"},
      {"source", "1 MiB of `;`", inline_with([](O& o) { o.cuda_sources = {std::string(1 << 20, ';')}; }), "",
       ""},
      {"compile", "empty source", compile_with([](CompileRequest& r, Arch&) { r.source.clear(); }),
       "InvalidArgument", "empty"},
      {"compile", "arch sm_10 (unsupported)", compile_with([](CompileRequest&, Arch& a) {
         a = Arch{1, 0, '\0'};
       }),
       "InvalidArgument", "sm_10"},
      {"compile", "arch sm_80a (no 'a' before sm_90)", compile_with([](CompileRequest&, Arch& a) {
         a = Arch{8, 0, 'a'};
       }),
       "InvalidArgument", "sm_80a"},
      {"compile", "arch suffix 'z'", compile_with([](CompileRequest&, Arch& a) {
         a = Arch{9, 0, 'z'};
       }),
       "InvalidArgument", "suffix"},
      {"arch", "`sm90`", [](KernelCache&) { Arch::parse("sm90"); }, "InvalidArgument", "sm90"},
      {"arch", "empty string", [](KernelCache&) { Arch::parse(""); }, "InvalidArgument", ""},
      {"arch", "`sm_1000`", [](KernelCache&) { Arch::parse("sm_1000"); }, "InvalidArgument", "sm_1000"},
      {"arch", "`sm_90b`", [](KernelCache&) { Arch::parse("sm_90b"); }, "InvalidArgument", "sm_90b"},
      {"arch", "`sm_99999999999999999999`", [](KernelCache&) { Arch::parse("sm_99999999999999999999"); },
       "InvalidArgument", "sm_9999"},
      {"module", "kernel() of an empty Module", [](KernelCache&) { Module().kernel("k"); }, "", ""},
      {"module", "name() of an empty Kernel", [](KernelCache&) { (void)Kernel().name(); }, "", ""},
      {"cache", "list() of an unusable disk tier",
       [](KernelCache&) {
         CacheConfig c = config_at("/proc/cuinline-cannot-be-here");
         DiskCache disk(c);
         disk.list();
       },
       "CacheError", "cuinline-cannot-be-here"},
  };
}

TEST(BadInput, EveryCaseIsAClearErrorNeverACrash) {
  TempDir dir("bad-input");
  KernelCache cache(config_at(dir.path() / "cache"));
  LogCapture quiet;  // the warnings some cases log are expected
  std::printf("| area | bad input | result |\n|---|---|---|\n");
  for (const Case& c : cases()) {
    SCOPED_TRACE(std::string(c.area) + ": " + c.input);
    std::string result;
    try {
      c.run(cache);
      result = "accepted";
    } catch (const std::exception& e) {
      const std::string what = e.what();
      const std::string first_line = what.substr(0, what.find('\n'));
      result = std::string(type_of(e)) + ": " + first_line.substr(0, 160);
      if (const auto* compile_error = dynamic_cast<const CompileError*>(&e)) {
        // The first error line of NVRTC's log says what was wrong.
        const std::string& log = compile_error->log();
        const auto at = log.find("error");
        if (at != std::string::npos) {
          const auto begin = log.rfind('\n', at);
          const auto line_start = begin == std::string::npos ? 0 : begin + 1;
          result += " `" +
                    log.substr(line_start, std::min<std::size_t>(log.find('\n', at) - line_start, 120)) + "`";
        }
      }
      EXPECT_NE(std::string(type_of(e)), "not a cuinline::Error") << what;
      if (*c.expected_type != '\0' && what.rfind("skipped", 0) != 0) {
        EXPECT_EQ(type_of(e), std::string(c.expected_type)) << what;
      }
      EXPECT_NE(what.find(c.needle), std::string::npos)
          << "the message does not name '" << c.needle << "': " << what;
    }
    if (*c.expected_type != '\0') {
      EXPECT_NE(result, "accepted");
    }
    std::printf("| %s | %s | %s |\n", c.area, c.input, markdown_cell(result).c_str());
  }
  EXPECT_EQ(cache.stats().disk_writes, cache.stats().compiles) << "only successful compiles are written";
}

}  // namespace
}  // namespace cuinline
