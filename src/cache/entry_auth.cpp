// Authenticated cache entries (entry_auth.hpp): HMAC-SHA256 on the low-level SHA-256, key files.

#include "cache/entry_auth.hpp"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "cache/disk_cache_io.hpp"
#include "common/sha256.hpp"
#include "cuinline/error.hpp"

namespace cuinline::detail {
namespace {

constexpr std::string_view kTagContext{"cuinline-entry-auth-v1\0", 23};

bool valid_key_id(std::string_view id) {
  if (id.empty() || id.size() > kMaxKeyIdSize) return false;
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<std::string> parse_hex(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  std::string out;
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    const int hi = hex_value(hex[i]), lo = hex_value(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
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
    case AuthCheck::bad_tag:
      return "bad_tag";
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
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (!fd) {
    *error = "cannot open the key file '" + shown + "': " + errno_text(errno);
    return std::nullopt;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    *error = "the key file '" + shown + "' is not a regular file";
    return std::nullopt;
  }
  // Whoever can read the key can forge entries that run as machine code on every server; whoever can
  // write it can swap it. Like ssh with its private keys: the user's own file, private to them.
  if (st.st_uid != ::geteuid()) {
    *error = "the key file '" + shown + "' is owned by uid " + std::to_string(st.st_uid) +
             ", not by this user (uid " + std::to_string(::geteuid()) + "); refusing it";
    return std::nullopt;
  }
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    *error = "the key file '" + shown + "' has mode " + mode +
             ": group or others may read or write it; refusing it (chmod 600 it)";
    return std::nullopt;
  }
  if (st.st_size > 65536) {
    *error = "the key file '" + shown + "' is larger than 64 KiB";
    return std::nullopt;
  }
  std::string text;
  if (const int err = read_up_to(fd.get(), static_cast<std::size_t>(st.st_size), text); err != 0) {
    *error = "cannot read the key file '" + shown + "': " + errno_text(err);
    return std::nullopt;
  }
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
      return std::nullopt;
    }
    keys.push_back({std::string(line.substr(0, space)), *secret});
  }
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

std::array<unsigned char, 32> EntryAuth::tag(const AuthKey& k, const CacheKey& key,
                                             std::string_view entry) const {
  const char id_size = static_cast<char>(k.id.size());
  return hmac_sha256(
      k.secret,
      {kTagContext, std::string_view(reinterpret_cast<const char*>(key.digest.data()), key.digest.size()),
       std::string_view(&id_size, 1), k.id, entry});
}

std::size_t seal_size(std::string_view head) noexcept {
  if (head.size() < sizeof kSealMagic + 1 || std::memcmp(head.data(), kSealMagic, sizeof kSealMagic) != 0) return 0;
  const std::size_t id_size = static_cast<unsigned char>(head[sizeof kSealMagic]);
  if (id_size == 0 || id_size > kMaxKeyIdSize) return 0;
  return sizeof kSealMagic + 1 + id_size + kTagSize;
}

std::string EntryAuth::seal(const CacheKey& key, std::string_view entry) const {
  const AuthKey& k = keys_.front();
  const auto t = tag(k, key, entry);
  std::string out;
  out.reserve(sizeof kSealMagic + 1 + k.id.size() + kTagSize + entry.size());
  out.append(kSealMagic, sizeof kSealMagic);
  out.push_back(static_cast<char>(k.id.size()));
  out += k.id;
  out.append(reinterpret_cast<const char*>(t.data()), t.size());
  out.append(entry.data(), entry.size());
  return out;
}

AuthCheck EntryAuth::open(const CacheKey& key, std::string_view sealed, std::string_view* entry,
                          std::string* key_id) const {
  if (sealed.size() < sizeof kSealMagic + 1 ||
      std::memcmp(sealed.data(), kSealMagic, sizeof kSealMagic) != 0) {
    return AuthCheck::not_sealed;
  }
  const std::size_t id_size = static_cast<unsigned char>(sealed[sizeof kSealMagic]);
  const std::size_t head = sizeof kSealMagic + 1 + id_size + kTagSize;
  if (id_size == 0 || id_size > kMaxKeyIdSize || sealed.size() < head) return AuthCheck::not_sealed;
  const std::string_view id = sealed.substr(sizeof kSealMagic + 1, id_size);
  if (key_id != nullptr) *key_id = std::string(id);
  const AuthKey* k = nullptr;
  for (const auto& candidate : keys_) {
    if (candidate.id == id) k = &candidate;
  }
  if (k == nullptr) return AuthCheck::unknown_key_id;
  const std::string_view body = sealed.substr(head);
  const auto expected = tag(*k, key, body);
  if (CRYPTO_memcmp(expected.data(), sealed.data() + sizeof kSealMagic + 1 + id_size, kTagSize) != 0) {
    return AuthCheck::bad_tag;
  }
  *entry = body;
  return AuthCheck::ok;
}

}  // namespace cuinline::detail
