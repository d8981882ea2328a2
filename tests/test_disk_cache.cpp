// The disk tier in one process: entry format, round trips, rejection of damaged entries, temp
// files, LRU eviction, verify/prune/clear/list, and many threads at once. Processes, locks,
// permissions and the environment are in test_disk_cache_process.cpp.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "cache/disk_cache_impl.hpp"
#include "disk_cache_test_util.hpp"

namespace cuinline {
namespace {

using namespace cuinline::test;

void expect_same(const CompiledProgram& a, const CompiledProgram& b) {
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.arch, b.arch);
  EXPECT_EQ(a.program_name, b.program_name);
  EXPECT_EQ(a.binary, b.binary);
  EXPECT_EQ(a.lowered_names, b.lowered_names);
}

TEST(DiskEntryFormat, EncodeDecodeRoundTrip) {
  const CacheKey key = make_key("format");
  CompiledProgram program = make_program("format.cu", 1000);
  program.kind = BinaryKind::ptx;
  const std::string bytes = detail::encode_entry(key, nvrtc_version(), program);
  EXPECT_EQ(bytes.size(), detail::kEntryHeaderSize + detail::kEntryChecksumSize + 4 + 9 + 4 +
                              (4 + 15 + 4 + 17) + (4 + 6 + 4 + 5) + 8 + 1000);
  CompiledProgram out;
  DiskEntryInfo info;
  ASSERT_EQ(check_entry_bytes(bytes, &key, &out, &info), EntryCheck::ok);
  expect_same(out, program);
  EXPECT_EQ(info.key, key);
  EXPECT_EQ(info.program_name, "format.cu");
  EXPECT_EQ(info.size_bytes, bytes.size());
  EXPECT_EQ(check_entry_bytes(bytes, nullptr, nullptr), EntryCheck::ok);
}

TEST(DiskEntryFormat, ClassifiesDamage) {
  const CacheKey key = make_key("damage");
  const std::string good = detail::encode_entry(key, nvrtc_version(), make_program("d.cu"));
  EXPECT_EQ(check_entry_bytes("", &key, nullptr), EntryCheck::truncated);
  EXPECT_EQ(check_entry_bytes(good.substr(0, 5), &key, nullptr), EntryCheck::truncated);
  EXPECT_EQ(check_entry_bytes(good.substr(0, 40), &key, nullptr), EntryCheck::truncated);
  EXPECT_EQ(check_entry_bytes(good.substr(0, good.size() - 1), &key, nullptr), EntryCheck::truncated);
  EXPECT_EQ(check_entry_bytes(good + "x", &key, nullptr), EntryCheck::bad_checksum);
  std::string magic = good;
  magic[0] = 'X';
  EXPECT_EQ(check_entry_bytes(magic, &key, nullptr), EntryCheck::bad_magic);
  std::string version = good;
  version[8] = static_cast<char>(kCacheFormatVersion + 1);
  EXPECT_EQ(check_entry_bytes(version, &key, nullptr), EntryCheck::wrong_version);
  const CacheKey other = make_key("other");
  EXPECT_EQ(check_entry_bytes(good, &other, nullptr), EntryCheck::wrong_key);
  const NvrtcVersion now = nvrtc_version();
  const std::string foreign = detail::encode_entry(key, {now.major + 1, now.minor}, make_program("d.cu"));
  DiskEntryInfo info;
  EXPECT_EQ(check_entry_bytes(foreign, &key, nullptr, &info), EntryCheck::foreign);
  EXPECT_EQ(info.nvrtc.major, now.major + 1);  // still described, for `cuinline cache list`
  for (std::size_t pos : {std::size_t{9}, std::size_t{20}, std::size_t{50}, std::size_t{70}, std::size_t{100},
                          good.size() / 2, good.size() - 40, good.size() - 1}) {
    for (int bit : {0, 7}) {
      std::string flipped = good;
      flipped[pos] = static_cast<char>(flipped[pos] ^ (1 << bit));
      EXPECT_NE(check_entry_bytes(flipped, &key, nullptr), EntryCheck::ok)
          << "byte " << pos << " bit " << bit;
    }
  }
}

// Lengths that lie, inside an entry whose checksum is valid: rejected, without a huge allocation.
TEST(DiskEntryFormat, ForgedLengthsAreForeign) {
  const CacheKey key = make_key("forged");
  const std::string good = detail::encode_entry(key, nvrtc_version(), make_program("f.cu", 64));
  const std::size_t body = detail::kEntryHeaderSize;
  const auto forge = [&](std::size_t offset, std::string value) {
    std::string bytes = good;
    bytes.replace(offset, value.size(), value);
    return reseal(bytes);
  };
  EXPECT_EQ(check_entry_bytes(forge(body, "\xf0\xff\xff\xff"), &key, nullptr), EntryCheck::foreign);
  EXPECT_EQ(check_entry_bytes(forge(body + 4 + 4, "\xff\xff\xff\xff"), &key, nullptr), EntryCheck::foreign);
  const std::size_t binary_length = good.size() - detail::kEntryChecksumSize - 64 - 8;
  EXPECT_EQ(check_entry_bytes(forge(binary_length, std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8)), &key,
                              nullptr),
            EntryCheck::foreign);
  EXPECT_EQ(
      check_entry_bytes(forge(body - 8, std::string("\xff\xff\xff\xff\xff\xff\xff\xff", 8)), &key, nullptr),
      EntryCheck::truncated);
  EXPECT_EQ(check_entry_bytes(forge(body - 11, "\x07"), &key, nullptr), EntryCheck::foreign);  // kind 7
  EXPECT_EQ(check_entry_bytes(forge(body - 10, "\x01"), &key, nullptr), EntryCheck::foreign);  // reserved
}

TEST(DiskEntryFormat, RandomMutationsNeverCrash) {
  const CacheKey key = make_key("mutate");
  const std::string good = detail::encode_entry(key, nvrtc_version(), make_program("m.cu", 256));
  for (int i = 0; i < 2000; ++i) {
    std::string bytes = good;
    const int edits = 1 + static_cast<int>(rng()() % 4);
    for (int e = 0; e < edits; ++e) bytes[rng()() % bytes.size()] = static_cast<char>(rng()());
    if (i % 2 == 0) bytes = reseal(bytes);  // get past the checksum to exercise the field parser
    if (i % 7 == 0) bytes.resize(rng()() % bytes.size());
    CompiledProgram out;
    DiskEntryInfo info;
    (void)check_entry_bytes(bytes, &key, &out, &info);
  }
}

TEST(DiskCache, RoundTripSameProcess) {
  TempDir dir;
  const CacheKey key = make_key("roundtrip");
  const CompiledProgram program = make_program("roundtrip.cu");
  {
    DiskCache cache(config_for(dir.path()));
    ASSERT_TRUE(cache.usable());
    EXPECT_FALSE(cache.load(key).has_value());
    ASSERT_TRUE(cache.store(key, program));
    const auto loaded = cache.load(key);
    ASSERT_TRUE(loaded.has_value());
    expect_same(*loaded, program);
    EXPECT_EQ(cache.stats().disk_writes, 1u);
    EXPECT_EQ(cache.stats().disk_hits, 1u);
    EXPECT_EQ(cache.stats().rejected_entries, 0u);
  }
  DiskCache again(config_for(dir.path()));
  const auto loaded = again.load(key);
  ASSERT_TRUE(loaded.has_value());
  expect_same(*loaded, program);
  EXPECT_EQ(files_in(dir.path()), std::vector<std::string>{key.hex()});
  EXPECT_EQ(fs::status(dir.path() / key.hex()).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
}

TEST(DiskCache, ModesDoNotDependOnTheUmask) {
  TempDir dir;
  const fs::path nested = dir.path() / "made" / "here";
  const mode_t old_umask = ::umask(0377);
  const CacheKey key = make_key("umask");
  bool stored = false, loaded = false;
  {
    DiskCache cache(config_for(nested));
    stored = cache.store(key, make_program("umask.cu"));
    loaded = cache.load(key).has_value();
  }
  ::umask(old_umask);
  EXPECT_TRUE(stored);
  EXPECT_TRUE(loaded);
  EXPECT_EQ(fs::status(nested).permissions() & fs::perms::all, fs::perms::owner_all);
  EXPECT_EQ(fs::status(nested / key.hex()).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(fs::status(nested / "lock").permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
}

TEST(DiskCache, StoreReplacesAnExistingEntry) {
  TempDir dir;
  DiskCache cache(config_for(dir.path()));
  const CacheKey key = make_key("replace");
  ASSERT_TRUE(cache.store(key, make_program("first.cu")));
  const CompiledProgram second = make_program("second.cu");
  ASSERT_TRUE(cache.store(key, second));
  expect_same(*cache.load(key), second);
  EXPECT_EQ(files_in(dir.path()).size(), 1u);
}

enum class Damage { truncate, flip, empty, magic, version, other_key, foreign_nvrtc };

class DamagedEntry : public ::testing::TestWithParam<Damage> {};

TEST_P(DamagedEntry, IsRejectedRemovedAndCounted) {
  TempDir dir;
  DiskCache cache(config_for(dir.path()));
  const CacheKey key = make_key("damaged");
  const CompiledProgram program = make_program("damaged.cu");
  ASSERT_TRUE(cache.store(key, program));
  const fs::path path = dir.path() / key.hex();
  std::string bytes = read_file(path);
  EntryCheck expected = EntryCheck::ok;
  switch (GetParam()) {
    case Damage::truncate:
      bytes.resize(bytes.size() / 2), expected = EntryCheck::truncated;
      break;
    case Damage::flip:
      bytes[bytes.size() / 3] ^= 0x10, expected = EntryCheck::bad_checksum;
      break;
    case Damage::empty:
      bytes.clear(), expected = EntryCheck::truncated;
      break;
    case Damage::magic:
      bytes[1] = 'x', expected = EntryCheck::bad_magic;
      break;
    case Damage::version:
      bytes[9] = 1, expected = EntryCheck::wrong_version;
      break;
    case Damage::other_key: {  // a valid entry of another key, copied under this key's name
      const CacheKey other = make_key("other");
      bytes = detail::encode_entry(other, nvrtc_version(), program), expected = EntryCheck::wrong_key;
      break;
    }
    case Damage::foreign_nvrtc:
      bytes = detail::encode_entry(key, {nvrtc_version().major + 1, 0}, program),
      expected = EntryCheck::foreign;
      break;
  }
  EXPECT_EQ(check_entry_bytes(bytes, &key, nullptr), expected);
  write_file(path, bytes);
  {
    LogCapture log;
    EXPECT_FALSE(cache.load(key).has_value());
  }
  EXPECT_FALSE(fs::exists(path)) << "a rejected entry is removed";
  EXPECT_EQ(cache.stats().rejected_entries, 1u);
  EXPECT_EQ(cache.stats().disk_hits, 0u);
  // The next store and load work as before.
  ASSERT_TRUE(cache.store(key, program));
  ASSERT_TRUE(cache.load(key).has_value());
}

INSTANTIATE_TEST_SUITE_P(AllKinds, DamagedEntry,
                         ::testing::Values(Damage::truncate, Damage::flip, Damage::empty, Damage::magic,
                                           Damage::version, Damage::other_key, Damage::foreign_nvrtc));

TEST(DiskCache, BitFlipsAnywhereAreRejected) {
  TempDir dir;
  DiskCache cache(config_for(dir.path()));
  const CacheKey key = make_key("flips");
  const CompiledProgram program = make_program("flips.cu", 512);
  ASSERT_TRUE(cache.store(key, program));
  const std::string good = read_file(dir.path() / key.hex());
  std::uint64_t rejected = 0;
  for (std::size_t pos = 0; pos < good.size(); pos += 37) {
    std::string bytes = good;
    bytes[pos] ^= static_cast<char>(1 << (pos % 8));
    write_file(dir.path() / key.hex(), bytes);
    EXPECT_FALSE(cache.load(key).has_value()) << "flipped byte " << pos;
    EXPECT_EQ(cache.stats().rejected_entries, ++rejected);
    EXPECT_FALSE(fs::exists(dir.path() / key.hex()));
  }
}

TEST(DiskCache, SymlinkUnderAnEntryNameIsNotFollowed) {
  TempDir dir;
  DiskCache cache(config_for(dir.path()));
  const CacheKey key = make_key("symlink");
  const CacheKey real = make_key("real");
  ASSERT_TRUE(cache.store(real, make_program("real.cu")));
  fs::create_symlink(dir.path() / real.hex(), dir.path() / key.hex());
  EXPECT_FALSE(cache.load(key).has_value());
  EXPECT_FALSE(fs::is_symlink(dir.path() / key.hex()));
  EXPECT_TRUE(fs::exists(dir.path() / real.hex()));
}

TEST(DiskCache, StaleTempFileIsNeverReadAndIsCleaned) {
  TempDir dir;
  const CacheKey key = make_key("temp");
  const std::string bytes = detail::encode_entry(key, nvrtc_version(), make_program("temp.cu"));
  const fs::path stale = dir.path() / (".tmp-" + key.hex().substr(0, 16) + "-99999-0-0123456789abcdef");
  const fs::path fresh = dir.path() / (".tmp-" + key.hex().substr(0, 16) + "-99998-0-0123456789abcdef");
  {
    DiskCache cache(config_for(dir.path()));
    write_file(stale, bytes);
    write_file(fresh, bytes);
    set_age(stale, 3600);
    EXPECT_FALSE(cache.load(key).has_value());
    EXPECT_EQ(cache.stats().rejected_entries, 0u);
    const VerifyReport report = cache.verify(/*fix=*/true);
    EXPECT_EQ(report.checked, 0u);
    EXPECT_EQ(report.stale_temp_files_removed, 1u);
    EXPECT_FALSE(fs::exists(stale));
    EXPECT_TRUE(fs::exists(fresh)) << "a temp file a live writer may still be writing stays";
  }
  // A new cache cleans stale temp files on its own, at its first store (opening a cache, which
  // every process that only reads does, scans nothing).
  write_file(stale, bytes);
  set_age(stale, 3600);
  DiskCache cache(config_for(dir.path()));
  EXPECT_FALSE(cache.load(key).has_value());
  EXPECT_TRUE(fs::exists(stale));
  EXPECT_TRUE(cache.store(make_key("other"), make_program("other.cu")));
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(fresh));
}

TEST(DiskCache, HitRefreshesUseTime) {
  TempDir dir;
  DiskCache cache(config_for(dir.path()));
  const CacheKey key = make_key("refresh");
  ASSERT_TRUE(cache.store(key, make_program("refresh.cu")));
  set_age(dir.path() / key.hex(), 7200);
  EXPECT_GE(age_seconds(dir.path() / key.hex()), 7100);
  ASSERT_TRUE(cache.load(key).has_value());
  EXPECT_LE(age_seconds(dir.path() / key.hex()), 60);
}

TEST(DiskCache, EvictionKeepsUnderCapAndRemovesLeastRecentlyUsed) {
  TempDir dir;
  const std::size_t binary = 10000;
  const std::uint64_t entry_size =
      detail::encode_entry(make_key("size"), nvrtc_version(), make_program("evict.cu", binary)).size();
  const std::uint64_t cap = entry_size * 10 + entry_size / 2;
  DiskCache cache(config_for(dir.path(), cap));
  std::vector<CacheKey> keys;
  for (int i = 0; i < 10; ++i) {
    keys.push_back(make_key("evict" + std::to_string(i)));
    ASSERT_TRUE(cache.store(keys.back(), make_program("evict.cu", binary)));
    set_age(dir.path() / keys.back().hex(), 1000 - i * 10);  // keys[0] is the oldest
  }
  EXPECT_EQ(cache.stats().evictions, 0u);
  EXPECT_EQ(cache.total_bytes(), entry_size * 10);
  ASSERT_TRUE(cache.load(keys[0]).has_value());  // now the most recently used
  const CacheKey newest = make_key("evict-new");
  ASSERT_TRUE(cache.store(newest, make_program("evict.cu", binary)));
  EXPECT_LE(cache.total_bytes(), cap);
  EXPECT_GE(cache.stats().evictions, 1u);
  EXPECT_TRUE(fs::exists(dir.path() / keys[0].hex())) << "a hit made it recent";
  EXPECT_TRUE(fs::exists(dir.path() / newest.hex()));
  EXPECT_FALSE(fs::exists(dir.path() / keys[1].hex())) << "the least recently used goes first";
  const std::uint64_t evicted = cache.stats().evictions;
  for (std::uint64_t i = 0; i < evicted; ++i) EXPECT_FALSE(fs::exists(dir.path() / keys[1 + i].hex()));
  for (std::size_t i = 1 + evicted; i < keys.size(); ++i) EXPECT_TRUE(fs::exists(dir.path() / keys[i].hex()));
}

TEST(DiskCache, ManyStoresStayUnderCap) {
  TempDir dir;
  const std::uint64_t cap = 64 * 1024;
  DiskCache cache(config_for(dir.path(), cap));
  for (int i = 0; i < 60; ++i) ASSERT_TRUE(cache.store(make_key("many"), make_program("many.cu", 3000)));
  EXPECT_LE(cache.total_bytes(), cap);
  EXPECT_GT(cache.stats().evictions, 30u);
  EXPECT_EQ(cache.stats().disk_writes, 60u);
}

TEST(DiskCache, VerifyFindsAndFixesBadEntries) {
  TempDir dir;
  DiskCache cache(config_for(dir.path()));
  const CacheKey good = make_key("good"), flipped = make_key("flipped"), foreign = make_key("foreign");
  ASSERT_TRUE(cache.store(good, make_program("good.cu")));
  ASSERT_TRUE(cache.store(flipped, make_program("flipped.cu")));
  std::string bytes = read_file(dir.path() / flipped.hex());
  bytes[bytes.size() / 2] ^= 1;
  write_file(dir.path() / flipped.hex(), bytes);
  write_file(dir.path() / foreign.hex(),
             detail::encode_entry(foreign, {nvrtc_version().major + 1, 0}, make_program("foreign.cu")));
  write_file(dir.path() / "unrelated.txt", "not ours");
  const CacheKey linked = make_key("symlink");
  fs::create_symlink(dir.path() / good.hex(), dir.path() / linked.hex());

  VerifyReport report = cache.verify(/*fix=*/false);
  EXPECT_EQ(report.checked, 4u);
  ASSERT_EQ(report.bad.size(), 3u);
  EXPECT_EQ(report.removed, 0u);
  EXPECT_TRUE(fs::exists(dir.path() / flipped.hex()));
  const auto has = [&](const CacheKey& key, EntryCheck check) {
    return std::find(report.bad.begin(), report.bad.end(), std::make_pair(dir.path() / key.hex(), check)) !=
           report.bad.end();
  };
  EXPECT_TRUE(has(flipped, EntryCheck::bad_checksum));
  EXPECT_TRUE(has(foreign, EntryCheck::foreign));
  EXPECT_TRUE(has(linked, EntryCheck::io_error));

  report = cache.verify(/*fix=*/true);
  EXPECT_EQ(report.removed, 3u);
  EXPECT_FALSE(fs::is_symlink(dir.path() / linked.hex()));
  EXPECT_FALSE(fs::exists(dir.path() / flipped.hex()));
  EXPECT_FALSE(fs::exists(dir.path() / foreign.hex()));
  EXPECT_TRUE(fs::exists(dir.path() / good.hex()));
  EXPECT_TRUE(fs::exists(dir.path() / "unrelated.txt"));
  EXPECT_TRUE(cache.verify(false).bad.empty());
}

TEST(DiskCache, PruneToASize) {
  TempDir dir;
  DiskCache cache(config_for(dir.path()));
  std::vector<CacheKey> keys;
  for (int i = 0; i < 5; ++i) {
    keys.push_back(make_key("prune"));
    ASSERT_TRUE(cache.store(keys.back(), make_program("prune.cu", 2000)));
    set_age(dir.path() / keys.back().hex(), 500 - i);
  }
  const std::uint64_t entry = fs::file_size(dir.path() / keys[0].hex());
  EXPECT_EQ(cache.prune(entry * 2), 3u);
  EXPECT_LE(cache.total_bytes(), entry * 2);
  EXPECT_TRUE(fs::exists(dir.path() / keys[3].hex()));
  EXPECT_TRUE(fs::exists(dir.path() / keys[4].hex()));
  EXPECT_EQ(cache.stats().evictions, 3u);
  EXPECT_EQ(cache.prune(entry * 2), 0u);
  EXPECT_EQ(cache.prune(0), 2u);
  EXPECT_EQ(cache.total_bytes(), 0u);
}

// clear() removes every entry and the stale temp files; a young temp file may be a live writer's and
// stays (removing it would fail that writer's publish).
TEST(DiskCache, ClearRemovesEntriesAndStaleTempFiles) {
  TempDir dir;
  DiskCache cache(config_for(dir.path()));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(cache.store(make_key("clear"), make_program("clear.cu")));
  write_file(dir.path() / ".tmp-0123456789abcdef-1-2-3", "partial");
  set_age(dir.path() / ".tmp-0123456789abcdef-1-2-3", 11 * 60);
  write_file(dir.path() / ".tmp-0123456789abcdef-4-5-6", "being written");
  EXPECT_EQ(cache.clear(), 4u);
  EXPECT_EQ(files_in(dir.path()), std::vector<std::string>{".tmp-0123456789abcdef-4-5-6"});
  EXPECT_EQ(cache.total_bytes(), 0u);
  const CacheKey key = make_key("after-clear");
  ASSERT_TRUE(cache.store(key, make_program("after.cu")));
  EXPECT_TRUE(cache.load(key).has_value());
}

TEST(DiskCache, ListDescribesEntries) {
  TempDir dir;
  DiskCache cache(config_for(dir.path()));
  const CacheKey key = make_key("list");
  const CompiledProgram program = make_program("listed.cu", 3333);
  ASSERT_TRUE(cache.store(key, program));
  write_file(dir.path() / make_key("junk").hex(), "junk");
  const auto entries = cache.list();
  ASSERT_EQ(entries.size(), 1u);
  const DiskEntryInfo& info = entries[0];
  EXPECT_EQ(info.key, key);
  EXPECT_EQ(info.path, dir.path() / key.hex());
  EXPECT_EQ(info.program_name, "listed.cu");
  EXPECT_EQ(info.lowered_names, program.lowered_names);
  EXPECT_EQ(info.arch, program.arch);
  EXPECT_EQ(info.kind, BinaryKind::cubin);
  EXPECT_EQ(info.nvrtc.major, nvrtc_version().major);
  EXPECT_EQ(info.size_bytes, fs::file_size(info.path));
  const auto age = fs::file_time_type::clock::now() - info.last_use;
  EXPECT_LT(std::chrono::abs(age), std::chrono::minutes(1));
}

TEST(DiskCache, ManyThreadsLoadStoreAndLock) {
  TempDir dir;
  DiskCache cache(config_for(dir.path(), 200 * 1024));
  std::vector<CacheKey> keys;
  std::vector<CompiledProgram> programs;
  for (int i = 0; i < 6; ++i) {
    keys.push_back(make_key("threads"));
    programs.push_back(make_program("threads" + std::to_string(i) + ".cu", 5000 + i));
  }
  std::atomic<int> failures{0}, inside{0}, max_inside{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 60; ++i) {
        const std::size_t k = static_cast<std::size_t>((t + i) % keys.size());
        if (i % 3 == 0) {
          auto lock = cache.lock(keys[0]);
          const int now = ++inside;
          int seen = max_inside.load();
          while (now > seen && !max_inside.compare_exchange_weak(seen, now)) {
          }
          std::this_thread::sleep_for(std::chrono::microseconds(200));
          --inside;
        }
        if (!cache.store(keys[k], programs[k])) ++failures;
        if (auto hit = cache.load(keys[k]); hit && hit->binary != programs[k].binary) ++failures;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(max_inside.load(), 1) << "a key lock excludes threads of the same process";
  EXPECT_EQ(cache.stats().rejected_entries, 0u);
  EXPECT_TRUE(cache.verify(false).bad.empty());
  for (const auto& name : files_in(dir.path())) EXPECT_TRUE(detail::is_entry_name(name)) << name;
}

}  // namespace
}  // namespace cuinline
