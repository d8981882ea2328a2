// The CLI's remote commands: warm --remote, cache stats --remote, cache verify
// --remote [--fix], cache pull. Starts its own redis-server; no GPU (a named arch).

#include <gtest/gtest.h>

#include "hostile_peer.hpp"
#include "remote_test_util.hpp"

#if CUINLINE_TEST_HAVE_REDIS

namespace cuinline {
namespace {

class CliRemote : public ::testing::Test {
 protected:
  void SetUp() override { REDIS_OR_SKIP(); }

  test::ProcessResult cli(const std::vector<std::string>& args, const std::string& cache_dir,
                          const std::string& key_file = "", const std::string& url = "") {
    std::vector<std::string> argv{CUINLINE_CLI_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    return test::run_process(
        argv, {"CUINLINE_CACHE_DIR=" + (fleet_.dir.path() / cache_dir).string(),
               "CUINLINE_REMOTE_CACHE=" + (url.empty() ? fleet_.redis.url() : url),
               "CUINLINE_CACHE_KEY_FILE=" + (key_file.empty() ? fleet_.key_file.string() : key_file),
               "CUINLINE_LOG_LEVEL=warn"});
  }
  std::string spec() const { return std::string(CUINLINE_SOURCE_DIR) + "/examples/specs/custom.json"; }

  test::Fleet fleet_;
};

TEST_F(CliRemote, WarmStatsVerifyPull) {
  auto r =
      cli({"warm", "--remote", "--spec", spec(), "--arch", "sm_90,sm_80", "-j", "2", "--no-progress"}, "a");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("2 compiled"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("remote: "), std::string::npos) << r.output;
  EXPECT_EQ(fleet_.redis.integer({"DBSIZE"}), 2);
  // Another build machine: everything is already in the fleet cache.
  r = cli({"warm", "--remote", "--spec", spec(), "--arch", "sm_90,sm_80", "--no-progress"}, "b");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("0 compiled, 2 already cached"), std::string::npos) << r.output;

  r = cli({"cache", "stats", "--remote"}, "a");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("entries      2"), std::string::npos) << r.output;
  r = cli({"cache", "stats", "--remote", "--json"}, "a");
  EXPECT_NE(r.output.find("\"entries\": 2"), std::string::npos) << r.output;

  r = cli({"cache", "verify", "--remote"}, "a");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("2 remote entries checked"), std::string::npos) << r.output;
  // A planted entry with no tag, and one of another fleet's key.
  const std::string planted = "cuinline:e:" + std::string(64, 'a');
  ASSERT_TRUE(fleet_.redis.command({"SET", planted, "CUINLINE\x1a planted"}));
  r = cli({"cache", "verify", "--remote"}, "a");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("not_sealed"), std::string::npos) << r.output;
  r = cli({"cache", "verify", "--remote", "--fix"}, "a");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("1 removed"), std::string::npos) << r.output;
  EXPECT_EQ(fleet_.redis.integer({"EXISTS", planted}), 0);

  // A fresh machine pulls the fleet cache onto its disk, then a library process hits the disk.
  r = cli({"cache", "pull"}, "c");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("2 entries pulled"), std::string::npos) << r.output;
  r = cli({"cache", "pull"}, "c");
  EXPECT_NE(r.output.find("0 entries pulled"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("2 already there"), std::string::npos) << r.output;
  r = cli({"cache", "list"}, "c");
  EXPECT_NE(r.output.find("2 entries"), std::string::npos) << r.output;
}

TEST_F(CliRemote, WrongTypedKeysAreReportedNotFatal) {
  auto r =
      cli({"warm", "--remote", "--spec", spec(), "--arch", "sm_90,sm_80", "-j", "2", "--no-progress"}, "a");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // A hash and a list under entry names: Redis answers WRONGTYPE to reading them.
  const std::string hash = "cuinline:e:" + std::string(64, 'b'), list = "cuinline:e:" + std::string(64, 'c');
  const auto plant = [&] {
    ASSERT_TRUE(fleet_.redis.command({"HSET", hash, "f", "v"}));
    ASSERT_TRUE(fleet_.redis.command({"RPUSH", list, "x"}));
  };
  plant();
  r = cli({"cache", "verify", "--remote"}, "a");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("4 remote entries checked (tag and checksum), 2 bad"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("wrong_type                   " + std::string(64, 'b')), std::string::npos)
      << r.output;
  r = cli({"cache", "verify", "--remote", "--fix"}, "a");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("2 bad, 2 removed"), std::string::npos) << r.output;
  EXPECT_EQ(fleet_.redis.integer({"EXISTS", hash, list}), 0);
  plant();
  r = cli({"cache", "pull"}, "c");
  EXPECT_EQ(r.exit_code, 1) << r.output;  // something was refused
  EXPECT_NE(r.output.find("2 entries pulled"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("2 refused"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("refusing " + std::string(64, 'c') + ": wrong_type"), std::string::npos)
      << r.output;
}

TEST_F(CliRemote, StatsEscapesWhatRedisSays) {
  const std::string info =
      "redis_version:7.2\x1b[2J\x1b]0;owned\x07\r\nrole:master\r\nmaxmemory_policy:allkeys-lru\x1b[8m\r\n"
      "maxmemory:1000\r\nused_memory:10\r\n";
  std::atomic<bool> scan_fails{false};
  test::HostilePeer peer([&](const std::string& command) {
    if (command == "INFO")
      return test::HostilePeer::Reply{"$" + std::to_string(info.size()) + "\r\n" + info + "\r\n"};
    if (command == "SCAN" && !scan_fails) return test::HostilePeer::Reply{"*2\r\n$1\r\n0\r\n*0\r\n"};
    return test::HostilePeer::Reply{"-ERR \x1b[31mred\r\n"};
  });
  auto r = cli({"cache", "stats", "--remote"}, "a", "", peer.url());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Redis 7.2\\x1b[2J\\x1b]0;owned\\x07 (master)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("eviction allkeys-lru\\x1b[8m"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find('\x1b'), std::string::npos) << "a raw escape reached the terminal";
  EXPECT_EQ(r.output.find('\x07'), std::string::npos);
  // An error reply's text, as the CLI reports it.
  scan_fails = true;
  r = cli({"cache", "verify", "--remote"}, "a", "", peer.url());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("SCAN failed: ERR \\x1b[31mred"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find('\x1b'), std::string::npos) << "a raw escape reached the terminal";
}

TEST_F(CliRemote, ADrippingPeerDoesNotHangTheCommands) {
  // Each byte well inside the 200 ms command timeout; a whole reply would take 6.7 s.
  test::HostilePeer peer(
      [](const std::string&) { return test::HostilePeer::Reply{"+" + std::string(64, 'O') + "\r\n"}; },
      std::chrono::milliseconds(100));
  const auto timed = [&](const std::vector<std::string>& args, const std::string& url) {
    const auto start = std::chrono::steady_clock::now();
    auto r = cli(args, "a", "", url);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("%s %s against a drip: %.3f s, exit %d\n", args[0].c_str(),
                args.size() > 1 ? args[1].c_str() : "", s, r.exit_code);
    EXPECT_LT(s, 3.0) << r.output;
    return r;
  };
  auto r = timed({"cache", "stats", "--remote"}, peer.url());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("INFO failed: timed out"), std::string::npos) << r.output;
  r = timed({"cache", "verify", "--remote"}, peer.url());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("SCAN failed: timed out"), std::string::npos) << r.output;
  // warm stuck in AUTH: the kernels are still compiled locally; publishing them fails.
  r = timed({"warm", "--remote", "--spec", spec(), "--arch", "sm_90", "--no-progress"}, peer.url(":secret"));
  EXPECT_NE(r.output.find("AUTH: timed out"), std::string::npos) << r.output;
}

TEST_F(CliRemote, WarmWithRedisDownKeepsTheLocalEntries) {
  // Nothing listens on port 1: every publish fails, but the compiled entries stay on the local disk
  // (not thrown away with the remote failures) and warm exits non-zero, naming the remote cache.
  const std::string down = "redis://127.0.0.1:1";
  const auto start = std::chrono::steady_clock::now();
  auto r = cli({"warm", "--remote", "--spec", spec(), "--arch", "sm_90,sm_80", "-j", "2", "--no-progress"},
               "a", "", down);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("warm --remote with Redis down: %.3f s\n", s);
  EXPECT_LT(s, 10.0) << "waited on the unreachable Redis\n" << r.output;  // refused at once: no waits
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("compiled into the local cache"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("not published to the remote cache " + down), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("2 failed"), std::string::npos) << r.output;
  r = cli({"cache", "list"}, "a");
  EXPECT_NE(r.output.find("2 entries"), std::string::npos) << r.output;
  // Redis back: the entries are published from the disk, nothing is compiled again.
  r = cli({"warm", "--remote", "--spec", spec(), "--arch", "sm_90,sm_80", "--no-progress"}, "a");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("0 compiled, 2 already cached"), std::string::npos) << r.output;
  EXPECT_EQ(fleet_.redis.integer({"DBSIZE"}), 2);
}

TEST_F(CliRemote, RefusedWithoutAPrivateKey) {
  const auto open_key =
      test::write_key_file(fleet_.dir.path(), "open.key", {{"k1", fleet_.secret_hex}}, 0644);
  auto r = cli({"warm", "--remote", "--spec", spec(), "--arch", "sm_90"}, "a", open_key.string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("chmod 600"), std::string::npos) << r.output;
  r = cli({"cache", "stats", "--remote"}, "a", "/nonexistent/key");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("remote cache cannot be used"), std::string::npos) << r.output;
  EXPECT_EQ(fleet_.redis.integer({"DBSIZE"}), 0);
}

}  // namespace
}  // namespace cuinline

#else  // a build without hiredis: nothing to test but that it says so

TEST(CliRemoteBuild, NeedsRedisSupport) {
  GTEST_SKIP() << ::cuinline::test::redis_skip_reason();
}

#endif
