#pragma once
// The on-disk entry format (see docs/cache-format.md). Pure functions on bytes: no I/O here, so the
// parser can be fuzzed on its own.

#include <cstddef>
#include <cstdint>
#include <cuinline/cache.hpp>
#include <string>
#include <string_view>

namespace cuinline::detail {

/// First eight bytes of every entry file.
inline constexpr char kEntryMagic[8] = {'C', 'U', 'I', 'N', 'L', 'N', 'E', '\x1a'};
/// magic, format version, key, NVRTC major/minor, arch major/minor/suffix, kind, reserved, body size.
inline constexpr std::size_t kEntryHeaderSize = 8 + 4 + 32 + 4 + 4 + 4 + 4 + 1 + 1 + 2 + 8;
inline constexpr std::size_t kEntryChecksumSize = 32;
/// No entry file (seal included) is ever larger than this; a larger file is rejected from its size,
/// before a byte of it is read. An entry is one kernel's CUBIN or PTX (kilobytes to a few MiB), and
/// with a fleet key the whole file must be read before its tag can be checked: this bound is what a
/// file planted by someone without the key can cost a lookup. The remote tier's default bound.
inline constexpr std::uint64_t kMaxEntryBytes = std::uint64_t{64} << 20;

/// The complete entry file for `program` under `key`, written as if by NVRTC `nvrtc`.
std::string encode_entry(const CacheKey& key, NvrtcVersion nvrtc, const CompiledProgram& program);

/// check_entry_bytes with the NVRTC version to compare against given explicitly. `info` is filled
/// (all but path and last_use) whenever the file is intact, even when the result is wrong_key or
/// foreign; `out` only on ok.
EntryCheck decode_entry(std::string_view bytes, const CacheKey* expected, NvrtcVersion current,
                        CompiledProgram* out, DiskEntryInfo* info);

/// The checks that need only the first kEntryHeaderSize bytes (`head`, shorter if the file is) and
/// the file's size: magic, format version, key (when `expected`), and a body size that matches the
/// file. ok means the rest is worth reading (decode_entry checks everything again).
EntryCheck check_entry_head(std::string_view head, std::uint64_t file_size, const CacheKey* expected);

/// SHA-256 of `bytes` (OpenSSL libcrypto).
std::array<unsigned char, 32> sha256(std::string_view bytes);

}  // namespace cuinline::detail

namespace cuinline {

/// Checks one entry file on its own (used by verify and by the fuzz target). When `expected` is
/// given, the key inside must equal it. On ok, fills `out` if non-null. (In namespace cuinline, not
/// detail, as the tests and the fuzz target name it.)
EntryCheck check_entry_bytes(std::string_view bytes, const CacheKey* expected, CompiledProgram* out,
                             DiskEntryInfo* info = nullptr);

}  // namespace cuinline
