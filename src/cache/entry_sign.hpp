#pragma once
// Ed25519 keys for signed cache entries (docs/RELIABILITY.md, "Signed entries"): the signer's private
// key (the warm / CI machine) and the list of trusted public keys every verifier holds. With a fleet
// key (HMAC) every member who can check an entry can also make one; with signatures the machines that
// only verify hold nothing that makes an entry they or others would accept.
//
// Files (docs/cache-format.md, "Key files"):
//   signing key   "ed25519-private <key-id> <32-byte seed as hex> [comment]", mode 0600, this user's
//   trusted keys  "ed25519 <key-id> <32-byte public key as hex> [comment]" per key, and
//                 "@revoked ed25519 <key-id> <public key as hex> [comment]" for a key never to accept
//                 again (by id and by key), whatever other lines say

#include <array>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

struct evp_pkey_st;  // OpenSSL's EVP_PKEY, kept out of this header

namespace cuinline::detail {

inline constexpr std::size_t kEd25519KeySize = 32;
inline constexpr std::size_t kEd25519SignatureSize = 64;

using Ed25519PublicKey = std::array<unsigned char, kEd25519KeySize>;
using Ed25519Signature = std::array<unsigned char, kEd25519SignatureSize>;

/// The private half of an Ed25519 key pair with its key id. Copies share one OpenSSL key.
class SigningKey {
 public:
  /// A fresh key pair from OpenSSL's random generator. Throws InvalidArgument for a bad id or a
  /// comment with a control character.
  static SigningKey generate(const std::string& id, const std::string& comment);
  /// Reads a signing key file (read_key_file's `secret` checks, then exactly one key line). nullopt
  /// with `error` set otherwise.
  static std::optional<SigningKey> from_file(const std::filesystem::path& path, std::string* error);
  /// Creates `path` (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600 whatever the umask: an existing file or
  /// link is never replaced) holding this key; fsync'ed. Throws Error saying why; a file it created
  /// and could not finish is removed.
  void write_file(const std::filesystem::path& path) const;

  const std::string& id() const noexcept { return id_; }
  const std::string& comment() const noexcept { return comment_; }
  const Ed25519PublicKey& public_key() const noexcept { return public_key_; }
  /// "ed25519 <id> <public key hex>[ <comment>]": the line to put in trusted-keys files.
  std::string public_line() const;
  Ed25519Signature sign(std::string_view message) const;

 private:
  SigningKey(std::string id, std::string comment, std::shared_ptr<evp_pkey_st> key);
  std::string id_;
  std::string comment_;
  std::shared_ptr<evp_pkey_st> key_;
  Ed25519PublicKey public_key_{};
};

/// Whether a key id names a key a verifier accepts.
enum class KeyTrust { trusted, unknown, revoked };

/// The public keys a verifier accepts entries from, and the revoked ones.
class TrustedKeys {
 public:
  /// Parses a trusted-keys file's text; `shown` names it in messages. Throws InvalidArgument naming
  /// the line: a malformed line, an unknown key type, an id or key listed twice as trusted.
  static TrustedKeys parse(std::string_view text, const std::string& shown);
  /// Reads a trusted-keys file (read_key_file's `public_list` checks), then parse. nullopt with `error`
  /// set otherwise. A file without any trusted key is an error (nothing could ever be loaded).
  static std::optional<TrustedKeys> from_file(const std::filesystem::path& path, std::string* error);
  /// The list of one key: a signer with no list trusts its own key alone.
  static TrustedKeys of(const SigningKey& key);

  /// Whether `id` is a trusted key (revocation wins over any trusted line of that id or key).
  KeyTrust trust(std::string_view id) const noexcept;
  /// Whether `key` is trusted under `id`.
  bool trusts(std::string_view id, const Ed25519PublicKey& key) const noexcept;
  /// The signature of `message` by trusted key `id` verifies. False for an untrusted id.
  bool verify(std::string_view id, std::string_view message, const Ed25519Signature& signature) const;

  std::size_t trusted_count() const noexcept { return trusted_.size(); }
  std::size_t revoked_count() const noexcept { return revoked_ids_.size(); }

 private:
  struct Key {
    std::string id;
    Ed25519PublicKey raw{};
    std::shared_ptr<evp_pkey_st> key;
  };
  std::vector<Key> trusted_;
  std::vector<std::string> revoked_ids_;
  std::vector<Ed25519PublicKey> revoked_keys_;
};

}  // namespace cuinline::detail
