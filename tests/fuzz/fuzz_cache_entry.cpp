// libFuzzer target: the cache-entry parser on arbitrary bytes (docs/RELIABILITY.md, "Fuzzing").
// Entry files are the one input cuinline reads that anyone with write access to the cache
// directory controls, so the parser must never crash, hang, over-read or allocate from an
// unchecked length, and must accept only what its own writer produces.
//
// Checked on every input: check_entry_bytes without an expected key, with the key the input
// claims, and with an unrelated key; decode_entry for the NVRTC version the input claims (so the
// accepting path is reached whatever this library's NVRTC is). Invariants (a violation traps):
//   - an accepted entry re-encodes to exactly the same bytes (the format has one spelling);
//   - an entry is accepted with an expected key only if that key is the one inside;
//   - what is filled on acceptance matches the input (binary size, arch, kind).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "cache/disk_cache_entry.hpp"
#include "cuinline/cache.hpp"

namespace {

using namespace cuinline;

void require(bool condition) {
  if (!condition) __builtin_trap();
}

std::uint32_t u32_at(std::string_view bytes, std::size_t offset) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[offset + i])) << (8 * i);
  return v;
}

void check_accepted(std::string_view bytes, const CacheKey& key, NvrtcVersion nvrtc,
                    const CompiledProgram& program) {
  require(detail::encode_entry(key, nvrtc, program) == bytes);
  require(program.binary.size() < bytes.size());
  require(program.kind == BinaryKind::cubin || program.kind == BinaryKind::ptx);
  require(program.arch.suffix == '\0' || program.arch.suffix == 'a' || program.arch.suffix == 'f');
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);

  CompiledProgram program;
  DiskEntryInfo info;
  const EntryCheck plain = check_entry_bytes(bytes, nullptr, &program, &info);
  if (plain == EntryCheck::ok) check_accepted(bytes, info.key, nvrtc_version(), program);

  CacheKey claimed;
  if (size >= 12 + 32) std::memcpy(claimed.digest.data(), data + 12, 32);
  CompiledProgram with_key;
  const EntryCheck keyed = check_entry_bytes(bytes, &claimed, &with_key);
  if (plain == EntryCheck::ok) require(keyed == EntryCheck::ok);
  if (keyed == EntryCheck::ok) require(plain == EntryCheck::ok && with_key.binary == program.binary);

  CacheKey unrelated;
  unrelated.digest.fill(0xa5);
  if (check_entry_bytes(bytes, &unrelated, nullptr) == EntryCheck::ok) require(claimed == unrelated);

  // The accepting path for whatever NVRTC version the input claims.
  if (size >= 52) {
    const NvrtcVersion claimed_nvrtc{static_cast<int>(u32_at(bytes, 44)),
                                     static_cast<int>(u32_at(bytes, 48))};
    CompiledProgram decoded;
    DiskEntryInfo decoded_info;
    if (detail::decode_entry(bytes, &claimed, claimed_nvrtc, &decoded, &decoded_info) == EntryCheck::ok) {
      check_accepted(bytes, claimed, claimed_nvrtc, decoded);
      require(decoded_info.key == claimed && decoded_info.size_bytes == size);
    }
  }
  return 0;
}
