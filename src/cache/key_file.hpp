#pragma once
// Reading the files that hold entry-authentication keys: the fleet key and the signing key (secrets)
// and the trusted-keys list (public keys), with the checks ssh makes of its own key files, and the
// small parsers their lines share.

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace cuinline::detail {

enum class KeyFileKind {
  /// A secret (fleet key, signing key): whoever reads it can make entries others run. A regular file
  /// owned by this user, with no group or other permission bits (0600 or stricter).
  secret,
  /// A list of trusted public keys: whoever writes it chooses whose entries run. A regular file owned
  /// by this user or root, writable by no one else (group and others may read it).
  public_list,
};

/// Reads the key file at `path` whole (at most 64 KiB, never through a symlink), after checking its
/// owner and mode on the opened descriptor. `what` names it in messages ("the key file", "the signing
/// key file"). false with `error` set (one sentence naming the file and the fix) otherwise.
bool read_key_file(const std::filesystem::path& path, const char* what, KeyFileKind kind, std::string& text,
                   std::string* error);

/// 1-64 characters of [A-Za-z0-9._-].
bool valid_key_id(std::string_view id) noexcept;
/// Hex digits (either case) as bytes; nullopt for an odd count or anything else.
std::optional<std::string> parse_hex(std::string_view hex);
/// Lowercase hex of `bytes`.
std::string to_hex(std::string_view bytes);
/// `s` without leading and trailing spaces, tabs and CRs.
std::string_view trim(std::string_view s) noexcept;

}  // namespace cuinline::detail
