#include <cuinline/arch.hpp>
#include <cuinline/error.hpp>
#include <string>
#include <string_view>

namespace cuinline {

namespace {

[[noreturn]] void throw_bad_arch(std::string_view text) {
  throw InvalidArgument("invalid architecture '" + std::string(text) +
                        "': expected sm_<major><minor>[a|f], compute_<major><minor>[a|f] or <major><minor>, "
                        "e.g. sm_90, sm_90a, sm_100f, compute_90, 90");
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

}  // namespace

Arch Arch::parse(std::string_view text) {
  std::string_view rest = text;
  if (rest.substr(0, 3) == "sm_") {
    rest.remove_prefix(3);
  } else if (rest.substr(0, 8) == "compute_") {
    rest.remove_prefix(8);
  }
  Arch arch;
  if (!rest.empty() && (rest.back() == 'a' || rest.back() == 'f')) {
    arch.suffix = rest.back();
    rest.remove_suffix(1);
  }
  // Two or three digits: the last is the minor version, the rest the major (sm_90, sm_100, sm_121).
  if (rest.size() < 2 || rest.size() > 3 || rest.front() == '0') throw_bad_arch(text);
  for (char c : rest) {
    if (!is_digit(c)) throw_bad_arch(text);
  }
  arch.minor = rest.back() - '0';
  arch.major = 0;
  for (char c : rest.substr(0, rest.size() - 1)) arch.major = arch.major * 10 + (c - '0');
  return arch;
}

std::string Arch::name() const {
  std::string out = "sm_" + std::to_string(number());
  if (suffix != '\0') out += suffix;
  return out;
}

std::string Arch::virtual_name() const {
  std::string out = "compute_" + std::to_string(number());
  if (suffix != '\0') out += suffix;
  return out;
}

}  // namespace cuinline
