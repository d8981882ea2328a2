#pragma once
// Small helpers shared by the subcommands: sizes, durations, terminals, the cache configuration.

#include <chrono>
#include <cstdint>
#include <cuinline/cache.hpp>
#include <cuinline/log.hpp>
#include <cuinline/remote_cache.hpp>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cuinline::cli {

/// "1.5 KiB", "12.3 MiB", "512 B".
std::string format_bytes(std::uint64_t bytes);
/// "850 ms", "3.21 s".
std::string format_seconds(double seconds);
/// "2026-11-21 05:10:22" (local time) of a file time.
std::string format_file_time(std::filesystem::file_time_type time);
/// Parses "123", "500K", "500KB", "500KiB", "1.5G", ... (K = 1024). nullopt if malformed.
std::optional<std::uint64_t> parse_byte_size(std::string_view text);

/// Parses "4096x393216", "4096,393216" or "128x8x128x128"; throws InvalidArgument.
std::vector<std::int64_t> parse_shape(const std::string& text);

bool stdout_is_terminal() noexcept;
/// Columns of the terminal on stdout; 80 when unknown.
int terminal_columns() noexcept;

/// The cache settings from the environment, with `cache_dir` (if not empty) as the directory and
/// the disk tier on (the command works on the disk tier whatever CUINLINE_DISABLE_DISK_CACHE says).
CacheConfig cli_cache_config(const std::string& cache_dir);

/// The remote tier as `config` (by default the environment: CUINLINE_REMOTE_CACHE, CUINLINE_CACHE_KEY_FILE,
/// CUINLINE_CACHE_SIGNING_KEY, CUINLINE_CACHE_TRUSTED_KEYS) sets it up; throws Error saying why when it
/// cannot be used (remote_cmd.cpp).
std::unique_ptr<RemoteCache> open_remote_cache(
    const RemoteCacheConfig& config = RemoteCacheConfig::from_environment());

/// Writes `data` to `path` whole or not at all, as a new file: a unique temporary file in the same
/// directory (created with O_CREAT | O_EXCL | O_NOFOLLOW, so nothing planted there is written
/// through), written, closed and renamed over `path`. A symlink at `path` is replaced, never
/// followed. On failure the temporary file is removed, `path` is as it was, and Error names it.
void write_output_file(const std::filesystem::path& path, std::string_view data);

/// Seconds since `start`.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Text from a file or the command line printed safely: the library's escaping (a name reads the
/// same in a log line and in the command's output).
using cuinline::escape_control;

}  // namespace cuinline::cli
