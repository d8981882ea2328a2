// Paths that move under us: the cache directory is opened through descriptors, one
// component at a time from '/', never following a symlink once the path is resolved; what is missing
// is made with mkdirat and given mode 0700 with fchmod on the opened directory; every directory above
// the cache must be owned by this user or root and writable by no one else unless sticky (ssh's rule
// for ~/.ssh). Inspection (CacheConfig::create = false, `cuinline cache list/stats/verify`) creates
// nothing. Tests that give a directory to another uid need root (chown) and skip otherwise.
#include <gtest/gtest.h>

#include "cache/disk_cache_impl.hpp"
#include "disk_cache_test_util.hpp"

namespace cuinline {
namespace {

using test::TempDir;
namespace fs = std::filesystem;

constexpr uid_t kOtherUid = 4242;

mode_t mode_of(const fs::path& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0;
}

// A cache at `cache` is refused: unusable, one warning naming `needle`, nothing created under `top`.
void expect_refused(const fs::path& cache, const std::string& needle) {
  test::LogCapture log;
  DiskCache disk(test::config_for(cache));
  EXPECT_FALSE(disk.usable());
  EXPECT_EQ(log.warnings(), 1u) << log.text();
  EXPECT_NE(log.text().find(needle), std::string::npos) << log.text();
  EXPECT_FALSE(fs::exists(cache)) << "the cache directory was created under a refused parent";
}

TEST(CachePath, MissingDirectoriesAreMadeOwnerOnlyWhateverTheUmask) {
  TempDir dir;
  const mode_t old_umask = ::umask(0);
  const fs::path cache = dir.path() / "a" / "b" / "cache";
  DiskCache disk(test::config_for(cache));
  ::umask(old_umask);
  ASSERT_TRUE(disk.usable());
  EXPECT_EQ(mode_of(dir.path() / "a"), 0700u);
  EXPECT_EQ(mode_of(dir.path() / "a" / "b"), 0700u);
  EXPECT_EQ(mode_of(cache), 0700u);
  EXPECT_EQ(mode_of(cache / "lock"), 0600u);
}

TEST(CachePath, AParentWritableByOthersIsRefused) {
  TempDir dir;
  const fs::path open = dir.path() / "open";
  fs::create_directory(open);
  ASSERT_EQ(::chmod(open.c_str(), 0777), 0);
  expect_refused(open / "cache", "'" + open.string() + "' is writable by group or others (mode 0777, not sticky)");
  // Group-writable is refused too (anyone in the group can rename the cache directory away).
  ASSERT_EQ(::chmod(open.c_str(), 0770), 0);
  expect_refused(open / "x" / "cache", "'" + open.string() + "' is writable by group or others (mode 0770");
}

TEST(CachePath, AStickyParentLikeTmpIsAccepted) {
  TempDir dir;
  const fs::path tmp_like = dir.path() / "tmp";
  fs::create_directory(tmp_like);
  ASSERT_EQ(::chmod(tmp_like.c_str(), 01777), 0);
  DiskCache disk(test::config_for(tmp_like / "cache"));
  EXPECT_TRUE(disk.usable());
}

TEST(CachePath, AParentOwnedByAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another uid";
  TempDir dir;
  const fs::path theirs = dir.path() / "theirs";
  fs::create_directory(theirs);
  ASSERT_EQ(::chmod(theirs.c_str(), 0755), 0);
  ASSERT_EQ(::chown(theirs.c_str(), kOtherUid, kOtherUid), 0);
  expect_refused(theirs / "cache", "'" + theirs.string() + "' is owned by uid 4242, not by this user or root");
}

TEST(CachePath, ASymlinkIsResolvedAndItsTargetsParentsAreChecked) {
  TempDir dir;
  // A symlink in the path is resolved once, and the directories it leads through are the ones checked.
  const fs::path open = dir.path() / "open";
  fs::create_directories(open / "real");
  ASSERT_EQ(::chmod(open.c_str(), 0777), 0);
  fs::create_directory_symlink(open / "real", dir.path() / "link");
  expect_refused(dir.path() / "link" / "cache", "'" + open.string() + "' is writable by group or others");
  // Through a private directory, the same symlink is fine.
  ASSERT_EQ(::chmod(open.c_str(), 0700), 0);
  DiskCache disk(test::config_for(dir.path() / "link" / "cache"));
  EXPECT_TRUE(disk.usable());
  EXPECT_TRUE(fs::is_directory(open / "real" / "cache"));
}

TEST(CachePath, AComponentThatBecameASymlinkIsNotFollowed) {
  TempDir dir;
  fs::create_directories(dir.path() / "elsewhere" / "cache");
  fs::create_directory_symlink(dir.path() / "elsewhere", dir.path() / "moved");
  // The walk after resolution, given a path in which a component is a symlink: what it meets when a
  // directory is swapped for a symlink after the path was resolved. Refused, naming the component.
  std::string reason;
  int error = 0;
  const fs::path path = fs::canonical(dir.path()) / "moved" / "cache";
  const detail::UniqueFd fd = detail::walk_directory_path(path, path, true, false, reason, error);
  EXPECT_FALSE(fd);
  EXPECT_TRUE(error == ELOOP || error == ENOTDIR) << error;  // O_DIRECTORY | O_NOFOLLOW on a symlink
  EXPECT_NE(reason.find("/moved' became a symbolic link after the path was resolved (not followed)"),
            std::string::npos) << reason;
}

TEST(CachePath, InspectionCreatesNothing) {
  TempDir dir;
  CacheConfig config = test::config_for(dir.path() / "cache");
  config.create = false;
  {
    test::LogCapture log;
    DiskCache disk(config);
    EXPECT_FALSE(disk.usable());
    EXPECT_EQ(log.warnings(), 0u) << "a cache that does not exist yet is not a problem: " << log.text();
  }
  EXPECT_FALSE(fs::exists(dir.path() / "cache"));
  // An existing directory without a lock file: inspected, still without one.
  fs::create_directory(dir.path() / "cache");
  ASSERT_EQ(::chmod((dir.path() / "cache").c_str(), 0700), 0);
  DiskCache disk(config);
  ASSERT_TRUE(disk.usable());
  EXPECT_TRUE(disk.list().empty());
  EXPECT_EQ(disk.verify(false).checked, 0u);
  EXPECT_FALSE(fs::exists(dir.path() / "cache" / "lock"));
}

}  // namespace
}  // namespace cuinline
