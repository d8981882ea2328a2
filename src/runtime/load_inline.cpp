#include "cuinline/load_inline.hpp"

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/log.hpp"
#include "cuinline/driver.hpp"
#include "cuinline/error.hpp"

namespace cuinline {
namespace {

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

bool blank(const std::string& s) {
  for (char c : s) {
    if (!std::isspace(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

std::string read_header_file(const std::filesystem::path& path, const std::string& program) {
  // An ifstream opens a directory on Linux and then reads nothing: check the kind first.
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!ec && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    throw InvalidArgument("load_inline '" + program + "': header file '" + path.string() +
                          "' is not a regular file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw InvalidArgument("load_inline '" + program + "': cannot read header file '" + path.string() +
                          "': " + std::strerror(errno));
  }
  std::ostringstream content;
  content << in.rdbuf();
  if (in.bad()) {
    throw InvalidArgument("load_inline '" + program + "': error reading header file '" + path.string() + "'");
  }
  return content.str();
}

}  // namespace

CompileRequest make_inline_request(const InlineOptions& options) {
  if (options.name.empty()) throw InvalidArgument("load_inline: the name is empty");
  CompileRequest request;
  request.name = options.name + ".cu";
  bool has_code = false;
  for (const std::string& part : options.cuda_sources) {
    if (!request.source.empty() && request.source.back() != '\n') request.source += '\n';
    request.source += part;
    has_code = has_code || !blank(part);
  }
  if (!has_code) throw InvalidArgument("load_inline '" + options.name + "': the CUDA source is empty");

  request.headers = options.headers;
  for (const auto& path : options.header_files) {
    request.headers.push_back({path.filename().string(), read_header_file(path, options.name)});
  }
  for (const auto& header : request.headers) {
    if (header.name.empty())
      throw InvalidArgument("load_inline '" + options.name + "': a header has no name");
  }

  for (const auto& [name, value] : options.defines) {
    if (!is_identifier(name)) {
      throw InvalidArgument("load_inline '" + options.name + "': define '" + name +
                            "' is not a valid macro name");
    }
    if (value.find('\n') != std::string::npos) {
      throw InvalidArgument("load_inline '" + options.name + "': the value of define '" + name +
                            "' contains a newline");
    }
    request.options.push_back(value.empty() ? "-D" + name : "-D" + name + "=" + value);
  }
  request.options.insert(request.options.end(), options.extra_options.begin(), options.extra_options.end());

  for (const std::string& fn : options.functions) {
    if (fn.empty()) throw InvalidArgument("load_inline '" + options.name + "': a function name is empty");
    request.name_expressions.push_back(fn);
  }
  for (const std::string& expr : options.name_expressions) {
    if (expr.empty()) throw InvalidArgument("load_inline '" + options.name + "': a name expression is empty");
    request.name_expressions.push_back(expr);
  }
  return request;
}

Module load_inline(const InlineOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const CompileRequest request = make_inline_request(options);
  const Arch target =
      options.arch ? *options.arch : device_arch(options.device ? *options.device : current_device());
  KernelCache& cache = options.cache ? *options.cache : default_cache();
  CacheTier tier = CacheTier::compiled;
  Module module = cache.get(request, target, &tier);
  if (options.verbose) {
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::string opts;
    for (const auto& o : request.options) opts += (opts.empty() ? "" : " ") + o;
    logger()->info("load_inline '{}': {} for {} in {:.3f} ms (key {}), options: [{}]", options.name,
                   tier == CacheTier::compiled ? "compiled" : std::string(to_string(tier)) + " hit",
                   target.name(), ms, module.key().hex().substr(0, 16), opts);
    if (!module.program().log.empty())
      logger()->info("load_inline '{}': NVRTC log:\n{}", options.name, module.program().log);
  }
  return module;
}

}  // namespace cuinline
