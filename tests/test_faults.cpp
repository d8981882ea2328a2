// Faults (docs/RELIABILITY.md §2): a writer killed mid-write, a lock holder killed mid-compile,
// every kind of damaged or foreign entry, a failing write (EFBIG, ENOSPC) during publish, the cache
// directory removed under a running process, and a rename that fails. Each must end with nothing
// wrong loaded, no temp file or half entry left behind, and the process still serving kernels.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <future>
#include <random>
#include <thread>

#include "cuinline/cuinline.hpp"
#include "hardening_support.hpp"
#include "stress_kernels.hpp"
#include "test_support.hpp"

namespace cuinline {
namespace {

namespace fs = std::filesystem;
using namespace test;

// Entry layout (src/cache/disk_cache_entry.hpp): magic 0, version 8, key 12, NVRTC 44/48,
// arch 52/56, suffix 60, kind 61, reserved 62, body size 64, body 72, checksum in the last 32.
constexpr std::size_t kVersionOffset = 8, kNvrtcMinorOffset = 48, kArchMajorOffset = 52, kBodySizeOffset = 64;
constexpr std::size_t kHeaderSize = 72;

class Faults : public ::testing::Test {
 protected:
  TempDir dir{"faults"};
  const Arch sm90 = Arch::parse("sm_90");

  fs::path cache_dir() const { return dir.path() / "cache"; }
  CacheKey key(int i, const Arch& arch) const { return make_cache_key(stress_request(i), arch); }
  fs::path entry_path(int i) const { return cache_dir() / key(i, sm90).hex(); }

  // Compiles kernel i for `arch` through a cache on cache_dir(); returns the entry file's bytes.
  std::string populate(int i, const Arch& arch) {
    KernelCache cache(config_at(cache_dir()));
    cache.get(stress_request(i), arch);
    return read_bytes(cache_dir() / key(i, arch).hex());
  }

  // A fresh process-like cache asks for kernel i: it must compile (not load what is planted), get
  // the right kernel, and leave a valid entry and no temp file.
  void expect_recompiled(int i, std::uint64_t rejections) {
    KernelCache cache(config_at(cache_dir()));
    CacheTier tier = CacheTier::memory;
    const Module m = cache.get(stress_request(i), sm90, &tier);
    EXPECT_EQ(tier, CacheTier::compiled);
    EXPECT_EQ(m.program().lowered_name(stress_expression(i)), stress_mangled(i));
    EXPECT_EQ(m.program().arch, sm90);
    EXPECT_EQ(cache.stats().rejected_entries, rejections);
    DiskCache disk(config_at(cache_dir()));
    const auto again = disk.load(key(i, sm90));
    ASSERT_TRUE(again.has_value()) << "no valid entry was published after the recompile";
    EXPECT_EQ(again->lowered_name(stress_expression(i)), stress_mangled(i));
    EXPECT_TRUE(names_in(cache_dir(), ".tmp-").empty());
  }
};

// ---- damaged and foreign entries --------------------------------------------------------------

struct Damage {
  const char* name;
  bool counted;  // seen by the disk tier itself (rejected_entries); else only the KernelCache refuses it
  std::string (*apply)(std::string valid, const std::string& other_kernel, const std::string& other_arch);
};

std::string flip_bit(std::string bytes, std::size_t from, std::size_t to) {
  std::mt19937_64 rng(fresh_seed());
  const std::size_t at = from + rng() % (to - from);
  bytes[at] = static_cast<char>(bytes[at] ^ (1 << (rng() % 8)));
  return bytes;
}

const Damage kDamages[] = {
    {"zero_length", true, [](std::string, const std::string&, const std::string&) { return std::string(); }},
    {"truncated_half", true,
     [](std::string b, const std::string&, const std::string&) { return b.substr(0, b.size() / 2); }},
    {"truncated_last_byte", true,
     [](std::string b, const std::string&, const std::string&) { return b.substr(0, b.size() - 1); }},
    {"header_only", true,
     [](std::string b, const std::string&, const std::string&) { return b.substr(0, kHeaderSize); }},
    {"magic_only", true,
     [](std::string b, const std::string&, const std::string&) { return b.substr(0, 8); }},
    {"bit_flip_header", true,
     [](std::string b, const std::string&, const std::string&) { return flip_bit(b, 8, kHeaderSize); }},
    {"bit_flip_binary", true,
     [](std::string b, const std::string&, const std::string&) {
       return flip_bit(b, kHeaderSize, b.size() - 32);
     }},
    {"bit_flip_checksum", true,
     [](std::string b, const std::string&, const std::string&) {
       return flip_bit(b, b.size() - 32, b.size());
     }},
    {"wrong_magic", true,
     [](std::string b, const std::string&, const std::string&) {
       b[0] = 'X';
       return reseal(b);
     }},
    {"wrong_version", true,
     [](std::string b, const std::string&, const std::string&) {
       put_u32_at(b, kVersionOffset, kCacheFormatVersion + 1);
       return reseal(b);
     }},
    {"wrong_key_other_kernel", true,
     [](std::string, const std::string& other, const std::string&) { return other; }},
    {"other_arch_entry", true, [](std::string, const std::string&, const std::string& arch) { return arch; }},
    {"other_nvrtc_version", true,
     [](std::string b, const std::string&, const std::string&) {
       put_u32_at(b, kNvrtcMinorOffset, static_cast<std::uint32_t>(nvrtc_version().minor + 1));
       return reseal(b);
     }},
    {"forged_arch_field", false,  // right key inside, but the header says sm_80: never serve it for sm_90
     [](std::string b, const std::string&, const std::string&) {
       put_u32_at(b, kArchMajorOffset, 8);
       return reseal(b);
     }},
    {"trailing_bytes", true,
     [](std::string b, const std::string&, const std::string&) { return b + "trailing"; }},
    {"huge_body_size", true,
     [](std::string b, const std::string&, const std::string&) {
       for (int i = 0; i < 8; ++i) b[kBodySizeOffset + i] = static_cast<char>(i == 7 ? 0x40 : 0);
       return b;
     }},
    {"random_bytes", true,
     [](std::string b, const std::string&, const std::string&) {
       std::mt19937_64 rng(fresh_seed());
       for (char& c : b) c = static_cast<char>(rng());
       return b;
     }},
};

class DamagedEntry : public Faults, public ::testing::WithParamInterface<Damage> {};

TEST_P(DamagedEntry, IsRejectedRecompiledAndReplaced) {
  const std::string valid = populate(3, sm90);
  ASSERT_GT(valid.size(), kHeaderSize + 32);
  const std::string other_kernel = populate(4, sm90);
  const std::string other_arch = populate(3, Arch::parse("sm_80"));
  const std::string damaged = GetParam().apply(valid, other_kernel, other_arch);
  ASSERT_NE(damaged, valid);
  write_bytes(entry_path(3), damaged);
  expect_recompiled(3, GetParam().counted ? 1 : 0);
}

INSTANTIATE_TEST_SUITE_P(Entries, DamagedEntry, ::testing::ValuesIn(kDamages),
                         [](const ::testing::TestParamInfo<Damage>& info) {
                           return std::string(info.param.name);
                         });

TEST_F(Faults, EntriesOfTwoArchsNeverServeEachOther) {
  const Arch sm80 = Arch::parse("sm_80");
  populate(5, sm80);
  populate(5, sm90);
  KernelCache cache(config_at(cache_dir()));
  CacheTier tier80 = CacheTier::compiled, tier90 = CacheTier::compiled;
  const Module m80 = cache.get(stress_request(5), sm80, &tier80);
  const Module m90 = cache.get(stress_request(5), sm90, &tier90);
  EXPECT_EQ(tier80, CacheTier::disk);
  EXPECT_EQ(tier90, CacheTier::disk);
  EXPECT_EQ(m80.program().arch, sm80);
  EXPECT_EQ(m90.program().arch, sm90);
  EXPECT_NE(m80.key(), m90.key());
}

TEST_F(Faults, FifoUnderAnEntryNameNeitherHangsNorLoads) {
  fs::create_directories(cache_dir());
  ASSERT_EQ(::mkfifo(entry_path(3).c_str(), 0600), 0);
  auto done = std::async(std::launch::async, [&] {
    KernelCache cache(config_at(cache_dir()));
    CacheTier tier = CacheTier::memory;
    const Module m = cache.get(stress_request(3), sm90, &tier);
    return tier == CacheTier::compiled && m.program().lowered_name(stress_expression(3)) == stress_mangled(3);
  });
  ASSERT_EQ(done.wait_for(std::chrono::seconds(120)), std::future_status::ready) << "hung on a FIFO";
  EXPECT_TRUE(done.get());
}

// ---- processes killed at the worst moment ----------------------------------------------------

TEST_F(Faults, WriterKilledMidWriteLeavesATempFileThatIsNeverReadAndLaterRemoved) {
  fs::create_directories(cache_dir());
  ::chmod(cache_dir().c_str(), 0700);
  CacheKey k = key(1, sm90);
  std::vector<std::string> temps;
  // Kill the writer as soon as its temp file exists; retry if it won the race and published.
  for (int attempt = 0; attempt < 5 && temps.empty(); ++attempt) {
    k.digest[0] = static_cast<unsigned char>(attempt);
    const Child writer =
        start_child({tool_path("fault_tool"), "store-big", cache_dir().string(), k.hex(), "60"},
                    (dir.path() / "writer.out").string());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (names_in(cache_dir(), ".tmp-").empty() && !fs::exists(cache_dir() / k.hex()) &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    ::kill(writer.pid, SIGKILL);
    wait_child(writer, std::chrono::seconds(30));
    temps = names_in(cache_dir(), ".tmp-");
    if (!temps.empty()) {
      ASSERT_FALSE(fs::exists(cache_dir() / k.hex())) << "both a temp file and the entry";
    }
  }
  ASSERT_EQ(temps.size(), 1u) << "could not kill the writer mid-write";
  const fs::path temp = cache_dir() / temps[0];
  struct stat st {};
  ASSERT_EQ(::stat(temp.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "temp files are owner-only";
  EXPECT_LT(static_cast<std::uint64_t>(st.st_size), (std::uint64_t{60} << 20) + 200);

  {  // A running process never takes the temp file for an entry, and leaves a young one alone.
    DiskCache disk(config_at(cache_dir()));
    EXPECT_FALSE(disk.load(k).has_value());
    EXPECT_EQ(disk.stats().rejected_entries, 0u);
    EXPECT_TRUE(disk.list().empty());
    EXPECT_TRUE(fs::exists(temp)) << "a temp file that may still be written was removed";
  }
  // Once it is older than any writer could be, the next publish (a process's first directory scan)
  // removes it, and the key is published and read normally.
  struct timespec old[2];
  ::clock_gettime(CLOCK_REALTIME, &old[0]);
  old[0].tv_sec -= 11 * 60;
  old[1] = old[0];
  ASSERT_EQ(::utimensat(AT_FDCWD, temp.c_str(), old, 0), 0);
  KernelCache cache(config_at(cache_dir()));
  EXPECT_EQ(cache.get(stress_request(1), sm90).program().lowered_name(stress_expression(1)),
            stress_mangled(1));
  EXPECT_EQ(cache.stats().disk_writes, 1u);
  EXPECT_FALSE(fs::exists(temp)) << "a stale temp file was kept";
  EXPECT_TRUE(DiskCache(config_at(cache_dir())).load(key(1, sm90)).has_value());
}

TEST_F(Faults, StaleTempFileIsRemovedByVerifyFix) {
  fs::create_directories(cache_dir());
  ::chmod(cache_dir().c_str(), 0700);
  const fs::path temp = cache_dir() / (".tmp-" + key(1, sm90).hex().substr(0, 16) + "-1-0-0123456789abcdef");
  write_bytes(temp, populate(1, sm90).substr(0, 100));
  struct timespec old[2];
  ::clock_gettime(CLOCK_REALTIME, &old[0]);
  old[0].tv_sec -= 11 * 60;
  old[1] = old[0];
  ASSERT_EQ(::utimensat(AT_FDCWD, temp.c_str(), old, 0), 0);
  DiskCache disk(config_at(cache_dir()));
  EXPECT_TRUE(disk.load(key(1, sm90)).has_value());
  EXPECT_EQ(disk.verify(/*fix=*/true).stale_temp_files_removed, 1u);
  EXPECT_FALSE(fs::exists(temp));
}

TEST_F(Faults, LockHolderKilledMidCompileLetsTheWaiterProceed) {
  fs::create_directories(cache_dir());
  ::chmod(cache_dir().c_str(), 0700);
  const fs::path ready = dir.path() / "ready";
  const Child holder =
      start_child({tool_path("fault_tool"), "hold", cache_dir().string(), key(2, sm90).hex(), ready.string()},
                  (dir.path() / "holder.out").string());
  for (int i = 0; i < 6000 && !fs::exists(ready); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(fs::exists(ready)) << "the holder never took the lock";

  auto waiter = std::async(std::launch::async, [&] {
    KernelCache cache(config_at(cache_dir()));
    CacheTier tier = CacheTier::memory;
    const Module m = cache.get(stress_request(2), sm90, &tier);
    return std::make_pair(tier, m.program().lowered_name(stress_expression(2)).value_or(""));
  });
  EXPECT_EQ(waiter.wait_for(std::chrono::milliseconds(800)), std::future_status::timeout)
      << "the waiter did not wait for the lock holder";
  ::kill(holder.pid, SIGKILL);
  wait_child(holder, std::chrono::seconds(30));
  ASSERT_EQ(waiter.wait_for(std::chrono::seconds(120)), std::future_status::ready)
      << "the waiter hangs after the lock holder died";
  const auto [tier, lowered] = waiter.get();
  EXPECT_EQ(tier, CacheTier::compiled);
  EXPECT_EQ(lowered, stress_mangled(2));
  EXPECT_TRUE(fs::exists(entry_path(2)));
}

// ---- failing writes, vanishing directories, failing renames ------------------------------------

// The "faults:" line of fault_tool: both kernels compiled and right, nothing published, nothing left.
void expect_memory_only(const std::string& output) {
  const auto c = parse_counters(output, "faults:");
  ASSERT_FALSE(c.empty()) << output;
  EXPECT_NE(output.find("first=compiled again=memory second=compiled"), std::string::npos) << output;
  EXPECT_EQ(c.at("ok"), 1u) << output;
  EXPECT_EQ(c.at("disk_writes"), 0u) << output;
  EXPECT_GE(c.at("write_failures"), 2u) << output;
  EXPECT_EQ(c.at("entries"), 0u) << output;
  EXPECT_EQ(c.at("temp_files"), 0u) << output;
}

TEST_F(Faults, WriteFailingWithEfbigDuringPublishLeavesNothingAndServesFromMemory) {
  const Child child = start_child({tool_path("fault_tool"), "fsize", cache_dir().string(), "2048"},
                                  (dir.path() / "fsize.out").string());
  const ChildExit exit = wait_child(child, std::chrono::seconds(180));
  ASSERT_FALSE(exit.timed_out);
  ASSERT_NE(exit.exit_code, 3) << "setrlimit failed: " << child.output();
  ASSERT_EQ(exit.exit_code, 0) << child.output();
  expect_memory_only(child.output());
  expect_recompiled(7, 0);  // and the next process, with room again, publishes normally
}

TEST_F(Faults, DiskFullDuringPublishLeavesNothingAndServesFromMemory) {
  fs::create_directories(dir.path() / "mnt");
  const Child child = start_child({tool_path("fault_tool"), "enospc", (dir.path() / "mnt").string(), "1"},
                                  (dir.path() / "enospc.out").string());
  const ChildExit exit = wait_child(child, std::chrono::seconds(180));
  ASSERT_FALSE(exit.timed_out);
  if (exit.exit_code == 3) GTEST_SKIP() << "no private tmpfs here: " << child.output();
  ASSERT_EQ(exit.exit_code, 0) << child.output();
  expect_memory_only(child.output());
}

TEST_F(Faults, SmallTmpfsWithRoomPublishesNormally) {
  fs::create_directories(dir.path() / "mnt");
  const Child child = start_child({tool_path("fault_tool"), "enospc", (dir.path() / "mnt").string(), "0"},
                                  (dir.path() / "enospc.out").string());
  const ChildExit exit = wait_child(child, std::chrono::seconds(180));
  ASSERT_FALSE(exit.timed_out);
  if (exit.exit_code == 3) GTEST_SKIP() << "no private tmpfs here: " << child.output();
  ASSERT_EQ(exit.exit_code, 0) << child.output();
  const auto c = parse_counters(child.output(), "faults:");
  EXPECT_EQ(c.at("disk_writes"), 2u) << child.output();
  EXPECT_EQ(c.at("entries"), 2u) << child.output();
}

TEST_F(Faults, CacheDirectoryRemovedWhileRunning) {
  KernelCache cache(config_at(cache_dir()));
  cache.get(stress_request(1), sm90);
  ASSERT_TRUE(fs::exists(entry_path(1)));
  fs::remove_all(cache_dir());
  CacheTier tier = CacheTier::memory;
  const Module m2 = cache.get(stress_request(2), sm90, &tier);
  EXPECT_EQ(tier, CacheTier::compiled);
  EXPECT_EQ(m2.program().lowered_name(stress_expression(2)), stress_mangled(2));
  cache.get(stress_request(1), sm90, &tier);
  EXPECT_EQ(tier, CacheTier::memory);
  EXPECT_NO_THROW(cache.clear_memory());
  const Module again = cache.get(stress_request(1), sm90, &tier);
  EXPECT_EQ(tier, CacheTier::compiled);
  EXPECT_EQ(again.program().lowered_name(stress_expression(1)), stress_mangled(1));
  // The next process recreates the directory and publishes again.
  expect_recompiled(2, 0);
}

TEST_F(Faults, RenameOntoANonEmptyDirectoryFailsCleanly) {
  fs::create_directories(entry_path(6) / "occupied");
  write_bytes(entry_path(6) / "occupied" / "file", "not yours");
  KernelCache cache(config_at(cache_dir()));
  CacheTier tier = CacheTier::memory;
  const Module m = cache.get(stress_request(6), sm90, &tier);
  EXPECT_EQ(tier, CacheTier::compiled);
  EXPECT_EQ(m.program().lowered_name(stress_expression(6)), stress_mangled(6));
  EXPECT_EQ(cache.stats().disk_writes, 0u);
  EXPECT_EQ(cache.stats().disk_write_failures, 1u);
  EXPECT_TRUE(names_in(cache_dir(), ".tmp-").empty()) << "the failed publish left its temp file";
  EXPECT_EQ(read_bytes(entry_path(6) / "occupied" / "file"), "not yours") << "the directory was touched";
  cache.get(stress_request(6), sm90, &tier);
  EXPECT_EQ(tier, CacheTier::memory);
  // Other keys still publish.
  cache.get(stress_request(9), sm90, &tier);
  EXPECT_EQ(cache.stats().disk_writes, 1u);
}

// Eviction must hold the cap even when every entry is in use: readers refresh each entry's use time
// (mtime) while the evicting process works through them, so an evictor that spared every entry used
// since its scan removed almost nothing and the directory stayed far over the cap.
TEST_F(Faults, EvictionHoldsTheCapWhileEveryEntryIsInUse) {
  const CompiledProgram program = compile(stress_request(1), sm90);
  std::vector<CacheKey> keys;
  {
    DiskCache fill(config_at(cache_dir()));
    for (int i = 0; i < 40; ++i) {
      CacheKey k = key(1, sm90);
      k.digest[31] = static_cast<unsigned char>(i);
      ASSERT_TRUE(fill.store(k, program));
      keys.push_back(k);
    }
  }
  const std::uint64_t entry_bytes = fs::file_size(cache_dir() / keys[0].hex());
  std::atomic<bool> stop{false};
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&, t] {
      DiskCache reader(config_at(cache_dir()));
      for (std::size_t n = static_cast<std::size_t>(t); !stop; ++n) reader.load(keys[n % keys.size()]);
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CacheConfig small = config_at(cache_dir());
  small.max_bytes = 10 * entry_bytes;  // a quarter of what is there
  DiskCache writer(small);
  CacheKey extra = key(2, sm90);
  ASSERT_TRUE(writer.store(extra, program));
  const std::uint64_t after_store = writer.total_bytes();
  const std::uint64_t pruned = writer.prune(0);
  const std::uint64_t after_prune = writer.total_bytes();
  stop = true;
  for (auto& r : readers) r.join();
  EXPECT_LE(after_store, small.max_bytes) << "a publish left the directory over its cap";
  EXPECT_EQ(after_prune, 0u) << "prune(0) left entries that were in use";
  EXPECT_GT(pruned, 0u);
}

TEST_F(Faults, CacheDirectoryThatIsAFileMeansMemoryOnly) {
  write_bytes(cache_dir(), "a file, not a directory");
  LogCapture log;
  KernelCache cache(config_at(cache_dir()));
  ASSERT_NE(cache.disk(), nullptr);
  EXPECT_FALSE(cache.disk()->usable());
  EXPECT_EQ(log.warnings(), 1u) << log.text();
  CacheTier tier = CacheTier::memory;
  const Module m = cache.get(stress_request(1), sm90, &tier);
  EXPECT_EQ(tier, CacheTier::compiled);
  EXPECT_EQ(m.program().lowered_name(stress_expression(1)), stress_mangled(1));
  EXPECT_EQ(read_bytes(cache_dir()), "a file, not a directory");
  EXPECT_EQ(log.warnings(), 1u) << log.text();
}

}  // namespace
}  // namespace cuinline
