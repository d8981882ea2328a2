#include "templates/template_source.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuinline/error.hpp>
#include <string>
#include <utility>

#include "cache/directory_walk.hpp"
#include "templates/embedded.hpp"

namespace cuinline::detail {
namespace {

// A template is source that is compiled and run: no override is near that size.
constexpr off_t kMaxTemplateBytes = 4 << 20;

struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

[[noreturn]] void refuse(const std::string& what, const std::string& why) {
  throw InvalidArgument("kernel template " + what + " (CUINLINE_TEMPLATE_DIR): " + why);
}

// Owned by this user or root and writable by no one else, like the cache directory: anyone who can
// write a template chooses the code that is compiled and run with this user's rights.
void check_owner(const struct stat& st, const std::string& what) {
  if (st.st_uid != ::geteuid() && st.st_uid != 0) {
    refuse(what, "owned by uid " + std::to_string(st.st_uid) +
                     ", not by this user or root: its owner chooses the code compiled and run");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    refuse(what, std::string("writable by group or others (mode ") + mode +
                     "): anyone who can write it chooses the code compiled and run; chmod go-w it");
  }
}

// The override of `name` in `dir`, or nothing when the directory has no such file.
bool read_override(const char* dir, std::string_view name, std::string& text) {
  const std::string shown_dir = std::string("'") + dir + "'";
  // The cache directory's walk (src/cache/disk_cache_directory.cpp): resolved once, then opened from
  // '/' without following symlinks, each directory above it owned by this user or root and writable
  // by no one else unless sticky. Whoever can replace a parent chooses the directory read here.
  std::string reason;
  int error = 0;
  Fd d(open_cache_directory(dir, /*create=*/false, /*shared=*/false, reason, error).release());
  if (d.fd < 0) refuse("directory " + shown_dir, reason);
  struct stat st {};
  if (::fstat(d.fd, &st) != 0) refuse("directory " + shown_dir, std::strerror(errno));
  check_owner(st, "directory " + shown_dir);
  const std::string file = std::string(dir) + "/" + std::string(name);
  const std::string shown = "'" + file + "'";
  // A template in a subfolder ("arch/mma_sm80.cuh"): each folder on the way opened without following
  // a symlink and held to the same owner and mode as the directory.
  Fd sub(-1);
  int at = d.fd;
  std::string_view rest = name;
  for (std::size_t slash = rest.find('/'); slash != std::string_view::npos; slash = rest.find('/')) {
    const std::string part(rest.substr(0, slash));
    rest.remove_prefix(slash + 1);
    const std::string shown_part = "'" + file.substr(0, file.size() - rest.size() - 1) + "'";
    Fd next(::openat(at, part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (next.fd < 0) {
      if (errno == ENOENT) return false;  // not overridden: the embedded template
      const int open_error = errno;
      // O_DIRECTORY answers a symlink with ENOTDIR before O_NOFOLLOW's ELOOP: name which it was.
      struct stat link {};
      const bool symlink = open_error == ELOOP || (open_error == ENOTDIR &&
                                                   ::fstatat(at, part.c_str(), &link, AT_SYMLINK_NOFOLLOW) == 0 &&
                                                   S_ISLNK(link.st_mode));
      refuse(shown_part, symlink                 ? std::string("a symbolic link (not followed)")
                         : open_error == ENOTDIR ? std::string("not a directory")
                                                 : std::string("cannot open: ") + std::strerror(open_error));
    }
    if (::fstat(next.fd, &st) != 0) refuse(shown_part, std::strerror(errno));
    check_owner(st, "directory " + shown_part);
    std::swap(sub.fd, next.fd);
    at = sub.fd;
  }
  Fd f(::openat(at, std::string(rest).c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (f.fd < 0) {
    if (errno == ENOENT) return false;  // not overridden: the embedded template
    refuse(shown, errno == ELOOP ? std::string("a symbolic link (not followed)")
                                 : std::string("cannot open: ") + std::strerror(errno));
  }
  if (::fstat(f.fd, &st) != 0) refuse(shown, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) {
    refuse(shown, S_ISDIR(st.st_mode) ? "a directory, not a file" : "not a regular file (a FIFO, socket or device)");
  }
  check_owner(st, shown);
  if (st.st_size > kMaxTemplateBytes) {
    refuse(shown, std::to_string(st.st_size) + " bytes, more than a template may have (" +
                      std::to_string(kMaxTemplateBytes) + ")");
  }
  text.assign(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(f.fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) refuse(shown, n < 0 ? std::string("read failed: ") + std::strerror(errno) : "shorter than its size");
    got += static_cast<std::size_t>(n);
  }
  if (text.find('\0') != std::string::npos) refuse(shown, "contains a NUL byte (not source text)");
  return true;
}

// A name as the templates include each other: a relative path of plain components ("ew_ops.cuh",
// "arch/mma_sm80.cuh"), none empty, "." or "..", so an override never reads outside the directory.
bool valid_name(std::string_view name) {
  if (name.empty() || name.front() == '/' || name.find('\0') != std::string_view::npos) return false;
  std::size_t start = 0;
  while (true) {
    const std::size_t slash = name.find('/', start);
    const std::string_view part = name.substr(start, slash == std::string_view::npos ? slash : slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

bool is_embedded(std::string_view name) {
  for (std::size_t i = 0; i < kEmbeddedTemplateCount; ++i) {
    if (kEmbeddedTemplates[i].name != nullptr && name == kEmbeddedTemplates[i].name) return true;
  }
  return false;
}

// The quoted includes of `text` ("#include "x"" at the start of a line, spaces allowed around '#'),
// whatever conditional they sit in: a header NVRTC is given but does not read changes nothing.
std::vector<std::string> quoted_includes(const std::string& text) {
  std::vector<std::string> names;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    const auto skip = [&line] {
      while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    };
    skip();
    if (line.empty() || line.front() != '#') continue;
    line.remove_prefix(1);
    skip();
    if (line.substr(0, 7) != "include") continue;
    line.remove_prefix(7);
    skip();
    if (line.empty() || line.front() != '"') continue;
    const std::size_t close = line.find('"', 1);
    if (close != std::string_view::npos) names.emplace_back(line.substr(1, close - 1));
  }
  return names;
}

}  // namespace

std::string template_text(std::string_view name) {
  if (!valid_name(name)) throw InvalidArgument("no kernel template named '" + std::string(name) + "'");
  if (const char* dir = std::getenv("CUINLINE_TEMPLATE_DIR"); dir != nullptr && *dir != '\0') {
    std::string text;
    if (read_override(dir, name, text)) return text;
  }
  for (std::size_t i = 0; i < kEmbeddedTemplateCount; ++i) {
    if (kEmbeddedTemplates[i].name != nullptr && name == kEmbeddedTemplates[i].name) {
      return kEmbeddedTemplates[i].content;
    }
  }
  throw InvalidArgument("no kernel template named '" + std::string(name) + "'");
}

std::vector<Header> template_headers(std::initializer_list<std::string_view> names) {
  std::vector<Header> headers;
  std::vector<std::string> pending(names.begin(), names.end());
  for (std::size_t i = 0; i < pending.size(); ++i) {
    bool seen = false;
    for (const Header& h : headers) seen = seen || h.name == pending[i];
    if (seen) continue;
    headers.push_back({pending[i], template_text(pending[i])});
    for (std::string& included : quoted_includes(headers.back().content)) {
      if (is_embedded(included)) pending.push_back(std::move(included));
    }
  }
  return headers;
}

std::vector<std::string> embedded_template_names() {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < kEmbeddedTemplateCount; ++i) {
    if (kEmbeddedTemplates[i].name != nullptr) names.emplace_back(kEmbeddedTemplates[i].name);
  }
  return names;
}

}  // namespace cuinline::detail
