#include <cuinline/error.hpp>
#include <cuinline/signing_key.hpp>

#include "cache/entry_sign.hpp"

namespace cuinline {

std::string generate_signing_key(const std::filesystem::path& path, const std::string& id,
                                 const std::string& comment) {
  const detail::SigningKey key = detail::SigningKey::generate(id, comment);
  key.write_file(path);
  return key.public_line();
}

std::string signing_key_public_line(const std::filesystem::path& path) {
  std::string error;
  const auto key = detail::SigningKey::from_file(path, &error);
  if (!key) throw Error(error);
  return key->public_line();
}

}  // namespace cuinline
