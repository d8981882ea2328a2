#pragma once
// Opening a directory whose contents decide what runs (the cache directory, CUINLINE_TEMPLATE_DIR, a
// Redis socket's directory) through descriptors, with ssh's checks of the directories above it
// (src/cache/disk_cache_directory.cpp).

#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "cache/disk_cache_io.hpp"

namespace cuinline::detail {

/// Opens `directory` through descriptors: the path is resolved once, then walked from '/' with
/// O_NOFOLLOW; missing directories are made (mkdirat, then fchmod 0700 on the opened one) if
/// `create`; every ancestor must be owned by this user or root and writable by no one else unless
/// sticky (in `shared` mode: any owner, group-writable allowed). The directory itself is the
/// caller's to check. On failure an empty fd, `reason` and `error`
/// (ENOENT when a component is missing and `create` is false).
UniqueFd open_cache_directory(const std::filesystem::path& directory, bool create, bool shared,
                              std::string& reason, int& error);
/// open_cache_directory's walk alone, of an absolute `path` taken as already resolved (a symlink met
/// is refused); `directory` is the name messages use.
UniqueFd walk_directory_path(const std::filesystem::path& path, const std::filesystem::path& directory,
                             bool create, bool shared, std::string& reason, int& error);

/// "uid 4242 (alice)", or "uid 4242" when the passwd database has no name for it.
std::string describe_uid(uid_t uid);

/// A file's permission bits as four octal digits ("0640").
std::string mode_text(mode_t mode);

}  // namespace cuinline::detail
