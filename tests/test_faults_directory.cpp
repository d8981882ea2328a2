// A cache directory nobody else controls (docs/RELIABILITY.md §3). Machine code from the cache runs
// with the user's rights, so a directory another user could write to is refused (one warning, then
// memory-only) unless sharing was asked for; entries are never read through a symlink; entries are
// owner-only; and no path is ever built from anything but the hex key.
//
// The tests run as root here and in CI: permission bits do not stop root, so they check what
// cuinline decides from the owner and mode, not what the kernel would allow.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "cuinline/cuinline.hpp"
#include "hardening_support.hpp"
#include "stress_kernels.hpp"
#include "test_support.hpp"

namespace cuinline {
namespace {

namespace fs = std::filesystem;
using namespace test;

class CacheDirectory : public ::testing::Test {
 protected:
  TempDir dir{"cachedir"};
  const Arch sm90 = Arch::parse("sm_90");

  fs::path cache_dir() const { return dir.path() / "cache"; }
  void make_cache_dir(mode_t mode) {
    fs::create_directories(cache_dir());
    ASSERT_EQ(::chmod(cache_dir().c_str(), mode), 0);
  }

  // With `config`, the disk tier is off (one warning in all, however many requests), kernels are
  // still served, and nothing is written into the directory.
  void expect_memory_only_with_one_warning(const CacheConfig& config, const std::string& needle) {
    LogCapture log;
    KernelCache cache(config);
    ASSERT_NE(cache.disk(), nullptr);
    EXPECT_FALSE(cache.disk()->usable());
    for (int i = 0; i < 3; ++i) {
      CacheTier tier = CacheTier::memory;
      const Module m = cache.get(stress_request(i), sm90, &tier);
      EXPECT_EQ(tier, CacheTier::compiled);
      EXPECT_EQ(m.program().lowered_name(stress_expression(i)), stress_mangled(i));
    }
    EXPECT_EQ(log.warnings(), 1u) << log.text();
    EXPECT_NE(log.text().find(needle), std::string::npos) << log.text();
    EXPECT_TRUE(names_in(cache_dir()).empty()) << "something was written into a refused directory";
  }

  // With allow_shared_directory, the same directory is used.
  void expect_used_when_shared() {
    CacheConfig config = config_at(cache_dir());
    config.allow_shared_directory = true;
    KernelCache cache(config);
    ASSERT_TRUE(cache.disk()->usable());
    cache.get(stress_request(1), sm90);
    EXPECT_EQ(cache.stats().disk_writes, 1u);
  }
};

TEST_F(CacheDirectory, WritableByOthersIsRefusedUnlessShared) {
  make_cache_dir(0777);
  expect_memory_only_with_one_warning(config_at(cache_dir()), "writable by group or others (mode 0777");
  expect_used_when_shared();
}

TEST_F(CacheDirectory, WritableByGroupIsRefusedUnlessShared) {
  make_cache_dir(0770);
  expect_memory_only_with_one_warning(config_at(cache_dir()), "writable by group or others (mode 0770");
  expect_used_when_shared();
}

TEST_F(CacheDirectory, StickyWorldWritableLikeTmpIsRefused) {
  make_cache_dir(01777);
  expect_memory_only_with_one_warning(config_at(cache_dir()), "writable by group or others");
}

TEST_F(CacheDirectory, OwnedByAnotherUserIsRefusedUnlessShared) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give the directory to another uid";
  make_cache_dir(0700);
  ASSERT_EQ(::chown(cache_dir().c_str(), 4242, 4242), 0);
  expect_memory_only_with_one_warning(config_at(cache_dir()), "owned by uid 4242");
  expect_used_when_shared();
}

TEST_F(CacheDirectory, ReadableByOthersIsAccepted) {
  make_cache_dir(0755);  // others may read entries, not plant them
  KernelCache cache(config_at(cache_dir()));
  EXPECT_TRUE(cache.disk()->usable());
}

TEST_F(CacheDirectory, SharingIsOffByDefaultAndOnlyAnExplicitSettingTurnsItOn) {
  EXPECT_FALSE(CacheConfig{}.allow_shared_directory);
  ::unsetenv("CUINLINE_CACHE_SHARED");
  EXPECT_FALSE(CacheConfig::from_environment().allow_shared_directory);
  ::setenv("CUINLINE_CACHE_SHARED", "1", 1);
  EXPECT_TRUE(CacheConfig::from_environment().allow_shared_directory);
  ::setenv("CUINLINE_CACHE_SHARED", "maybe", 1);  // not a boolean: ignored (with a warning), stays off
  EXPECT_FALSE(CacheConfig::from_environment().allow_shared_directory);
  ::unsetenv("CUINLINE_CACHE_SHARED");
}

TEST_F(CacheDirectory, SymlinkUnderAnEntryNameIsNeverFollowed) {
  make_cache_dir(0700);
  // A perfectly valid entry for the key, but reached through a symlink: an attacker's file would
  // look the same. It must not be loaded, and the file it points to must not be touched.
  const CacheKey key = make_cache_key(stress_request(3), sm90);
  {
    TempDir elsewhere("elsewhere");
    KernelCache other(config_at(elsewhere.path()));
    other.get(stress_request(3), sm90);
    fs::copy_file(elsewhere.path() / key.hex(), dir.path() / "target");
  }
  const std::string target_bytes = read_bytes(dir.path() / "target");
  fs::create_symlink(dir.path() / "target", cache_dir() / key.hex());

  KernelCache cache(config_at(cache_dir()));
  CacheTier tier = CacheTier::memory;
  const Module m = cache.get(stress_request(3), sm90, &tier);
  EXPECT_EQ(tier, CacheTier::compiled) << "an entry was read through a symlink";
  EXPECT_EQ(m.program().lowered_name(stress_expression(3)), stress_mangled(3));
  EXPECT_FALSE(fs::is_symlink(cache_dir() / key.hex())) << "the symlink is still there";
  EXPECT_TRUE(fs::is_regular_file(cache_dir() / key.hex()));
  EXPECT_EQ(read_bytes(dir.path() / "target"), target_bytes) << "the symlink's target was changed";
  // verify() and list() do not follow it either.
  fs::remove(cache_dir() / key.hex());
  fs::create_symlink(dir.path() / "target", cache_dir() / key.hex());
  DiskCache disk(config_at(cache_dir()));
  EXPECT_TRUE(disk.list().empty());
  const VerifyReport report = disk.verify(/*fix=*/true);
  EXPECT_EQ(report.bad.size(), 1u);
  EXPECT_EQ(read_bytes(dir.path() / "target"), target_bytes);
}

TEST_F(CacheDirectory, SymlinkedLockFileIsNotUsed) {
  make_cache_dir(0700);
  write_bytes(dir.path() / "victim", "keep me");
  fs::create_symlink(dir.path() / "victim", cache_dir() / "lock");
  LogCapture log;
  KernelCache cache(config_at(cache_dir()));
  const Module m = cache.get(stress_request(1), sm90);
  EXPECT_EQ(m.program().lowered_name(stress_expression(1)), stress_mangled(1));
  EXPECT_EQ(read_bytes(dir.path() / "victim"), "keep me");
}

TEST_F(CacheDirectory, EntriesAreOwnerOnlyWhateverTheUmask) {
  const mode_t old = ::umask(0);
  {
    KernelCache cache(config_at(cache_dir()));
    cache.get(stress_request(1), sm90);
  }
  ::umask(old);
  struct stat st {};
  ASSERT_EQ(::stat(cache_dir().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u) << "a created cache directory is owner-only";
  const auto entries = names_in(cache_dir());
  ASSERT_EQ(entries.size(), 1u);
  ASSERT_EQ(::stat((cache_dir() / entries[0]).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((cache_dir() / "lock").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(CacheDirectory, PathsComeOnlyFromTheHexKey) {
  make_cache_dir(0700);
  KernelCache cache(config_at(cache_dir()));
  CompileRequest hostile = stress_request(1);
  hostile.name = "../../escaped/../../etc/passwd";
  hostile.headers = {{"../../header.cuh", "// harmless\n"}};
  hostile.source = "#include \"../../header.cuh\"\n" + hostile.source;
  cache.get(hostile, sm90);
  const auto names = names_in(cache_dir());
  ASSERT_EQ(names.size(), 1u);
  EXPECT_TRUE(CacheKey::from_hex(names[0]).has_value()) << names[0];
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"cache"}) << "a file appeared outside the cache";
  for (const char* bad :
       {"../../../../etc/passwd", "", "ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789",
        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde/",
        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0"}) {
    EXPECT_FALSE(CacheKey::from_hex(bad).has_value()) << bad;
  }
}

TEST_F(CacheDirectory, FilesThatAreNotEntriesAreNeverTouched) {
  make_cache_dir(0700);
  const std::vector<std::string> foreign = {
      "notes.txt", "ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789", "tmp-not-ours",
      ".hidden"};
  for (const auto& name : foreign) write_bytes(cache_dir() / name, "user data " + name);
  {
    CacheConfig config = config_at(cache_dir());
    config.max_bytes = 1;  // evict everything it can
    KernelCache cache(config);
    for (int i = 0; i < 3; ++i) cache.get(stress_request(i), sm90);
    DiskCache& disk = *cache.disk();
    disk.verify(/*fix=*/true);
    disk.prune(0);
    disk.clear();
  }
  for (const auto& name : foreign) EXPECT_EQ(read_bytes(cache_dir() / name), "user data " + name) << name;
}

}  // namespace
}  // namespace cuinline
