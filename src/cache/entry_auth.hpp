#pragma once
// Authenticated cache entries for the tiers others can write (a team disk cache, Redis), in one of
// two modes (docs/RELIABILITY.md, "Remote cache" and "Signed entries"):
//
// - fleet key: an HMAC-SHA256 tag over the entry under a shared secret with a key id, so keys can
//   rotate. Every holder of the key can both check and make entries.
// - signatures: an Ed25519 signature by the signer's private key (the warm / CI machine), checked
//   against a list of trusted public keys. A machine holding only public keys cannot make an entry
//   that it or anyone else accepts.
//
// A sealed entry is (docs/cache-format.md)
//   "CUIAUTH1" | u8 key-id length | key id | 32-byte tag | the entry
//   "CUISIGN1" | u8 key-id length | key id | 64-byte signature | the entry
// The tag is HMAC-SHA256(secret, "cuinline-entry-auth-v1" | 0 | cache key digest | u8 id length |
// key id | entry); the signature is Ed25519 over "cuinline-entry-sign-v1" | 0 | cache key digest |
// u8 id length | key id | SHA-256(entry). The cache key is inside both, so a valid entry copied under
// another key does not verify.

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cache/entry_sign.hpp"
#include "cuinline/cache.hpp"

namespace cuinline::detail {

inline constexpr char kSealMagic[8] = {'C', 'U', 'I', 'A', 'U', 'T', 'H', '1'};
inline constexpr char kSignedMagic[8] = {'C', 'U', 'I', 'S', 'I', 'G', 'N', '1'};
inline constexpr std::size_t kTagSize = 32;
inline constexpr std::size_t kMaxKeyIdSize = 64;
inline constexpr std::size_t kMinSecretSize = 16;

/// The longest seal in front of an entry (magic, id length, id, signature).
inline constexpr std::size_t kMaxSealSize = sizeof kSignedMagic + 1 + kMaxKeyIdSize + kEd25519SignatureSize;

/// The size of the seal (of either mode) that `head` (the first bytes of a stored value, up to
/// kMaxSealSize) starts with, or 0 when it does not start a well-formed seal. Lets a reader check the entry
/// header behind the seal before reading the rest.
std::size_t seal_size(std::string_view head) noexcept;

/// One fleet key.
struct AuthKey {
  std::string id;      ///< 1-64 characters of [A-Za-z0-9._-]
  std::string secret;  ///< raw bytes, at least kMinSecretSize
};

/// not_sealed: no seal of this process's mode (an unsealed entry, or a fleet-key entry where signatures
/// are required and the reverse). revoked_key and bad_signature: signature mode only.
enum class AuthCheck { ok, not_sealed, unknown_key_id, revoked_key, bad_tag, bad_signature };
const char* to_string(AuthCheck check) noexcept;

/// HMAC-SHA256 of the concatenation of `parts`. Built on the low-level SHA-256 (common/sha256.hpp)
/// for the same reason: OpenSSL 3's HMAC()/EVP_MAC cost ~1 ms on first use in a process, the whole
/// budget of a remote hit. tests/test_entry_auth.cpp checks it against OpenSSL's HMAC().
std::array<unsigned char, 32> hmac_sha256(std::string_view key, const std::vector<std::string_view>& parts);

/// How a tier seals and checks its entries: a fleet key (keys still accepted for rotation), or an
/// Ed25519 signer and the trusted public keys.
class EntryAuth {
 public:
  enum class Mode { fleet_key, signatures };

  /// Fleet key: keys[0] seals; every key verifies. Throws InvalidArgument for an empty list, a bad id,
  /// a short secret or a repeated id.
  explicit EntryAuth(std::vector<AuthKey> keys);
  /// Signatures: entries are signed by `signer` (none: this process checks entries and makes none)
  /// and accepted when signed by a key `trusted` lists and has not revoked; without a list, by the
  /// signer's own key alone. Throws InvalidArgument with neither, or when the list does not trust
  /// the signer (its entries would be refused by itself and every verifier using the list).
  EntryAuth(std::optional<SigningKey> signer, std::optional<TrustedKeys> trusted);

  /// Reads a fleet key file: lines "<key-id> <secret as hex>", '#' comments; the first key seals. The
  /// file must be a regular file owned by the effective user with no group/other permission bits
  /// (0600 or stricter). nullopt with `error` set (one sentence) otherwise.
  static std::optional<EntryAuth> from_key_file(const std::filesystem::path& path, std::string* error);
  /// What `config` chooses: signatures when signing_key_file or trusted_keys_file is set (the fleet
  /// key is then not used), else the fleet key of key_file. nullopt with `error` empty when nothing is
  /// configured, with `error` saying why when a named file cannot be used.
  static std::optional<EntryAuth> from_config(const RemoteCacheConfig& config, std::string* error);

  Mode mode() const noexcept { return signer_ || trusted_ ? Mode::signatures : Mode::fleet_key; }
  /// Whether seal() works: always with a fleet key; with signatures only for the signer.
  bool can_seal() const noexcept { return mode() == Mode::fleet_key || signer_.has_value(); }
  /// The id of the key new entries are sealed with; empty when this process cannot seal.
  const std::string& signing_key_id() const noexcept;
  /// "fleet key 'k1'", "signing key 'ci-1', 2 trusted keys", "verifying only, 2 trusted keys, 1 revoked".
  std::string describe() const;

  /// The sealed form of `entry` under `key`. Throws CacheError when this process cannot seal.
  std::string seal(const CacheKey& key, std::string_view entry) const;
  /// Verifies a sealed entry; on ok, `entry` views the entry inside `sealed`. Constant-time compare
  /// for tags. `key_id` gets the seal's key id when there is one.
  AuthCheck open(const CacheKey& key, std::string_view sealed, std::string_view* entry,
                 std::string* key_id = nullptr) const;
  /// The disk tier's verdict for an entry whose seal gave `check`: unauthenticated, or with signatures
  /// the more precise unknown_key, revoked_key or bad_signature.
  EntryCheck entry_check(AuthCheck check) const noexcept;
  /// Why a team cache's entry with verdict `check` is not loaded, and what becomes of it (for the log).
  const char* refusal(EntryCheck check) const noexcept;

 private:
  std::array<unsigned char, 32> tag(const AuthKey& k, const CacheKey& key, std::string_view entry) const;
  std::vector<AuthKey> keys_;           // fleet key mode
  std::optional<SigningKey> signer_;    // signature mode
  std::optional<TrustedKeys> trusted_;  // signature mode (set whenever signer_ is)
};

}  // namespace cuinline::detail
