#pragma once
// A warm spec is confined to its directory: one from elsewhere must not make `cuinline warm` read a
// file outside that directory — and print it, as NVRTC echoes the line a diagnostic points at —
// through its "file" and "headers", the #includes of its sources (an absolute name, "../..", a
// symlink, a macro), or NVRTC options that name files (--pre-include, -I, --use-pch, --time, ...).
// `--allow-outside-paths` lifts all of it.
//
// NVRTC resolves an #include itself (in-memory headers by name, then the directory of the including
// file if it is one on disk, the -I directories, the toolkit's include directory, absolute names as
// they are), so every place a name could resolve to is checked, and every file it reaches inside the
// spec's directory is read and checked in turn.

#include <cuinline/compiler.hpp>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace cuinline::cli {

/// An #include-like directive in source text: #include, #include_next, and #import / #embed (which
/// NVRTC may come to read). Found conservatively: a '#' (or "%:" or "??=") first on its logical line,
/// or after a comment's end, counts, even inside a string literal or a comment.
struct IncludeDirective {
  std::size_t line = 0;   ///< 1-based physical line of the '#'
  std::string directive;  ///< "include", "include_next", "import", "embed"
  std::string text;       ///< the directive as written (for messages), up to 200 characters
  std::string name;       ///< the name between the quotes or angle brackets; empty when `computed`
  bool angled = false;    ///< <name>
  bool computed = false;  ///< no literal name (a macro names the file): cannot be checked
};
std::vector<IncludeDirective> find_include_directives(std::string_view text);

class SpecConfinement {
 public:
  explicit SpecConfinement(const std::filesystem::path& spec_directory);

  /// `name` (a spec's "file" or header) relative to the spec's directory, resolved: it must lie
  /// inside the directory (no absolute path, "..", or symlink that leads out). Throws
  /// InvalidArgument naming `field`.
  std::filesystem::path resolve_spec_file(const std::string& name, const std::string& field) const;

  /// Checks a "cuda" entry's program before anything is compiled: its options name no file or
  /// directory outside the spec's directory, and its source, headers and every file they include
  /// from the spec's directory include nothing outside it (the toolkit's headers excepted) and no
  /// file through a macro. `source_label` names the source in messages (the spec's "file");
  /// `source_path` and `header_paths` (one per request.headers) are where the spec's files lie: a
  /// name is also looked up next to them, as a reader of the spec would ("../x" from the spec's
  /// directory is outside it). Throws InvalidArgument naming `entry_path`, the file, the line and
  /// the directive or option.
  void check_program(const CompileRequest& request, const std::string& entry_path,
                     const std::string& source_label, const std::filesystem::path& source_path,
                     const std::vector<std::filesystem::path>& header_paths) const;

  /// NVRTC's `log` for `request` with every diagnostic in a file outside the spec's directory (and
  /// outside the toolkit's include directories) reduced to its location: its message and the source
  /// lines NVRTC echoes are withheld.
  std::string redact_log(std::string_view log, const CompileRequest& request) const;

 private:
  bool inside_directory(const std::filesystem::path& path) const;
  bool inside_toolkit(const std::filesystem::path& path) const;
  std::string outside_message() const;

  std::string shown_;                           ///< the directory as the spec's path gives it
  std::filesystem::path directory_;             ///< canonical
  std::vector<std::filesystem::path> toolkit_;  ///< canonical include directories of the toolkit
};

}  // namespace cuinline::cli
