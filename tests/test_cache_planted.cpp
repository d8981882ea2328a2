// Planted entries: an entry file is loaded only if this user (or root) owns it and no one else can
// write it, checked on the opened descriptor. A file another user wrote while the directory was
// group-writable stays refused after `chmod 700`; `verify` reports such entries and `verify(fix)`
// removes them. In a team cache (shared mode) only the fleet key makes another member's entry
// trusted: without one, such entries are misses left in place and `verify` reports them. Shared mode
// never reaches the read-only tiers. A file over the entry size bound is refused from its size,
// unread. A lock file of another user is replaced in a private cache, and passed over in a team
// cache, where this user's own lock file keeps its processes single-flight. Tests that give files
// to another uid need root (chown) and skip otherwise.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "cache/disk_cache_impl.hpp"
#include "cache/entry_auth.hpp"
#include "cuinline/kernel_cache.hpp"
#include "cuinline/module.hpp"
#include "disk_cache_test_util.hpp"
#include "stress_kernels.hpp"

namespace cuinline {
namespace {

using test::TempDir;
namespace fs = std::filesystem;

constexpr uid_t kOtherUid = 4242;
constexpr uid_t kNobody = 65534;

fs::path entry_path(const DiskCache& cache, const CacheKey& key) {
  return cache.directory() / key.hex();
}

// Sets an environment variable for a scope (this user's lock directory lives under XDG_CACHE_HOME).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { old_ ? ::setenv(name_, old_->c_str(), 1) : ::unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// A team cache at dir/team, with a fleet key or without, its user's own lock under dir/xdg.
CacheConfig team_config(const fs::path& dir, bool with_key) {
  CacheConfig config = test::config_for(dir / "team");
  config.allow_shared_directory = true;
  if (with_key) {
    config.remote.key_file = dir / "fleet.key";
    test::write_file(config.remote.key_file, "fleet-1 00112233445566778899aabbccddeeff0011223344556677\n");
    ::chmod(config.remote.key_file.c_str(), 0600);
  }
  return config;
}

// Bytes this process has read so far (read, pread and the like: /proc/self/io's rchar).
std::uint64_t bytes_read() {
  std::ifstream io("/proc/self/io");
  std::string name;
  std::uint64_t value = 0;
  while (io >> name >> value) {
    if (name == "rchar:") return value;
  }
  return 0;
}

std::size_t occurrences(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
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

TEST(PlantedEntries, ATeamCacheWithAKeyLeavesAuthenticityToTheTag) {
  TempDir dir;
  ScopedEnv xdg("XDG_CACHE_HOME", (dir.path() / "xdg").string());
  DiskCache cache(team_config(dir.path(), /*with_key=*/true));
  const CacheKey key = test::make_key("shared");
  ASSERT_TRUE(cache.store(key, test::make_program("s")));
  // Any member may have written it (group-writable here): the tag says whether to trust it.
  ASSERT_EQ(::chmod(entry_path(cache, key).c_str(), 0664), 0);
  EXPECT_TRUE(cache.load(key).has_value());
  EXPECT_TRUE(cache.verify(false).bad.empty());
}

TEST(PlantedEntries, ATeamCacheWithoutAKeyLoadsOnlyThisUsersEntries) {
  TempDir dir;
  ScopedEnv xdg("XDG_CACHE_HOME", (dir.path() / "xdg").string());
  DiskCache cache(team_config(dir.path(), /*with_key=*/false));
  ASSERT_TRUE(cache.usable());
  const CacheKey mine = test::make_key("mine"), rewritable = test::make_key("rewritable"),
                 theirs = test::make_key("theirs");
  for (const CacheKey& key : {mine, rewritable, theirs}) {
    ASSERT_TRUE(cache.store(key, test::make_program("p")));
  }
  EXPECT_TRUE(cache.load(mine).has_value()) << "this user's own entry (0640) is a hit";
  // Another member could have rewritten this one; and one another member wrote (root only).
  ASSERT_EQ(::chmod(entry_path(cache, rewritable).c_str(), 0664), 0);
  std::vector<CacheKey> planted = {rewritable};
  if (::geteuid() == 0) {
    ASSERT_EQ(::chown(entry_path(cache, theirs).c_str(), kNobody, kNobody), 0);
    planted.push_back(theirs);
  }
  for (const CacheKey& key : planted) {
    EXPECT_FALSE(cache.load(key).has_value()) << "an entry no key authenticates, of another writer";
    EXPECT_TRUE(fs::exists(entry_path(cache, key))) << "another member's entry is left in place";
  }
  EXPECT_EQ(cache.stats().disk_hits, 1u);
  EXPECT_EQ(cache.stats().rejected_entries, 0u) << "not damaged: another member's";
  // verify reports them as not trusted (not clean), and --fix leaves them: they are not bad for
  // the member who wrote them.
  VerifyReport report = cache.verify(false);
  EXPECT_EQ(report.checked, 3u);
  ASSERT_EQ(report.bad.size(), planted.size());
  for (const auto& [path, check] : report.bad) EXPECT_EQ(check, EntryCheck::untrusted_owner) << path;
  report = cache.verify(true);
  EXPECT_EQ(report.removed, 0u);
  for (const CacheKey& key : planted) EXPECT_TRUE(fs::exists(entry_path(cache, key)));
}

// A sparse file of 1 GiB (a few KiB on disk) under an entry name, with a seal and a header that
// describe it, as a member without the key would plant it: refused from its size, nothing read.
TEST(PlantedEntries, AnEntryFileOverTheSizeBoundIsNeverRead) {
  TempDir dir;
  ScopedEnv xdg("XDG_CACHE_HOME", (dir.path() / "xdg").string());
  CacheConfig config = team_config(dir.path(), /*with_key=*/true);
  config.max_bytes = 1 << 20;
  DiskCache cache(config);
  const CacheKey key = test::make_key("huge");
  ASSERT_TRUE(cache.store(key, test::make_program("genuine")));
  const fs::path entry = entry_path(cache, key);
  std::string head = test::read_file(entry);
  const std::size_t seal = detail::seal_size(head);
  ASSERT_GT(seal, 0u);
  constexpr std::uint64_t kPlanted = std::uint64_t{1} << 30;
  const std::uint64_t body = kPlanted - seal - detail::kEntryHeaderSize - detail::kEntryChecksumSize;
  for (int i = 0; i < 8; ++i) head[seal + 64 + i] = static_cast<char>((body >> (8 * i)) & 0xff);
  head.resize(seal + detail::kEntryHeaderSize);
  const auto plant = [&](std::uint64_t size) {
    const fs::path temp = dir.path() / "team" / ".planted";
    test::write_file(temp, head);
    ASSERT_EQ(::truncate(temp.c_str(), static_cast<off_t>(size)), 0);
    ASSERT_EQ(::chmod(temp.c_str(), 0640), 0);
    ASSERT_EQ(::rename(temp.c_str(), entry.c_str()), 0);
  };
  plant(kPlanted);
  const std::uint64_t before = bytes_read();
  EXPECT_FALSE(cache.load(key).has_value());
  EXPECT_LT(bytes_read() - before, std::uint64_t{1} << 20) << "the planted file was read";
  EXPECT_EQ(cache.stats().rejected_entries, 1u);
  EXPECT_FALSE(fs::exists(entry)) << "refused and removed (the directory is writable)";

  // One byte over the bound: eviction does not count it (its size would have every real entry
  // evicted, the planted one last with a use time in the future), verify reports it (unread) and
  // --fix removes it.
  plant(detail::kMaxEntryBytes + 1);
  test::set_age(entry, -86400);
  const CacheKey other = test::make_key("other");
  ASSERT_TRUE(cache.store(other, test::make_program("other")));
  ASSERT_TRUE(cache.store(test::make_key("rescan"), test::make_program("rescan", 200 << 10)));
  EXPECT_EQ(cache.stats().evictions, 0u);
  EXPECT_TRUE(cache.load(other).has_value());
  const std::uint64_t before_verify = bytes_read();
  const VerifyReport report = cache.verify(false);
  EXPECT_LT(bytes_read() - before_verify, std::uint64_t{1} << 20);
  ASSERT_EQ(report.bad.size(), 1u);
  EXPECT_EQ(report.bad[0].second, EntryCheck::too_large);
  EXPECT_EQ(std::string(to_string(EntryCheck::too_large)), "too_large");
  EXPECT_EQ(cache.verify(true).removed, 1u);
}

// Shared mode is the writable team cache's: a read-only tier stays a private cache, so a directory
// another user owns or anyone can write, and entries planted in it, are refused. The warning says
// which tier is skipped and which are still used.
TEST(ReadOnlyTiers, SharedModeDoesNotWeakenThem) {
  TempDir dir;
  ScopedEnv xdg("XDG_CACHE_HOME", (dir.path() / "xdg").string());
  const Arch sm90 = Arch::parse("sm_90");
  const CompileRequest request = test::stress_request(7);
  const CacheKey key = make_cache_key(request, sm90);
  {  // a genuine entry, as a forger would copy it
    KernelCache build(test::config_for(dir.path() / "build"));
    build.get(request, sm90);
  }
  const fs::path theirs = dir.path() / "theirs";
  ASSERT_TRUE(fs::create_directory(theirs));
  fs::copy_file(dir.path() / "build" / key.hex(), theirs / key.hex());
  ASSERT_EQ(::chmod((theirs / key.hex()).c_str(), 0666), 0);
  ASSERT_EQ(::chmod(theirs.c_str(), 0777), 0);
  if (::geteuid() == 0) {
    ASSERT_EQ(::chown(theirs.c_str(), kNobody, kNobody), 0);
    ASSERT_EQ(::chown((theirs / key.hex()).c_str(), kNobody, kNobody), 0);
  }
  CacheConfig config = test::config_for(dir.path() / "local");
  config.read_only_directories = {theirs};
  // CUINLINE_CACHE_SHARED=1 without a key, then private (where the refusal always was, but its
  // message said the memory cache alone was used while the writable one still was).
  for (const bool shared : {true, false}) {
    config.allow_shared_directory = shared;
    test::LogCapture log;
    KernelCache cache(config);
    CacheTier tier = CacheTier::memory;
    cache.get(request, sm90, &tier);
    if (shared) {
      EXPECT_EQ(tier, CacheTier::compiled) << "the forged entry of the read-only tier was served";
      EXPECT_TRUE(fs::exists(dir.path() / "local" / key.hex())) << "compiled into the writable cache";
    }
    const std::string text = log.text();
    EXPECT_EQ(occurrences(text, "skipping the read-only cache '" + theirs.string() + "'"), 1u) << text;
    const std::string still_used = "still used: the memory cache, the disk cache '" + config.directory.string() + "'";
    EXPECT_NE(text.find(still_used), std::string::npos) << text;
    EXPECT_EQ(text.find("memory cache only"), std::string::npos) << text;
  }
}

// A member replaced the team's lock file (by a symlink here, and by a file anyone can write): the
// cache stays on, one warning names the file's owner and says what to do, and this user's
// processes still exclude each other through their own lock file.
TEST(TeamLockFile, AReplacedLockFileIsPassedOverAndThisUsersProcessesStayExclusive) {
  TempDir dir;
  ScopedEnv xdg("XDG_CACHE_HOME", (dir.path() / "xdg").string());
  CacheConfig config = team_config(dir.path(), /*with_key=*/true);
  config.lock_wait = std::chrono::milliseconds(200);
  { DiskCache first(config); }
  const fs::path lock = config.directory / "lock";
  const fs::path target = dir.path() / "target";
  test::write_file(target, "untouched");
  for (const bool symlink : {true, false}) {
    fs::remove(lock);
    if (symlink) {
      fs::create_symlink(target, lock);
    } else {
      test::write_file(lock, "");
      ASSERT_EQ(::chmod(lock.c_str(), 0666), 0);
    }
    const bool root = ::geteuid() == 0;
    if (root) ASSERT_EQ(::lchown(lock.c_str(), kNobody, kNobody), 0);
    test::LogCapture log;
    DiskCache a(config);
    ASSERT_TRUE(a.usable()) << log.text();
    const CacheKey key = test::make_key("key");
    {
      DiskCache::KeyLock held = a.lock(key);
      EXPECT_TRUE(held.held());
      ASSERT_TRUE(a.store(key, test::make_program("p")));
      EXPECT_TRUE(a.load(key).has_value());
      const std::string text = log.text();
      EXPECT_EQ(occurrences(text, "passing over the lock file '" + lock.string() + "'"), 1u) << text;
      if (root) EXPECT_NE(text.find("owned by uid 65534"), std::string::npos) << text;
      EXPECT_NE(text.find("`rm " + lock.string() + "`"), std::string::npos) << text;
      EXPECT_EQ(log.warnings(), 1u) << text;
      // Another "process" of this user (a description of its own) waits for the held key.
      DiskCache b(config);
      const auto start = std::chrono::steady_clock::now();
      EXPECT_FALSE(b.lock(key).held());
      EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(200));
      EXPECT_EQ(b.stats().disk_lock_timeouts, 1u);
    }
    DiskCache c(config);
    EXPECT_TRUE(c.lock(key).held()) << "released with the first holder";
    EXPECT_EQ(test::read_file(target), "untouched");
    EXPECT_TRUE(fs::exists(dir.path() / "xdg" / "cuinline-locks" / "team.lock"));
  }
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
