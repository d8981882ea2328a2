// cuinline key generate | public: the Ed25519 key pair that signs cache entries (docs/RELIABILITY.md,
// "Signed entries"). The private key stays on the signing (warm / CI) machine; the public line goes
// into the trusted keys file (CUINLINE_CACHE_TRUSTED_KEYS) of every machine that loads its entries.

#include <pwd.h>
#include <unistd.h>

#include <cstdio>
#include <cuinline/error.hpp>
#include <cuinline/signing_key.hpp>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/util.hpp"

namespace cuinline::cli {
namespace {

// "user@host", as ssh-keygen labels a key: says where a key came from when a list is reviewed.
std::string default_comment() {
  std::string user;
  std::vector<char> buffer(16384);
  struct passwd entry {};
  struct passwd* found = nullptr;
  if (::getpwuid_r(::geteuid(), &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr)
    user = found->pw_name;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  if (user.empty() && host[0] == '\0') return "";
  return user + "@" + host;
}

}  // namespace

int run_key_generate(const KeyOptions& options) {
  if (options.file.empty()) throw InvalidArgument("key generate: an empty file name");
  const std::string public_line =
      generate_signing_key(options.file, options.id, options.comment ? *options.comment : default_comment());
  std::fprintf(
      stderr,
      "cuinline key generate: wrote the private key '%s' to %s (mode 0600; keep it on the signing "
      "machine). Its public line, for the trusted keys file of every machine that loads its entries:\n",
      options.id.c_str(), escape_control(options.file).c_str());
  std::printf("%s\n", escape_control(public_line).c_str());
  return kExitOk;
}

int run_key_public(const KeyOptions& options) {
  std::printf("%s\n", escape_control(signing_key_public_line(options.file)).c_str());
  return kExitOk;
}

}  // namespace cuinline::cli
