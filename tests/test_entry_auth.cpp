// Entry authentication (src/cache/entry_auth.*, entry_sign.*): the HMAC against OpenSSL's, seal/open,
// rotation by key id, and the key file's checks; Ed25519 signatures: sign/verify, forgeries, rotation,
// revocation, the signing and trusted keys files; the Redis URL parser (src/cache/remote_cache_config.cpp).
// No Redis and no GPU needed.

#include <gtest/gtest.h>
#include <openssl/hmac.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

#include "cache/entry_auth.hpp"
#include "cache/remote_endpoint.hpp"
#include "cuinline/error.hpp"
#include "cuinline/kernel_cache.hpp"
#include "cuinline/module.hpp"
#include "cuinline/remote_cache.hpp"
#include "redis_test_util.hpp"

namespace cuinline {
namespace {

using detail::AuthCheck;
using detail::EntryAuth;
using detail::SigningKey;
using detail::TrustedKeys;

CacheKey some_key(unsigned char seed) {
  CacheKey k;
  for (std::size_t i = 0; i < k.digest.size(); ++i) k.digest[i] = static_cast<unsigned char>(seed * 31 + i);
  return k;
}

std::string random_bytes(std::size_t n) {
  std::mt19937_64 gen(test::fresh_seed());
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(gen());
  return s;
}

TEST(EntryAuth, HmacMatchesOpenSsl) {
  for (std::size_t key_size : {1u, 16u, 32u, 64u, 65u, 200u}) {
    for (std::size_t data_size : {0u, 1u, 55u, 64u, 1000u, 100000u}) {
      const std::string key = random_bytes(key_size), data = random_bytes(data_size);
      unsigned char expected[32];
      unsigned int len = 0;
      HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), expected, &len);
      ASSERT_EQ(len, 32u);
      // Split into parts anywhere: the MAC is over their concatenation.
      const std::size_t cut = data.size() / 3;
      const auto got = detail::hmac_sha256(
          key, {std::string_view(data).substr(0, cut), std::string_view(data).substr(cut)});
      EXPECT_EQ(0, std::memcmp(got.data(), expected, 32)) << key_size << " " << data_size;
    }
  }
}

TEST(EntryAuth, SealOpenAndEveryForgery) {
  const std::string secret = random_bytes(32);
  EntryAuth auth({{"k1", secret}});
  const CacheKey key = some_key(1);
  const std::string entry = random_bytes(5000);
  const std::string sealed = auth.seal(key, entry);
  std::string_view out;
  std::string id;
  ASSERT_EQ(auth.open(key, sealed, &out, &id), AuthCheck::ok);
  EXPECT_EQ(out, entry);
  EXPECT_EQ(id, "k1");
  // The bare entry (no envelope), and a truncated one.
  EXPECT_EQ(auth.open(key, entry, &out), AuthCheck::not_sealed);
  EXPECT_EQ(auth.open(key, sealed.substr(0, 20), &out), AuthCheck::not_sealed);
  EXPECT_EQ(auth.open(key, sealed.substr(0, sealed.size() - 1), &out), AuthCheck::bad_tag);
  // Copied under another key.
  EXPECT_EQ(auth.open(some_key(2), sealed, &out), AuthCheck::bad_tag);
  // Any flipped bit anywhere after the key id.
  std::mt19937_64 gen(test::fresh_seed());
  for (int i = 0; i < 200; ++i) {
    std::string bad = sealed;
    const std::size_t at = 8 + 1 + 2 + gen() % (bad.size() - 11);
    bad[at] = static_cast<char>(bad[at] ^ (1 << (gen() % 8)));
    EXPECT_EQ(auth.open(key, bad, &out), AuthCheck::bad_tag) << at;
  }
  // Made with another secret under the same id, or with an id this verifier does not hold.
  EXPECT_EQ(auth.open(key, EntryAuth({{"k1", random_bytes(32)}}).seal(key, entry), &out), AuthCheck::bad_tag);
  EXPECT_EQ(auth.open(key, EntryAuth({{"k9", secret}}).seal(key, entry), &out), AuthCheck::unknown_key_id);
}

TEST(EntryAuth, RotationByKeyId) {
  const std::string old_secret = random_bytes(32), new_secret = random_bytes(32);
  const EntryAuth old_fleet({{"2026-10", old_secret}});
  const EntryAuth rotating({{"2026-11", new_secret}, {"2026-10", old_secret}});
  const EntryAuth new_fleet({{"2026-11", new_secret}});
  const CacheKey key = some_key(3);
  std::string_view out;
  // During the rotation, entries of the old key still verify; new ones are signed with the new key.
  EXPECT_EQ(rotating.open(key, old_fleet.seal(key, "entry"), &out), AuthCheck::ok);
  EXPECT_EQ(rotating.signing_key_id(), "2026-11");
  EXPECT_EQ(new_fleet.open(key, rotating.seal(key, "entry"), &out), AuthCheck::ok);
  // After it, the old key is refused.
  EXPECT_EQ(new_fleet.open(key, old_fleet.seal(key, "entry"), &out), AuthCheck::unknown_key_id);
  using Keys = std::vector<detail::AuthKey>;
  EXPECT_THROW(EntryAuth(Keys{{"bad id", new_secret}}), InvalidArgument);
  EXPECT_THROW(EntryAuth(Keys{{"k", "short"}}), InvalidArgument);
  EXPECT_THROW(EntryAuth(Keys{{"k", new_secret}, {"k", old_secret}}), InvalidArgument);
}

TEST(EntryAuth, KeyFileMustBePrivate) {
  test::TempDir dir("keyfile");
  std::string error;
  const auto good =
      test::write_key_file(dir.path(), "good", {{"k2", test::random_hex(32)}, {"k1", test::random_hex(32)}});
  auto auth = EntryAuth::from_key_file(good, &error);
  ASSERT_TRUE(auth) << error;
  EXPECT_EQ(auth->signing_key_id(), "k2");
  const auto stricter = test::write_key_file(dir.path(), "ro", {{"k", test::random_hex(32)}}, 0400);
  EXPECT_TRUE(EntryAuth::from_key_file(stricter, &error)) << error;

  const auto open_to_all = test::write_key_file(dir.path(), "wide", {{"k", test::random_hex(32)}}, 0644);
  EXPECT_FALSE(EntryAuth::from_key_file(open_to_all, &error));
  EXPECT_NE(error.find("0644"), std::string::npos) << error;
  EXPECT_NE(error.find("chmod 600"), std::string::npos) << error;
  EXPECT_FALSE(EntryAuth::from_key_file(
      test::write_key_file(dir.path(), "g", {{"k", test::random_hex(32)}}, 0640), &error));

  const auto bad = test::write_key_file(dir.path(), "bad", {{"k", "xyz"}});
  EXPECT_FALSE(EntryAuth::from_key_file(bad, &error));
  EXPECT_NE(error.find("line"), std::string::npos) << error;
  const auto shorter = test::write_key_file(dir.path(), "short", {{"k", test::random_hex(8)}});
  EXPECT_FALSE(EntryAuth::from_key_file(shorter, &error));
  EXPECT_FALSE(EntryAuth::from_key_file(dir.path() / "missing", &error));
  std::filesystem::create_symlink(good, dir.path() / "link");
  EXPECT_FALSE(EntryAuth::from_key_file(dir.path() / "link", &error));
}

TEST(EntryAuth, KeyFileOfAnotherOwnerIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give the key file to another user";
  const struct passwd* nobody = ::getpwnam("nobody");
  if (nobody == nullptr) GTEST_SKIP() << "no user 'nobody'";
  test::TempDir dir("keyowner");
  const auto path = test::write_key_file(dir.path(), "theirs", {{"k", test::random_hex(32)}});
  ASSERT_EQ(::chown(path.c_str(), nobody->pw_uid, nobody->pw_gid), 0);
  std::string error;
  EXPECT_FALSE(EntryAuth::from_key_file(path, &error));
  EXPECT_NE(error.find("not by this user"), std::string::npos) << error;
}

// ---- Ed25519 signatures --------------------------------------------------------------------------

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

TrustedKeys trusted(const std::vector<std::string>& lines) {
  std::string text = "# trusted signers\n";
  for (const auto& line : lines) text += line + "\n";
  return TrustedKeys::parse(text, "the test's list");
}

TEST(EntrySignature, SignVerifyAndEveryForgery) {
  const SigningKey ci = SigningKey::generate("ci-1", "warm@ci");
  const EntryAuth signer(ci, std::nullopt);  // no list: its own key alone
  const EntryAuth verifier(std::nullopt, trusted({ci.public_line()}));
  const CacheKey key = some_key(4);
  const std::string entry = random_bytes(5000);
  const std::string sealed = signer.seal(key, entry);
  std::string_view out;
  std::string id;
  ASSERT_EQ(verifier.open(key, sealed, &out, &id), AuthCheck::ok);
  EXPECT_EQ(out, entry);
  EXPECT_EQ(id, "ci-1");
  EXPECT_EQ(signer.open(key, sealed, &out), AuthCheck::ok);
  EXPECT_EQ(detail::seal_size(sealed), 8 + 1 + 4 + 64u);
  // The verifier holds only public keys: it cannot make an entry.
  EXPECT_FALSE(verifier.can_seal());
  EXPECT_TRUE(verifier.signing_key_id().empty());
  EXPECT_THROW(verifier.seal(key, entry), CacheError);
  // Any flipped bit in the signature or the entry, a truncation, another cache key.
  std::mt19937_64 gen(test::fresh_seed());
  for (int i = 0; i < 100; ++i) {
    std::string bad = sealed;
    const std::size_t at = 13 + gen() % (bad.size() - 13);
    bad[at] = static_cast<char>(bad[at] ^ (1 << (gen() % 8)));
    EXPECT_EQ(verifier.open(key, bad, &out), AuthCheck::bad_signature) << at;
  }
  EXPECT_EQ(verifier.open(key, sealed.substr(0, sealed.size() - 1), &out), AuthCheck::bad_signature);
  EXPECT_EQ(verifier.open(key, sealed.substr(0, 40), &out), AuthCheck::not_sealed);
  EXPECT_EQ(verifier.open(some_key(5), sealed, &out), AuthCheck::bad_signature);
  // Unsealed, sealed with a fleet key (any member could make that), signed by a key not on the list,
  // or by another key under the trusted id.
  EXPECT_EQ(verifier.open(key, entry, &out), AuthCheck::not_sealed);
  EXPECT_EQ(verifier.open(key, EntryAuth({{"ci-1", random_bytes(32)}}).seal(key, entry), &out),
            AuthCheck::not_sealed);
  const EntryAuth stranger(SigningKey::generate("mallory", ""), std::nullopt);
  EXPECT_EQ(verifier.open(key, stranger.seal(key, entry), &out, &id), AuthCheck::unknown_key_id);
  EXPECT_EQ(id, "mallory");
  const EntryAuth impostor(SigningKey::generate("ci-1", ""), std::nullopt);
  EXPECT_EQ(verifier.open(key, impostor.seal(key, entry), &out), AuthCheck::bad_signature);
  // And a fleet-key process does not take a signed entry for one of its own.
  EXPECT_EQ(EntryAuth({{"ci-1", random_bytes(32)}}).open(key, sealed, &out), AuthCheck::not_sealed);
  // One verifier serves every thread of a process (KernelCache's lookups run in parallel).
  std::atomic<int> verified{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      std::string_view view;
      for (int i = 0; i < 25; ++i) verified += verifier.open(key, sealed, &view) == AuthCheck::ok ? 1 : 0;
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(verified.load(), 100);
}

TEST(EntrySignature, RotationAndRevocation) {
  const SigningKey old_key = SigningKey::generate("ci-2026-10", ""),
                   new_key = SigningKey::generate("ci-2026-11", "");
  const CacheKey key = some_key(6);
  const std::string old_entry = EntryAuth(old_key, std::nullopt).seal(key, "old");
  const std::string new_entry = EntryAuth(new_key, std::nullopt).seal(key, "new");
  std::string_view out;
  // Both trusted during the rotation.
  const EntryAuth both(std::nullopt, trusted({old_key.public_line(), new_key.public_line()}));
  EXPECT_EQ(both.open(key, old_entry, &out), AuthCheck::ok);
  EXPECT_EQ(both.open(key, new_entry, &out), AuthCheck::ok);
  // Retired (line removed): unknown; revoked: refused as such, even with a trusted line left for it,
  // and under any other id its key is listed with.
  EXPECT_EQ(EntryAuth(std::nullopt, trusted({new_key.public_line()})).open(key, old_entry, &out),
            AuthCheck::unknown_key_id);
  const std::string old_hex = old_key.public_line().substr(std::string("ed25519 ci-2026-10 ").size());
  const TrustedKeys revoking =
      trusted({old_key.public_line(), "@revoked " + old_key.public_line() + " leaked",
               "ed25519 alias " + old_hex, new_key.public_line()});
  EXPECT_EQ(revoking.trust("ci-2026-10"), detail::KeyTrust::revoked);
  EXPECT_EQ(revoking.trust("alias"), detail::KeyTrust::revoked);
  EXPECT_EQ(revoking.trusted_count(), 1u);
  const EntryAuth after(std::nullopt, revoking);
  EXPECT_EQ(after.open(key, old_entry, &out), AuthCheck::revoked_key);
  EXPECT_EQ(after.open(key, new_entry, &out), AuthCheck::ok);
  EXPECT_EQ(after.entry_check(AuthCheck::revoked_key), EntryCheck::revoked_key);
  EXPECT_EQ(after.entry_check(AuthCheck::unknown_key_id), EntryCheck::unknown_key);
  // A signer whose own list revokes or lacks it is a configuration error, not entries refused later.
  EXPECT_THROW(EntryAuth(old_key, revoking), InvalidArgument);
  EXPECT_THROW(EntryAuth(new_key, trusted({old_key.public_line()})), InvalidArgument);
  EXPECT_NO_THROW(EntryAuth(new_key, revoking));
}

TEST(EntrySignature, TrustedKeysLinesAreChecked) {
  const std::string line = SigningKey::generate("k1", "").public_line();
  const auto error_of = [](const std::vector<std::string>& lines) -> std::string {
    try {
      trusted(lines);
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of({line, "ssh-ed25519 AAAAC3Nza k2"}).find("line 3: unknown key type 'ssh-ed25519'"),
            std::string::npos);
  EXPECT_NE(error_of({"ed25519 k2 abcd"}).find("line 2: expected"), std::string::npos);
  EXPECT_NE(error_of({"ed25519 bad/id " + std::string(64, 'a')}).find("line 2"), std::string::npos);
  EXPECT_NE(error_of({line, line}).find("'k1' is listed already (line 2)"), std::string::npos);
  EXPECT_NE(error_of({"@revoked"}).find("line 2"), std::string::npos);
  EXPECT_EQ(error_of({line + " a comment with spaces", "", "# note", "@revoked " + line}), "");
}

TEST(EntrySignature, KeyFilesAreCheckedAndNeverReplaced) {
  test::TempDir dir("signkeys");
  const auto path = dir.path() / "ci.key";
  const mode_t old_umask = ::umask(0);  // the file is 0600 whatever the umask
  const SigningKey key = SigningKey::generate("ci-1", "warm@ci");
  key.write_file(path);
  ::umask(old_umask);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  std::string error;
  const auto loaded = SigningKey::from_file(path, &error);
  ASSERT_TRUE(loaded) << error;
  EXPECT_EQ(loaded->public_line(), key.public_line());
  EXPECT_EQ(loaded->public_line().rfind("ed25519 ci-1 ", 0), 0u);
  // An existing file, or a symlink to one, is never replaced.
  const std::string before = read_text(path);
  try {
    SigningKey::generate("ci-2", "").write_file(path);
    ADD_FAILURE() << "an existing key file was replaced";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("never replaced"), std::string::npos) << e.what();
  }
  std::filesystem::create_symlink(path, dir.path() / "link.key");
  EXPECT_THROW(SigningKey::generate("ci-3", "").write_file(dir.path() / "link.key"), Error);
  EXPECT_EQ(read_text(path), before);
  EXPECT_FALSE(SigningKey::from_file(dir.path() / "link.key", &error));
  EXPECT_NE(error.find("symbolic link"), std::string::npos) << error;

  ASSERT_EQ(::chmod(path.c_str(), 0640), 0);
  EXPECT_FALSE(SigningKey::from_file(path, &error));
  EXPECT_NE(error.find("mode 0640"), std::string::npos) << error;
  EXPECT_NE(error.find("chmod 600"), std::string::npos) << error;

  // The trusted list: readable by all is fine, writable by group or others is not.
  const auto list = dir.path() / "trusted";
  write_text(list, key.public_line() + "\n");
  for (const mode_t mode : {0644, 0600, 0444}) {
    ASSERT_EQ(::chmod(list.c_str(), mode), 0);
    EXPECT_TRUE(TrustedKeys::from_file(list, &error)) << mode << ": " << error;
  }
  for (const mode_t mode : {0664, 0666, 0646}) {
    ASSERT_EQ(::chmod(list.c_str(), mode), 0);
    EXPECT_FALSE(TrustedKeys::from_file(list, &error)) << mode;
    EXPECT_NE(error.find("may write it"), std::string::npos) << error;
    EXPECT_NE(error.find("chmod go-w"), std::string::npos) << error;
  }
  ASSERT_EQ(::chmod(list.c_str(), 0644), 0);
  write_text(list, "@revoked " + key.public_line() + "\n");
  EXPECT_FALSE(TrustedKeys::from_file(list, &error));
  EXPECT_NE(error.find("trusts no key"), std::string::npos) << error;
  EXPECT_FALSE(TrustedKeys::from_file(dir.path() / "missing", &error));

  // Another owner: the private key only this user's, the list this user's or root's.
  if (::geteuid() == 0) {
    if (const struct passwd* nobody = ::getpwnam("nobody")) {
      write_text(list, key.public_line() + "\n");
      ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
      ASSERT_EQ(::chown(path.c_str(), nobody->pw_uid, nobody->pw_gid), 0);
      ASSERT_EQ(::chown(list.c_str(), nobody->pw_uid, nobody->pw_gid), 0);
      EXPECT_FALSE(SigningKey::from_file(path, &error));
      EXPECT_NE(error.find("not by this user"), std::string::npos) << error;
      EXPECT_FALSE(TrustedKeys::from_file(list, &error));
      EXPECT_NE(error.find("not by this user or root"), std::string::npos) << error;
    }
  }
}

TEST(EntrySignature, TheConfigurationChoosesTheMode) {
  test::TempDir dir("signmode");
  RemoteCacheConfig config;
  std::string error;
  EXPECT_FALSE(EntryAuth::from_config(config, &error));
  EXPECT_TRUE(error.empty()) << error;
  config.key_file = test::write_key_file(dir.path(), "fleet.key", {{"k1", test::random_hex(32)}});
  auto auth = EntryAuth::from_config(config, &error);
  ASSERT_TRUE(auth) << error;
  EXPECT_EQ(auth->mode(), EntryAuth::Mode::fleet_key);
  // Trusted keys switch to signatures (the fleet key is then not used): a verifier.
  const SigningKey key = SigningKey::generate("ci-1", "");
  key.write_file(dir.path() / "ci.key");
  config.trusted_keys_file = dir.path() / "trusted";
  write_text(config.trusted_keys_file, key.public_line() + "\n");
  auth = EntryAuth::from_config(config, &error);
  ASSERT_TRUE(auth) << error;
  EXPECT_EQ(auth->mode(), EntryAuth::Mode::signatures);
  EXPECT_FALSE(auth->can_seal());
  EXPECT_EQ(auth->describe(), "verifying only, 1 trusted key");
  config.signing_key_file = dir.path() / "ci.key";
  auth = EntryAuth::from_config(config, &error);
  ASSERT_TRUE(auth) << error;
  EXPECT_TRUE(auth->can_seal());
  EXPECT_EQ(auth->signing_key_id(), "ci-1");
  config.signing_key_file = dir.path() / "missing.key";
  EXPECT_FALSE(EntryAuth::from_config(config, &error));
  EXPECT_NE(error.find("missing.key"), std::string::npos) << error;
}

TEST(RedisUrl, Parses) {
  std::string error;
  auto ep = detail::parse_redis_url("redis://alice:s%40cret@cache.internal:6380/2", &error);
  ASSERT_TRUE(ep) << error;
  EXPECT_EQ(ep->host, "cache.internal");
  EXPECT_EQ(ep->port, 6380);
  EXPECT_EQ(ep->user, "alice");
  EXPECT_EQ(ep->password, "s@cret");
  EXPECT_EQ(ep->db, 2);
  EXPECT_EQ(ep->shown.find("s@cret"), std::string::npos);
  EXPECT_EQ(ep->shown.find("cret"), std::string::npos);
  ep = detail::parse_redis_url("redis://:pw@127.0.0.1:7000", &error);
  ASSERT_TRUE(ep);
  EXPECT_EQ(ep->password, "pw");
  EXPECT_TRUE(ep->user.empty());
  ep = detail::parse_redis_url("redis://localhost", &error);
  ASSERT_TRUE(ep);
  EXPECT_EQ(ep->port, 6379);
  ep = detail::parse_redis_url("unix:///run/redis/redis.sock", &error);
  ASSERT_TRUE(ep);
  EXPECT_TRUE(ep->unix_socket);
  EXPECT_EQ(ep->path, "/run/redis/redis.sock");
  for (const char* bad : {"", "http://x", "redis://", "redis://h:0", "redis://h:99999", "redis://h:1/x",
                          "unix://relative.sock", "rediss://h:6379", "redis://u:%zz@h"}) {
    EXPECT_FALSE(detail::parse_redis_url(bad, &error)) << bad;
  }
  EXPECT_FALSE(detail::parse_redis_url("redis://u:topsecret@h:bad", &error));
  EXPECT_EQ(error.find("topsecret"), std::string::npos) << "a password in an error message: " << error;
}

TEST(RemoteConfig, FromEnvironment) {
  ::setenv("CUINLINE_REMOTE_CACHE", "redis://127.0.0.1:7001/3", 1);
  ::setenv("CUINLINE_CACHE_KEY_FILE", "/etc/cuinline/fleet.key", 1);
  ::setenv("CUINLINE_REMOTE_TIMEOUT_MS", "150", 1);
  ::setenv("CUINLINE_REMOTE_CONNECT_TIMEOUT_MS", "garbage", 1);
  ::setenv("CUINLINE_REMOTE_TTL_S", "3600", 1);
  ::setenv("CUINLINE_REMOTE_SCAN_TIMEOUT_MS", "4500", 1);
  ::setenv("CUINLINE_CACHE_SIGNING_KEY", "/etc/cuinline/ci.key", 1);
  ::setenv("CUINLINE_CACHE_TRUSTED_KEYS", "/etc/cuinline/trusted_keys", 1);
  const RemoteCacheConfig c = CacheConfig::from_environment().remote;
  for (const char* name :
       {"CUINLINE_REMOTE_CACHE", "CUINLINE_CACHE_KEY_FILE", "CUINLINE_REMOTE_TIMEOUT_MS",
        "CUINLINE_REMOTE_CONNECT_TIMEOUT_MS", "CUINLINE_REMOTE_TTL_S", "CUINLINE_REMOTE_SCAN_TIMEOUT_MS",
        "CUINLINE_CACHE_SIGNING_KEY", "CUINLINE_CACHE_TRUSTED_KEYS"}) {
    ::unsetenv(name);
  }
  EXPECT_EQ(c.url, "redis://127.0.0.1:7001/3");
  EXPECT_EQ(c.key_file, "/etc/cuinline/fleet.key");
  EXPECT_EQ(c.signing_key_file, "/etc/cuinline/ci.key");
  EXPECT_EQ(c.trusted_keys_file, "/etc/cuinline/trusted_keys");
  EXPECT_EQ(c.command_timeout.count(), 150);
  EXPECT_EQ(c.connect_timeout.count(), 50) << "a bad value keeps the default";
  EXPECT_EQ(c.entry_ttl.count(), 3600);
  EXPECT_EQ(c.scan_timeout.count(), 4500);
  EXPECT_EQ(c.lock_wait.count(), 10000);
}

// In a build without hiredis a configured remote tier is one warning and the local tiers; with
// hiredis, a URL that does not parse is the same.
TEST(RemoteConfig, UnusableRemoteTierLeavesTheLocalTiers) {
  test::TempDir dir("noremote");
  CacheConfig config;
  config.directory = dir.path() / "disk";
  config.remote.url = RemoteCache::supported() ? "redis://host:notaport" : "redis://127.0.0.1:6379";
  config.remote.key_file = test::write_key_file(dir.path(), "key", {{"k1", test::random_hex(32)}});
  RemoteCache remote(config.remote);
  EXPECT_FALSE(remote.usable());
  EXPECT_NE(remote.unusable_reason().find(RemoteCache::supported() ? "bad port" : "no Redis support"),
            std::string::npos)
      << remote.unusable_reason();
  KernelCache cache(config);
  EXPECT_EQ(cache.remote(), nullptr);
  CompileRequest r;
  r.name = "k.cu";
  r.source = "extern \"C\" __global__ void k(int* p) { *p = " + std::to_string(test::fresh_seed() % 1000) + "; }";
  CacheTier tier = CacheTier::memory;
  cache.get(r, Arch::parse("sm_90"), &tier);
  EXPECT_EQ(tier, CacheTier::compiled);
  EXPECT_EQ(cache.stats().disk_writes, 1u);
}

}  // namespace
}  // namespace cuinline
