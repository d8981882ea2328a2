// Team caches, shipped read-only caches and bounded lock waits (and the shared
// disk mode's fleet key), tested the way users meet them: the `cuinline` command and
// the library's lookups (tools/cli_cache_probe) in processes of their own, as separate users of one
// group. The multi-user tests need root (setuid to made-up uids; no accounts are needed) and skip
// otherwise; the others run as anyone.

#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cuinline/kernel_cache.hpp>
#include <cuinline/module.hpp>
#include <cuinline/ops.hpp>
#include <string>
#include <vector>

#include "disk_cache_test_util.hpp"

namespace cuinline {
namespace {

using namespace cuinline::test;

constexpr gid_t kTeam = 4343;
constexpr uid_t kAlice = 4344, kBob = 4345, kMallory = 4346;  // all three in kTeam; Mallory has no key
constexpr uid_t kNobody = 65534;

const std::string kCli = CUINLINE_CLI_PATH;
const std::string kFleetKey = "fleet-1 00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n";
const std::string kOtherKey = "fleet-1 ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100\n";

struct Outcome {
  int code = -1;  // -1: killed or timed out
  std::string out, err;
};

// Runs argv[0] as `uid` (group `gid`, supplementary groups `groups`; uid 0: this process's own
// credentials) with a small environment plus `env`. Output files live in `scratch`.
Outcome run_as(uid_t uid, gid_t gid, const std::vector<gid_t>& groups, std::vector<std::string> argv,
           std::vector<std::string> env, const fs::path& scratch,
           std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  static int counter = 0;
  const std::string tag = std::to_string(::getpid()) + "-" + std::to_string(counter++);
  const fs::path out = scratch / ("out-" + tag), err = scratch / ("err-" + tag);
  env.push_back("PATH=/usr/bin:/bin");
  if (std::none_of(env.begin(), env.end(), [](const std::string& e) { return e.rfind("HOME=", 0) == 0; })) {
    env.push_back("HOME=" + scratch.string());
  }
  std::vector<char*> args, envp;  // built before fork: the child makes only async-signal-safe calls
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd_out = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int fd_err = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd_out < 0 || fd_err < 0) ::_exit(125);
    ::dup2(fd_out, STDOUT_FILENO);
    ::dup2(fd_err, STDERR_FILENO);
    if (uid != 0 && (::setgroups(groups.size(), groups.data()) != 0 || ::setresgid(gid, gid, gid) != 0 ||
                     ::setresuid(uid, uid, uid) != 0)) {
      ::_exit(126);
    }
    ::execve(args[0], args.data(), envp.data());
    ::_exit(127);
  }
  Outcome run;
  run.code = wait_tool(pid, timeout);
  run.out = read_file(out);
  run.err = read_file(err);
  return run;
}

std::vector<std::string> sorted_files(const fs::path& dir) {  // every file but "lock", sorted
  std::vector<std::string> names = files_in(dir);
  std::sort(names.begin(), names.end());
  return names;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

ops::Variant relu_variant(int vector_width) {
  ops::Variant variant;
  variant.op = ops::Op::relu();
  variant.dtype = DType::f32;
  variant.vector_width = vector_width;
  return variant;
}

CacheKey relu_key(int vector_width) {
  return make_cache_key(ops::make_request(relu_variant(vector_width)), Arch::parse("sm_90"));
}

std::vector<std::string> probe_args(int vector_width) {
  return {tool_path("cli_cache_probe"), "op", "relu", "f32", std::to_string(vector_width), "i32", "sm_90"};
}

// A directory tree others can enter: the test's temp directory is private (0700) when made.
class TeamCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to act as several users (setuid to made-up uids)";
    ASSERT_EQ(::chmod(root_.path().c_str(), 0755), 0);
    team_ = root_.path() / "team";
    scratch_ = root_.path() / "scratch";
    ASSERT_TRUE(fs::create_directory(team_));
    ASSERT_TRUE(fs::create_directory(scratch_));
    // The documented set-up: `install -d -m 2770 -g team DIR` (setgid: entries get the team's group).
    ASSERT_EQ(::chown(team_.c_str(), 0, kTeam), 0);
    ASSERT_EQ(::chmod(team_.c_str(), 02770), 0);
    ASSERT_EQ(::chmod(scratch_.c_str(), 01777), 0);
    // Each member's own home (where their own lock file goes), as on a real machine.
    for (uid_t user : {kAlice, kBob, kMallory}) {
      ASSERT_TRUE(fs::create_directory(home(user)));
      ASSERT_EQ(::chown(home(user).c_str(), user, user), 0);
      ASSERT_EQ(::chmod(home(user).c_str(), 0700), 0);
    }
    for (uid_t user : {kAlice, kBob}) {
      const fs::path key = key_file(user);
      write_file(key, kFleetKey);
      ASSERT_EQ(::chown(key.c_str(), user, user), 0);
      ASSERT_EQ(::chmod(key.c_str(), 0600), 0);
    }
    spec_ = root_.path() / "relu.json";
    write_file(spec_, R"({"entries": [{"kind": "op", "op": "relu", "dtype": "f32"}]})");
    ASSERT_EQ(::chmod(spec_.c_str(), 0644), 0);
  }

  fs::path key_file(uid_t user) const { return root_.path() / ("key-" + std::to_string(user)); }
  fs::path home(uid_t user) const { return root_.path() / ("home-" + std::to_string(user)); }

  std::vector<std::string> team_env(uid_t user, bool with_key = true) const {
    std::vector<std::string> env = {"CUINLINE_CACHE_DIR=" + team_.string(), "CUINLINE_CACHE_SHARED=1",
                                    "HOME=" + home(user).string()};
    if (with_key) env.push_back("CUINLINE_CACHE_KEY_FILE=" + key_file(user).string());
    return env;
  }

  Outcome as(uid_t user, std::vector<std::string> argv, bool with_key = true) {
    return run_as(user, user, {kTeam}, std::move(argv), team_env(user, with_key), scratch_);
  }

  void alice_warms() {
    const Outcome warm = as(kAlice, {kCli, "warm", "--spec", spec_.string(), "--arch", "sm_90", "-j", "1"});
    ASSERT_EQ(warm.code, 0) << warm.out << warm.err;
  }

  TempDir root_;
  fs::path team_, scratch_, spec_;
};

TEST_F(TeamCacheTest, EveryMemberOfTheGroupUsesWhatAnotherCompiled) {
  alice_warms();
  // Entries are the writer's, of the team's group (setgid), readable by the group, writable by no
  // one else; the lock file is writable by the group.
  struct stat lock {};
  ASSERT_EQ(::stat((team_ / "lock").c_str(), &lock), 0);
  EXPECT_EQ(lock.st_mode & 0777, 0660u);
  std::size_t entries = 0;
  for (const auto& name : files_in(team_)) {
    struct stat st {};
    ASSERT_EQ(::stat((team_ / name).c_str(), &st), 0);
    ++entries;
    EXPECT_EQ(st.st_uid, kAlice) << name;
    EXPECT_EQ(st.st_gid, kTeam) << name;
    EXPECT_EQ(st.st_mode & 0777, 0640u) << name;
  }
  EXPECT_GE(entries, 3u);

  const Outcome bob = as(kBob, probe_args(4));
  ASSERT_EQ(bob.code, 0) << bob.out << bob.err;
  EXPECT_TRUE(contains(bob.out, "tier=disk compiles=0")) << bob.out << bob.err;
  EXPECT_TRUE(contains(bob.out, "unauthenticated=0")) << bob.out;

  // Bob's compile lands in the team cache for Alice; both inspect it.
  const std::vector<std::string> leaky = {tool_path("cli_cache_probe"), "op", "leaky_relu(0.25)", "f32", "4", "i32",
                                          "sm_90"};
  const Outcome bob_compiles = as(kBob, leaky);
  EXPECT_TRUE(contains(bob_compiles.out, "tier=compiled compiles=1")) << bob_compiles.out << bob_compiles.err;
  const Outcome alice_hits = as(kAlice, leaky);
  EXPECT_TRUE(contains(alice_hits.out, "tier=disk compiles=0")) << alice_hits.out << alice_hits.err;
  for (uid_t user : {kAlice, kBob}) {
    const Outcome verify = as(user, {kCli, "cache", "verify"});
    EXPECT_EQ(verify.code, 0) << verify.out << verify.err;
  }
}

TEST_F(TeamCacheTest, EntriesWithoutAValidTagAreNeverLoaded) {
  alice_warms();
  const CacheKey key = relu_key(4);
  // Mallory (in the group, without the key) replaces the entry with a well-formed unsealed one, then
  // with one sealed under another key: both pass every check but the tag.
  TempDir elsewhere;
  CacheConfig plain = config_for(elsewhere.path());
  const fs::path other_key = elsewhere.path() / "other.key";
  write_file(other_key, kOtherKey);
  ASSERT_EQ(::chmod(other_key.c_str(), 0600), 0);
  CacheConfig sealed_other = plain;
  sealed_other.allow_shared_directory = true;
  sealed_other.remote.key_file = other_key;
  sealed_other.directory = elsewhere.path() / "sealed";
  for (const CacheConfig& forger : {plain, sealed_other}) {
    {
      DiskCache cache(forger);
      ASSERT_TRUE(cache.usable());
      ASSERT_TRUE(cache.store(key, make_program("planted.cu")));
    }
    const fs::path planted = team_ / ".planted";
    write_file(planted, read_file(forger.directory / key.hex()));
    ASSERT_EQ(::chown(planted.c_str(), kMallory, kTeam), 0);
    ASSERT_EQ(::chmod(planted.c_str(), 0640), 0);
    ASSERT_EQ(::rename(planted.c_str(), (team_ / key.hex()).c_str()), 0);

    const Outcome bob = as(kBob, probe_args(4));
    ASSERT_EQ(bob.code, 0) << bob.out << bob.err;
    EXPECT_TRUE(contains(bob.out, "tier=compiled compiles=1")) << bob.out << bob.err;
    EXPECT_TRUE(contains(bob.out, "unauthenticated=1")) << bob.out;
    EXPECT_TRUE(contains(bob.err, "authentication tag does not verify")) << bob.err;
    // What Bob rebuilt in its place is sealed, and a hit for Alice.
    const Outcome alice = as(kAlice, probe_args(4));
    EXPECT_TRUE(contains(alice.out, "tier=disk compiles=0")) << alice.out << alice.err;
  }

  // A valid sealed entry copied under another key's name is refused too.
  const CacheKey other = relu_key(2);
  ASSERT_TRUE(fs::exists(team_ / other.hex()));
  write_file(team_ / ".copied", read_file(team_ / key.hex()));
  ASSERT_EQ(::rename((team_ / ".copied").c_str(), (team_ / other.hex()).c_str()), 0);
  const Outcome bob = as(kBob, probe_args(2));
  EXPECT_TRUE(contains(bob.out, "tier=compiled compiles=1")) << bob.out << bob.err;

  // `cache verify` with the key reports planted entries; `--fix` removes them.
  const fs::path planted = team_ / ".planted";
  write_file(planted, read_file(plain.directory / key.hex()));
  ASSERT_EQ(::rename(planted.c_str(), (team_ / key.hex()).c_str()), 0);
  const Outcome verify = as(kBob, {kCli, "cache", "verify"});
  EXPECT_NE(verify.code, 0);
  EXPECT_TRUE(contains(verify.out + verify.err, "unauthenticated")) << verify.out << verify.err;
  const Outcome fix = as(kBob, {kCli, "cache", "verify", "--fix"});
  EXPECT_FALSE(fs::exists(team_ / key.hex())) << fix.out << fix.err;
}

TEST_F(TeamCacheTest, WithoutAFleetKeyTheTeamCacheWorksAndSaysItIsUnauthenticated) {
  alice_warms();
  const Outcome bob = as(kBob, probe_args(4), /*with_key=*/false);
  ASSERT_EQ(bob.code, 0) << bob.out << bob.err;
  // Alice's entries are sealed: without the key Bob cannot check them, compiles his own and leaves
  // hers alone.
  EXPECT_TRUE(contains(bob.out, "compiles=1")) << bob.out << bob.err;
  EXPECT_TRUE(contains(bob.err, "is not authenticated")) << bob.err;
}

// Without a key nothing authenticates another member's entry: Bob loads only his own (and root's).
// Mallory's genuine-looking entry (a real compile of the kernel asked for) is a miss, left in place,
// and `cache verify` reports it as not trusted instead of calling the cache clean.
TEST_F(TeamCacheTest, WithoutAFleetKeyOnlyAMembersOwnEntriesAreLoaded) {
  const CacheKey key = relu_key(4);
  TempDir elsewhere;
  {
    KernelCache forger(config_for(elsewhere.path()));
    forger.get(ops::make_request(relu_variant(4)), Arch::parse("sm_90"));
  }
  const fs::path planted = team_ / key.hex();
  write_file(planted, read_file(elsewhere.path() / key.hex()));
  ASSERT_EQ(::chown(planted.c_str(), kMallory, kTeam), 0);
  ASSERT_EQ(::chmod(planted.c_str(), 0640), 0);

  const Outcome verify = as(kBob, {kCli, "cache", "verify"}, /*with_key=*/false);
  EXPECT_EQ(verify.code, 1) << verify.out << verify.err;
  EXPECT_TRUE(contains(verify.out, "untrusted_owner")) << verify.out;
  const Outcome fix = as(kBob, {kCli, "cache", "verify", "--fix"}, /*with_key=*/false);
  EXPECT_TRUE(fs::exists(planted)) << "another member's entry is not Bob's to remove: " << fix.out << fix.err;

  const Outcome bob = as(kBob, probe_args(4), /*with_key=*/false);
  ASSERT_EQ(bob.code, 0) << bob.out << bob.err;
  EXPECT_TRUE(contains(bob.out, "tier=compiled compiles=1")) << bob.out << bob.err;
  EXPECT_TRUE(contains(bob.err, "only entries this user or root wrote are loaded")) << bob.err;
  // What Bob published in its place is his: a hit for him, a miss for Mallory.
  const Outcome again = as(kBob, probe_args(4), /*with_key=*/false);
  EXPECT_TRUE(contains(again.out, "tier=disk compiles=0")) << again.out << again.err;
  const Outcome mallory = as(kMallory, probe_args(4), /*with_key=*/false);
  EXPECT_TRUE(contains(mallory.out, "tier=compiled compiles=1")) << mallory.out << mallory.err;
}

// Mallory replaces the team's lock file with one only she can open. It used to switch the disk tier
// off for every member, with a hint telling "its owner" (Mallory) to fix it. Now Bob passes over it
// with one warning naming her, and his hits and publishes go on.
TEST_F(TeamCacheTest, ALockFileAMemberReplacedIsPassedOverAndTheCacheStaysOn) {
  alice_warms();
  const fs::path lock = team_ / "lock";
  ASSERT_TRUE(fs::remove(lock));
  write_file(lock, "");
  ASSERT_EQ(::chown(lock.c_str(), kMallory, kTeam), 0);
  ASSERT_EQ(::chmod(lock.c_str(), 0600), 0);

  const Outcome hit = as(kBob, probe_args(4));
  EXPECT_TRUE(contains(hit.out, "tier=disk compiles=0")) << hit.out << hit.err;
  const Outcome miss =
      as(kBob, {tool_path("cli_cache_probe"), "op", "leaky_relu(0.5)", "f32", "4", "i32", "sm_90"});
  EXPECT_TRUE(contains(miss.out, "tier=compiled compiles=1")) << miss.out << miss.err;
  const std::string warning = "passing over the lock file '" + lock.string() + "'";
  for (const Outcome* run : {&hit, &miss}) {
    std::size_t count = 0;
    for (auto at = run->err.find(warning); at != std::string::npos; at = run->err.find(warning, at + 1)) ++count;
    EXPECT_EQ(count, 1u) << run->err;
    EXPECT_TRUE(contains(run->err, "this user may not write it (owned by uid 4346")) << run->err;
    EXPECT_FALSE(contains(run->err, "its owner can chmod")) << run->err;
  }
  const Outcome alice = as(kAlice, {tool_path("cli_cache_probe"), "op", "leaky_relu(0.5)", "f32", "4", "i32", "sm_90"});
  EXPECT_TRUE(contains(alice.out, "tier=disk compiles=0")) << "Bob's compile was published: " << alice.out << alice.err;
  // Each member's own lock file, in a directory of their own.
  struct stat own {};
  ASSERT_EQ(::stat((home(kBob) / ".cache" / "cuinline-locks" / "team.lock").c_str(), &own), 0);
  EXPECT_EQ(own.st_uid, kBob);
  EXPECT_EQ(own.st_mode & 0777, 0600u);
}

TEST_F(TeamCacheTest, AKeyFileOthersCanReadIsRefused) {
  ASSERT_EQ(::chmod(key_file(kAlice).c_str(), 0640), 0);
  const Outcome alice = as(kAlice, probe_args(4));
  EXPECT_TRUE(contains(alice.err, "chmod 600")) << alice.err;
  EXPECT_TRUE(files_in(team_).empty()) << "the disk tier is not used without its key";
  EXPECT_FALSE(fs::exists(team_ / "lock"));
}

// A shipped cache: warmed on a build machine, then root's and only readable. Another user's lookups
// are hits, `cache list/stats/verify` inspect it, and nothing writes to it.
TEST(ShippedCache, AnotherUserGetsHitsAndCanInspectButNotChangeIt) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to act as another user";
  TempDir root;
  ASSERT_EQ(::chmod(root.path().c_str(), 0755), 0);
  const fs::path shipped = root.path() / "shipped", scratch = root.path() / "scratch";
  ASSERT_TRUE(fs::create_directory(scratch));
  ASSERT_EQ(::chmod(scratch.c_str(), 01777), 0);
  const fs::path spec = root.path() / "relu.json";
  write_file(spec, R"({"entries": [{"kind": "op", "op": "relu", "dtype": "f32"}]})");
  const Outcome warm = run_as(0, 0, {}, {kCli, "warm", "--spec", spec.string(), "--arch", "sm_90", "-j", "1"},
                          {"CUINLINE_CACHE_DIR=" + shipped.string()}, scratch);
  ASSERT_EQ(warm.code, 0) << warm.out << warm.err;
  // As an image build would ship it: readable by all, writable by root alone.
  ASSERT_EQ(::chmod(shipped.c_str(), 0755), 0);
  for (const auto& name : files_in(shipped)) ASSERT_EQ(::chmod((shipped / name).c_str(), 0644), 0);
  const std::vector<std::string> before = sorted_files(shipped);
  const std::vector<std::string> env = {"CUINLINE_CACHE_DIR=" + shipped.string()};

  const Outcome probe = run_as(kNobody, kNobody, {}, probe_args(4), env, scratch);
  EXPECT_TRUE(contains(probe.out, "tier=disk compiles=0")) << probe.out << probe.err;
  const Outcome miss = run_as(kNobody, kNobody, {}, probe_args(2), env, scratch);
  EXPECT_EQ(miss.code, 0) << miss.err;
  for (const char* command : {"list", "stats", "verify"}) {
    const Outcome run = run_as(kNobody, kNobody, {}, {kCli, "cache", command}, env, scratch);
    EXPECT_EQ(run.code, 0) << command << ": " << run.out << run.err;
  }
  const Outcome list = run_as(kNobody, kNobody, {}, {kCli, "cache", "list"}, env, scratch);
  EXPECT_TRUE(contains(list.out, "3 entries")) << list.out;
  for (const std::vector<std::string>& change : std::vector<std::vector<std::string>>{
           {"verify", "--fix"}, {"clear", "--yes"}, {"prune", "--max-bytes", "1"}}) {
    std::vector<std::string> argv = {kCli, "cache"};
    argv.insert(argv.end(), change.begin(), change.end());
    const Outcome run = run_as(kNobody, kNobody, {}, argv, env, scratch);
    EXPECT_NE(run.code, 0) << change[0];
    EXPECT_TRUE(contains(run.err, "read-only")) << change[0] << ": " << run.err;
  }
  EXPECT_EQ(sorted_files(shipped), before);
}

// CUINLINE_CACHE_READONLY_DIRS: a writable local cache in front of shipped ones. Hits come from
// the shipped cache; misses are compiled into the local one; the shipped one is never written.
TEST(ShippedCache, ReadOnlyDirectoriesBehindAWritableOne) {
  TempDir shipped, local;
  const ops::Variant variant = relu_variant(4);
  const CompileRequest request = ops::make_request(variant);
  const Arch arch = Arch::parse("sm_90");
  {
    KernelCache build(config_for(shipped.path()));
    build.get(request, arch);
  }
  const std::vector<std::string> shipped_files = sorted_files(shipped.path());
  CacheConfig config = config_for(local.path());
  config.read_only_directories = {shipped.path()};
  KernelCache cache(config);
  CacheTier tier = CacheTier::compiled;
  cache.get(request, arch, &tier);
  EXPECT_EQ(tier, CacheTier::disk);
  EXPECT_EQ(cache.stats().compiles, 0u);
  EXPECT_TRUE(files_in(local.path()).empty()) << "a shipped hit is not copied";

  cache.get(ops::make_request(relu_variant(2)), arch, &tier);
  EXPECT_EQ(tier, CacheTier::compiled);
  EXPECT_EQ(files_in(local.path()).size(), 1u) << "the miss is written to the local cache";
  EXPECT_EQ(sorted_files(shipped.path()), shipped_files) << "the shipped cache is never written";

  // A shipped directory that is missing is skipped (one warning), never created.
  {
    CacheConfig with_missing = config_for(local.path());
    with_missing.read_only_directories = {shipped.path() / "missing", shipped.path()};
    LogCapture log;
    KernelCache other(with_missing);
    other.get(request, arch, &tier);
    EXPECT_EQ(tier, CacheTier::disk);
    EXPECT_FALSE(fs::exists(shipped.path() / "missing"));
    EXPECT_EQ(log.warnings(), 1u);
  }

  // The environment variable, ':'-separated, empty parts skipped.
  ::setenv("CUINLINE_CACHE_READONLY_DIRS", (":" + shipped.path().string() + "::/nonexistent").c_str(), 1);
  const CacheConfig from_env = CacheConfig::from_environment();
  ::unsetenv("CUINLINE_CACHE_READONLY_DIRS");
  EXPECT_EQ(from_env.read_only_directories, (std::vector<fs::path>{shipped.path(), "/nonexistent"}));
}

// Every wait on a lock is bounded: a holder that never lets go costs a caller config.lock_wait and
// one warning, then it compiles on its own; `cache clear` and `prune` go on too.
TEST(LockWaits, AKeyLockHeldForeverDelaysALookupOnlyBoundedly) {
  TempDir dir, scratch;
  const CompileRequest request = ops::make_request(relu_variant(4));
  const Arch arch = Arch::parse("sm_90");
  const CacheKey key = make_cache_key(request, arch);
  { DiskCache create(config_for(dir.path())); }
  const fs::path ready = scratch.path() / "ready";
  const pid_t holder = spawn_tool("disk_cache_tool", {"hold", dir.path().string(), key.hex(), ready.string()});
  for (int i = 0; i < 2000 && !fs::exists(ready); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(fs::exists(ready));

  CacheConfig config = config_for(dir.path());
  config.lock_wait = std::chrono::milliseconds(300);
  LogCapture log;
  KernelCache cache(config);
  const auto start = std::chrono::steady_clock::now();
  CacheTier tier = CacheTier::memory;
  cache.get(request, arch, &tier);
  const auto waited = std::chrono::steady_clock::now() - start;
  ::kill(holder, SIGKILL);
  wait_tool(holder);
  EXPECT_EQ(tier, CacheTier::compiled);
  EXPECT_GE(waited, std::chrono::milliseconds(300));
  EXPECT_LT(waited, std::chrono::seconds(20));
  EXPECT_EQ(cache.stats().disk_lock_timeouts, 1u);
  EXPECT_EQ(log.warnings(), 1u);
  EXPECT_TRUE(fs::exists(dir.path() / key.hex())) << "the compile is still published";
}

TEST(LockWaits, ClearAndPruneGoOnPastAHeldDirectoryLock) {
  TempDir dir, scratch;
  {
    DiskCache cache(config_for(dir.path()));
    ASSERT_TRUE(cache.store(make_key("a"), make_program("a.cu")));
    ASSERT_TRUE(cache.store(make_key("b"), make_program("b.cu")));
  }
  const fs::path ready = scratch.path() / "ready";
  const pid_t holder =
      spawn_tool("disk_cache_tool", {"hold-dir", dir.path().string(), make_key("x").hex(), ready.string()});
  for (int i = 0; i < 2000 && !fs::exists(ready); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(fs::exists(ready));
  const std::vector<std::string> env = {"CUINLINE_CACHE_DIR=" + dir.path().string(), "CUINLINE_CACHE_LOCK_WAIT_MS=300"};
  const Outcome prune =
      run_as(0, 0, {}, {kCli, "cache", "prune", "--max-bytes", "5000"}, env, scratch.path(), std::chrono::seconds(20));
  const Outcome clear = run_as(0, 0, {}, {kCli, "cache", "clear", "--yes"}, env, scratch.path(), std::chrono::seconds(20));
  ::kill(holder, SIGKILL);
  wait_tool(holder);
  EXPECT_EQ(prune.code, 0) << prune.out << prune.err;
  EXPECT_TRUE(contains(prune.err, "going on without it")) << prune.err;
  EXPECT_EQ(clear.code, 0) << clear.out << clear.err;
  EXPECT_TRUE(files_in(dir.path()).empty());
}

}  // namespace
}  // namespace cuinline
