#pragma once
// A JSON value together with its path in the document ("entries[3].dtype"), so that every
// complaint about a spec names the exact field: "entries[3].dtype: expected one of f32,f16,bf16,f64,
// got "f8"". Every accessor checks the type first and throws cuinline::InvalidArgument.

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cuinline::cli {

class JsonField {
 public:
  JsonField(const nlohmann::json& value, std::string path) : value_(&value), path_(std::move(path)) {}

  const nlohmann::json& value() const noexcept { return *value_; }
  /// "entries[3].dtype"; "(root)" for the document itself.
  const std::string& path() const noexcept { return path_; }

  /// Throws InvalidArgument("<path>: <message>").
  [[noreturn]] void fail(const std::string& message) const;

  // ---- objects
  /// Throws unless this is an object whose keys are all in `allowed`.
  void expect_object(std::initializer_list<std::string_view> allowed) const;
  bool has(std::string_view key) const;
  /// The member `key`; throws "missing required field" when absent.
  JsonField at(std::string_view key) const;
  std::optional<JsonField> find(std::string_view key) const;

  // ---- arrays
  /// The elements of an array (each with its path "...[i]"); throws unless an array of
  /// min_size..max_size elements.
  std::vector<JsonField> elements(std::size_t min_size = 0, std::size_t max_size = SIZE_MAX) const;
  /// The elements of an array, or this value alone when it is not an array: lets a variant field be
  /// written "dtype": "f32" or "dtype": ["f32", "f16"]. An empty array is rejected.
  std::vector<JsonField> one_or_many() const;

  // ---- scalars
  std::string as_string() const;
  /// A non-empty string without NUL characters.
  std::string as_nonempty_string() const;
  bool as_bool() const;
  /// An integer in [min, max] (a float with an integral value is rejected: sizes are integers).
  std::int64_t as_int(std::int64_t min, std::int64_t max) const;
  /// A finite number in [min, max].
  double as_number(double min, double max) const;
  /// A string equal to one of `choices`; the message lists them.
  std::string as_choice(const std::vector<std::string>& choices) const;

  /// A short description of the value for messages: `"f8"`, `number 3`, `array`, `null`, ...
  static std::string describe(const nlohmann::json& value);

 private:
  JsonField child(std::string_view key, const nlohmann::json& value) const;

  const nlohmann::json* value_;
  std::string path_;
};

/// Parses JSON text, turning every syntax error into InvalidArgument ("spec: syntax error at line
/// L, column C: ..."), and rejecting nesting deeper than `max_depth`.
nlohmann::json parse_json_text(std::string_view text, int max_depth = 32);

}  // namespace cuinline::cli
