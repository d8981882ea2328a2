#include "cli/spec_confine.hpp"

#include <algorithm>
#include <cuinline/error.hpp>
#include <deque>
#include <optional>
#include <set>
#include <system_error>

#include "cli/spec.hpp"

namespace cuinline::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kAllow = " (pass --allow-outside-paths to read files from anywhere)";
// A spec's sources may include this many files of its directory, not more.
constexpr std::size_t kMaxIncludedFiles = 10000;

// `path` made absolute (against the working directory, as NVRTC and open() see it), its symlinks
// resolved as far as it exists.
fs::path resolved(const fs::path& path) {
  std::error_code ec;
  const fs::path absolute = fs::absolute(path, ec);
  if (ec) return path.lexically_normal();
  const fs::path canonical = fs::weakly_canonical(absolute, ec);
  return ec ? absolute.lexically_normal() : canonical;
}

bool is_within(const fs::path& path, const fs::path& root) {
  const fs::path relative = path.lexically_relative(root);
  return !relative.empty() && *relative.begin() != "..";
}

bool is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\f' || c == '\v' || c == '\r';
}

bool is_identifier_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$';
}

// One pass of find_include_directives. `trigraph_splices`: "??/" before a line break splices lines
// too (C++11 mode reads trigraphs; C++17 does not, so both readings are scanned).
void scan_directives(std::string_view raw, bool trigraph_splices, std::vector<IncludeDirective>& out) {
  // Translation phase 2: a backslash right before a line break joins the lines. `splices` holds the
  // positions in `text` where one was removed, for the physical line numbers.
  std::string text;
  text.reserve(raw.size());
  std::vector<std::size_t> splices;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    std::size_t after = std::string_view::npos;
    if (raw[i] == '\\') after = i + 1;
    if (trigraph_splices && raw.compare(i, 3, "?\?/") == 0) after = i + 3;
    if (after != std::string_view::npos) {
      if (raw.compare(after, 1, "\n") == 0) {
        splices.push_back(text.size());
        i = after;
        continue;
      }
      if (raw.compare(after, 2, "\r\n") == 0) {
        splices.push_back(text.size());
        i = after + 1;
        continue;
      }
    }
    text.push_back(raw[i]);
  }
  // Skips blanks and /* */ comments from `p`; npos when a comment does not end.
  auto skip_space = [&text](std::size_t p) {
    while (p < text.size()) {
      if (is_blank(text[p])) {
        ++p;
      } else if (text.compare(p, 2, "/*") == 0) {
        const std::size_t end = text.find("*/", p + 2);
        if (end == std::string::npos) return std::string::npos;
        p = end + 2;
      } else {
        break;
      }
    }
    return p;
  };
  std::size_t line = 1, counted = 0, splice = 0;
  for (std::size_t pos = 0; pos < text.size(); ++pos) {
    std::size_t hash_len = 0;
    if (text[pos] == '#')
      hash_len = 1;
    else if (text.compare(pos, 2, "%:") == 0)
      hash_len = 2;
    else if (text.compare(pos, 3, "?\?=") == 0)
      hash_len = 3;
    if (hash_len == 0) continue;
    // First on its line, or after the end of a comment (that may have begun the line).
    std::size_t back = pos;
    while (back > 0 && is_blank(text[back - 1])) --back;
    const bool first =
        back == 0 || text[back - 1] == '\n' || (back >= 2 && text.compare(back - 2, 2, "*/") == 0);
    if (!first) continue;
    std::size_t p = skip_space(pos + hash_len);
    if (p == std::string::npos) continue;
    std::size_t name_end = p;
    while (name_end < text.size() && is_identifier_char(text[name_end])) ++name_end;
    const std::string directive = text.substr(p, name_end - p);
    if (directive != "include" && directive != "include_next" && directive != "import" &&
        directive != "embed")
      continue;
    IncludeDirective found;
    for (; counted < pos; ++counted) line += text[counted] == '\n' ? 1 : 0;
    while (splice < splices.size() && splices[splice] <= pos) ++splice;
    found.line = line + splice;
    found.directive = directive;
    const std::size_t line_end = std::min(text.find('\n', pos), text.size());
    found.text = text.substr(pos, std::min<std::size_t>(line_end - pos, 200));
    while (!found.text.empty() && is_blank(found.text.back())) found.text.pop_back();
    p = skip_space(name_end);
    const char open = p == std::string::npos || p >= text.size() ? '\0' : text[p];
    const std::size_t close = open == '"'   ? text.find('"', p + 1)
                              : open == '<' ? text.find('>', p + 1)
                                            : std::string::npos;
    if (close == std::string::npos || close > line_end || close == p + 1) {
      found.computed = true;
    } else {
      found.name = text.substr(p + 1, close - p - 1);
      found.angled = open == '<';
    }
    out.push_back(std::move(found));
  }
}

}  // namespace

std::vector<IncludeDirective> find_include_directives(std::string_view text) {
  std::vector<IncludeDirective> out;
  scan_directives(text, false, out);
  if (text.find("?\?/") != std::string_view::npos) {
    std::vector<IncludeDirective> more;
    scan_directives(text, true, more);
    for (auto& d : more) {
      const bool seen = std::any_of(out.begin(), out.end(), [&](const IncludeDirective& o) {
        return o.line == d.line && o.name == d.name && o.computed == d.computed;
      });
      if (!seen) out.push_back(std::move(d));
    }
  }
  return out;
}

SpecConfinement::SpecConfinement(const fs::path& spec_directory)
    : shown_(spec_directory.empty() ? std::string(".") : spec_directory.string()),
      directory_(resolved(spec_directory.empty() ? fs::path(".") : spec_directory)) {
  // The toolkit's include directories that compile() puts on every include path (<cuda_fp16.h>, ...).
  for (const std::string& option : default_options()) {
    if (option.rfind("-I", 0) == 0 && option.size() > 2) toolkit_.push_back(resolved(option.substr(2)));
  }
}

bool SpecConfinement::inside_directory(const fs::path& path) const {
  return is_within(path, directory_);
}

bool SpecConfinement::inside_toolkit(const fs::path& path) const {
  return std::any_of(toolkit_.begin(), toolkit_.end(),
                     [&](const fs::path& root) { return is_within(path, root); });
}

std::string SpecConfinement::outside_message() const {
  return ", outside the spec's directory '" + shown_ + "'" + kAllow;
}

fs::path SpecConfinement::resolve_spec_file(const std::string& name, const std::string& field) const {
  const fs::path target = resolved(directory_ / name);
  if (fs::path(name).is_absolute() || !inside_directory(target)) {
    throw InvalidArgument(field + ": '" + name + "' is outside the spec's directory '" + shown_ + "'" +
                          kAllow);
  }
  return target;
}

void SpecConfinement::check_program(const CompileRequest& request, const std::string& entry_path,
                                    const std::string& source_label, const fs::path& source_path,
                                    const std::vector<fs::path>& header_paths) const {
  std::vector<std::string> options;
  try {
    options = canonical_options(request.options);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(entry_path + ".options: " + e.what());
  }
  // Options that name files or directories: each must lie inside the directory.
  std::vector<fs::path> include_dirs;         // as NVRTC gets them: relative to the working directory
  std::vector<std::string> pre_includes;      // the files
  std::vector<std::string> pre_include_text;  // the options, for messages
  bool pch = false, pch_dir = false;
  for (std::size_t i = 0; i < options.size(); ++i) {
    const std::string& option = options[i];
    const std::string where = entry_path + ".options: '" + option + "'";
    auto require_inside = [&](const std::string& path, const char* verb) {
      const fs::path target = resolved(path);
      if (!inside_directory(target))
        throw InvalidArgument(where + " " + verb + " '" + target.string() + "'" + outside_message());
    };
    if (option.rfind("-I", 0) == 0) {
      require_inside(option.substr(2), "reads the directory");
      include_dirs.push_back(option.substr(2));
      continue;
    }
    if (option.rfind("--pre-include=", 0) == 0) {
      pre_includes.push_back(option.substr(14));
      pre_include_text.push_back(where);
      continue;
    }
    // The other spellings NVRTC reads: -opt, --opt, with '_' for '-', the value after '=' or next.
    const std::size_t name_end = option.find_first_of("= \t");
    std::string name = option.substr(0, name_end);
    name.erase(0, name.find_first_not_of('-'));
    std::replace(name.begin(), name.end(), '_', '-');
    auto value = [&]() -> std::string {
      if (name_end != std::string::npos) {
        const std::size_t at = option.find_first_not_of("= \t", name_end);
        return at == std::string::npos ? std::string() : option.substr(at);
      }
      return i + 1 < options.size() ? options[++i] : std::string();
    };
    if (name == "preinclude" || name == "include" || name == "pre-include") {
      pre_includes.push_back(value());
      pre_include_text.push_back(where);
    } else if (name == "include-path") {
      const std::string dir = value();
      require_inside(dir, "reads the directory");
      include_dirs.push_back(dir);
    } else if (name == "use-pch") {
      require_inside(value(), "reads");
    } else if (name == "pch-dir") {
      require_inside(value(), "reads and writes the directory");
      pch_dir = true;
    } else if (name == "create-pch" || name == "time" || name == "fdevice-time-trace" ||
               name == "device-time-trace") {
      require_inside(value(), "writes");
    } else if (name == "pch") {
      pch = true;
    }
  }
  if (pch && !pch_dir) {
    throw InvalidArgument(
        entry_path + ".options: '--pch' reads and writes precompiled headers outside the spec's directory '" +
        shown_ + "' (NVRTC keeps them under /tmp unless --pch-dir names a directory inside it)" + kAllow);
  }

  // The files the program includes. NVRTC looks a name up among the in-memory headers, then next to
  // the including file (one on disk, for "name"), in the -I directories and the toolkit's: every
  // place that holds a file of that name is checked, not only the first.
  struct Source {
    std::string label;
    std::string text;
    std::optional<fs::path> path;  // where it lies on disk (NVRTC's name for a file it found there)
  };
  std::deque<Source> queue;
  queue.push_back({source_label, request.source, source_path});
  for (std::size_t h = 0; h < request.headers.size(); ++h) {
    const Header& header = request.headers[h];
    queue.push_back({header.name, header.content,
                     h < header_paths.size() ? std::optional<fs::path>(header_paths[h]) : std::nullopt});
  }
  std::set<fs::path> visited;
  auto check_name = [&](const std::string& name, bool angled, const std::optional<fs::path>& includer,
                        bool from_working_directory, const std::string& where) {
    std::vector<fs::path> candidates;
    if (fs::path(name).is_absolute()) {
      candidates.push_back(name);
    } else {
      if (from_working_directory) candidates.push_back(name);
      if (!angled && includer) candidates.push_back(includer->parent_path() / name);
      for (const fs::path& dir : include_dirs) candidates.push_back(dir / name);
      for (const fs::path& dir : toolkit_) candidates.push_back(dir / name);
    }
    for (const fs::path& candidate : candidates) {
      std::error_code ec;
      if (!fs::exists(candidate, ec)) continue;  // (a dangling symlink included: NVRTC cannot open it either)
      const fs::path target = resolved(candidate);
      if (inside_directory(target)) {
        if (fs::is_regular_file(target, ec) && visited.insert(target).second) {
          if (visited.size() > kMaxIncludedFiles) {
            throw InvalidArgument(entry_path + ": the program includes more than " +
                                  std::to_string(kMaxIncludedFiles) + " files of the spec's directory");
          }
          queue.push_back(
              {candidate.string(), read_text_file(target, entry_path + ": included file", false), candidate});
        }
      } else if (!inside_toolkit(target)) {
        throw InvalidArgument(where + " reads '" + target.string() + "'" + outside_message());
      }
    }
  };
  for (std::size_t k = 0; k < pre_includes.size(); ++k)
    check_name(pre_includes[k], false, std::nullopt, true, pre_include_text[k]);
  while (!queue.empty()) {
    const Source source = std::move(queue.front());
    queue.pop_front();
    for (const IncludeDirective& d : find_include_directives(source.text)) {
      const std::string where =
          entry_path + ": '" + source.label + "' line " + std::to_string(d.line) + ": '" + d.text + "'";
      if (d.computed) {
        throw InvalidArgument(where +
                              " does not name its file literally (a macro, or no name), so it cannot be "
                              "checked to stay inside the spec's directory '" +
                              shown_ + "'" + kAllow);
      }
      check_name(d.name, d.angled, source.path, false, where);
    }
  }
}

std::string SpecConfinement::redact_log(std::string_view log, const CompileRequest& request) const {
  // NVRTC's diagnostics: "FILE(LINE): error: ..." at the start of a line, then the source line and a
  // caret, indented. Every line NVRTC writes itself starts with a non-blank character.
  auto allowed = [&](const std::string& file) {
    if (file == request.name || file == "__nv_name_map") return true;
    for (const Header& header : request.headers) {
      if (header.name == file) return true;
    }
    const fs::path target = resolved(file);
    return inside_directory(target) || inside_toolkit(target);
  };
  std::string out;
  bool withholding = false;
  std::size_t start = 0;
  while (start <= log.size()) {
    std::size_t end = log.find('\n', start);
    if (end == std::string_view::npos) end = log.size();
    const std::string_view line = log.substr(start, end - start);
    const bool indented = line.empty() || line.front() == ' ' || line.front() == '\t';
    if (!indented) {
      withholding = false;
      // "FILE(LINE): ": the last "(digits): " on the line that begins with the file name.
      const std::size_t colon = line.find("): ");
      const std::size_t open = colon == std::string_view::npos ? colon : line.rfind('(', colon);
      const bool digits = open != std::string_view::npos && open > 0 && open + 1 < colon &&
                          std::all_of(line.begin() + static_cast<std::ptrdiff_t>(open + 1),
                                      line.begin() + static_cast<std::ptrdiff_t>(colon),
                                      [](char c) { return c >= '0' && c <= '9'; });
      if (digits && !allowed(std::string(line.substr(0, open)))) {
        withholding = true;
        out.append(line.substr(0, colon + 1))
            .append(": (withheld: a diagnostic in a file outside the spec's directory '")
            .append(shown_)
            .append("')");
        if (end < log.size()) out.push_back('\n');
        start = end + 1;
        continue;
      }
    }
    if (!withholding) {
      out.append(line);
      if (end < log.size()) out.push_back('\n');
    }
    start = end + 1;
  }
  return out;
}

}  // namespace cuinline::cli
