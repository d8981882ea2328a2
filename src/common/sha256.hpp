#pragma once
// SHA-256 from OpenSSL's libcrypto, through its low-level SHA256_* interface.
//
// Why not EVP: in OpenSSL 3 the first EVP digest of a process initializes the provider machinery,
// about 1 ms — more than the whole budget of a disk-cache hit in a new process (≤ 0.3 ms). The
// low-level functions (deprecated, but part of OpenSSL 3's ABI) run the same implementation with
// ~20 µs of first-use cost.
#include <array>
#include <cstddef>
#include <string_view>

namespace cuinline::detail {

using Sha256Digest = std::array<unsigned char, 32>;

class Sha256 {
 public:
  Sha256();
  void update(const void* data, std::size_t size);
  void update(std::string_view text) { update(text.data(), text.size()); }
  Sha256Digest finish();

  static Sha256Digest of(const void* data, std::size_t size);

 private:
  alignas(
      8) unsigned char state_[128];  // an SHA256_CTX (112 bytes), opaque here to keep OpenSSL out of headers
};

}  // namespace cuinline::detail
