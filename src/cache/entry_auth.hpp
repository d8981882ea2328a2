#pragma once
// Authenticated cache entries: an HMAC-SHA256 tag over a whole entry under a fleet key with a key
// id, so keys can rotate (docs/RELIABILITY.md, "Remote cache"). Used by the remote tier; made to be
// reused by the disk tier's shared mode (seal before publish, open before decode).
//
// A sealed entry is
//   "CUIAUTH1" | u8 key-id length | key id | 32-byte tag | the entry (docs/cache-format.md)
// and the tag is HMAC-SHA256(secret, "cuinline-entry-auth-v1" | 0 | cache key digest | u8 id length |
// key id | entry). The cache key is part of the MAC, so a valid entry copied under another key does
// not verify.

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cuinline/cache.hpp"

namespace cuinline::detail {

inline constexpr char kSealMagic[8] = {'C', 'U', 'I', 'A', 'U', 'T', 'H', '1'};
inline constexpr std::size_t kTagSize = 32;
inline constexpr std::size_t kMaxKeyIdSize = 64;
inline constexpr std::size_t kMinSecretSize = 16;

/// The longest seal in front of an entry (magic, id length, id, tag).
inline constexpr std::size_t kMaxSealSize = sizeof kSealMagic + 1 + kMaxKeyIdSize + kTagSize;

/// The size of the seal that `head` (the first bytes of a stored value, up to kMaxSealSize) starts
/// with, or 0 when it does not start a well-formed seal. Lets a reader check the entry header behind
/// the seal before reading the rest.
std::size_t seal_size(std::string_view head) noexcept;

/// One fleet key.
struct AuthKey {
  std::string id;      ///< 1-64 characters of [A-Za-z0-9._-]
  std::string secret;  ///< raw bytes, at least kMinSecretSize
};

enum class AuthCheck { ok, not_sealed, unknown_key_id, bad_tag };
const char* to_string(AuthCheck check) noexcept;

/// HMAC-SHA256 of the concatenation of `parts`. Built on the low-level SHA-256 (common/sha256.hpp)
/// for the same reason: OpenSSL 3's HMAC()/EVP_MAC cost ~1 ms on first use in a process, the whole
/// budget of a remote hit. tests/test_entry_auth.cpp checks it against OpenSSL's HMAC().
std::array<unsigned char, 32> hmac_sha256(std::string_view key, const std::vector<std::string_view>& parts);

/// The signing key and the keys still accepted (rotation: the previous key verifies until retired).
class EntryAuth {
 public:
  /// keys[0] signs; every key verifies. Throws InvalidArgument for an empty list, a bad id, a short
  /// secret or a repeated id.
  explicit EntryAuth(std::vector<AuthKey> keys);

  /// Reads a key file: lines "<key-id> <secret as hex>", '#' comments; the first key signs. The file
  /// must be a regular file owned by the effective user with no group/other permission bits (0600 or
  /// stricter). nullopt with `error` set (one sentence) otherwise.
  static std::optional<EntryAuth> from_key_file(const std::filesystem::path& path, std::string* error);

  const std::string& signing_key_id() const noexcept { return keys_.front().id; }

  /// The sealed form of `entry` under `key`.
  std::string seal(const CacheKey& key, std::string_view entry) const;
  /// Verifies a sealed entry; on ok, `entry` views the entry inside `sealed`. Constant-time compare.
  AuthCheck open(const CacheKey& key, std::string_view sealed, std::string_view* entry,
                 std::string* key_id = nullptr) const;

 private:
  std::array<unsigned char, 32> tag(const AuthKey& k, const CacheKey& key, std::string_view entry) const;
  std::vector<AuthKey> keys_;
};

}  // namespace cuinline::detail
