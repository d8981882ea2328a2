#pragma once
/// @file signing_key.hpp
/// The Ed25519 key pair that signs cache entries (docs/RELIABILITY.md, "Signed entries"): made and
/// read here for `cuinline key`; the private key stays on the signing machine, its public line goes
/// into the trusted keys file (CUINLINE_CACHE_TRUSTED_KEYS) of every machine that loads its entries.

#include <filesystem>
#include <string>

namespace cuinline {

/// Generates a key pair named `id` (with `comment`, e.g. "user@host") and writes the private key to
/// `path` (created with mode 0600; an existing file or link is never replaced). Returns the key's
/// public line, "ed25519 <id> <public key hex>[ <comment>]". Throws InvalidArgument for a bad id or
/// a comment with a control character, Error saying why the file could not be written (a file it
/// created and could not finish is removed).
std::string generate_signing_key(const std::filesystem::path& path, const std::string& id,
                                 const std::string& comment);

/// The public line of the signing key file at `path`. Throws Error saying why the file is not a
/// usable signing key (unreadable, readable by others, not exactly one key line).
std::string signing_key_public_line(const std::filesystem::path& path);

}  // namespace cuinline
