#include "cli/util.hpp"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <cerrno>
#include <cstring>
#include <cuinline/error.hpp>
#include <random>

namespace cuinline::cli {

std::string format_bytes(std::uint64_t bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char buf[32];
  if (unit == 0) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f %s", value, units[unit]);
  }
  return buf;
}

std::string format_seconds(double seconds) {
  char buf[32];
  if (seconds < 1) {
    std::snprintf(buf, sizeof buf, "%.0f ms", seconds * 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f s", seconds);
  }
  return buf;
}

std::string format_file_time(std::filesystem::file_time_type time) {
  // C++17 has no clock_cast: go through the offset between the two clocks' "now".
  auto system_time =
      std::chrono::system_clock::now() + std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                             time - std::filesystem::file_time_type::clock::now());
  std::time_t t = std::chrono::system_clock::to_time_t(system_time);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::optional<std::uint64_t> parse_byte_size(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  std::string number(text.substr(0, i));
  if (number.empty() || number == "." || number.find('.') != number.rfind('.')) return std::nullopt;
  std::string unit(text.substr(i));
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  double scale = 1;
  if (unit.empty() || unit == "B") {
    scale = 1;
  } else {
    const std::string prefixes = "KMGT";
    auto p = prefixes.find(unit[0]);
    std::string rest = unit.substr(1);
    if (p == std::string::npos || !(rest.empty() || rest == "B" || rest == "IB")) return std::nullopt;
    scale = std::pow(1024.0, static_cast<double>(p + 1));
  }
  double value = std::strtod(number.c_str(), nullptr) * scale;
  if (!std::isfinite(value) || value < 0 || value >= 1.8e19) return std::nullopt;
  // A fraction of a byte ("0.5", "1.5B") is not a size: never truncate it (0.5 would prune all).
  if (value != std::floor(value)) return std::nullopt;
  return static_cast<std::uint64_t>(value);
}

std::vector<std::int64_t> parse_shape(const std::string& text) {
  std::vector<std::int64_t> shape;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t end = text.find_first_of("x,", pos);
    if (end == std::string::npos) end = text.size();
    std::string part = text.substr(pos, end - pos);
    bool digits = !part.empty() && part.size() <= 12 &&
                  std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || std::stoll(part) == 0) {
      throw InvalidArgument("--shape: expected positive sizes like 4096x393216, got '" + text + "'");
    }
    shape.push_back(std::stoll(part));
    pos = end + 1;
  }
  if (shape.size() > 8) throw InvalidArgument("--shape: at most 8 dimensions, got '" + text + "'");
  return shape;
}

bool stdout_is_terminal() noexcept {
  return ::isatty(STDOUT_FILENO) == 1;
}

int terminal_columns() noexcept {
  winsize size{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return 80;
}

CacheConfig cli_cache_config(const std::string& cache_dir) {
  CacheConfig config = CacheConfig::from_environment();
  config.disk_enabled = true;
  if (!cache_dir.empty()) config.directory = cache_dir;
  return config;
}

void write_output_file(const std::filesystem::path& path, std::string_view data) {
  const std::string shown = "'" + path.string() + "'";
  const std::string name = path.filename().string();
  if (name.empty() || name == "." || name == "..") throw Error("cannot write " + shown + ": not a file name");
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  // The temporary name is unpredictable and created exclusively: in a directory others can write
  // (a team's 2770 directory), a file or symlink planted under it makes the open fail, not write
  // elsewhere. Its mode is 0666 less the umask, as any new file's.
  std::random_device random;
  std::filesystem::path temp;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    char suffix[24];
    std::snprintf(suffix, sizeof suffix, "%08x%08x", random(), random());
    temp = dir / ("." + name + ".tmp-" + suffix);
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) throw Error("cannot write " + shown + ": creating a temporary file in '" + dir.string() + "': " + std::strerror(errno));
  auto fail = [&](const std::string& what, int error) {
    if (fd >= 0) ::close(fd);
    ::unlink(temp.c_str());
    throw Error("cannot write " + shown + ": " + what + ": " + std::strerror(error));
  };
  for (std::size_t done = 0; done < data.size();) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("writing", errno);
    done += static_cast<std::size_t>(n);
  }
  const int closed = ::close(fd);
  fd = -1;
  if (closed != 0) fail("closing", errno);
  // rename replaces whatever is at `path` (a symlink included) by this file; it never follows it.
  if (::rename(temp.c_str(), path.c_str()) != 0) fail("replacing it", errno);
}

}  // namespace cuinline::cli
