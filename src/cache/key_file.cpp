// Key files (key_file.hpp): owner and mode checks on the opened descriptor, and line parsing helpers.

#include "cache/key_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/directory_walk.hpp"
#include "cache/disk_cache_io.hpp"

namespace cuinline::detail {
namespace {

constexpr off_t kMaxKeyFileBytes = 65536;

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

bool read_key_file(const std::filesystem::path& path, const char* what, KeyFileKind kind, std::string& text,
                   std::string* error) {
  const std::string shown = std::string(what) + " '" + path.string() + "'";
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (!fd) {
    const int err = errno;
    *error = "cannot open " + shown + ": " +
             (err == ELOOP ? std::string("it is a symbolic link (not followed)") : errno_text(err));
    return false;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    *error = shown + " is not a regular file";
    return false;
  }
  const uid_t me = ::geteuid();
  if (kind == KeyFileKind::secret) {
    // Whoever can read a secret can make entries that run as machine code wherever they are
    // accepted; whoever can write it can swap it. Like ssh with its private keys: the user's own
    // file, private to them.
    if (st.st_uid != me) {
      *error = shown + " is owned by uid " + std::to_string(st.st_uid) + ", not by this user (uid " +
               std::to_string(me) + "); refusing it";
      return false;
    }
    if ((st.st_mode & 077) != 0) {
      *error = shown + " has mode " + mode_text(st.st_mode) +
               ": group or others may read or write it; refusing it (chmod 600 it)";
      return false;
    }
  } else {
    // Public keys are not secret, but whoever can write the list decides whose entries run here:
    // like ssh's authorized_keys, this user's or root's, and writable by no one else.
    if (st.st_uid != me && st.st_uid != 0) {
      *error = shown + " is owned by uid " + std::to_string(st.st_uid) +
               ", not by this user or root: its owner decides whose entries run here; refusing it";
      return false;
    }
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
      *error = shown + " has mode " + mode_text(st.st_mode) +
               ": group or others may write it (and add their own keys); refusing it (chmod go-w it)";
      return false;
    }
  }
  if (st.st_size > kMaxKeyFileBytes) {
    *error = shown + " is larger than 64 KiB";
    return false;
  }
  if (const int err = read_up_to(fd.get(), static_cast<std::size_t>(st.st_size), text); err != 0) {
    *error = "cannot read " + shown + ": " + errno_text(err);
    return false;
  }
  return true;
}

bool valid_key_id(std::string_view id) noexcept {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::optional<std::string> parse_hex(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  std::string out;
  out.reserve(hex.size() / 2);
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    const int hi = hex_value(hex[i]), lo = hex_value(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

std::string to_hex(std::string_view bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    out.push_back(digits[b >> 4]);
    out.push_back(digits[b & 15]);
  }
  return out;
}

std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

}  // namespace cuinline::detail
