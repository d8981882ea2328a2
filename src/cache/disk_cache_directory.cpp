// Opening the cache directory (and the other directories whose contents decide what runs:
// CUINLINE_TEMPLATE_DIR, a Redis socket's, this user's lock directory) through descriptors (paths
// that move under us): the path is resolved once, then walked from '/' one component at a time with
// O_NOFOLLOW, creating what is missing with mkdirat and fchmod on the opened directory, and checking
// each ancestor the way ssh checks the directories above ~/.ssh.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pwd.h>

#include <cerrno>
#include <cstdio>
#include <string>
#include <system_error>
#include <vector>

#include "cache/directory_walk.hpp"

namespace cuinline::detail {
namespace {

// An ancestor of the directory must be owned by this user or root and writable by no one else
// unless sticky (/tmp): whoever can rename or replace a directory above it chooses what the path
// leads to. In shared mode the owner may be anyone and group-writable is fine (a team directory),
// but a directory writable by all still needs the sticky bit.
std::string ancestor_problem(const struct stat& st, bool shared) {
  const bool sticky = (st.st_mode & S_ISVTX) != 0;
  if (!shared && st.st_uid != ::geteuid() && st.st_uid != 0) {
    return "is owned by " + describe_uid(st.st_uid) +
           ", not by this user or root: its owner can replace the directories under it";
  }
  const mode_t writable = shared ? S_IWOTH : (S_IWGRP | S_IWOTH);
  if ((st.st_mode & writable) != 0 && !sticky) {
    return "is writable by " + std::string(shared ? "others" : "group or others") + " (mode " +
           mode_text(st.st_mode) + ", not sticky): anyone who can write it can replace the directories "
           "under it; chmod go-w it or choose another directory";
  }
  return {};
}

}  // namespace

std::string mode_text(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

std::string describe_uid(uid_t uid) {
  std::string text = "uid " + std::to_string(uid);
  std::vector<char> buffer(16384);
  struct passwd entry {};
  struct passwd* found = nullptr;
  if (::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr &&
      found->pw_name != nullptr && found->pw_name[0] != '\0') {
    text += std::string(" (") + found->pw_name + ")";
  }
  return text;
}

UniqueFd open_cache_directory(const std::filesystem::path& directory, bool create, bool shared,
                              std::string& reason, int& error) {
  error = 0;
  std::error_code ec;
  std::filesystem::path path = std::filesystem::absolute(directory, ec);
  if (ec) {
    error = ec.value();
    reason = "cannot resolve '" + directory.string() + "': " + ec.message();
    return UniqueFd();
  }
  // Symlinks in the existing part are resolved here, once (a home directory may be one); from here on
  // nothing is followed, so a component swapped for a symlink afterwards is refused, not followed.
  const std::filesystem::path resolved = std::filesystem::weakly_canonical(path, ec);
  if (!ec) path = resolved;
  return walk_directory_path(path.lexically_normal(), directory, create, shared, reason, error);
}

UniqueFd walk_directory_path(const std::filesystem::path& path, const std::filesystem::path& directory,
                             bool create, bool shared, std::string& reason, int& error) {
  error = 0;
  UniqueFd fd(::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  std::filesystem::path walked = "/";
  if (!fd) {
    error = errno;
    reason = "cannot open '/': " + errno_text(error);
    return UniqueFd();
  }
  for (const auto& part : path.relative_path()) {
    if (part.empty() || part == ".") continue;
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) {
      error = errno;
      reason = "cannot stat '" + walked.string() + "': " + errno_text(error);
      return UniqueFd();
    }
    // Every directory above the one asked for (whose own rules are the caller's).
    if (const std::string problem = ancestor_problem(st, shared); !problem.empty()) {
      error = EPERM;
      reason = "cannot use '" + directory.string() + "': '" + walked.string() + "' " + problem;
      return UniqueFd();
    }
    walked /= part;
    const int parent = fd.get();
    UniqueFd child(::openat(parent, part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!child && errno == ENOENT && create) {
      if (::mkdirat(parent, part.c_str(), 0700) == 0) {
        child.reset(::openat(parent, part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        // What the umask took away, on the directory just opened (never on a path that could move).
        struct stat made {};
        if (child && ::fstat(child.get(), &made) == 0 && made.st_uid == ::geteuid()) ::fchmod(child.get(), 0700);
      } else if (errno == EEXIST) {
        child.reset(::openat(parent, part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      } else {
        error = errno;
        reason = "cannot create '" + walked.string() + "': " + errno_text(error);
        return UniqueFd();
      }
    }
    if (!child) {
      error = errno;
      if (error == ELOOP || error == ENOTDIR) {
        struct stat link {};
        const bool is_link = ::fstatat(parent, part.c_str(), &link, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(link.st_mode);
        reason = "cannot use '" + directory.string() + "': '" + walked.string() + "' " +
                 (is_link ? "became a symbolic link after the path was resolved (not followed)"
                          : "is not a directory");
      } else if (error == ENOENT) {
        reason = "'" + walked.string() + "' does not exist";
      } else {
        reason = "cannot open '" + walked.string() + "': " + errno_text(error);
      }
      return UniqueFd();
    }
    fd = std::move(child);
  }
  return fd;
}

}  // namespace cuinline::detail
