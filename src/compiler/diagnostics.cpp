#include "compiler/diagnostics.hpp"

#include <algorithm>
#include <cstdio>
#include <utility>

namespace cuinline {

namespace {

constexpr int kContextLines = 2;
constexpr std::size_t kMaxExcerpts = 5;

// Splits into lines without the '\n' (and a trailing '\r'); a final newline does not start a line.
std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    auto end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    start = end + 1;
  }
  return lines;
}

void append_numbered_line(std::string& out, std::size_t number, std::string_view line, const char* marker) {
  char prefix[40];
  std::snprintf(prefix, sizeof prefix, "%s%5zu | ", marker, number);
  out.append(prefix).append(line).push_back('\n');
}

// A location the log reports: "<file>(<line>): error ...".
struct Location {
  std::string file;
  std::size_t line = 0;
};

std::vector<Location> error_locations(std::string_view log) {
  std::vector<Location> out;
  for (std::string_view line : split_lines(log)) {
    const auto close = line.find("): ");
    if (close == std::string_view::npos) continue;
    const auto open = line.rfind('(', close);
    if (open == std::string_view::npos || open == 0 || open + 1 == close) continue;
    std::size_t number = 0;
    bool digits = true;
    for (char c : line.substr(open + 1, close - open - 1)) {
      if (c < '0' || c > '9') {
        digits = false;
        break;
      }
      number = number * 10 + static_cast<std::size_t>(c - '0');
    }
    const std::string_view what = line.substr(close + 3);
    if (!digits || number == 0 || what.find("error") == std::string_view::npos) continue;
    Location loc{std::string(line.substr(0, open)), number};
    const bool seen = std::any_of(
        out.begin(), out.end(), [&](const Location& l) { return l.file == loc.file && l.line == loc.line; });
    if (!seen) out.push_back(std::move(loc));
  }
  return out;
}

const std::string* text_of(const std::string& file, const CompileRequest& request) {
  if (file == request.name) return &request.source;
  for (const Header& header : request.headers) {
    if (header.name == file) return &header.content;
  }
  return nullptr;
}

}  // namespace

std::string number_source_lines(std::string_view source) {
  std::string out;
  out.reserve(source.size() + source.size() / 8 + 16);
  std::size_t number = 0;
  for (std::string_view line : split_lines(source)) append_numbered_line(out, ++number, line, "");
  return out;
}

namespace detail {

std::string tidy_log(std::string log) {
  while (!log.empty() &&
         (log.back() == '\0' || log.back() == '\n' || log.back() == ' ' || log.back() == '\r')) {
    log.pop_back();
  }
  return log;
}

std::vector<std::string> failed_name_expressions(std::string_view log, const CompileRequest& request) {
  // NVRTC compiles name expressions as "#pragma nv_mangled_name <expr>" in a pseudo-file
  // __nv_name_map and echoes that line under each error it reports there.
  constexpr std::string_view kPragma = "#pragma nv_mangled_name ";
  std::vector<std::string> out;
  for (std::string_view line : split_lines(log)) {
    const auto at = line.find(kPragma);
    if (at == std::string_view::npos) continue;
    std::string_view expr = line.substr(at + kPragma.size());
    while (!expr.empty() && (expr.back() == ' ' || expr.back() == '\t')) expr.remove_suffix(1);
    for (const std::string& requested : request.name_expressions) {
      if (requested == expr && std::find(out.begin(), out.end(), requested) == out.end()) {
        out.push_back(requested);
      }
    }
  }
  return out;
}

std::string describe_compile_failure(std::string_view headline, std::string_view log,
                                     const CompileRequest& request) {
  std::string out(headline);
  out.append(":\n").append(log);
  if (!log.empty() && log.back() != '\n') out.push_back('\n');

  std::size_t shown = 0;
  for (const Location& loc : error_locations(log)) {
    if (shown == kMaxExcerpts) break;
    const std::string* text = text_of(loc.file, request);
    if (text == nullptr) continue;
    const std::vector<std::string_view> lines = split_lines(*text);
    if (loc.line > lines.size()) continue;
    const std::size_t first = loc.line > kContextLines ? loc.line - kContextLines : 1;
    const std::size_t last = std::min(lines.size(), loc.line + kContextLines);
    out.append("\n").append(loc.file).append(" around line ").append(std::to_string(loc.line)).append(":\n");
    for (std::size_t n = first; n <= last; ++n)
      append_numbered_line(out, n, lines[n - 1], n == loc.line ? "> " : "  ");
    ++shown;
  }

  const std::vector<std::string> bad_names = failed_name_expressions(log, request);
  if (!bad_names.empty()) {
    out.append("\nname expressions that do not name anything in the program:");
    for (const std::string& name : bad_names) out.append(" '").append(name).append("'");
    out.push_back('\n');
  }
  return out;
}

}  // namespace detail
}  // namespace cuinline
