// Entry authentication (src/cache/entry_auth.*): the HMAC against OpenSSL's, seal/open, rotation by
// key id, and the key file's checks; the Redis URL parser (src/cache/remote_cache_config.cpp).
// No Redis and no GPU needed.

#include <gtest/gtest.h>
#include <openssl/hmac.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "cache/entry_auth.hpp"
#include "cache/remote_endpoint.hpp"
#include "cuinline/error.hpp"
#include "cuinline/module.hpp"
#include "cuinline/remote_cache.hpp"
#include "redis_test_util.hpp"

namespace cuinline {
namespace {

using detail::AuthCheck;
using detail::EntryAuth;

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
  const RemoteCacheConfig c = CacheConfig::from_environment().remote;
  for (const char* name :
       {"CUINLINE_REMOTE_CACHE", "CUINLINE_CACHE_KEY_FILE", "CUINLINE_REMOTE_TIMEOUT_MS",
        "CUINLINE_REMOTE_CONNECT_TIMEOUT_MS", "CUINLINE_REMOTE_TTL_S", "CUINLINE_REMOTE_SCAN_TIMEOUT_MS"}) {
    ::unsetenv(name);
  }
  EXPECT_EQ(c.url, "redis://127.0.0.1:7001/3");
  EXPECT_EQ(c.key_file, "/etc/cuinline/fleet.key");
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
