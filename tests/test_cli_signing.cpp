// Signed entries through the public cache API and the `cuinline` command: a signer publishes to a
// team disk cache and to Redis, verifiers (trusted public keys only) load its entries and can publish
// none; forged, tampered, unknown-key and revoked-key entries are misses left in place and reported
// by `cache verify`; `cuinline key generate | public`; `warm --signing-key`.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>
#include <vector>

#include "cache/entry_sign.hpp"
#include "cli_test_support.hpp"
#include "cuinline/cuinline.hpp"
#include "cuinline/remote_cache.hpp"
#include "redis_test_util.hpp"

namespace cuinline {
namespace {

using namespace cuinline::test;
using detail::SigningKey;

CacheKey fresh_key(int salt) {
  CacheKey key;
  std::mt19937_64 gen(fresh_seed() + static_cast<std::uint64_t>(salt));
  for (auto& b : key.digest) b = static_cast<unsigned char>(gen());
  return key;
}

CompiledProgram fake_program(const std::string& name) {
  CompiledProgram p;
  p.kind = BinaryKind::cubin;
  p.arch = Arch::parse("sm_90");
  p.program_name = name;
  std::mt19937_64 gen(fresh_seed());
  p.binary.resize(6000);
  for (auto& c : p.binary) c = static_cast<char>(gen());
  p.lowered_names = {{"k", "k"}};
  return p;
}

// Two signers (rotation) and the trusted keys files of the machines that only verify.
class Signers {
 public:
  Signers() {
    for (const char* id : {"ci-1", "ci-2"}) {
      const SigningKey key = SigningKey::generate(id, std::string("warm@") + id);
      key.write_file(dir_.path() / (std::string(id) + ".key"));
      lines_.push_back(key.public_line());
    }
  }
  std::filesystem::path private_key(int i) const {
    return dir_.path() / ("ci-" + std::to_string(i) + ".key");
  }
  const std::string& line(int i) const { return lines_[static_cast<std::size_t>(i - 1)]; }
  /// A trusted keys file (mode 0644) of `lines`.
  std::filesystem::path list(const std::string& name, const std::vector<std::string>& lines) const {
    const auto path = dir_.path() / name;
    std::string text = "# signers whose entries this machine runs\n";
    for (const auto& l : lines) text += l + "\n";
    write_file(path, text);
    ::chmod(path.c_str(), 0644);
    return path;
  }

 private:
  TempDir dir_{"signers"};
  std::vector<std::string> lines_;
};

CacheConfig team_config(const std::filesystem::path& dir, const std::filesystem::path& trusted,
                        const std::filesystem::path& signing_key = {}) {
  CacheConfig c;
  c.directory = dir;
  c.allow_shared_directory = true;
  c.remote.trusted_keys_file = trusted;
  c.remote.signing_key_file = signing_key;
  return c;
}

// Why a disk cache is unusable, as every management call says it.
std::string unusable_reason(DiskCache& cache) {
  try {
    cache.verify(false);
  } catch (const CacheError& e) {
    return e.what();
  }
  return "(usable)";
}

EntryCheck verdict(const VerifyReport& report, const std::filesystem::path& path) {
  for (const auto& [bad, check] : report.bad) {
    if (bad == path) return check;
  }
  return EntryCheck::ok;
}

TEST(SignedTeamCache, TheSignerPublishesVerifiersLoadAndCannotForge) {
  Signers signers;
  TempDir root("signedteam");
  const auto team = root.path() / "team";
  const auto both = signers.list("both", {signers.line(1), signers.line(2)});
  const CacheKey k1 = fresh_key(1), k2 = fresh_key(2), k3 = fresh_key(3);
  const CompiledProgram program = fake_program("signed.cu");
  {
    DiskCache signer(team_config(team, both, signers.private_key(1)));
    ASSERT_TRUE(signer.usable());
    ASSERT_TRUE(signer.store(k1, program));
  }
  EXPECT_EQ(read_file(team / k1.hex()).substr(0, 8), "CUISIGN1");

  DiskCache verifier(team_config(team, both));
  ASSERT_TRUE(verifier.usable());
  const auto hit = verifier.load(k1);
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->binary, program.binary);
  // A member holding only public keys writes nothing (it could not be accepted) and holds no locks.
  EXPECT_FALSE(verifier.store(k2, program));
  EXPECT_FALSE(std::filesystem::exists(team / k2.hex()));
  EXPECT_FALSE(verifier.lock(k2).held());

  // What such a member could plant instead: an unsealed entry, one sealed with the old fleet key, one
  // signed with a key of its own. None is loaded; each stays where it is and `verify` names it.
  TempDir forge("forge");
  const auto plant = [&](const CacheConfig& config, const CacheKey& key) {
    {
      DiskCache cache(config);
      ASSERT_TRUE(cache.store(key, program));
    }
    write_file(team / key.hex(), read_file(config.directory / key.hex()));
  };
  CacheConfig fleet = team_config(forge.path() / "fleet", {});
  fleet.remote.key_file = write_key_file(forge.path(), "fleet.key", {{"fleet-1", random_hex(32)}});
  const SigningKey own = SigningKey::generate("mallory", "");
  own.write_file(forge.path() / "own.key");
  CacheConfig plain;
  plain.directory = forge.path() / "plain";
  plant(plain, k2);
  plant(fleet, k3);
  const CacheKey k4 = fresh_key(4);
  plant(team_config(forge.path() / "own", {}, forge.path() / "own.key"), k4);
  for (const CacheKey* key : {&k2, &k3, &k4}) EXPECT_FALSE(verifier.load(*key)) << key->hex();
  EXPECT_EQ(verifier.stats().unauthenticated_entries, 3u);
  EXPECT_EQ(verifier.stats().disk_hits, 1u);

  // Tampered body and tampered signature of the signer's own entry.
  const CacheKey k5 = fresh_key(5), k6 = fresh_key(6);
  {
    DiskCache signer(team_config(team, both, signers.private_key(2)));  // rotation: the second key
    ASSERT_TRUE(signer.store(k5, program));
    ASSERT_TRUE(signer.store(k6, program));
  }
  ASSERT_TRUE(verifier.load(k5)) << "an entry of the second trusted key";
  std::string body = read_file(team / k5.hex());
  body[body.size() - 100] = static_cast<char>(body[body.size() - 100] ^ 0x01);
  write_file(team / k5.hex(), body);
  std::string signature = read_file(team / k6.hex());
  signature[8 + 1 + 4 + 10] = static_cast<char>(signature[8 + 1 + 4 + 10] ^ 0x80);
  write_file(team / k6.hex(), signature);
  EXPECT_FALSE(verifier.load(k5));
  EXPECT_FALSE(verifier.load(k6));

  const VerifyReport report = verifier.verify(/*fix=*/false);
  EXPECT_EQ(report.checked, 6u);
  EXPECT_EQ(verdict(report, team / k1.hex()), EntryCheck::ok);
  EXPECT_EQ(verdict(report, team / k2.hex()), EntryCheck::unauthenticated);
  EXPECT_EQ(verdict(report, team / k3.hex()), EntryCheck::unauthenticated);
  EXPECT_EQ(verdict(report, team / k4.hex()), EntryCheck::unknown_key);
  EXPECT_EQ(verdict(report, team / k5.hex()), EntryCheck::bad_signature);
  EXPECT_EQ(verdict(report, team / k6.hex()), EntryCheck::bad_signature);
  for (const CacheKey* key : {&k2, &k3, &k4, &k5, &k6})
    EXPECT_TRUE(std::filesystem::exists(team / key->hex()));

  // Revoking the first key: its entry is refused as such; the second key's still load.
  const auto revoking = signers.list("revoking", {"@revoked " + signers.line(1), signers.line(2)});
  DiskCache after(team_config(team, revoking));
  EXPECT_FALSE(after.load(k1));
  EXPECT_EQ(verdict(after.verify(false), team / k1.hex()), EntryCheck::revoked_key);
  // A signer whose list revokes its key is refused outright (its entries would be refused).
  DiskCache revoked_signer(team_config(team, revoking, signers.private_key(1)));
  EXPECT_FALSE(revoked_signer.usable());
  EXPECT_NE(unusable_reason(revoked_signer).find("is not trusted by the trusted keys file"),
            std::string::npos);
}

TEST(SignedTeamCache, KeyFilesOthersCouldChangeAreRefused) {
  Signers signers;
  TempDir root("signedperm");
  const auto list = signers.list("list", {signers.line(1)});
  ASSERT_EQ(::chmod(list.c_str(), 0666), 0);
  DiskCache verifier(team_config(root.path() / "team", list));
  EXPECT_FALSE(verifier.usable());
  EXPECT_NE(unusable_reason(verifier).find("has mode 0666: group or others may write it"), std::string::npos);
  ASSERT_EQ(::chmod(list.c_str(), 0644), 0);
  ASSERT_EQ(::chmod(signers.private_key(1).c_str(), 0644), 0);
  DiskCache signer(team_config(root.path() / "team", list, signers.private_key(1)));
  EXPECT_FALSE(signer.usable());
  EXPECT_NE(unusable_reason(signer).find("chmod 600"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(root.path() / "team" / "lock")) << "nothing written without its keys";
}

TEST(SignedRemoteCache, VerifiersLoadSignedEntriesAndPublishNothing) {
  REDIS_OR_SKIP();
#if CUINLINE_TEST_HAVE_REDIS
  Signers signers;
  RedisServer redis;
  ASSERT_TRUE(redis.running());
  const auto list = signers.list("list", {signers.line(1)});
  RemoteCacheConfig signer_config;
  signer_config.url = redis.url();
  signer_config.signing_key_file = signers.private_key(1);
  RemoteCacheConfig verifier_config = signer_config;
  verifier_config.signing_key_file.clear();
  verifier_config.trusted_keys_file = list;

  const CacheKey key = fresh_key(1), other = fresh_key(2);
  const CompiledProgram program = fake_program("remote.cu");
  RemoteCache signer(signer_config), verifier(verifier_config);
  ASSERT_TRUE(signer.usable()) << signer.unusable_reason();
  ASSERT_TRUE(verifier.usable()) << verifier.unusable_reason();
  EXPECT_EQ(signer.signing_key_id(), "ci-1");
  EXPECT_EQ(verifier.signing_key_id(), "");
  ASSERT_TRUE(signer.store(key, program));
  const auto hit = verifier.load(key);
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->binary, program.binary);
  // Nothing published, no lease taken.
  EXPECT_FALSE(verifier.store(other, program));
  EXPECT_EQ(verifier.lock_key(other), nullptr);
  EXPECT_EQ(verifier.check(other), RemoteEntryCheck::missing);
  EXPECT_EQ(redis.integer({"EXISTS", "cuinline:l:" + other.hex()}), 0);

  // An entry under the fleet key (which every member held) and a tampered signed one are refused.
  RemoteCacheConfig fleet = signer_config;
  fleet.signing_key_file.clear();
  TempDir dir("fleetkey");
  fleet.key_file = write_key_file(dir.path(), "fleet.key", {{"fleet-1", random_hex(32)}});
  RemoteCache member(fleet);
  ASSERT_TRUE(member.store(other, program));
  EXPECT_EQ(verifier.check(other), RemoteEntryCheck::not_sealed);
  EXPECT_FALSE(verifier.load(other));
  std::string value = redis.get("cuinline:e:" + key.hex());
  value[value.size() / 2] = static_cast<char>(value[value.size() / 2] ^ 0x04);
  redis.command({"SET", "cuinline:e:" + key.hex(), value});
  EXPECT_EQ(verifier.check(key), RemoteEntryCheck::bad_signature);
  EXPECT_FALSE(verifier.load(key));
  EXPECT_EQ(verifier.stats().unauthenticated_entries, 2u);
#endif
}

// ---- the command --------------------------------------------------------------------------------

class SigningCli : public CliTest {
 protected:
  // Runs the command with `env` added to this process's environment.
  Result cli_with(const std::vector<std::string>& env, const std::vector<std::string>& args) {
    for (const auto& e : env) ::putenv(const_cast<char*>(e.c_str()));
    Result r = cli(args);
    for (const auto& e : env) ::unsetenv(e.substr(0, e.find('=')).c_str());
    return r;
  }
};

TEST_F(SigningCli, KeyGenerateWritesAPrivateFileAndPrintsThePublicLine) {
  const fs::path key = dir_ / "ci.key";
  const Result made = cli({"key", "generate", "--id", "ci-2026-11", "--comment", "warm@ci", key.string()});
  ASSERT_EQ(made.code, 0) << made.err;
  EXPECT_EQ(made.out.rfind("ed25519 ci-2026-11 ", 0), 0u) << made.out;
  EXPECT_CONTAINS(made.out, " warm@ci\n");
  EXPECT_CONTAINS(made.err, "mode 0600");
  struct stat st {};
  ASSERT_EQ(::stat(key.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  const Result shown = cli({"key", "public", key.string()});
  EXPECT_EQ(shown.code, 0) << shown.err;
  EXPECT_EQ(shown.out, made.out);

  // Never replaced: not the file, not through a symlink.
  const std::string before = read_file(key);
  const Result again = cli({"key", "generate", "--id", "ci-2", key.string()});
  EXPECT_EQ(again.code, 1);
  EXPECT_CONTAINS(again.err, "never replaced");
  fs::create_symlink(key, dir_ / "link.key");
  EXPECT_EQ(cli({"key", "generate", "--id", "ci-3", (dir_ / "link.key").string()}).code, 1);
  EXPECT_EQ(read_file(key), before);
  const Result bad_id = cli({"key", "generate", "--id", "ci 1", (dir_ / "x.key").string()});
  EXPECT_EQ(bad_id.code, 2);
  EXPECT_CONTAINS(bad_id.err, "key id 'ci 1'");
  EXPECT_FALSE(fs::exists(dir_ / "x.key"));
  ASSERT_EQ(::chmod(key.c_str(), 0644), 0);
  const Result open_key = cli({"key", "public", key.string()});
  EXPECT_EQ(open_key.code, 1);
  EXPECT_CONTAINS(open_key.err, "chmod 600");
}

TEST_F(SigningCli, WarmSignsVerifiersHitAndVerifyReportsWhatIsNotSigned) {
  const fs::path key = dir_ / "ci.key";
  const Result made = cli({"key", "generate", "--id", "ci-1", key.string()});
  ASSERT_EQ(made.code, 0) << made.err;
  const fs::path list = dir_ / "trusted_keys";
  write_file(list, made.out);
  const fs::path spec =
      write_spec("relu.json", R"({"entries": [{"kind": "op", "op": "relu", "dtype": "f32"}]})");
  const std::string shared = "CUINLINE_CACHE_SHARED=1",
                    trusted = "CUINLINE_CACHE_TRUSTED_KEYS=" + list.string();

  // A verifier cannot warm the team cache: nothing it wrote would be accepted.
  const Result refused =
      cli_with({shared, trusted}, {"warm", "--spec", spec.string(), "--arch", "sm_90", "-j", "1"});
  EXPECT_EQ(refused.code, 1);
  EXPECT_CONTAINS(refused.err, "holds no signing key");
  EXPECT_TRUE(entry_files().empty());

  const Result warm = cli_with({shared, trusted}, {"warm", "--spec", spec.string(), "--arch", "sm_90", "-j",
                                                   "1", "--signing-key", key.string()});
  ASSERT_EQ(warm.code, 0) << warm.out << warm.err;
  const auto entries = entry_files();
  ASSERT_GE(entries.size(), 3u);
  for (const auto& entry : entries) EXPECT_EQ(read_file(entry).substr(0, 8), "CUISIGN1") << entry;

  // The library on a verifier: a disk hit, and a miss is compiled but not written to the team cache.
  const Result hit = [&] {
    ::putenv(const_cast<char*>(shared.c_str()));
    ::putenv(const_cast<char*>(trusted.c_str()));
    Result r = probe({"op", "relu", "f32", "4", "i32", "sm_90"});
    Result miss = probe({"op", "leaky_relu(0.25)", "f32", "4", "i32", "sm_90"});
    ::unsetenv("CUINLINE_CACHE_SHARED");
    ::unsetenv("CUINLINE_CACHE_TRUSTED_KEYS");
    EXPECT_CONTAINS(miss.out, "tier=compiled compiles=1");
    return r;
  }();
  EXPECT_CONTAINS(hit.out, "tier=disk compiles=0");
  EXPECT_CONTAINS(hit.out, "unauthenticated=0");
  EXPECT_EQ(entry_files().size(), entries.size());

  const Result clean = cli_with({shared, trusted}, {"cache", "verify"});
  EXPECT_EQ(clean.code, 0) << clean.out << clean.err;

  // One entry altered, and a list that does not know the signer: reported, left in place.
  std::string bytes = read_file(entries[0]);
  bytes[bytes.size() - 40] = static_cast<char>(bytes[bytes.size() - 40] ^ 0x10);
  write_file(entries[0], bytes);
  const Result tampered = cli_with({shared, trusted}, {"cache", "verify"});
  EXPECT_EQ(tampered.code, 1);
  EXPECT_CONTAINS(tampered.out, "bad_signature");
  EXPECT_CONTAINS(tampered.out, entries[0].filename().string());
  const fs::path stranger = dir_ / "stranger.key", other_list = dir_ / "other_keys";
  const Result other = cli({"key", "generate", "--id", "other", stranger.string()});
  write_file(other_list, other.out);
  const Result unknown = cli_with({shared}, {"cache", "verify", "--trusted-keys", other_list.string()});
  EXPECT_EQ(unknown.code, 1);
  EXPECT_CONTAINS(unknown.out, "unknown_key");
  EXPECT_EQ(unknown.out.find("bad_signature"), std::string::npos)
      << "an unknown signer's entry is not checked further";
  for (const auto& entry : entries) EXPECT_TRUE(fs::exists(entry)) << entry;
}

TEST_F(SigningCli, WarmRemoteSignsInEveryWorkerAndVerifiersCheckTheSignatures) {
  REDIS_OR_SKIP();
  RedisServer redis;
  ASSERT_TRUE(redis.running());
  const fs::path key = dir_ / "ci.key", list = dir_ / "trusted_keys";
  const Result made = cli({"key", "generate", "--id", "ci-1", key.string()});
  ASSERT_EQ(made.code, 0) << made.err;
  write_file(list, made.out);
  const fs::path spec =
      write_spec("relu.json", R"({"entries": [{"kind": "op", "op": "relu", "dtype": "f32"}]})");
  const std::string url = "CUINLINE_REMOTE_CACHE=" + redis.url(),
                    trusted = "CUINLINE_CACHE_TRUSTED_KEYS=" + list.string();
  // Two worker processes: each signs with the key given on the command line.
  const Result warm = cli_with({url}, {"warm", "--spec", spec.string(), "--arch", "sm_90", "-j", "2",
                                       "--remote", "--signing-key", key.string()});
  ASSERT_EQ(warm.code, 0) << warm.out << warm.err;
  EXPECT_CONTAINS(warm.out, "key 'ci-1'");
  const Result verify = cli_with({url, trusted}, {"cache", "verify", "--remote"});
  EXPECT_EQ(verify.code, 0) << verify.out << verify.err;
  EXPECT_CONTAINS(verify.out, "3 remote entries checked");
  // A list without the signer: every entry is an unknown key's.
  const Result other = cli({"key", "generate", "--id", "other", (dir_ / "other.key").string()});
  write_file(dir_ / "other_keys", other.out);
  const Result unknown =
      cli_with({url}, {"cache", "verify", "--remote", "--trusted-keys", (dir_ / "other_keys").string()});
  EXPECT_EQ(unknown.code, 1);
  EXPECT_CONTAINS(unknown.out, "unknown_key_id");
  // A verifier may not warm Redis.
  const Result refused =
      cli_with({url, trusted}, {"warm", "--spec", spec.string(), "--arch", "sm_90", "--remote"});
  EXPECT_EQ(refused.code, 1);
  EXPECT_CONTAINS(refused.err, "holds no signing key");
}

}  // namespace
}  // namespace cuinline
