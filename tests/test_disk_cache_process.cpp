// The disk tier across processes (tools/disk_cache_tool), with unusable directories, and the
// CUINLINE_* environment variables.

#include <grp.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <map>
#include <optional>

#include "disk_cache_test_util.hpp"

namespace cuinline {
namespace {

using namespace cuinline::test;

TEST(DiskCacheProcess, EntryWrittenHereIsReadByAnotherProcess) {
  TempDir dir, scratch;
  const CacheKey key = make_key("cross-process");
  {
    DiskCache cache(config_for(dir.path()));
    ASSERT_TRUE(cache.store(key, make_program("cross.cu", 777)));
  }
  std::string output;
  EXPECT_EQ(run_tool("disk_cache_tool", {"load", dir.path().string(), key.hex()}, &output, scratch.path()),
            0);
  EXPECT_NE(output.find("hit cross.cu 777 2"), std::string::npos) << output;
  EXPECT_NE(output.find("disk_hits=1 rejected_entries=0"), std::string::npos) << output;

  // A damaged entry is a miss in the other process too, and it removes it.
  std::string bytes = read_file(dir.path() / key.hex());
  bytes[bytes.size() - 5] ^= 0x40;
  write_file(dir.path() / key.hex(), bytes);
  EXPECT_EQ(run_tool("disk_cache_tool", {"load", dir.path().string(), key.hex()}, &output, scratch.path()),
            1);
  EXPECT_NE(output.find("rejected_entries=1"), std::string::npos) << output;
  EXPECT_FALSE(fs::exists(dir.path() / key.hex()));
}

// Every holder appends "start" and "end" while it holds the lock: with exclusion, the log is a
// strict alternation start P / end P.
TEST(DiskCacheProcess, OneProcessHoldsAKeyLockAtATime) {
  TempDir dir;
  const CacheKey key = make_key("contended");
  { DiskCache cache(config_for(dir.path())); }  // create the directory
  const std::string log = (dir.path() / "holders.log").string();
  std::vector<pid_t> pids;
  for (int i = 0; i < 5; ++i)
    pids.push_back(spawn_tool("disk_cache_tool", {"lock", dir.path().string(), key.hex(), "60", log}));
  for (pid_t pid : pids) EXPECT_EQ(wait_tool(pid), 0);
  std::istringstream lines(read_file(log));
  std::string what, pid, open_pid;
  int starts = 0;
  while (lines >> what >> pid) {
    if (what == "start") {
      EXPECT_TRUE(open_pid.empty()) << pid << " started while " << open_pid << " held the lock";
      open_pid = pid;
      ++starts;
    } else {
      EXPECT_EQ(what, "end");
      EXPECT_EQ(pid, open_pid);
      open_pid.clear();
    }
  }
  EXPECT_EQ(starts, 5);
  EXPECT_TRUE(open_pid.empty());
}

TEST(DiskCacheProcess, KilledLockHolderDoesNotBlockTheNext) {
  TempDir dir;
  const CacheKey key = make_key("killed");
  { DiskCache cache(config_for(dir.path())); }
  const std::string ready = (dir.path() / "ready").string();
  const std::string log = (dir.path() / "next.log").string();
  const pid_t holder = spawn_tool("disk_cache_tool", {"hold", dir.path().string(), key.hex(), ready});
  for (int i = 0; i < 2000 && !fs::exists(ready); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(fs::exists(ready)) << "the holder never took the lock";
  const pid_t waiter = spawn_tool("disk_cache_tool", {"lock", dir.path().string(), key.hex(), "0", log});
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  int status = 0;
  EXPECT_EQ(::waitpid(waiter, &status, WNOHANG), 0) << "the waiter got the lock while it was held";
  ASSERT_EQ(::kill(holder, SIGKILL), 0);
  EXPECT_EQ(wait_tool(holder), -2);
  EXPECT_EQ(wait_tool(waiter, std::chrono::seconds(20)), 0) << "the lock died with its holder";
  EXPECT_NE(read_file(log).find("end"), std::string::npos);
  // And this process can take it too.
  DiskCache cache(config_for(dir.path()));
  EXPECT_TRUE(cache.lock(key).held());
}

TEST(DiskCacheProcess, LocksOfDifferentKeysDoNotBlockEachOther) {
  TempDir dir;
  DiskCache cache(config_for(dir.path()));
  const CacheKey a = make_key("a"), b = make_key("b");
  auto lock_a = cache.lock(a);
  ASSERT_TRUE(lock_a.held());
  const std::string log = (dir.path() / "b.log").string();
  EXPECT_EQ(wait_tool(spawn_tool("disk_cache_tool", {"lock", dir.path().string(), b.hex(), "0", log}),
                      std::chrono::seconds(20)),
            0);
  DiskCache::KeyLock moved = std::move(lock_a);
  EXPECT_TRUE(moved.held());
  EXPECT_FALSE(lock_a.held());  // NOLINT(bugprone-use-after-move): moved-from state is specified
}

TEST(DiskCacheDirectory, CreatedRecursivelyPrivate) {
  TempDir dir;
  const fs::path nested = dir.path() / "a" / "b" / "cache";
  DiskCache cache(config_for(nested));
  ASSERT_TRUE(cache.usable());
  for (const fs::path& p : {dir.path() / "a", dir.path() / "a" / "b", nested}) {
    EXPECT_EQ(fs::status(p).permissions() & fs::perms::all, fs::perms::owner_all) << p;
  }
}

// A shipped cache (issue 20, item 3): root's directory and entries, only readable by everyone, used
// by another user. Root ignores permission bits, so the user runs in a tool process as nobody. Its
// hits are served; nothing is written, not even a lock file.
TEST(DiskCacheDirectory, ARootOwnedReadableCacheServesHitsToAnotherUser) {
  if (::geteuid() != 0) GTEST_SKIP() << "covered in-process by AReadOnlyDirectoryServesHitsAndWritesNothing";
  TempDir dir, scratch;
  const uid_t nobody = 65534;
  const CacheKey key = make_key("shipped");
  {
    DiskCache cache(config_for(dir.path()));
    ASSERT_TRUE(cache.store(key, make_program("shipped.cu")));
  }
  ASSERT_EQ(::chmod((dir.path() / key.hex()).c_str(), 0644), 0);
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  ASSERT_EQ(::chown(scratch.path().c_str(), nobody, nobody), 0);
  const std::vector<std::string> before = files_in(dir.path());
  const std::string tool = tool_path("disk_cache_tool"), out = (scratch.path() / "probe.out").string();
  const std::string dir_arg = dir.path().string(), key_arg = key.hex();
  char* argv[] = {const_cast<char*>(tool.c_str()), const_cast<char*>("probe"),
                  const_cast<char*>(dir_arg.c_str()), const_cast<char*>(key_arg.c_str()), nullptr};
  const int out_fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
  ASSERT_GE(out_fd, 0);
  ASSERT_EQ(::fchown(out_fd, nobody, nobody), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out_fd, STDOUT_FILENO);
    if (::setgroups(0, nullptr) != 0 || ::setresgid(nobody, nobody, nobody) != 0 ||
        ::setresuid(nobody, nobody, nobody) != 0) {
      ::_exit(126);
    }
    ::execv(tool.c_str(), argv);
    ::_exit(127);
  }
  ::close(out_fd);
  ASSERT_EQ(wait_tool(pid), 0) << read_file(out);
  EXPECT_EQ(read_file(out), "usable=1 store=0 load=1 lock=0\n");
  EXPECT_EQ(files_in(dir.path()), before);
}

TEST(DiskCacheDirectory, AReadOnlyDirectoryServesHitsAndWritesNothing) {
  if (::geteuid() == 0) GTEST_SKIP() << "running as root: permission bits do not stop writes";
  TempDir dir;
  const CacheKey key = make_key("readonly"), other = make_key("readonly-miss");
  {
    DiskCache cache(config_for(dir.path()));
    ASSERT_TRUE(cache.store(key, make_program("ro.cu")));
  }
  ASSERT_EQ(::chmod(dir.path().c_str(), 0500), 0);
  const std::vector<std::string> before = files_in(dir.path());
  LogCapture log;
  DiskCache cache(config_for(dir.path()));
  EXPECT_TRUE(cache.usable());
  EXPECT_TRUE(cache.read_only());
  EXPECT_NO_THROW({
    EXPECT_TRUE(cache.load(key).has_value());
    EXPECT_FALSE(cache.store(other, make_program("ro.cu")));
    EXPECT_FALSE(cache.load(other).has_value());
    EXPECT_FALSE(cache.lock(other).held());
  });
  EXPECT_EQ(log.warnings(), 1u) << "one warning: new kernels are not saved";
  EXPECT_EQ(cache.verify(false).bad.size(), 0u);
  EXPECT_THROW(cache.verify(true), CacheError);
  EXPECT_THROW(cache.clear(), CacheError);
  EXPECT_THROW(cache.prune(0), CacheError);
  EXPECT_EQ(files_in(dir.path()), before);
  ::chmod(dir.path().c_str(), 0700);
}

TEST(DiskCacheDirectory, DirectoryThatBecomesReadOnly) {
  if (::geteuid() == 0) GTEST_SKIP() << "running as root: permission bits do not stop writes";
  TempDir dir;
  DiskCache cache(config_for(dir.path()));
  ASSERT_TRUE(cache.usable());
  ASSERT_EQ(::chmod(dir.path().c_str(), 0500), 0);
  LogCapture log;
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(cache.store(make_key("ro"), make_program("ro.cu")));
  EXPECT_EQ(cache.stats().disk_write_failures, 3u);
  EXPECT_EQ(log.warnings(), 1u) << "one warning, not one per call";
}

// A full disk, simulated with RLIMIT_FSIZE (works as root too): the write fails part way, the
// store returns false, nothing half-written is left, and there is one warning.
TEST(DiskCacheDirectory, WriteFailurePartWayLeavesNothingBehind) {
  TempDir dir;
  DiskCache cache(config_for(dir.path()));
  ASSERT_TRUE(cache.usable());
  struct rlimit old_limit {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  struct sigaction ignore {
  }, old_action{};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGXFSZ, &ignore, &old_action), 0);
  struct rlimit small = old_limit;
  small.rlim_cur = 1000;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::size_t warnings = 0;
  std::vector<bool> stored;
  {
    LogCapture log;
    for (int i = 0; i < 3; ++i)
      stored.push_back(cache.store(make_key("full"), make_program("full.cu", 50000)));
    warnings = log.warnings();
  }
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  ::sigaction(SIGXFSZ, &old_action, nullptr);
  EXPECT_EQ(stored, std::vector<bool>(3, false));
  EXPECT_EQ(cache.stats().disk_write_failures, 3u);
  EXPECT_EQ(warnings, 1u);
  EXPECT_TRUE(files_in(dir.path()).empty()) << "no temp file or entry is left behind";
  EXPECT_TRUE(cache.store(make_key("after"), make_program("after.cu", 50000)));
}

TEST(DiskCacheDirectory, GroupWritableDirectoryIsRefusedUnlessShared) {
  TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0770), 0);
  {
    LogCapture log;
    DiskCache cache(config_for(dir.path()));
    EXPECT_FALSE(cache.usable());
    EXPECT_FALSE(cache.store(make_key("shared"), make_program("shared.cu")));
    EXPECT_EQ(log.warnings(), 1u);
  }
  EXPECT_TRUE(files_in(dir.path()).empty());
  CacheConfig shared = config_for(dir.path());
  shared.allow_shared_directory = true;
  DiskCache cache(shared);
  EXPECT_TRUE(cache.usable());
  EXPECT_TRUE(cache.store(make_key("shared"), make_program("shared.cu")));
}

TEST(DiskCacheDirectory, DirectoryOfAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another user";
  TempDir dir;
  ASSERT_EQ(::chown(dir.path().c_str(), 65534, 65534), 0);
  DiskCache cache(config_for(dir.path()));
  EXPECT_FALSE(cache.usable());
  CacheConfig shared = config_for(dir.path());
  shared.allow_shared_directory = true;
  EXPECT_TRUE(DiskCache(shared).usable());
}

TEST(DiskCacheDirectory, DisabledDiskTier) {
  TempDir dir;
  CacheConfig config = config_for(dir.path() / "never");
  config.disk_enabled = false;
  DiskCache cache(config);
  EXPECT_FALSE(cache.usable());
  EXPECT_FALSE(cache.store(make_key("off"), make_program("off.cu")));
  EXPECT_FALSE(fs::exists(dir.path() / "never"));
}

// Sets environment variables for one test and puts the old values back.
class ScopedEnvironment {
 public:
  ScopedEnvironment() {
    for (const char* name : {"CUINLINE_CACHE_DIR", "XDG_CACHE_HOME", "HOME", "CUINLINE_CACHE_MAX_BYTES",
                             "CUINLINE_DISABLE_DISK_CACHE", "CUINLINE_CACHE_SHARED"}) {
      const char* value = std::getenv(name);
      saved_[name] = value ? std::optional<std::string>(value) : std::nullopt;
      ::unsetenv(name);
    }
  }
  ~ScopedEnvironment() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }
  void set(const char* name, const std::string& value) { ::setenv(name, value.c_str(), 1); }
  void unset(const char* name) { ::unsetenv(name); }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

TEST(CacheEnvironment, DirectorySelection) {
  ScopedEnvironment env;
  env.set("HOME", "/home/someone");
  EXPECT_EQ(default_cache_directory(), fs::path("/home/someone/.cache/cuinline"));
  env.set("XDG_CACHE_HOME", "relative/is/ignored");
  EXPECT_EQ(default_cache_directory(), fs::path("/home/someone/.cache/cuinline"));
  env.set("XDG_CACHE_HOME", "/xdg/cache");
  EXPECT_EQ(default_cache_directory(), fs::path("/xdg/cache/cuinline"));
  env.set("CUINLINE_CACHE_DIR", "/explicit/dir");
  EXPECT_EQ(default_cache_directory(), fs::path("/explicit/dir"));
  EXPECT_EQ(CacheConfig::from_environment().directory, fs::path("/explicit/dir"));
  env.set("CUINLINE_CACHE_DIR", "rel/dir");
  EXPECT_EQ(default_cache_directory(), fs::current_path() / "rel/dir");
}

TEST(CacheEnvironment, Defaults) {
  ScopedEnvironment env;
  env.set("HOME", "/home/someone");
  const CacheConfig config = CacheConfig::from_environment();
  EXPECT_TRUE(config.disk_enabled);
  EXPECT_FALSE(config.allow_shared_directory);
  EXPECT_EQ(config.max_bytes, std::uint64_t{1} << 30);
  EXPECT_EQ(config.directory, fs::path("/home/someone/.cache/cuinline"));
}

TEST(CacheEnvironment, FlagsAndMaxBytes) {
  ScopedEnvironment env;
  env.set("CUINLINE_DISABLE_DISK_CACHE", "1");
  env.set("CUINLINE_CACHE_SHARED", "1");
  env.set("CUINLINE_CACHE_MAX_BYTES", "12345");
  CacheConfig config = CacheConfig::from_environment();
  EXPECT_FALSE(config.disk_enabled);
  EXPECT_TRUE(config.allow_shared_directory);
  EXPECT_EQ(config.max_bytes, 12345u);
  env.set("CUINLINE_DISABLE_DISK_CACHE", "0");
  env.set("CUINLINE_CACHE_MAX_BYTES", "512M");
  config = CacheConfig::from_environment();
  EXPECT_TRUE(config.disk_enabled);
  EXPECT_EQ(config.max_bytes, std::uint64_t{512} << 20);
  env.set("CUINLINE_CACHE_MAX_BYTES", "2GiB");
  EXPECT_EQ(CacheConfig::from_environment().max_bytes, std::uint64_t{2} << 30);
}

TEST(CacheEnvironment, GarbageMaxBytesWarnsOnceAndUsesDefault) {
  ScopedEnvironment env;
  LogCapture log;
  for (const char* garbage : {"lots", "-5", "0", "12abc", "99999999999999999999999", "1.5G", "16E"}) {
    env.set("CUINLINE_CACHE_MAX_BYTES", garbage);
    EXPECT_EQ(CacheConfig::from_environment().max_bytes, std::uint64_t{1} << 30) << garbage;
  }
  EXPECT_EQ(log.warnings(), 1u) << "one warning per process, however often it is read";
}

}  // namespace
}  // namespace cuinline
