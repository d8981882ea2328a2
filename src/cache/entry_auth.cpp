// Authenticated cache entries (entry_auth.hpp): HMAC-SHA256 on the low-level SHA-256 with fleet key
// files, and the Ed25519 mode (keys in entry_sign.cpp).

#include "cache/entry_auth.hpp"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <utility>

#include "cache/key_file.hpp"
#include "common/sha256.hpp"
#include "cuinline/error.hpp"
#include "common/log.hpp"

namespace cuinline::detail {
namespace {

constexpr std::string_view kTagContext{"cuinline-entry-auth-v1\0", 23};

constexpr std::string_view kSignContext{"cuinline-entry-sign-v1\0", 23};

// What a signature covers: the context, the cache key, the key id and a digest of the entry (one
// pass over the entry, as for a tag; Ed25519 itself wants its whole message in one buffer).
std::string signed_message(const CacheKey& key, std::string_view id, std::string_view entry) {
  const Sha256Digest digest = Sha256::of(entry.data(), entry.size());
  std::string message(kSignContext);
  message.append(reinterpret_cast<const char*>(key.digest.data()), key.digest.size());
  message.push_back(static_cast<char>(id.size()));
  message.append(id);
  message.append(reinterpret_cast<const char*>(digest.data()), digest.size());
  return message;
}

// The parts of a seal of either kind: magic, then u8 id length, id, then `mac_size` bytes.
struct SealView {
  std::string_view id, mac, entry;
};
std::optional<SealView> split_seal(std::string_view sealed, const char (&magic)[8], std::size_t mac_size) {
  if (sealed.size() < sizeof magic + 1 || std::memcmp(sealed.data(), magic, sizeof magic) != 0)
    return std::nullopt;
  const std::size_t id_size = static_cast<unsigned char>(sealed[sizeof magic]);
  const std::size_t head = sizeof magic + 1 + id_size + mac_size;
  if (id_size == 0 || id_size > kMaxKeyIdSize || sealed.size() < head) return std::nullopt;
  return SealView{sealed.substr(sizeof magic + 1, id_size),
                  sealed.substr(sizeof magic + 1 + id_size, mac_size), sealed.substr(head)};
}

}  // namespace

const char* to_string(AuthCheck check) noexcept {
  switch (check) {
    case AuthCheck::ok:
      return "ok";
    case AuthCheck::not_sealed:
      return "not_sealed";
    case AuthCheck::unknown_key_id:
      return "unknown_key_id";
    case AuthCheck::revoked_key:
      return "revoked_key";
    case AuthCheck::bad_tag:
      return "bad_tag";
    case AuthCheck::bad_signature:
      return "bad_signature";
  }
  return "unknown";
}

std::array<unsigned char, 32> hmac_sha256(std::string_view key, const std::vector<std::string_view>& parts) {
  constexpr std::size_t kBlock = 64;
  unsigned char block[kBlock] = {};
  if (key.size() > kBlock) {
    const Sha256Digest d = Sha256::of(key.data(), key.size());
    std::memcpy(block, d.data(), d.size());
  } else if (!key.empty()) {
    std::memcpy(block, key.data(), key.size());
  }
  unsigned char pad[kBlock];
  for (std::size_t i = 0; i < kBlock; ++i) pad[i] = block[i] ^ 0x36;
  Sha256 inner;
  inner.update(pad, kBlock);
  for (std::string_view part : parts) inner.update(part);
  const Sha256Digest inner_digest = inner.finish();
  for (std::size_t i = 0; i < kBlock; ++i) pad[i] = block[i] ^ 0x5c;
  Sha256 outer;
  outer.update(pad, kBlock);
  outer.update(inner_digest.data(), inner_digest.size());
  OPENSSL_cleanse(block, sizeof block);
  OPENSSL_cleanse(pad, sizeof pad);
  return outer.finish();
}

EntryAuth::EntryAuth(std::vector<AuthKey> keys) : keys_(std::move(keys)) {
  if (keys_.empty()) throw InvalidArgument("entry authentication: no key");
  for (std::size_t i = 0; i < keys_.size(); ++i) {
    if (!valid_key_id(keys_[i].id)) {
      throw InvalidArgument("entry authentication: key id '" + keys_[i].id +
                            "' is not 1-64 characters of [A-Za-z0-9._-]");
    }
    if (keys_[i].secret.size() < kMinSecretSize) {
      throw InvalidArgument("entry authentication: the secret of key '" + keys_[i].id + "' is shorter than " +
                            std::to_string(kMinSecretSize) + " bytes");
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (keys_[j].id == keys_[i].id)
        throw InvalidArgument("entry authentication: key id '" + keys_[i].id + "' twice");
    }
  }
}

std::optional<EntryAuth> EntryAuth::from_key_file(const std::filesystem::path& path, std::string* error) {
  const std::string shown = path.string();
  std::string text;
  if (!read_key_file(path, "the key file", KeyFileKind::secret, text, error)) return std::nullopt;
  std::vector<AuthKey> keys;
  std::size_t line_no = 0;
  for (std::size_t start = 0; start <= text.size();) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string_view line = trim(std::string_view(text).substr(start, end - start));
    start = end + 1;
    ++line_no;
    if (line.empty() || line.front() == '#') continue;
    const std::size_t space = line.find_first_of(" \t");
    const auto secret = space == std::string_view::npos ? std::nullopt : parse_hex(trim(line.substr(space)));
    if (!secret) {
      *error = "the key file '" + shown + "', line " + std::to_string(line_no) +
               ": expected '<key-id> <secret as hex digits>'";
      OPENSSL_cleanse(text.data(), text.size());
      return std::nullopt;
    }
    keys.push_back({std::string(line.substr(0, space)), *secret});
  }
  OPENSSL_cleanse(text.data(), text.size());
  if (keys.empty()) {
    *error = "the key file '" + shown + "' holds no key";
    return std::nullopt;
  }
  try {
    return EntryAuth(std::move(keys));
  } catch (const InvalidArgument& e) {
    *error = "the key file '" + shown + "': " + e.what();
    return std::nullopt;
  }
}

EntryAuth::EntryAuth(std::optional<SigningKey> signer, std::optional<TrustedKeys> trusted)
    : signer_(std::move(signer)), trusted_(std::move(trusted)) {
  if (!signer_ && !trusted_)
    throw InvalidArgument("entry signatures: neither a signing key nor trusted keys");
  if (!trusted_) trusted_ = TrustedKeys::of(*signer_);
  if (signer_ && !trusted_->trusts(signer_->id(), signer_->public_key())) {
    throw InvalidArgument(
        "the signing key '" + signer_->id() +
        "' is not trusted by the trusted keys file (its public line is missing, revoked, or "
        "lists another key under that id): the entries it signs would be refused; add `" +
        signer_->public_line() + "`");
  }
}

std::optional<EntryAuth> EntryAuth::from_config(const RemoteCacheConfig& config, std::string* error) {
  error->clear();
  if (config.signing_key_file.empty() && config.trusted_keys_file.empty()) {
    if (config.key_file.empty()) return std::nullopt;
    return from_key_file(config.key_file, error);
  }
  std::optional<SigningKey> signer;
  std::optional<TrustedKeys> trusted;
  if (!config.signing_key_file.empty() && !(signer = SigningKey::from_file(config.signing_key_file, error)))
    return std::nullopt;
  if (!config.trusted_keys_file.empty() &&
      !(trusted = TrustedKeys::from_file(config.trusted_keys_file, error)))
    return std::nullopt;
  if (!config.key_file.empty()) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true)) {
      logger()->info(
          "entries are signed (Ed25519): the fleet key '{}' is not used, and entries sealed with it "
          "are refused",
          config.key_file.string());
    }
  }
  try {
    return EntryAuth(std::move(signer), std::move(trusted));
  } catch (const InvalidArgument& e) {
    *error = e.what();
    return std::nullopt;
  }
}

const std::string& EntryAuth::signing_key_id() const noexcept {
  static const std::string none;
  if (mode() == Mode::fleet_key) return keys_.front().id;
  return signer_ ? signer_->id() : none;
}

std::string EntryAuth::describe() const {
  if (mode() == Mode::fleet_key) return "fleet key '" + keys_.front().id + "'";
  std::string text = signer_ ? "signing key '" + signer_->id() + "'" : std::string("verifying only");
  text += ", " + std::to_string(trusted_->trusted_count()) + " trusted key" +
          (trusted_->trusted_count() == 1 ? "" : "s");
  if (trusted_->revoked_count() > 0) text += ", " + std::to_string(trusted_->revoked_count()) + " revoked";
  return text;
}

std::array<unsigned char, 32> EntryAuth::tag(const AuthKey& k, const CacheKey& key,
                                             std::string_view entry) const {
  const char id_size = static_cast<char>(k.id.size());
  return hmac_sha256(
      k.secret,
      {kTagContext, std::string_view(reinterpret_cast<const char*>(key.digest.data()), key.digest.size()),
       std::string_view(&id_size, 1), k.id, entry});
}

std::size_t seal_size(std::string_view head) noexcept {
  for (const auto& [magic, mac_size] :
       {std::pair<const char*, std::size_t>{kSealMagic, kTagSize},
        std::pair<const char*, std::size_t>{kSignedMagic, kEd25519SignatureSize}}) {
    if (head.size() < 9 || std::memcmp(head.data(), magic, 8) != 0) continue;
    const std::size_t id_size = static_cast<unsigned char>(head[8]);
    if (id_size == 0 || id_size > kMaxKeyIdSize) return 0;
    return 8 + 1 + id_size + mac_size;
  }
  return 0;
}

std::string EntryAuth::seal(const CacheKey& key, std::string_view entry) const {
  const bool signs = mode() == Mode::signatures;
  if (signs && !signer_) {
    throw CacheError(
        "sealing an entry: this process holds trusted public keys but no signing key "
        "(CUINLINE_CACHE_SIGNING_KEY), so it cannot make an entry others accept");
  }
  const std::string& id = signs ? signer_->id() : keys_.front().id;
  std::string mac;
  if (signs) {
    const Ed25519Signature signature = signer_->sign(signed_message(key, id, entry));
    mac.assign(reinterpret_cast<const char*>(signature.data()), signature.size());
  } else {
    const auto t = tag(keys_.front(), key, entry);
    mac.assign(reinterpret_cast<const char*>(t.data()), t.size());
  }
  std::string out;
  out.reserve(sizeof kSealMagic + 1 + id.size() + mac.size() + entry.size());
  out.append(signs ? kSignedMagic : kSealMagic, sizeof kSealMagic);
  out.push_back(static_cast<char>(id.size()));
  out += id;
  out += mac;
  out.append(entry.data(), entry.size());
  return out;
}

AuthCheck EntryAuth::open(const CacheKey& key, std::string_view sealed, std::string_view* entry,
                          std::string* key_id) const {
  if (mode() == Mode::signatures) {
    // Only signatures: a fleet-key entry may have been made by any holder of the fleet key.
    const auto seal = split_seal(sealed, kSignedMagic, kEd25519SignatureSize);
    if (!seal) return AuthCheck::not_sealed;
    if (key_id != nullptr) *key_id = std::string(seal->id);
    switch (trusted_->trust(seal->id)) {
      case KeyTrust::revoked:
        return AuthCheck::revoked_key;
      case KeyTrust::unknown:
        return AuthCheck::unknown_key_id;
      case KeyTrust::trusted:
        break;
    }
    Ed25519Signature signature{};
    std::memcpy(signature.data(), seal->mac.data(), signature.size());
    if (!trusted_->verify(seal->id, signed_message(key, seal->id, seal->entry), signature))
      return AuthCheck::bad_signature;
    *entry = seal->entry;
    return AuthCheck::ok;
  }
  const auto seal = split_seal(sealed, kSealMagic, kTagSize);
  if (!seal) return AuthCheck::not_sealed;
  if (key_id != nullptr) *key_id = std::string(seal->id);
  const AuthKey* k = nullptr;
  for (const auto& candidate : keys_) {
    if (candidate.id == seal->id) k = &candidate;
  }
  if (k == nullptr) return AuthCheck::unknown_key_id;
  const auto expected = tag(*k, key, seal->entry);
  if (CRYPTO_memcmp(expected.data(), seal->mac.data(), kTagSize) != 0) return AuthCheck::bad_tag;
  *entry = seal->entry;
  return AuthCheck::ok;
}

EntryCheck EntryAuth::entry_check(AuthCheck check) const noexcept {
  switch (check) {
    case AuthCheck::ok:
      return EntryCheck::ok;
    case AuthCheck::unknown_key_id:
      // A fleet key's unknown id is one more tag that does not verify; a signer's, a key to trust or not.
      return mode() == Mode::signatures ? EntryCheck::unknown_key : EntryCheck::unauthenticated;
    case AuthCheck::revoked_key:
      return EntryCheck::revoked_key;
    case AuthCheck::bad_signature:
      return EntryCheck::bad_signature;
    case AuthCheck::not_sealed:
    case AuthCheck::bad_tag:
      break;
  }
  return EntryCheck::unauthenticated;
}

const char* EntryAuth::refusal(EntryCheck check) const noexcept {
  if (mode() == Mode::fleet_key) {
    return "its authentication tag does not verify with the fleet key (CUINLINE_CACHE_KEY_FILE); it will be "
           "rebuilt";
  }
  switch (check) {
    case EntryCheck::unknown_key:
      return "it is signed by a key CUINLINE_CACHE_TRUSTED_KEYS does not list; left in place";
    case EntryCheck::revoked_key:
      return "it is signed by a key CUINLINE_CACHE_TRUSTED_KEYS revokes; left in place";
    case EntryCheck::bad_signature:
      return "its signature does not verify (altered, or copied under another name); left in place";
    default:
      return "it is not signed (entries here must carry the signature of a trusted key); left in place";
  }
}

}  // namespace cuinline::detail
