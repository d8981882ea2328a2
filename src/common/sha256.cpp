#define OPENSSL_SUPPRESS_DEPRECATED  // see sha256.hpp for why the low-level interface is used
#include "common/sha256.hpp"

#include <openssl/sha.h>

#include <new>

namespace cuinline::detail {

static_assert(sizeof(SHA256_CTX) <= 128, "SHA256_CTX does not fit the storage in Sha256");

namespace {
SHA256_CTX* ctx(unsigned char* storage) {
  return std::launder(reinterpret_cast<SHA256_CTX*>(storage));
}
}  // namespace

Sha256::Sha256() {
  SHA256_Init(new (state_) SHA256_CTX);
}

void Sha256::update(const void* data, std::size_t size) {
  if (size != 0) SHA256_Update(ctx(state_), data, size);
}

Sha256Digest Sha256::finish() {
  Sha256Digest out{};
  SHA256_Final(out.data(), ctx(state_));
  return out;
}

Sha256Digest Sha256::of(const void* data, std::size_t size) {
  Sha256 h;
  h.update(data, size);
  return h.finish();
}

}  // namespace cuinline::detail
