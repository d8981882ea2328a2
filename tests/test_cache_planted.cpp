// Planted entries (issue 20, item 1): an entry file is loaded only if this user (or root) owns it and
// no one else can write it, checked on the opened descriptor. A file another user wrote while the
// directory was group-writable stays refused after `chmod 700`; `verify` reports such entries and
// `verify(fix)` removes them; shared mode (the fleet key's job) accepts them; a lock file of another
// user is replaced; the refusal of a writable directory does not recommend CUINLINE_CACHE_SHARED=1.
// Tests that give files to another uid need root (chown) and skip otherwise.
#include <gtest/gtest.h>

#include "disk_cache_test_util.hpp"

namespace cuinline {
namespace {

using test::TempDir;
namespace fs = std::filesystem;

constexpr uid_t kOtherUid = 4242;

fs::path entry_path(const DiskCache& cache, const CacheKey& key) {
  return cache.directory() / key.hex();
}

TEST(PlantedEntries, AGroupWritableEntryIsRefusedAndRebuilt) {
  TempDir dir;
  test::LogCapture log;
  DiskCache cache(test::config_for(dir.path()));
  ASSERT_TRUE(cache.usable());
  const CacheKey key = test::make_key("planted");
  ASSERT_TRUE(cache.store(key, test::make_program("p")));
  ASSERT_TRUE(cache.load(key).has_value());
  // Someone in the group could have rewritten this one: it holds valid bytes, and is still refused.
  ASSERT_EQ(::chmod(entry_path(cache, key).c_str(), 0664), 0);
  EXPECT_FALSE(cache.load(key).has_value());
  EXPECT_EQ(cache.stats().rejected_entries, 1u);
  EXPECT_FALSE(fs::exists(entry_path(cache, key))) << "a refused entry is removed, to be rebuilt";
  EXPECT_EQ(log.warnings(), 1u);
  // A second planted entry is counted and removed too, warned about once a process only.
  const CacheKey key2 = test::make_key("planted2");
  ASSERT_TRUE(cache.store(key2, test::make_program("q")));
  ASSERT_EQ(::chmod(entry_path(cache, key2).c_str(), 0646), 0);
  EXPECT_FALSE(cache.load(key2).has_value());
  EXPECT_EQ(cache.stats().rejected_entries, 2u);
  EXPECT_EQ(log.warnings(), 1u);
  // Rebuilt: the next store is loaded again.
  ASSERT_TRUE(cache.store(key, test::make_program("p")));
  EXPECT_TRUE(cache.load(key).has_value());
}

TEST(PlantedEntries, AnotherUsersEntryStaysRefusedAfterChmod700) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give an entry to another uid";
  TempDir dir;
  const CacheKey key = test::make_key("other");
  fs::path planted;
  {
    DiskCache cache(test::config_for(dir.path()));
    ASSERT_TRUE(cache.store(key, test::make_program("valid bytes, foreign owner")));
    planted = entry_path(cache, key);
  }
  // The entry as another user would have written it while the directory was group-writable (the
  // directory is private again now: the user followed the warning).
  ASSERT_EQ(::chown(planted.c_str(), kOtherUid, kOtherUid), 0);
  ASSERT_EQ(::chmod(planted.c_str(), 0600), 0);
  ASSERT_EQ(::chmod(dir.path().c_str(), 0700), 0);
  DiskCache cache(test::config_for(dir.path()));
  ASSERT_TRUE(cache.usable());
  const VerifyReport report = cache.verify(false);
  ASSERT_EQ(report.bad.size(), 1u);
  EXPECT_EQ(report.bad[0].second, EntryCheck::untrusted_owner);
  EXPECT_TRUE(fs::exists(planted)) << "verify without fix changes nothing";
  EXPECT_FALSE(cache.load(key).has_value());
  EXPECT_EQ(cache.stats().rejected_entries, 1u);
}

TEST(PlantedEntries, VerifyReportsAndFixRemovesThem) {
  TempDir dir;
  DiskCache cache(test::config_for(dir.path()));
  const CacheKey good = test::make_key("good"), bad = test::make_key("bad");
  ASSERT_TRUE(cache.store(good, test::make_program("good")));
  ASSERT_TRUE(cache.store(bad, test::make_program("bad")));
  ASSERT_EQ(::chmod(entry_path(cache, bad).c_str(), 0620), 0);
  VerifyReport report = cache.verify(false);
  EXPECT_EQ(report.checked, 2u);
  ASSERT_EQ(report.bad.size(), 1u);
  EXPECT_EQ(report.bad[0].first.filename(), bad.hex());
  EXPECT_EQ(report.bad[0].second, EntryCheck::untrusted_owner);
  report = cache.verify(true);
  EXPECT_EQ(report.removed, 1u);
  EXPECT_FALSE(fs::exists(entry_path(cache, bad)));
  EXPECT_TRUE(cache.load(good).has_value());
  EXPECT_TRUE(cache.verify(false).bad.empty());
}

TEST(PlantedEntries, SharedModeLeavesAuthenticityToTheFleetKey) {
  TempDir dir;
  CacheConfig config = test::config_for(dir.path());
  config.allow_shared_directory = true;
  DiskCache cache(config);
  const CacheKey key = test::make_key("shared");
  ASSERT_TRUE(cache.store(key, test::make_program("s")));
  ASSERT_EQ(::chmod(entry_path(cache, key).c_str(), 0664), 0);
  EXPECT_TRUE(cache.load(key).has_value());
  EXPECT_TRUE(cache.verify(false).bad.empty());
}

TEST(PlantedEntries, AnotherUsersLockFileIsReplaced) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give the lock file to another uid";
  TempDir dir;
  { DiskCache first(test::config_for(dir.path())); }
  const fs::path lock = dir.path() / "lock";
  ASSERT_TRUE(fs::exists(lock));
  ASSERT_EQ(::chown(lock.c_str(), kOtherUid, kOtherUid), 0);
  ASSERT_EQ(::chmod(lock.c_str(), 0666), 0);
  DiskCache cache(test::config_for(dir.path()));
  ASSERT_TRUE(cache.usable());
  struct stat st {};
  ASSERT_EQ(::stat(lock.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, ::geteuid());
  EXPECT_EQ(st.st_mode & 077, 0u);
  const CacheKey key = test::make_key("after");
  DiskCache::KeyLock held = cache.lock(key);
  EXPECT_TRUE(held.held());
}

TEST(PlantedEntries, TheRefusalOfAWritableDirectoryDoesNotRecommendSharedMode) {
  TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0770), 0);
  test::LogCapture log;
  DiskCache cache(test::config_for(dir.path()));
  EXPECT_FALSE(cache.usable());
  try {
    cache.verify(false);
    ADD_FAILURE() << "verify of an unusable cache should throw";
  } catch (const CacheError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find("CUINLINE_CACHE_SHARED"), std::string::npos) << what;
    EXPECT_NE(what.find("chmod 700"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace cuinline
