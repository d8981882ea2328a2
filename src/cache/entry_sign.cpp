// Ed25519 keys for signed entries (entry_sign.hpp), on OpenSSL's EVP interface (libcrypto has no
// lower-level Ed25519 API).

#include "cache/entry_sign.hpp"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "cache/disk_cache_io.hpp"
#include "cache/key_file.hpp"
#include "cuinline/error.hpp"

namespace cuinline::detail {
namespace {

constexpr std::string_view kPrivateType = "ed25519-private";
constexpr std::string_view kPublicType = "ed25519";
constexpr std::string_view kRevokedMarker = "@revoked";

std::shared_ptr<evp_pkey_st> own(EVP_PKEY* key) {
  return std::shared_ptr<evp_pkey_st>(key, [](EVP_PKEY* k) { EVP_PKEY_free(k); });
}

std::shared_ptr<evp_pkey_st> public_key_object(const Ed25519PublicKey& raw) {
  EVP_PKEY* key = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, raw.data(), raw.size());
  if (key == nullptr) throw Error("entry signatures: OpenSSL cannot make an Ed25519 public key");
  return own(key);
}

// Splits a line into whitespace-separated fields; the fields from `keep_rest_from` on are one
// (the comment, which may hold spaces).
std::vector<std::string_view> fields(std::string_view line, std::size_t keep_rest_from) {
  std::vector<std::string_view> out;
  while (!line.empty()) {
    line = trim(line);
    if (line.empty()) break;
    if (out.size() == keep_rest_from) {
      out.push_back(line);
      break;
    }
    const std::size_t end = std::min(line.find_first_of(" \t"), line.size());
    out.push_back(line.substr(0, end));
    line.remove_prefix(end);
  }
  return out;
}

std::optional<Ed25519PublicKey> parse_key_bytes(std::string_view hex) {
  const auto bytes = parse_hex(hex);
  if (!bytes || bytes->size() != kEd25519KeySize) return std::nullopt;
  Ed25519PublicKey out{};
  std::copy(bytes->begin(), bytes->end(), out.begin());
  return out;
}

// One line of a file: '#' comments and blank lines skipped. Calls `each(line, number)`.
template <class Each>
void for_each_line(std::string_view text, Each each) {
  std::size_t number = 0;
  for (std::size_t start = 0; start <= text.size();) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = trim(text.substr(start, end - start));
    start = end + 1;
    ++number;
    if (!line.empty() && line.front() != '#') each(line, number);
  }
}

}  // namespace

SigningKey::SigningKey(std::string id, std::string comment, std::shared_ptr<evp_pkey_st> key)
    : id_(std::move(id)), comment_(std::move(comment)), key_(std::move(key)) {
  std::size_t size = public_key_.size();
  if (EVP_PKEY_get_raw_public_key(key_.get(), public_key_.data(), &size) != 1 || size != public_key_.size())
    throw Error("entry signatures: OpenSSL cannot give the Ed25519 public key");
}

SigningKey SigningKey::generate(const std::string& id, const std::string& comment) {
  if (!valid_key_id(id))
    throw InvalidArgument("key id '" + id + "' is not 1-64 characters of [A-Za-z0-9._-]");
  // One line in two files, and printed: no line breaks or terminal escapes.
  for (const char c : comment) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      throw InvalidArgument("the key comment holds a control character (a tab, line break or escape)");
  }
  unsigned char seed[kEd25519KeySize];
  if (RAND_priv_bytes(seed, sizeof seed) != 1)
    throw Error("entry signatures: OpenSSL's random generator failed");
  EVP_PKEY* key = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, seed, sizeof seed);
  OPENSSL_cleanse(seed, sizeof seed);
  if (key == nullptr) throw Error("entry signatures: OpenSSL cannot make an Ed25519 key");
  return SigningKey(id, std::string(trim(comment)), own(key));
}

std::optional<SigningKey> SigningKey::from_file(const std::filesystem::path& path, std::string* error) {
  std::string text;
  if (!read_key_file(path, "the signing key file", KeyFileKind::secret, text, error)) return std::nullopt;
  const std::string shown = "the signing key file '" + path.string() + "'";
  std::optional<SigningKey> found;
  std::string problem;
  for_each_line(text, [&](std::string_view line, std::size_t number) {
    if (!problem.empty()) return;
    const auto f = fields(line, 3);
    std::optional<std::string> seed;
    if (f.size() >= 3 && f[0] == kPrivateType) seed = parse_hex(f[2]);
    if (!seed || seed->size() != kEd25519KeySize || !valid_key_id(f[1])) {
      problem = shown + ", line " + std::to_string(number) +
                ": expected 'ed25519-private <key-id> <32-byte key as 64 hex digits>' (made by `cuinline key "
                "generate`)";
    } else if (found) {
      problem = shown + " holds more than one key (line " + std::to_string(number) + ")";
    } else {
      EVP_PKEY* key = EVP_PKEY_new_raw_private_key(
          EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(seed->data()), seed->size());
      if (key == nullptr) {
        problem = shown + ": OpenSSL refuses the key";
      } else {
        found = SigningKey(std::string(f[1]), f.size() > 3 ? std::string(f[3]) : std::string(), own(key));
      }
    }
    if (seed) OPENSSL_cleanse(seed->data(), seed->size());
  });
  OPENSSL_cleanse(text.data(), text.size());
  if (problem.empty() && !found) problem = shown + " holds no key";
  if (!problem.empty()) {
    *error = problem;
    return std::nullopt;
  }
  return found;
}

void SigningKey::write_file(const std::filesystem::path& path) const {
  unsigned char seed[kEd25519KeySize];
  std::size_t size = sizeof seed;
  if (EVP_PKEY_get_raw_private_key(key_.get(), seed, &size) != 1 || size != sizeof seed)
    throw Error("entry signatures: OpenSSL cannot give the Ed25519 private key");
  std::string text =
      "# cuinline entry-signing key (Ed25519). Keep it private: whoever reads it can sign kernels that "
      "every\n"
      "# machine trusting its public key runs. The public line: `cuinline key public <this file>`.\n" +
      std::string(kPrivateType) + " " + id_ + " " +
      to_hex(std::string_view(reinterpret_cast<const char*>(seed), sizeof seed)) +
      (comment_.empty() ? "" : " " + comment_) + "\n";
  OPENSSL_cleanse(seed, sizeof seed);
  const std::string shown = "'" + path.string() + "'";
  // O_EXCL: never replace a file (another key, or one a link points at); O_NOFOLLOW: with O_EXCL a
  // symlink already fails, this says so for the last component too.
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) {
    const int err = errno;
    OPENSSL_cleanse(text.data(), text.size());
    throw Error("creating the signing key file " + shown + ": " + errno_text(err) +
                (err == EEXIST ? " (an existing file is never replaced; choose another name)" : ""));
  }
  int err = ::fchmod(fd.get(), 0600) == 0 ? 0 : errno;  // whatever the umask; never more
  if (err == 0) err = write_all(fd.get(), text);
  if (err == 0 && ::fsync(fd.get()) != 0) err = errno;
  if (const int close_err = fd.close(); err == 0) err = close_err;
  OPENSSL_cleanse(text.data(), text.size());
  if (err != 0) {
    ::unlink(path.c_str());  // ours: created by the O_EXCL open above
    throw Error("writing the signing key file " + shown + ": " + errno_text(err));
  }
}

std::string SigningKey::public_line() const {
  return std::string(kPublicType) + " " + id_ + " " +
         to_hex(std::string_view(reinterpret_cast<const char*>(public_key_.data()), public_key_.size())) +
         (comment_.empty() ? "" : " " + comment_);
}

Ed25519Signature SigningKey::sign(std::string_view message) const {
  Ed25519Signature signature{};
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  std::size_t size = signature.size();
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key_.get()) != 1 ||
      EVP_DigestSign(ctx.get(), signature.data(), &size,
                     reinterpret_cast<const unsigned char*>(message.data()), message.size()) != 1 ||
      size != signature.size()) {
    throw Error("entry signatures: signing with key '" + id_ + "' failed in OpenSSL");
  }
  return signature;
}

TrustedKeys TrustedKeys::parse(std::string_view text, const std::string& shown) {
  struct Line {
    std::string id;
    Ed25519PublicKey raw;
    std::size_t number;
  };
  std::vector<Line> trusted;
  TrustedKeys out;
  for_each_line(text, [&](std::string_view line, std::size_t number) {
    const std::string where = shown + ", line " + std::to_string(number);
    auto f = fields(line, 3);
    const bool revoked = !f.empty() && f[0] == kRevokedMarker;
    if (revoked) f = fields(line.substr(kRevokedMarker.size()), 3);
    if (!f.empty() && f[0] != kPublicType) {
      throw InvalidArgument(where + ": unknown key type '" + std::string(f[0].substr(0, 32)) +
                            "' (expected '" + std::string(kPublicType) + "' or '@revoked ed25519')");
    }
    const auto raw = f.size() >= 3 ? parse_key_bytes(f[2]) : std::nullopt;
    if (!raw || !valid_key_id(f[1])) {
      throw InvalidArgument(
          where + ": expected '" + std::string(revoked ? "@revoked " : "") +
          "ed25519 <key-id> <public key as 64 hex digits> [comment]' (the line `cuinline key "
          "generate` prints)");
    }
    if (revoked) {
      out.revoked_ids_.emplace_back(f[1]);
      out.revoked_keys_.push_back(*raw);
      return;
    }
    for (const auto& earlier : trusted) {
      if (earlier.id == f[1]) {
        throw InvalidArgument(where + ": key id '" + earlier.id + "' is listed already (line " +
                              std::to_string(earlier.number) + "); give each key an id of its own");
      }
    }
    trusted.push_back({std::string(f[1]), *raw, number});
  });
  // Revocation wins: a key revoked by id or by its bytes is not trusted under any id.
  for (const auto& line : trusted) {
    const bool by_id =
        std::find(out.revoked_ids_.begin(), out.revoked_ids_.end(), line.id) != out.revoked_ids_.end();
    const bool by_key =
        std::find(out.revoked_keys_.begin(), out.revoked_keys_.end(), line.raw) != out.revoked_keys_.end();
    if (by_id || by_key) {
      if (!by_id) out.revoked_ids_.push_back(line.id);
      continue;
    }
    out.trusted_.push_back({line.id, line.raw, public_key_object(line.raw)});
  }
  return out;
}

std::optional<TrustedKeys> TrustedKeys::from_file(const std::filesystem::path& path, std::string* error) {
  std::string text;
  if (!read_key_file(path, "the trusted keys file", KeyFileKind::public_list, text, error))
    return std::nullopt;
  const std::string shown = "the trusted keys file '" + path.string() + "'";
  try {
    TrustedKeys keys = parse(text, shown);
    if (keys.trusted_.empty()) {
      *error = shown + " trusts no key (" + std::to_string(keys.revoked_count()) +
               " revoked): no entry could be loaded; add a line 'ed25519 <key-id> <public key>'";
      return std::nullopt;
    }
    return keys;
  } catch (const InvalidArgument& e) {
    *error = e.what();
    return std::nullopt;
  }
}

TrustedKeys TrustedKeys::of(const SigningKey& key) {
  TrustedKeys out;
  out.trusted_.push_back({key.id(), key.public_key(), public_key_object(key.public_key())});
  return out;
}

KeyTrust TrustedKeys::trust(std::string_view id) const noexcept {
  for (const auto& revoked : revoked_ids_) {
    if (revoked == id) return KeyTrust::revoked;
  }
  for (const auto& key : trusted_) {
    if (key.id == id) return KeyTrust::trusted;
  }
  return KeyTrust::unknown;
}

bool TrustedKeys::trusts(std::string_view id, const Ed25519PublicKey& raw) const noexcept {
  for (const auto& key : trusted_) {
    if (key.id == id) return key.raw == raw;
  }
  return false;
}

bool TrustedKeys::verify(std::string_view id, std::string_view message,
                         const Ed25519Signature& signature) const {
  const Key* found = nullptr;
  for (const auto& key : trusted_) {
    if (key.id == id) found = &key;
  }
  if (found == nullptr) return false;
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  return ctx && EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, found->key.get()) == 1 &&
         EVP_DigestVerify(ctx.get(), signature.data(), signature.size(),
                          reinterpret_cast<const unsigned char*>(message.data()), message.size()) == 1;
}

}  // namespace cuinline::detail
