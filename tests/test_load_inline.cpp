// load_inline and the two-tier KernelCache on a machine with or without a GPU (offline sm_90), and
// logging through the application's sink (include/cuinline/log.hpp).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string_view>
#include <thread>
#include <vector>

#include "cuinline/cuinline.hpp"
#include "log_capture.hpp"
#include "test_support.hpp"

namespace cuinline {
namespace {

using test::TempDir;

constexpr const char* kSaxpy = R"(
extern "C" __global__ void saxpy(float* y, const float* x, float a, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaf(a, x[i], y[i]);
}
template <typename T, int N>
__global__ void scale(T* y, const T* x, T a) {
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * N;
  #pragma unroll
  for (int k = 0; k < N; ++k) y[i + k] = a * x[i + k];
}
)";

CacheConfig config_in(const TempDir& dir) {
  CacheConfig c;
  c.directory = dir.path();
  return c;
}

InlineOptions saxpy_options(KernelCache& cache) {
  InlineOptions o;
  o.name = "saxpy";
  o.cuda_sources = {kSaxpy};
  o.functions = {"saxpy"};
  o.name_expressions = {"scale<float, 4>"};
  o.arch = Arch::parse("sm_90");
  o.cache = &cache;
  return o;
}

std::size_t entry_count(KernelCache& cache) {
  return cache.disk() ? cache.disk()->list().size() : 0;
}

TEST(LoadInline, CompilesOfflineThenHitsMemory) {
  TempDir dir;
  KernelCache cache(config_in(dir));
  Module first = load_inline(saxpy_options(cache));
  EXPECT_EQ(first.tier(), CacheTier::compiled);
  EXPECT_EQ(first.program().kind, BinaryKind::cubin);
  EXPECT_EQ(first.program().arch, Arch::parse("sm_90"));
  ASSERT_GE(first.program().binary.size(), 4u);
  EXPECT_EQ(std::string(first.program().binary.data() + 1, 3), "ELF");
  EXPECT_EQ(first.program().lowered_name("saxpy").value_or(""), "saxpy");
  EXPECT_NE(first.program().lowered_name("scale<float, 4>").value_or("").find("scale"), std::string::npos);

  CacheStats s = cache.stats();
  EXPECT_EQ(s.compiles, 1u);
  EXPECT_EQ(s.disk_writes, 1u);
  EXPECT_EQ(s.memory_hits, 0u);

  CacheTier tier = CacheTier::compiled;
  Module again = cache.get(make_inline_request(saxpy_options(cache)), Arch::parse("sm_90"), &tier);
  EXPECT_EQ(tier, CacheTier::memory);
  EXPECT_EQ(&again.program(), &first.program()) << "a memory hit shares the same module";
  s = cache.stats();
  EXPECT_EQ(s.compiles, 1u);
  EXPECT_EQ(s.memory_hits, 1u);
  EXPECT_EQ(entry_count(cache), 1u);
}

TEST(LoadInline, SecondCacheOnSameDirectoryHitsDisk) {
  TempDir dir;
  {
    KernelCache cache(config_in(dir));
    load_inline(saxpy_options(cache));
  }
  KernelCache cache(config_in(dir));
  Module m = load_inline(saxpy_options(cache));
  EXPECT_EQ(m.tier(), CacheTier::disk);
  EXPECT_EQ(cache.stats().compiles, 0u);
  EXPECT_EQ(cache.stats().disk_hits, 1u);
  EXPECT_EQ(m.program().lowered_name("saxpy").value_or(""), "saxpy");
}

TEST(LoadInline, NewProcessGetsDiskHit) {
  TempDir dir;
  const auto first = test::run_process({test::tool_path("inline_worker"), dir.path().string()});
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_NE(first.output.find("tier=compiled compiles=1"), std::string::npos) << first.output;
  const auto second = test::run_process({test::tool_path("inline_worker"), dir.path().string()});
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("tier=disk compiles=0 disk_hits=1"), std::string::npos) << second.output;
  // A different define is a different program: compiled, not served from the first entry.
  const auto third = test::run_process({test::tool_path("inline_worker"), dir.path().string(), "1.0f"});
  ASSERT_EQ(third.exit_code, 0) << third.output;
  EXPECT_NE(third.output.find("tier=compiled compiles=1"), std::string::npos) << third.output;
}

TEST(LoadInline, SixteenThreadsOneCompile) {
  TempDir dir;
  KernelCache cache(config_in(dir));
  constexpr int kThreads = 16;
  std::vector<Module> modules(kThreads);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      modules[t] = load_inline(saxpy_options(cache));
    });
  }
  for (auto& th : threads) th.join();
  const CacheStats s = cache.stats();
  EXPECT_EQ(s.compiles, 1u);
  EXPECT_EQ(s.memory_hits, static_cast<std::uint64_t>(kThreads - 1));
  for (const Module& m : modules) EXPECT_EQ(&m.program(), &modules[0].program());
}

TEST(LoadInline, DisabledDiskTierWritesNothing) {
  TempDir dir;
  CacheConfig c = config_in(dir);
  c.disk_enabled = false;
  KernelCache cache(c);
  EXPECT_EQ(cache.disk(), nullptr);
  load_inline(saxpy_options(cache));
  EXPECT_EQ(cache.stats().compiles, 1u);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

// Every bad input: the right exception, a message naming the bad value, no compile and no entry.
class BadInput : public ::testing::Test {
 protected:
  TempDir dir;
  KernelCache cache{config_in(dir)};

  template <class E>
  void expect_rejected(const InlineOptions& o, const std::string& needle) {
    try {
      load_inline(o);
      ADD_FAILURE() << "no exception; expected one mentioning '" << needle << "'";
    } catch (const E& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "wrong exception type: " << e.what();
    }
    EXPECT_EQ(entry_count(cache), 0u);
    EXPECT_EQ(cache.stats().disk_writes, 0u);
  }
};

TEST_F(BadInput, EmptySource) {
  InlineOptions o = saxpy_options(cache);
  o.cuda_sources = {"", "  \n\t"};
  expect_rejected<InvalidArgument>(o, "empty");
  o.cuda_sources = {};
  expect_rejected<InvalidArgument>(o, "empty");
}

TEST_F(BadInput, UnreadableHeaderFile) {
  InlineOptions o = saxpy_options(cache);
  o.header_files = {dir.path() / "does_not_exist.cuh"};
  expect_rejected<InvalidArgument>(o, "does_not_exist.cuh");
}

TEST_F(BadInput, HeaderFileThatIsADirectory) {
  InlineOptions o = saxpy_options(cache);
  o.header_files = {dir.path()};
  expect_rejected<InvalidArgument>(o, "is not a regular file");
}

TEST_F(BadInput, BadDefineName) {
  InlineOptions o = saxpy_options(cache);
  o.defines["1BAD NAME"] = "1";
  expect_rejected<InvalidArgument>(o, "1BAD NAME");
}

TEST_F(BadInput, UnknownFunctionName) {
  InlineOptions o = saxpy_options(cache);
  o.functions = {"no_such_kernel"};
  expect_rejected<CompileError>(o, "no_such_kernel");
}

TEST_F(BadInput, OptionNvrtcRejects) {
  InlineOptions o = saxpy_options(cache);
  o.extra_options = {"--no-such-option-xyz"};
  expect_rejected<Error>(o, "--no-such-option-xyz");
}

TEST_F(BadInput, SyntaxErrorKeepsLogAndNumberedSource) {
  InlineOptions o = saxpy_options(cache);
  o.cuda_sources = {"extern \"C\" __global__ void saxpy(float* y) {\n  y[0] = undefined_thing;\n}\n"};
  try {
    load_inline(o);
    FAIL() << "expected CompileError";
  } catch (const CompileError& e) {
    EXPECT_NE(e.log().find("saxpy.cu(2)"), std::string::npos) << e.log();
    EXPECT_NE(e.numbered_source().find("undefined_thing"), std::string::npos);
    EXPECT_EQ(e.program_name(), "saxpy.cu");
    EXPECT_FALSE(e.options().empty());
  }
  EXPECT_EQ(entry_count(cache), 0u);
  EXPECT_EQ(cache.stats().compile_failures, 1u);
}

TEST_F(BadInput, MalformedArch) {
  EXPECT_THROW(Arch::parse("sm90"), InvalidArgument);
  EXPECT_THROW(Arch::parse("sm_1000"), InvalidArgument);
  try {
    Arch::parse("sm90");
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("sm90"), std::string::npos);
  }
}

TEST(LoadInline, HeadersAndDefinesReachTheProgram) {
  TempDir dir;
  KernelCache cache(config_in(dir));
  const auto header_path = dir.path() / "from_disk.cuh";
  std::ofstream(header_path) << "#define FROM_DISK 3\n";
  InlineOptions o;
  o.name = "headers";
  o.cuda_sources = {
      "#include \"given.cuh\"\n#include \"from_disk.cuh\"\n"
      "extern \"C\" __global__ void k(int* out) { out[0] = GIVEN + FROM_DISK + DEFINED; }\n"};
  o.headers = {{"given.cuh", "#define GIVEN 1\n"}};
  o.header_files = {header_path};
  o.defines["DEFINED"] = "5";
  o.functions = {"k"};
  o.arch = Arch::parse("sm_90");
  o.cache = &cache;
  Module a = load_inline(o);
  o.headers = {{"given.cuh", "#define GIVEN 2\n"}};
  Module b = load_inline(o);
  EXPECT_NE(a.key(), b.key()) << "a header's content is part of the key";
  EXPECT_EQ(cache.stats().compiles, 2u);
}

TEST(LoadInline, VerboseLogsThroughTheApplicationsSink) {
  TempDir dir;
  KernelCache cache(config_in(dir));
  InlineOptions o = saxpy_options(cache);
  o.verbose = true;
  {
    test::LogCapture log(LogLevel::info);
    load_inline(o);
    load_inline(o);
    const std::string text = log.text();
    EXPECT_NE(text.find("[info] load_inline 'saxpy': compiled for sm_90"), std::string::npos) << text;
    EXPECT_NE(text.find("[info] load_inline 'saxpy': memory hit"), std::string::npos) << text;
    EXPECT_EQ(log.count(LogLevel::debug), 0u) << "below the level: never delivered\n" << text;
  }
  test::LogCapture later(LogLevel::warn);
  load_inline(o);
  EXPECT_EQ(later.text(), "") << "info messages are dropped at level warn";
}

// The sink is the whole public logging surface: levels by name, the level filter, a sink that is
// replaced and restored, and the misuse it refuses.
TEST(Log, LevelsByName) {
  for (LogLevel l : {LogLevel::trace, LogLevel::debug, LogLevel::info, LogLevel::warn, LogLevel::error,
                     LogLevel::critical, LogLevel::off}) {
    EXPECT_EQ(parse_log_level(to_string(l)), l) << to_string(l);
  }
  EXPECT_EQ(parse_log_level("warning"), LogLevel::warn);
  EXPECT_EQ(parse_log_level("err"), LogLevel::error);
  EXPECT_EQ(parse_log_level("loud"), std::nullopt);
  EXPECT_EQ(parse_log_level(""), std::nullopt);
  EXPECT_THROW(set_log_level(static_cast<LogLevel>(7)), InvalidArgument);
  EXPECT_THROW(set_log_level(static_cast<LogLevel>(-1)), InvalidArgument);
}

TEST(Log, EscapeControlWritesWhatATerminalWouldActOnAsHex) {
  EXPECT_EQ(escape_control("saxpy_f32"), "saxpy_f32");
  EXPECT_EQ(escape_control(std::string_view("a\nb\x1b[31m\\\x7f\xc3\xa9\0z", 14)),
            "a\\x0ab\\x1b[31m\\x5c\\x7f\\xc3\\xa9\\x00z");
  EXPECT_EQ(escape_control(""), "");
}

TEST(Log, SinkGetsEveryMessageFromEveryThreadOneAtATime) {
  TempDir dir;
  KernelCache cache(config_in(dir));
  InlineOptions o = saxpy_options(cache);
  o.verbose = true;
  std::atomic<int> inside{0}, overlaps{0}, messages{0};
  set_log_sink([&](LogLevel level, std::string_view text) {
    if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
    if (level == LogLevel::info && text.find(" ms (key ") != std::string_view::npos) messages.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    inside.fetch_sub(1);
  });
  const LogLevel before = log_level();
  set_log_level(LogLevel::info);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) threads.emplace_back([&] { load_inline(o); });
  for (auto& t : threads) t.join();
  set_log_sink(nullptr);
  set_log_level(before);
  EXPECT_EQ(messages.load(), 8) << "one verbose line a call";
  EXPECT_EQ(overlaps.load(), 0) << "calls of the sink never overlap";
}

TEST(Log, SetLogSinkFromInsideTheSinkIsRefused) {
  TempDir dir;
  KernelCache cache(config_in(dir));
  InlineOptions o = saxpy_options(cache);
  o.verbose = true;
  std::string refused;
  set_log_sink([&](LogLevel, std::string_view) {
    try {
      set_log_sink(nullptr);
    } catch (const InvalidArgument& e) {
      refused = e.what();
    }
  });
  const LogLevel before = log_level();
  set_log_level(LogLevel::info);
  load_inline(o);
  set_log_sink(nullptr);
  set_log_level(before);
  EXPECT_NE(refused.find("set_log_sink called from inside the log sink"), std::string::npos) << refused;
}

// CUINLINE_LOG_LEVEL is read when cuinline first logs: each case runs in a fresh process.
TEST(LogDeathTest, LevelComesFromTheEnvironment) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("CUINLINE_LOG_LEVEL", "error", 1);
        std::exit(log_level() == LogLevel::error ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        setenv("CUINLINE_LOG_LEVEL", "loud", 1);
        std::exit(log_level() == LogLevel::warn ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "CUINLINE_LOG_LEVEL='loud' is not a level");
}

TEST(Driver, WithoutDriverEverythingStartsAndGpuCallsThrowClearly) {
  if (driver_available()) GTEST_SKIP() << "a CUDA driver is present";
  EXPECT_EQ(device_count(), 0);
  EXPECT_FALSE(driver_unavailable_reason().empty());
  try {
    current_device();
    FAIL() << "expected DriverError";
  } catch (const DriverError& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA driver found (libcuda.so.1)"), std::string::npos)
        << e.what();
  }
  TempDir dir;
  KernelCache cache(config_in(dir));
  InlineOptions o = saxpy_options(cache);
  o.arch.reset();  // the device's arch is needed now
  EXPECT_THROW(load_inline(o), DriverError);
  EXPECT_EQ(entry_count(cache), 0u);
  // An offline module can be built, but not loaded.
  o.arch = Arch::parse("sm_90");
  Module m = load_inline(o);
  EXPECT_THROW(m.kernel("saxpy"), DriverError);
}

}  // namespace
}  // namespace cuinline
