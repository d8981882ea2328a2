#pragma once
/// @file arch.hpp
/// A GPU target architecture such as sm_90 or sm_90a.

#include <string>
#include <string_view>

namespace cuinline {

/// A compute capability plus an optional suffix: 'a' (arch-specific, e.g. sm_90a) or 'f'
/// (family-specific, e.g. sm_100f). Parsed from and printed as "sm_<major><minor>[a|f]".
struct Arch {
  int major = 0;
  int minor = 0;
  char suffix = '\0';  ///< '\0', 'a' or 'f'

  /// Parses "sm_90", "sm_90a", "sm_100f", also "compute_90" and "90". Throws InvalidArgument
  /// naming the bad value for anything else ("sm90", "sm_1000", "sm_9", "").
  static Arch parse(std::string_view text);

  /// 90 for sm_90, 100 for sm_100.
  int number() const noexcept { return major * 10 + minor; }
  /// "sm_90", "sm_90a".
  std::string name() const;
  /// "compute_90", "compute_90a" (the virtual architecture of the same number).
  std::string virtual_name() const;

  friend bool operator==(const Arch& a, const Arch& b) noexcept {
    return a.major == b.major && a.minor == b.minor && a.suffix == b.suffix;
  }
  friend bool operator!=(const Arch& a, const Arch& b) noexcept { return !(a == b); }
  friend bool operator<(const Arch& a, const Arch& b) noexcept {
    if (a.number() != b.number()) return a.number() < b.number();
    return a.suffix < b.suffix;
  }
};

}  // namespace cuinline
