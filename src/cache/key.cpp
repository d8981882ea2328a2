#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cuinline/cache.hpp>
#include <cuinline/error.hpp>
#include <cuinline/version.hpp>
#include <memory>
#include <string>
#include <string_view>

#include "common/sha256.hpp"
#include "compiler/options.hpp"

namespace cuinline {

namespace {

// SHA-256 over length-prefixed fields, with no allocation beyond what the caller's strings
// already hold.
class KeyHasher final : public detail::OptionSink {
 public:
  void number(std::uint64_t value) {
    unsigned char bytes[8];
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(value >> (8 * i));
    update(bytes, sizeof bytes);
  }

  void field(std::string_view text) {
    number(text.size());
    update(text.data(), text.size());
  }

  // One canonical option, hashed as the field prefix + value without joining them.
  void option(std::string_view prefix, std::string_view value) override {
    number(prefix.size() + value.size());
    update(prefix.data(), prefix.size());
    update(value.data(), value.size());
  }

  CacheKey finish() {
    flush();
    CacheKey key;
    key.digest = sha_.finish();
    return key;
  }

 private:
  // Small fields are gathered in a stack buffer: each digest update call costs more than hashing a
  // few bytes.
  void update(const void* data, std::size_t size) {
    if (size == 0) return;  // data may be null then
    if (size <= sizeof buffer_ - used_) {
      std::memcpy(buffer_ + used_, data, size);
      used_ += size;
      return;
    }
    flush();
    if (size <= sizeof buffer_) {
      std::memcpy(buffer_, data, size);
      used_ = size;
    } else {
      digest_update(data, size);
    }
  }

  void flush() {
    digest_update(buffer_, used_);
    used_ = 0;
  }

  void digest_update(const void* data, std::size_t size) { sha_.update(data, size); }

  detail::Sha256 sha_;
  unsigned char buffer_[1024];
  std::size_t used_ = 0;
};

struct OptionCounter final : detail::OptionSink {
  std::uint64_t count = 0;
  void option(std::string_view, std::string_view) override { ++count; }
};

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

std::string CacheKey::hex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(digest.size() * 2, '\0');
  for (std::size_t i = 0; i < digest.size(); ++i) {
    out[2 * i] = kDigits[digest[i] >> 4];
    out[2 * i + 1] = kDigits[digest[i] & 0xf];
  }
  return out;
}

std::optional<CacheKey> CacheKey::from_hex(std::string_view hex) {
  // Lowercase only, so that a key and its text (a cache file name) map one to one.
  CacheKey key;
  if (hex.size() != key.digest.size() * 2) return std::nullopt;
  for (std::size_t i = 0; i < key.digest.size(); ++i) {
    const int high = hex_value(hex[2 * i]);
    const int low = hex_value(hex[2 * i + 1]);
    if (high < 0 || low < 0) return std::nullopt;
    key.digest[i] = static_cast<unsigned char>(high << 4 | low);
  }
  return key;
}

std::size_t CacheKeyHash::operator()(const CacheKey& key) const noexcept {
  std::size_t value = 0;
  std::memcpy(&value, key.digest.data(), sizeof value);
  return value;
}

CacheKey make_cache_key(const CompileRequest& request, const Arch& requested) {
  // The arch the binary is built for (an arch-specific request: sm_90a for sm_90). The flag itself
  // is not hashed: where it changes nothing (sm_80) the binary is the same.
  const Arch target = compile_target(request, requested);
  KeyHasher hash;
  hash.field("cuinline.cache-key");
  hash.number(kCacheFormatVersion);
  hash.field(CUINLINE_VERSION_STRING);
  const NvrtcVersion nvrtc = nvrtc_version();
  hash.number(static_cast<std::uint64_t>(nvrtc.major));
  hash.number(static_cast<std::uint64_t>(nvrtc.minor));
  // Fixed-size scratch: Arch::name() would allocate.
  char arch[24];
  int arch_size = std::snprintf(arch, sizeof arch - 1, "sm_%d", target.number());
  if (arch_size < 0) arch_size = 0;
  if (target.suffix != '\0') arch[arch_size++] = target.suffix;
  hash.field(std::string_view(arch, static_cast<std::size_t>(arch_size)));
  // The name reaches the binary through line info and debug info.
  hash.field(request.name);
  hash.field(request.source);
  hash.number(request.headers.size());
  for (const Header& header : request.headers) {
    hash.field(header.name);
    hash.field(header.content);
  }
  const std::vector<std::string>& defaults = detail::keyed_default_options();
  hash.number(defaults.size());
  for (const std::string& option : defaults) hash.field(option);
  // Two walks (count, then hash) keep the list length-prefixed without building the options.
  OptionCounter counter;
  detail::for_each_canonical_option(request.options, counter);
  hash.number(counter.count);
  detail::for_each_canonical_option(request.options, hash);
  hash.number(request.name_expressions.size());
  for (const std::string& expression : request.name_expressions) hash.field(expression);
  return hash.finish();
}

const char* to_string(CacheTier tier) noexcept {
  switch (tier) {
    case CacheTier::memory:
      return "memory";
    case CacheTier::disk:
      return "disk";
    case CacheTier::compiled:
      return "compiled";
    case CacheTier::remote:
      return "remote";
  }
  return "unknown";
}

}  // namespace cuinline
