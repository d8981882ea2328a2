// CacheConfig::from_environment and default_cache_directory: the CUINLINE_CACHE_* variables; where
// this user's own lock files for team caches live.

#include <pwd.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cache/disk_cache_impl.hpp"
#include "common/log.hpp"
#include "cuinline/cache.hpp"

namespace cuinline {
namespace {

std::optional<std::string_view> environment(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string_view(value);
}

std::string lowercase(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Each variable is warned about at most once per process, however often it is read.
void warn_once(std::atomic<bool>& warned, const char* name, std::string_view value, const char* what) {
  if (!warned.exchange(true)) logger()->warn("{}='{}' is not {}", name, value, what);
}

std::optional<bool> parse_flag(std::string_view text) {
  const std::string value = lowercase(text);
  if (value == "1" || value == "true" || value == "yes" || value == "on") return true;
  if (value == "0" || value == "false" || value == "no" || value == "off") return false;
  return std::nullopt;
}

bool flag_from_environment(const char* name, bool fallback, std::atomic<bool>& warned) {
  const auto value = environment(name);
  if (!value) return fallback;
  if (const auto parsed = parse_flag(*value)) return *parsed;
  warn_once(warned, name, *value, "a boolean (1/0, true/false, yes/no, on/off); ignoring it");
  return fallback;
}

// "1073741824", "512M", "2GiB", "64k": a positive byte count with an optional binary suffix.
std::optional<std::uint64_t> parse_byte_count(std::string_view text) {
  std::size_t digits = 0;
  std::uint64_t value = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
    const std::uint64_t digit = static_cast<std::uint64_t>(text[digits] - '0');
    if (value > (UINT64_MAX - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
    ++digits;
  }
  if (digits == 0) return std::nullopt;
  const std::string suffix = lowercase(text.substr(digits));
  int shift = 0;
  if (suffix.empty() || suffix == "b") {
    shift = 0;
  } else if (suffix == "k" || suffix == "kb" || suffix == "kib") {
    shift = 10;
  } else if (suffix == "m" || suffix == "mb" || suffix == "mib") {
    shift = 20;
  } else if (suffix == "g" || suffix == "gb" || suffix == "gib") {
    shift = 30;
  } else if (suffix == "t" || suffix == "tb" || suffix == "tib") {
    shift = 40;
  } else {
    return std::nullopt;
  }
  if (value == 0 || value > (UINT64_MAX >> shift)) return std::nullopt;
  return value << shift;
}

std::optional<std::filesystem::path> home_directory() {
  if (const auto home = environment("HOME")) return std::filesystem::path(*home);
  std::vector<char> buffer(16384);
  struct passwd entry {};
  struct passwd* found = nullptr;
  if (::getpwuid_r(::getuid(), &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr &&
      found->pw_dir != nullptr && found->pw_dir[0] != '\0') {
    return std::filesystem::path(found->pw_dir);
  }
  return std::nullopt;
}

}  // namespace

namespace detail {

std::filesystem::path own_lock_directory() {
  // Like default_cache_directory without CUINLINE_CACHE_DIR (that names the team's directory): every
  // process of this user finds the same file for the same team cache, and no one else can replace it.
  if (const auto xdg = environment("XDG_CACHE_HOME"); xdg && std::filesystem::path(*xdg).is_absolute()) {
    return std::filesystem::path(*xdg) / "cuinline-locks";
  }
  if (const auto home = home_directory()) return *home / ".cache" / "cuinline-locks";
  return std::filesystem::temp_directory_path() / ("cuinline-locks-" + std::to_string(::geteuid()));
}

}  // namespace detail

std::filesystem::path default_cache_directory() {
  if (const auto dir = environment("CUINLINE_CACHE_DIR")) {
    std::error_code ec;
    auto absolute = std::filesystem::absolute(std::filesystem::path(*dir), ec);
    return (ec ? std::filesystem::path(*dir) : absolute).lexically_normal();
  }
  // The XDG spec says a relative XDG_CACHE_HOME is invalid and must be ignored.
  if (const auto xdg = environment("XDG_CACHE_HOME"); xdg && std::filesystem::path(*xdg).is_absolute()) {
    return std::filesystem::path(*xdg) / "cuinline";
  }
  if (const auto home = home_directory()) return *home / ".cache" / "cuinline";
  // No home at all (a system service): a per-user directory; DiskCache checks its owner and mode.
  return std::filesystem::temp_directory_path() / ("cuinline-cache-" + std::to_string(::getuid()));
}

CacheConfig CacheConfig::from_environment() {
  static std::atomic<bool> warned_disable{false}, warned_shared{false}, warned_max{false};
  CacheConfig config;
  config.directory = default_cache_directory();
  config.disk_enabled = !flag_from_environment("CUINLINE_DISABLE_DISK_CACHE", false, warned_disable);
  config.allow_shared_directory = flag_from_environment("CUINLINE_CACHE_SHARED", false, warned_shared);
  if (const auto text = environment("CUINLINE_CACHE_MAX_BYTES")) {
    if (const auto bytes = parse_byte_count(*text)) {
      config.max_bytes = *bytes;
    } else {
      warn_once(warned_max, "CUINLINE_CACHE_MAX_BYTES", *text,
                "a positive byte count (e.g. 1073741824, 512M, 2G); using the default of 1 GiB");
    }
  }
  if (const auto text = environment("CUINLINE_CACHE_READONLY_DIRS")) {
    // ':'-separated like PATH; empty parts are skipped. Relative paths are taken from the working
    // directory now, so a later chdir does not move them.
    std::size_t start = 0;
    while (start <= text->size()) {
      std::size_t end = text->find(':', start);
      if (end == std::string::npos) end = text->size();
      if (end > start) {
        std::error_code ec;
        const std::filesystem::path part{std::string(text->substr(start, end - start))};
        const auto absolute = std::filesystem::absolute(part, ec);
        config.read_only_directories.push_back((ec ? part : absolute).lexically_normal());
      }
      start = end + 1;
    }
  }
  if (const auto text = environment("CUINLINE_CACHE_LOCK_WAIT_MS")) {
    static std::atomic<bool> warned_wait{false};
    const std::string value(*text);
    char* end = nullptr;
    errno = 0;
    const long long ms = std::strtoll(value.c_str(), &end, 10);
    if (errno == 0 && end != value.c_str() && *end == '\0' && ms >= 0 && ms <= 24LL * 3600 * 1000) {
      config.lock_wait = std::chrono::milliseconds(ms);
    } else {
      warn_once(warned_wait, "CUINLINE_CACHE_LOCK_WAIT_MS", *text,
                "milliseconds from 0 to 86400000; using the default of 10000");
    }
  }
  config.remote = RemoteCacheConfig::from_environment();  // src/cache/remote_cache_config.cpp
  return config;
}

}  // namespace cuinline
