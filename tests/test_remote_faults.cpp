// The remote tier is never a single point of failure: Redis killed mid-run and
// restarted, paused past the command timeout, full (maxmemory + noeviction), a read-only replica, a
// wrong password. Every request is still served (local tiers or a compile) with the right kernel,
// the extra delay is printed and bounded generously, and nothing bad lands on the local disk.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "remote_test_util.hpp"

#if CUINLINE_TEST_HAVE_REDIS

namespace cuinline {
namespace {

using test::Fleet;
using test::sm90;
using test::stress_request;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// One request, checked; returns its wall time.
double timed_get(KernelCache& cache, int i, CacheTier* tier = nullptr) {
  const auto start = Clock::now();
  CacheTier got = CacheTier::memory;
  Module m = cache.get(stress_request(i), sm90(), &got);
  const double s = seconds_since(start);
  EXPECT_EQ(test::check_stress_module(m, i, make_cache_key(stress_request(i), sm90())), "") << i;
  if (tier) *tier = got;
  return s;
}

void expect_clean_disk(const CacheConfig& config) {
  DiskCache disk(config);
  const VerifyReport report = disk.verify(false);
  EXPECT_TRUE(report.bad.empty()) << report.bad.size() << " bad entries on the local disk";
}

// Compile time of one small kernel on this machine, for comparing delays against.
double compile_seconds(int i) {
  const auto start = Clock::now();
  compile(stress_request(i), sm90());
  return seconds_since(start);
}

int base() {
  static const int b = static_cast<int>(test::fresh_seed() % 100000) * 100;
  return b;
}

TEST(RemoteFaults, KilledMidRunAndRestarted) {
  REDIS_OR_SKIP();
  Fleet fleet(/*tcp=*/true);
  CacheConfig config = fleet.config("a");
  config.remote.retry_initial = std::chrono::milliseconds(200);
  KernelCache cache(config);
  std::atomic<bool> stop{false};
  std::vector<double> times;
  std::thread worker([&] {
    for (int n = 0; !stop; ++n) {
      // New kernels (misses) and repeats (memory hits) and, after clear_memory, disk hits.
      if (n % 7 == 6) cache.clear_memory();
      times.push_back(timed_get(cache, base() + n / 2));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  fleet.redis.stop();  // SIGKILL
  const std::uint64_t writes_before = cache.stats().remote_writes;
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  ASSERT_TRUE(fleet.redis.start());  // empty: no persistence
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  stop = true;
  worker.join();
  const CacheStats s = cache.stats();
  const double worst = *std::max_element(times.begin(), times.end());
  std::printf(
      "killed and restarted: %zu requests, worst %.3f s, compile %.3f s; remote writes %llu (%llu before the "
      "kill), errors %llu\n",
      times.size(), worst, compile_seconds(base() + 99), static_cast<unsigned long long>(s.remote_writes),
      static_cast<unsigned long long>(writes_before), static_cast<unsigned long long>(s.remote_errors));
  EXPECT_LT(worst, 2.0);
  EXPECT_GT(s.remote_errors, 0u);
  EXPECT_GT(s.remote_writes, writes_before) << "publishing did not resume after the restart";
  EXPECT_GT(fleet.redis.integer({"DBSIZE"}), 0);
  expect_clean_disk(config);
}

TEST(RemoteFaults, PausedPastTheTimeout) {
  REDIS_OR_SKIP();
  Fleet fleet(/*tcp=*/true);
  CacheConfig config = fleet.config("a");
  {
    KernelCache warm(config);
    timed_get(warm, base() + 1);  // published; on a's disk too
  }
  fleet.redis.pause();
  // A disk hit never asks Redis.
  {
    KernelCache local(config);
    CacheTier tier;
    const double s = timed_get(local, base() + 1, &tier);
    EXPECT_EQ(tier, CacheTier::disk);
    std::printf("paused: disk hit %.6f s\n", s);
    EXPECT_LT(s, 0.1);
  }
  // A miss: one command timeout (200 ms), then the tier is skipped (back-off) and we compile.
  KernelCache other(fleet.config("b"));
  CacheTier tier;
  const double first = timed_get(other, base() + 1, &tier);
  EXPECT_EQ(tier, CacheTier::compiled);
  const double second = timed_get(other, base() + 2, &tier);
  EXPECT_EQ(tier, CacheTier::compiled);
  const double compile_s = compile_seconds(base() + 3);
  std::printf("paused: first miss %.3f s (command timeout 0.2 s), next miss %.3f s, a compile alone %.3f s\n",
              first, second, compile_s);
  EXPECT_LT(first, 2.0);
  EXPECT_LT(second, 2.0);
  EXPECT_GT(other.stats().remote_errors, 0u);
  fleet.redis.resume();
  expect_clean_disk(fleet.config("b"));
}

TEST(RemoteFaults, FullRedisStillServesReads) {
  REDIS_OR_SKIP();
  Fleet fleet(/*tcp=*/false);
  // Publish one entry while there is room, then shrink maxmemory below what is used.
  {
    KernelCache warm(fleet.config("a"));
    timed_get(warm, base() + 1);
  }
  ASSERT_TRUE(fleet.redis.command({"CONFIG", "SET", "maxmemory-policy", "noeviction"}));
  ASSERT_TRUE(fleet.redis.command({"CONFIG", "SET", "maxmemory", "1mb"}));
  {
    auto r = fleet.redis.command({"SET", "probe", "x"});
    ASSERT_TRUE(r);
    ASSERT_EQ(r->type, REDIS_REPLY_ERROR) << "Redis is not full; the test proves nothing";
  }
  KernelCache cache(fleet.config("b"));
  CacheTier tier;
  const double hit = timed_get(cache, base() + 1, &tier);
  EXPECT_EQ(tier, CacheTier::remote) << "a full Redis still answers reads";
  double worst = 0;
  for (int i = 2; i < 8; ++i) worst = std::max(worst, timed_get(cache, base() + i, &tier));
  const CacheStats s = cache.stats();
  std::printf("full (OOM): remote hit %.4f s, worst miss %.3f s, write failures %llu, errors %llu\n", hit,
              worst, static_cast<unsigned long long>(s.remote_write_failures),
              static_cast<unsigned long long>(s.remote_errors));
  EXPECT_LT(worst, 2.0);
  EXPECT_GT(s.remote_write_failures, 0u);
  EXPECT_EQ(s.compiles, 6u);
  expect_clean_disk(fleet.config("b"));
}

TEST(RemoteFaults, ReadOnlyReplica) {
  REDIS_OR_SKIP();
  Fleet fleet(/*tcp=*/false);
  {
    KernelCache warm(fleet.config("a"));
    timed_get(warm, base() + 1);
  }
  // A replica of a master nobody runs: read-only, still serving what it holds.
  const int nobody = test::free_tcp_port();
  ASSERT_TRUE(fleet.redis.command({"REPLICAOF", "127.0.0.1", std::to_string(nobody)}));
  KernelCache cache(fleet.config("b"));
  CacheTier tier;
  const double hit = timed_get(cache, base() + 1, &tier);
  EXPECT_EQ(tier, CacheTier::remote) << "a read-only replica still answers reads";
  double worst = 0;
  for (int i = 2; i < 6; ++i) worst = std::max(worst, timed_get(cache, base() + i, &tier));
  const CacheStats s = cache.stats();
  std::printf("read-only replica: remote hit %.4f s, worst miss %.3f s, write failures %llu\n", hit, worst,
              static_cast<unsigned long long>(s.remote_write_failures));
  EXPECT_LT(worst, 2.0);
  EXPECT_EQ(s.compiles, 4u);
  EXPECT_EQ(fleet.redis.integer({"DBSIZE"}), 1) << "nothing may be written to a replica";
  expect_clean_disk(fleet.config("b"));
}

TEST(RemoteFaults, WrongPassword) {
  REDIS_OR_SKIP();
  Fleet fleet(/*tcp=*/true, {"--requirepass", "right-password"});
  for (const std::string& userinfo : {std::string(":wrong-password"), std::string()}) {
    SCOPED_TRACE(userinfo.empty() ? "no password" : "wrong password");
    CacheConfig config = fleet.config("wrong" + userinfo);
    config.remote.url = fleet.redis.url(userinfo);
    KernelCache cache(config);
    ASSERT_NE(cache.remote(), nullptr);
    double worst = 0;
    for (int i = 1; i < 5; ++i) worst = std::max(worst, timed_get(cache, base() + i));
    const CacheStats s = cache.stats();
    std::printf("%s: worst miss %.3f s, remote errors %llu\n",
                userinfo.empty() ? "no password" : "wrong password", worst,
                static_cast<unsigned long long>(s.remote_errors));
    EXPECT_LT(worst, 2.0);
    EXPECT_EQ(s.compiles, 4u);
    EXPECT_GT(s.remote_errors, 0u);
    expect_clean_disk(config);
  }
  EXPECT_EQ(fleet.redis.integer({"DBSIZE"}, "right-password"), 0);
  // The right password works.
  CacheConfig config = fleet.config("right");
  config.remote.url = fleet.redis.url(":right-password");
  KernelCache cache(config);
  timed_get(cache, base() + 1);
  EXPECT_EQ(cache.stats().remote_writes, 1u);
  EXPECT_EQ(fleet.redis.integer({"DBSIZE"}, "right-password"), 1);
}

TEST(RemoteFaults, NobodyListening) {
  REDIS_OR_SKIP();
  Fleet fleet(/*tcp=*/true);
  CacheConfig config = fleet.config("a");
  config.remote.url = "redis://127.0.0.1:" + std::to_string(test::free_tcp_port());
  KernelCache cache(config);
  double worst = 0;
  for (int i = 1; i < 4; ++i) worst = std::max(worst, timed_get(cache, base() + i));
  std::printf("nobody listening: worst miss %.3f s\n", worst);
  EXPECT_LT(worst, 2.0);
  EXPECT_EQ(cache.stats().compiles, 3u);
  // An address that does not answer (or, behind a proxy, answers something that is not Redis): the
  // connect timeout (50 ms) or the protocol error bounds it.
  config.remote.url = "redis://10.255.255.1:6379";
  config.directory = fleet.dir.path() / "disk-b";
  KernelCache unroutable(config);
  const double s = timed_get(unroutable, base() + 1);
  std::printf("unroutable (or non-Redis) address: miss %.3f s\n", s);
  EXPECT_LT(s, 2.0);
}

}  // namespace
}  // namespace cuinline

#else  // a build without hiredis: nothing to test but that it says so

TEST(RemoteFaultsBuild, NeedsRedisSupport) {
  GTEST_SKIP() << ::cuinline::test::redis_skip_reason();
}

#endif
