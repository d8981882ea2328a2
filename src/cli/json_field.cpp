#include "cli/json_field.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <cuinline/error.hpp>
#include <sstream>

namespace cuinline::cli {
namespace {

using nlohmann::json;

bool is_identifier(std::string_view key) {
  if (key.empty()) return false;
  for (char c : key) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

// A string shown in a message: JSON-escaped (so control characters and quotes stay visible) and
// cut to a readable length.
std::string quote(std::string_view text) {
  constexpr std::size_t kMax = 48;
  std::string shown(text.substr(0, kMax));
  std::string out = json(shown).dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > kMax) out.insert(out.size() - 1, "...");
  return out;
}

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += sep;
    out += item;
  }
  return out;
}

}  // namespace

std::string JsonField::describe(const json& value) {
  switch (value.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return value.get<bool>() ? "true" : "false";
    case json::value_t::string:
      return quote(value.get_ref<const std::string&>());
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      return "number " + value.dump();
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    default:
      return "an unsupported value";
  }
}

void JsonField::fail(const std::string& message) const {
  throw InvalidArgument(path_ + ": " + message);
}

JsonField JsonField::child(std::string_view key, const json& value) const {
  std::string path = path_ == "(root)" ? std::string() : path_;
  if (is_identifier(key)) {
    if (!path.empty()) path += '.';
    path += key;
  } else {
    path += "[" + quote(key) + "]";
  }
  return JsonField(value, std::move(path));
}

void JsonField::expect_object(std::initializer_list<std::string_view> allowed) const {
  if (!value_->is_object()) fail("expected an object, got " + describe(*value_));
  for (const auto& item : value_->items()) {
    bool known = false;
    for (auto name : allowed) known = known || item.key() == name;
    if (!known) {
      std::vector<std::string> names(allowed.begin(), allowed.end());
      child(item.key(), item.value()).fail("unknown field (known fields: " + join(names, ", ") + ")");
    }
  }
}

bool JsonField::has(std::string_view key) const {
  return value_->is_object() && value_->find(std::string(key)) != value_->end();
}

std::optional<JsonField> JsonField::find(std::string_view key) const {
  if (!value_->is_object()) fail("expected an object, got " + describe(*value_));
  auto it = value_->find(std::string(key));
  if (it == value_->end()) return std::nullopt;
  return child(key, *it);
}

JsonField JsonField::at(std::string_view key) const {
  auto field = find(key);
  if (!field) child(key, *value_).fail("missing required field");
  return *field;
}

std::vector<JsonField> JsonField::elements(std::size_t min_size, std::size_t max_size) const {
  if (!value_->is_array()) fail("expected an array, got " + describe(*value_));
  std::size_t n = value_->size();
  if (n < min_size || n > max_size) {
    std::ostringstream msg;
    if (min_size == max_size) {
      msg << "expected an array of " << min_size << " elements, got " << n;
    } else if (max_size == SIZE_MAX) {
      msg << "expected an array of at least " << min_size << " element" << (min_size == 1 ? "" : "s")
          << ", got " << n;
    } else {
      msg << "expected an array of " << min_size << " to " << max_size << " elements, got " << n;
    }
    fail(msg.str());
  }
  std::vector<JsonField> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) out.emplace_back((*value_)[i], path_ + "[" + std::to_string(i) + "]");
  return out;
}

std::vector<JsonField> JsonField::one_or_many() const {
  if (value_->is_array()) return elements(1);
  return {*this};
}

std::string JsonField::as_string() const {
  if (!value_->is_string()) fail("expected a string, got " + describe(*value_));
  return value_->get<std::string>();
}

std::string JsonField::as_nonempty_string() const {
  std::string text = as_string();
  if (text.empty()) fail("must not be empty");
  if (text.find('\0') != std::string::npos) fail("must not contain NUL characters");
  return text;
}

bool JsonField::as_bool() const {
  if (!value_->is_boolean()) fail("expected true or false, got " + describe(*value_));
  return value_->get<bool>();
}

std::int64_t JsonField::as_int(std::int64_t min, std::int64_t max) const {
  std::int64_t v = 0;
  if (value_->is_number_unsigned()) {
    auto u = value_->get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(INT64_MAX)) {
      fail("expected an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "], got " +
           describe(*value_));
    }
    v = static_cast<std::int64_t>(u);
  } else if (value_->is_number_integer()) {
    v = value_->get<std::int64_t>();
  } else {
    fail("expected an integer, got " + describe(*value_));
  }
  if (v < min || v > max) {
    fail("expected an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "], got " +
         describe(*value_));
  }
  return v;
}

double JsonField::as_number(double min, double max) const {
  if (!value_->is_number()) fail("expected a number, got " + describe(*value_));
  double v = value_->get<double>();
  if (!std::isfinite(v) || v < min || v > max) {
    std::ostringstream msg;
    msg << "expected a number in [" << min << ", " << max << "], got " << describe(*value_);
    fail(msg.str());
  }
  return v;
}

std::string JsonField::as_choice(const std::vector<std::string>& choices) const {
  if (value_->is_string()) {
    const auto& text = value_->get_ref<const std::string&>();
    for (const auto& choice : choices) {
      if (text == choice) return text;
    }
  }
  fail("expected one of " + join(choices, ",") + ", got " + describe(*value_));
}

namespace {
// Bytes from the spec file shown in a message: control characters and bytes >= 0x7f as \xNN.
// (common/escape.hpp's escape_control, which also escapes '\\', serves the commands; this file is also
// built into the spec fuzzer on its own.)
std::string shown(std::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    if (c < 0x20 || c >= 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}
}  // namespace

nlohmann::json parse_json_text(std::string_view text, int max_depth) {
  // The keys seen in each object being parsed: a key given twice is an error (nlohmann keeps the last
  // one silently, so `"dtype": "f32", ..., "dtype": "f16"` would warm f16 only).
  auto keys = std::make_shared<std::vector<std::vector<std::string>>>();
  json::parser_callback_t limit_depth = [max_depth, keys](int depth, json::parse_event_t event, json& parsed) {
    if (depth > max_depth) {
      throw InvalidArgument("spec: nested deeper than " + std::to_string(max_depth) + " levels");
    }
    if (event == json::parse_event_t::object_start) {
      keys->emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      if (!keys->empty()) keys->pop_back();
    } else if (event == json::parse_event_t::key && !keys->empty()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      auto& seen = keys->back();
      if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
        throw InvalidArgument("spec: key \"" + shown(key) + "\" appears twice in one object");
      }
      seen.push_back(key);
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), limit_depth, /*allow_exceptions=*/true,
                       /*ignore_comments=*/false);
  } catch (const json::parse_error& e) {
    // "[json.exception.parse_error.101] parse error at line 1, column 5: ..." → drop the prefix.
    std::string what = e.what();
    auto pos = what.find("] ");
    if (pos != std::string::npos) what = what.substr(pos + 2);
    // The message quotes the bytes last read, which may be anything: show them escaped.
    throw InvalidArgument("spec: not valid JSON: " + shown(what));
  } catch (const json::exception& e) {
    throw InvalidArgument(std::string("spec: not valid JSON: ") + e.what());
  }
}

}  // namespace cuinline::cli
