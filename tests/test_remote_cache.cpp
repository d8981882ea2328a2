// The remote tier: lookup order memory → disk → remote → compile, publishing, TTLs,
// the compile lease, forged entries, and a remote tier that is not configured well enough to use.
// Starts its own redis-server (tests/redis_test_util.hpp); no GPU needed (sm_90 offline).

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "cache/disk_cache_entry.hpp"
#include "cache/entry_auth.hpp"
#include "remote_test_util.hpp"

#if CUINLINE_TEST_HAVE_REDIS

namespace cuinline {
namespace {

using test::Fleet;
using test::sm90;
using test::stress_request;

std::string hex_to_bytes(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

TEST(RemoteCache, MissPublishesAndAnotherMachineHits) {
  REDIS_OR_SKIP();
  Fleet fleet;
  const int i = static_cast<int>(test::fresh_seed() % 1000);
  const CacheKey key = make_cache_key(stress_request(i), sm90());
  {
    KernelCache a(fleet.config("a"));
    ASSERT_NE(a.remote(), nullptr);
    CacheTier tier = CacheTier::memory;
    Module m = a.get(stress_request(i), sm90(), &tier);
    EXPECT_EQ(tier, CacheTier::compiled);
    EXPECT_EQ(test::check_stress_module(m, i, key), "");
    const CacheStats s = a.stats();
    EXPECT_EQ(s.compiles, 1u);
    EXPECT_EQ(s.remote_writes, 1u);
    EXPECT_EQ(s.disk_writes, 1u);
    EXPECT_EQ(fleet.redis.integer({"EXISTS", fleet.lock_key(key)}), 0) << "the lease outlived the publish";
  }
  const long long pttl = fleet.redis.integer({"PTTL", fleet.entry_key(key)});
  EXPECT_GT(pttl, 29LL * 24 * 3600 * 1000);
  EXPECT_LE(pttl, 30LL * 24 * 3600 * 1000);
  // Another machine: remote hit, copied to its disk; then its next process hits the disk.
  ASSERT_TRUE(fleet.redis.command({"PEXPIRE", fleet.entry_key(key), "100000"}));
  {
    KernelCache b(fleet.config("b"));
    CacheTier tier = CacheTier::memory;
    Module m = b.get(stress_request(i), sm90(), &tier);
    EXPECT_EQ(tier, CacheTier::remote);
    EXPECT_EQ(test::check_stress_module(m, i, key), "");
    b.flush();  // the copy to the disk is written in the background
    const CacheStats s = b.stats();
    EXPECT_EQ(s.compiles, 0u);
    EXPECT_EQ(s.remote_hits, 1u);
    EXPECT_EQ(s.disk_writes, 1u);
    EXPECT_EQ(s.unauthenticated_entries + s.remote_rejected + s.rejected_entries, 0u);
  }
  EXPECT_GT(fleet.redis.integer({"PTTL", fleet.entry_key(key)}), 1000000LL) << "a hit refreshes the TTL";
  {
    KernelCache b2(fleet.config("b"));
    CacheTier tier = CacheTier::memory;
    b2.get(stress_request(i), sm90(), &tier);
    EXPECT_EQ(tier, CacheTier::disk);
    EXPECT_EQ(b2.stats().remote_hits, 0u);
  }
  // What the CLI uses.
  RemoteCache remote(fleet.config("c").remote);
  ASSERT_TRUE(remote.usable());
  const auto keys = remote.keys();
  ASSERT_EQ(keys.size(), 1u);
  EXPECT_EQ(keys[0], key);
  CompiledProgram p;
  EXPECT_EQ(remote.check(key, &p), RemoteEntryCheck::ok);
  EXPECT_EQ(p.arch, sm90());
  EXPECT_EQ(remote.list().size(), 1u);
  EXPECT_FALSE(remote.server_info().version.empty());
  EXPECT_TRUE(remote.remove(key));
  EXPECT_EQ(remote.check(key), RemoteEntryCheck::missing);
}

TEST(RemoteCache, ForgedEntriesAreNeverLoaded) {
  REDIS_OR_SKIP();
  Fleet fleet;
  const int i = static_cast<int>(test::fresh_seed() % 1000);
  const CacheKey key = make_cache_key(stress_request(i), sm90());
  const CacheKey other = make_cache_key(stress_request(i + 1), sm90());
  const CompiledProgram program = compile(stress_request(i), sm90());
  const std::string entry = detail::encode_entry(key, nvrtc_version(), program);
  const detail::EntryAuth fleet_key({{"k1", hex_to_bytes(fleet.secret_hex)}});
  const std::string sealed = fleet_key.seal(key, entry);
  std::string flipped = sealed;
  flipped[8 + 1 + 2 + 5] ^= 0x40;  // inside the tag
  const CompiledProgram sm80 = compile(stress_request(i), Arch::parse("sm_80"));

  struct Case {
    const char* name;
    std::string value;
    std::uint64_t CacheStats::*counter;
  };
  const std::vector<Case> cases = {
      {"no tag (right checksum)", entry, &CacheStats::unauthenticated_entries},
      {"wrong tag", flipped, &CacheStats::unauthenticated_entries},
      {"tag of another key", detail::EntryAuth({{"k1", std::string(32, 'x')}}).seal(key, entry),
       &CacheStats::unauthenticated_entries},
      {"unknown key id", detail::EntryAuth({{"k0", std::string(32, 'y')}}).seal(key, entry),
       &CacheStats::unauthenticated_entries},
      {"valid entry copied under another key",
       fleet_key.seal(other, detail::encode_entry(other, nvrtc_version(), program)),
       &CacheStats::unauthenticated_entries},
      {"truncated", sealed.substr(0, sealed.size() - 100), &CacheStats::unauthenticated_entries},
      {"empty", "", &CacheStats::unauthenticated_entries},
      {"huge", sealed + std::string(2u << 20, 'z'), &CacheStats::remote_rejected},
      {"authentic, damaged inside", fleet_key.seal(key, entry.substr(0, entry.size() - 1) + "!"),
       &CacheStats::remote_rejected},
      {"authentic, another arch", fleet_key.seal(key, detail::encode_entry(key, nvrtc_version(), sm80)),
       &CacheStats::wrong_arch_entries},
  };
  int n = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ASSERT_TRUE(fleet.redis.command({"SET", fleet.entry_key(key), c.value}));
    CacheConfig config = fleet.config("forged-" + std::to_string(n++));
    config.remote.max_entry_bytes = 1u << 20;
    KernelCache cache(config);
    CacheTier tier = CacheTier::memory;
    Module m = cache.get(stress_request(i), sm90(), &tier);
    EXPECT_EQ(tier, CacheTier::compiled);
    EXPECT_EQ(test::check_stress_module(m, i, key), "");
    const CacheStats s = cache.stats();
    // An entry for another arch passes the tier's checks (remote_hits counts it) and is refused by
    // KernelCache, once before and once after the lease.
    if (c.counter == &CacheStats::wrong_arch_entries) {
      EXPECT_GE(s.*(c.counter), 1u);
    } else {
      EXPECT_EQ(s.*(c.counter), 2u) << "looked at before and after taking the lease";
      EXPECT_EQ(s.remote_hits, 0u);
    }
    EXPECT_EQ(s.compiles, 1u);
    // The compile replaced the forgery with an authentic entry; the local disk got the compiled one.
    RemoteCache remote(config.remote);
    EXPECT_EQ(remote.check(key), RemoteEntryCheck::ok);
    DiskCache disk(config);
    auto local = disk.load(key);
    ASSERT_TRUE(local);
    EXPECT_EQ(local->binary, program.binary);
  }
}

TEST(RemoteCache, NotUsedWithoutAPrivateKey) {
  REDIS_OR_SKIP();
  Fleet fleet;
  CacheConfig config = fleet.config("nokey");
  config.remote.key_file.clear();
  {
    KernelCache cache(config);
    EXPECT_EQ(cache.remote(), nullptr);
    RemoteCache remote(config.remote);
    EXPECT_NE(remote.unusable_reason().find("CUINLINE_CACHE_KEY_FILE"), std::string::npos);
    CacheTier tier = CacheTier::memory;
    cache.get(stress_request(1), sm90(), &tier);
    EXPECT_EQ(tier, CacheTier::compiled);
  }
  config.remote.key_file =
      test::write_key_file(fleet.dir.path(), "open.key", {{"k1", fleet.secret_hex}}, 0644);
  KernelCache cache(config);
  EXPECT_EQ(cache.remote(), nullptr);
  EXPECT_EQ(RemoteCache(config.remote).unusable_reason().find("0644") != std::string::npos, true);
  EXPECT_EQ(fleet.redis.integer({"DBSIZE"}), 0) << "nothing may be written without a key";
}

TEST(RemoteCache, OneCompileWhileOthersWait) {
  REDIS_OR_SKIP();
  Fleet fleet;
  const int i = static_cast<int>(test::fresh_seed() % 1000);
  constexpr int kMachines = 6;
  std::vector<std::unique_ptr<KernelCache>> caches;
  for (int m = 0; m < kMachines; ++m)
    caches.push_back(std::make_unique<KernelCache>(fleet.config(std::to_string(m))));
  std::vector<CacheTier> tiers(kMachines);
  std::vector<std::thread> threads;
  for (int m = 0; m < kMachines; ++m) {
    threads.emplace_back([&, m] { caches[m]->get(stress_request(i), sm90(), &tiers[m]); });
  }
  for (auto& t : threads) t.join();
  std::uint64_t compiles = 0, waits = 0;
  for (auto& c : caches) {
    compiles += c->stats().compiles;
    waits += c->stats().remote_lock_waits;
  }
  EXPECT_EQ(compiles, 1u);
  EXPECT_EQ(std::count(tiers.begin(), tiers.end(), CacheTier::remote), kMachines - 1);
  std::printf("one compile, %llu lookups waited for it\n", static_cast<unsigned long long>(waits));
}

TEST(RemoteCache, LeaseOfADeadHolderExpiresAndWaitsAreBounded) {
  REDIS_OR_SKIP();
  Fleet fleet;
  const int i = static_cast<int>(test::fresh_seed() % 1000);
  const CacheKey key = make_cache_key(stress_request(i), sm90());
  // A holder that died 0.4 s before its lease runs out: the next process takes the lease then.
  ASSERT_TRUE(fleet.redis.command({"SET", fleet.lock_key(key), "dead-holder", "PX", "400"}));
  {
    KernelCache cache(fleet.config("a"));
    const auto start = std::chrono::steady_clock::now();
    CacheTier tier = CacheTier::memory;
    cache.get(stress_request(i), sm90(), &tier);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(tier, CacheTier::compiled);
    EXPECT_EQ(cache.stats().remote_lock_waits, 1u);
    EXPECT_EQ(cache.stats().remote_lock_timeouts, 0u);
    std::printf("expired lease: served after %.3f s\n", s);
    EXPECT_LT(s, 5.0);
  }
  // A lease that lives on (a stuck holder): the wait is bounded by lock_wait, then we compile.
  const CacheKey key2 = make_cache_key(stress_request(i + 1), sm90());
  ASSERT_TRUE(fleet.redis.command({"SET", fleet.lock_key(key2), "stuck-holder", "PX", "60000"}));
  CacheConfig config = fleet.config("b");
  config.remote.lock_wait = std::chrono::milliseconds(300);
  KernelCache cache(config);
  const auto start = std::chrono::steady_clock::now();
  CacheTier tier = CacheTier::memory;
  cache.get(stress_request(i + 1), sm90(), &tier);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(tier, CacheTier::compiled);
  EXPECT_EQ(cache.stats().remote_lock_timeouts, 1u);
  EXPECT_EQ(fleet.redis.get(fleet.lock_key(key2)), "stuck-holder") << "someone else's lease was deleted";
  std::printf("stuck lease: served after %.3f s (lock_wait 0.3 s)\n", s);
  EXPECT_GE(s, 0.3);
  EXPECT_LT(s, 5.0);
}

}  // namespace
}  // namespace cuinline

namespace cuinline {
namespace {

// A process that forks after using the remote tier: the child must not talk on the parent's pooled
// connection (replies would interleave); both keep getting right answers.
TEST(RemoteCache, ForkedChildOpensItsOwnConnection) {
  REDIS_OR_SKIP();
  test::Fleet fleet;
  const int i = static_cast<int>(test::fresh_seed() % 1000);
  const CacheKey key = make_cache_key(test::stress_request(i), test::sm90());
  KernelCache cache(fleet.config("a"));
  cache.get(test::stress_request(i), test::sm90());
  RemoteCache* remote = cache.remote();
  ASSERT_NE(remote, nullptr);
  ASSERT_TRUE(remote->load(key));  // a pooled connection now exists
  const pid_t pid = ::fork();
  if (pid == 0) {
    int bad = 0;
    for (int n = 0; n < 200; ++n) bad += remote->load(key) ? 0 : 1;
    ::_exit(bad == 0 ? 0 : 1);
  }
  int parent_bad = 0;
  for (int n = 0; n < 200; ++n) parent_bad += remote->load(key) ? 0 : 1;
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(parent_bad, 0);
  EXPECT_EQ(remote->stats().unauthenticated_entries + remote->stats().remote_rejected, 0u);
}

}  // namespace
}  // namespace cuinline

#else  // a build without hiredis: nothing to test but that it says so

TEST(RemoteCacheBuild, NeedsRedisSupport) {
  GTEST_SKIP() << ::cuinline::test::redis_skip_reason();
}

#endif
