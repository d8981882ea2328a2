#include "cache/disk_cache_entry.hpp"

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "common/sha256.hpp"
#include "cuinline/error.hpp"

namespace cuinline {
namespace detail {
namespace {

// Every integer in an entry is little-endian, written byte by byte (no host-order memcpy).
void put_u8(std::string& out, std::uint8_t v) {
  out.push_back(static_cast<char>(v));
}
void put_u16(std::string& out, std::uint16_t v) {
  for (int i = 0; i < 2; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_string32(std::string& out, std::string_view s) {
  if (s.size() > UINT32_MAX)
    throw CacheError("a name of " + std::to_string(s.size()) + " bytes is too long to cache");
  put_u32(out, static_cast<std::uint32_t>(s.size()));
  out.append(s.data(), s.size());
}

// A bounds-checked cursor over untrusted bytes. Every read checks the remaining length first and
// reports failure instead of reading past the end; nothing is allocated before a length is checked.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}

  std::size_t remaining() const noexcept { return bytes_.size() - pos_; }

  bool u8(std::uint8_t& v) noexcept {
    if (remaining() < 1) return false;
    v = static_cast<unsigned char>(bytes_[pos_++]);
    return true;
  }
  bool u16(std::uint16_t& v) noexcept {
    std::uint64_t wide = 0;
    if (!little_endian(2, wide)) return false;
    v = static_cast<std::uint16_t>(wide);
    return true;
  }
  bool u32(std::uint32_t& v) noexcept {
    std::uint64_t wide = 0;
    if (!little_endian(4, wide)) return false;
    v = static_cast<std::uint32_t>(wide);
    return true;
  }
  bool u64(std::uint64_t& v) noexcept { return little_endian(8, v); }
  bool bytes(std::size_t n, std::string_view& v) noexcept {
    if (remaining() < n) return false;
    v = bytes_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  bool string32(std::string_view& v) noexcept {
    std::uint32_t n = 0;
    return u32(n) && bytes(n, v);
  }

 private:
  bool little_endian(int width, std::uint64_t& v) noexcept {
    if (remaining() < static_cast<std::size_t>(width)) return false;
    v = 0;
    for (int i = 0; i < width; ++i) {
      v |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes_[pos_ + i])) << (8 * i);
    }
    pos_ += static_cast<std::size_t>(width);
    return true;
  }

  std::string_view bytes_;
  std::size_t pos_ = 0;
};

bool valid_kind(std::uint8_t kind) {
  return kind == static_cast<std::uint8_t>(BinaryKind::cubin) ||
         kind == static_cast<std::uint8_t>(BinaryKind::ptx);
}

bool valid_suffix(std::uint8_t suffix) {
  return suffix == 0 || suffix == 'a' || suffix == 'f';
}

// Arch and NVRTC numbers are small; anything past this is not something cuinline wrote.
constexpr std::uint32_t kMaxVersionNumber = 1000;

}  // namespace

std::array<unsigned char, 32> sha256(std::string_view bytes) {
  return Sha256::of(bytes.data(), bytes.size());
}

std::string encode_entry(const CacheKey& key, NvrtcVersion nvrtc, const CompiledProgram& program) {
  std::string body;
  put_string32(body, program.program_name);
  if (program.lowered_names.size() > UINT32_MAX) throw CacheError("too many lowered names to cache");
  put_u32(body, static_cast<std::uint32_t>(program.lowered_names.size()));
  for (const auto& [expression, lowered] : program.lowered_names) {
    put_string32(body, expression);
    put_string32(body, lowered);
  }
  put_u64(body, program.binary.size());
  body.append(program.binary.data(), program.binary.size());

  std::string out;
  out.reserve(kEntryHeaderSize + body.size() + kEntryChecksumSize);
  out.append(kEntryMagic, sizeof kEntryMagic);
  put_u32(out, kCacheFormatVersion);
  out.append(reinterpret_cast<const char*>(key.digest.data()), key.digest.size());
  put_u32(out, static_cast<std::uint32_t>(nvrtc.major));
  put_u32(out, static_cast<std::uint32_t>(nvrtc.minor));
  put_u32(out, static_cast<std::uint32_t>(program.arch.major));
  put_u32(out, static_cast<std::uint32_t>(program.arch.minor));
  put_u8(out, static_cast<std::uint8_t>(program.arch.suffix));
  put_u8(out, static_cast<std::uint8_t>(program.kind));
  put_u16(out, 0);  // reserved
  put_u64(out, body.size());
  out += body;
  const auto checksum = sha256(out);
  out.append(reinterpret_cast<const char*>(checksum.data()), checksum.size());
  return out;
}

EntryCheck check_entry_head(std::string_view head, std::uint64_t file_size, const CacheKey* expected) {
  if (head.size() < sizeof kEntryMagic) return EntryCheck::truncated;
  if (std::memcmp(head.data(), kEntryMagic, sizeof kEntryMagic) != 0) return EntryCheck::bad_magic;
  Reader header(head.substr(sizeof kEntryMagic));
  std::uint32_t version = 0;
  if (!header.u32(version)) return EntryCheck::truncated;
  if (version != kCacheFormatVersion) return EntryCheck::wrong_version;
  std::string_view digest;
  std::uint32_t skip32 = 0;
  std::uint8_t skip8 = 0;
  std::uint16_t skip16 = 0;
  std::uint64_t body_size = 0;
  if (!header.bytes(32, digest) || !header.u32(skip32) || !header.u32(skip32) || !header.u32(skip32) ||
      !header.u32(skip32) || !header.u8(skip8) || !header.u8(skip8) || !header.u16(skip16) ||
      !header.u64(body_size)) {
    return EntryCheck::truncated;
  }
  if (expected != nullptr && std::memcmp(digest.data(), expected->digest.data(), 32) != 0) {
    return EntryCheck::wrong_key;
  }
  if (file_size < kEntryHeaderSize + kEntryChecksumSize) return EntryCheck::truncated;
  const std::uint64_t room = file_size - kEntryHeaderSize - kEntryChecksumSize;
  if (body_size > room) return EntryCheck::truncated;
  if (body_size != room) return EntryCheck::bad_checksum;  // trailing bytes
  return EntryCheck::ok;
}

EntryCheck decode_entry(std::string_view bytes, const CacheKey* expected, NvrtcVersion current,
                        CompiledProgram* out, DiskEntryInfo* info) {
  if (bytes.size() < sizeof kEntryMagic) return EntryCheck::truncated;
  if (std::memcmp(bytes.data(), kEntryMagic, sizeof kEntryMagic) != 0) return EntryCheck::bad_magic;

  Reader header(bytes.substr(sizeof kEntryMagic));
  std::uint32_t version = 0;
  if (!header.u32(version)) return EntryCheck::truncated;
  // Another format version may lay out everything after this field differently: stop here.
  if (version != kCacheFormatVersion) return EntryCheck::wrong_version;

  std::string_view digest;
  std::uint32_t nvrtc_major = 0, nvrtc_minor = 0, arch_major = 0, arch_minor = 0;
  std::uint8_t suffix = 0, kind = 0;
  std::uint16_t reserved = 0;
  std::uint64_t body_size = 0;
  if (!header.bytes(32, digest) || !header.u32(nvrtc_major) || !header.u32(nvrtc_minor) ||
      !header.u32(arch_major) || !header.u32(arch_minor) || !header.u8(suffix) || !header.u8(kind) ||
      !header.u16(reserved) || !header.u64(body_size)) {
    return EntryCheck::truncated;
  }
  // Compare against what is there, never compute header + body_size (it could overflow).
  const std::uint64_t after_header = bytes.size() - kEntryHeaderSize;
  if (after_header < kEntryChecksumSize || body_size > after_header - kEntryChecksumSize) {
    return EntryCheck::truncated;
  }
  if (body_size != after_header - kEntryChecksumSize) return EntryCheck::bad_checksum;  // trailing bytes

  const std::size_t checked_size = kEntryHeaderSize + static_cast<std::size_t>(body_size);
  const auto checksum = sha256(bytes.substr(0, checked_size));
  if (std::memcmp(checksum.data(), bytes.data() + checked_size, kEntryChecksumSize) != 0) {
    return EntryCheck::bad_checksum;
  }

  // The checksum holds, so from here on a malformed field means a writer we do not understand.
  if (reserved != 0 || !valid_kind(kind) || !valid_suffix(suffix) || nvrtc_major > kMaxVersionNumber ||
      nvrtc_minor > kMaxVersionNumber || arch_major > kMaxVersionNumber || arch_minor > kMaxVersionNumber) {
    return EntryCheck::foreign;
  }
  Reader body(bytes.substr(kEntryHeaderSize, static_cast<std::size_t>(body_size)));
  std::string_view program_name;
  std::uint32_t lowered_count = 0;
  if (!body.string32(program_name) || !body.u32(lowered_count)) return EntryCheck::foreign;
  // Each pair needs at least its two length fields: bound the count before reserving anything.
  if (lowered_count > body.remaining() / 8) return EntryCheck::foreign;
  std::vector<std::pair<std::string_view, std::string_view>> lowered;
  lowered.reserve(lowered_count);
  for (std::uint32_t i = 0; i < lowered_count; ++i) {
    std::string_view expression, name;
    if (!body.string32(expression) || !body.string32(name)) return EntryCheck::foreign;
    lowered.emplace_back(expression, name);
  }
  std::uint64_t binary_size = 0;
  std::string_view binary;
  if (!body.u64(binary_size) || binary_size != body.remaining() ||
      !body.bytes(static_cast<std::size_t>(binary_size), binary)) {
    return EntryCheck::foreign;
  }

  CacheKey key;
  std::memcpy(key.digest.data(), digest.data(), key.digest.size());
  Arch arch;
  arch.major = static_cast<int>(arch_major);
  arch.minor = static_cast<int>(arch_minor);
  arch.suffix = static_cast<char>(suffix);
  const NvrtcVersion nvrtc{static_cast<int>(nvrtc_major), static_cast<int>(nvrtc_minor)};

  if (info != nullptr) {
    info->key = key;
    info->program_name = std::string(program_name);
    info->lowered_names.clear();
    for (const auto& [expression, name] : lowered) info->lowered_names.emplace_back(expression, name);
    info->arch = arch;
    info->kind = static_cast<BinaryKind>(kind);
    info->nvrtc = nvrtc;
    info->size_bytes = bytes.size();
  }
  if (expected != nullptr && *expected != key) return EntryCheck::wrong_key;
  if (nvrtc.major != current.major || nvrtc.minor != current.minor) return EntryCheck::foreign;

  if (out != nullptr) {
    out->kind = static_cast<BinaryKind>(kind);
    out->arch = arch;
    out->program_name = std::string(program_name);
    out->binary.assign(binary.begin(), binary.end());
    out->lowered_names.clear();
    for (const auto& [expression, name] : lowered) out->lowered_names.emplace_back(expression, name);
    out->log.clear();
  }
  return EntryCheck::ok;
}

}  // namespace detail

EntryCheck check_entry_bytes(std::string_view bytes, const CacheKey* expected, CompiledProgram* out,
                             DiskEntryInfo* info) {
  return detail::decode_entry(bytes, expected, nvrtc_version(), out, info);
}

const char* to_string(EntryCheck check) noexcept {
  switch (check) {
    case EntryCheck::ok:
      return "ok";
    case EntryCheck::truncated:
      return "truncated";
    case EntryCheck::bad_magic:
      return "bad_magic";
    case EntryCheck::wrong_version:
      return "wrong_version";
    case EntryCheck::wrong_key:
      return "wrong_key";
    case EntryCheck::bad_checksum:
      return "bad_checksum";
    case EntryCheck::foreign:
      return "foreign";
    case EntryCheck::io_error:
      return "io_error";
    case EntryCheck::untrusted_owner:
      return "untrusted_owner";
    case EntryCheck::unauthenticated:
      return "unauthenticated";
    case EntryCheck::too_large:
      return "too_large";
    case EntryCheck::unknown_key:
      return "unknown_key";
    case EntryCheck::revoked_key:
      return "revoked_key";
    case EntryCheck::bad_signature:
      return "bad_signature";
  }
  return "unknown";
}

}  // namespace cuinline
