#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cuinline/cache.hpp>
#include <cuinline/error.hpp>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

namespace cuinline {
namespace {

CompileRequest base_request() {
  CompileRequest request;
  request.name = "k.cu";
  request.source = "#include \"h.cuh\"\n__global__ void k(float* x) { x[0] = VALUE; }\n";
  request.headers = {{"h.cuh", "#define VALUE 1.0f\n"}, {"g.cuh", "// other\n"}};
  request.options = {"-DN=4", "--use_fast_math"};
  request.name_expressions = {"k", "&k"};
  return request;
}

const Arch kSm90{9, 0, '\0'};

TEST(CacheKey, SameInputsGiveSameKey) {
  EXPECT_EQ(make_cache_key(base_request(), kSm90), make_cache_key(base_request(), kSm90));
  EXPECT_EQ(make_cache_key(base_request(), kSm90).hex(), make_cache_key(base_request(), kSm90).hex());
}

// An arch-specific request is keyed by the arch it is built for: sm_90 asked is sm_90a built, the
// key of a plain request for sm_90a, and not that of the portable sm_90 binary; where the flag
// changes nothing (sm_80) the key is the plain one.
TEST(CacheKey, ArchSpecificRequestIsKeyedByTheArchItIsBuiltFor) {
  CompileRequest specific = base_request();
  specific.arch_specific = true;
  const Arch sm90a = Arch::parse("sm_90a"), sm80 = Arch::parse("sm_80");
  EXPECT_EQ(make_cache_key(specific, kSm90), make_cache_key(base_request(), sm90a));
  EXPECT_NE(make_cache_key(specific, kSm90), make_cache_key(base_request(), kSm90));
  EXPECT_EQ(make_cache_key(specific, sm80), make_cache_key(base_request(), sm80));
}

TEST(CacheKey, EachInputAloneChangesTheKey) {
  using Change = std::function<void(CompileRequest&, Arch&)>;
  const std::vector<std::pair<const char*, Change>> changes = {
      {"source", [](CompileRequest& r, Arch&) { r.source += " "; }},
      {"name", [](CompileRequest& r, Arch&) { r.name = "other.cu"; }},
      {"header content", [](CompileRequest& r, Arch&) { r.headers[0].content = "#define VALUE 2.0f\n"; }},
      {"header name", [](CompileRequest& r, Arch&) { r.headers[1].name = "f.cuh"; }},
      {"header order", [](CompileRequest& r, Arch&) { std::swap(r.headers[0], r.headers[1]); }},
      {"header added",
       [](CompileRequest& r, Arch&) {
         r.headers.push_back({"x.cuh", ""});
       }},
      {"header removed", [](CompileRequest& r, Arch&) { r.headers.pop_back(); }},
      {"option value", [](CompileRequest& r, Arch&) { r.options[0] = "-DN=8"; }},
      {"option added", [](CompileRequest& r, Arch&) { r.options.push_back("-lineinfo"); }},
      {"option removed", [](CompileRequest& r, Arch&) { r.options.pop_back(); }},
      {"option order", [](CompileRequest& r, Arch&) { std::swap(r.options[0], r.options[1]); }},
      {"name expression", [](CompileRequest& r, Arch&) { r.name_expressions[0] = "k2"; }},
      {"name expression added", [](CompileRequest& r, Arch&) { r.name_expressions.push_back("k3"); }},
      {"name expression order",
       [](CompileRequest& r, Arch&) { std::swap(r.name_expressions[0], r.name_expressions[1]); }},
      {"arch number",
       [](CompileRequest&, Arch& a) {
         a = Arch{8, 9, '\0'};
       }},
      {"arch suffix", [](CompileRequest&, Arch& a) { a.suffix = 'a'; }},
      // Field boundaries: moving text from one field to the next must not give the same bytes.
      {"boundary source/header",
       [](CompileRequest& r, Arch&) {
         r.source.pop_back();
         r.headers[0].name = "\n" + r.headers[0].name;
       }},
      {"boundary option split", [](CompileRequest& r, Arch&) { r.options = {"-DN=4--use_fast_math"}; }},
      {"option moved to expression",
       [](CompileRequest& r, Arch&) {
         r.options.pop_back();
         r.name_expressions.insert(r.name_expressions.begin(), "--use_fast_math");
       }},
  };
  const CacheKey base = make_cache_key(base_request(), kSm90);
  std::set<std::string> seen = {base.hex()};
  for (const auto& [what, change] : changes) {
    CompileRequest request = base_request();
    Arch arch = kSm90;
    change(request, arch);
    const CacheKey key = make_cache_key(request, arch);
    EXPECT_NE(key, base) << what;
    EXPECT_TRUE(seen.insert(key.hex()).second) << what << " collides with another change";
  }
}

TEST(CacheKey, CanonicalSpellingsGiveTheSameKey) {
  CompileRequest a = base_request();
  a.options = {"-DN=4", "-I/opt/inc", "-std=c++17", "--use_fast_math"};
  const CacheKey expected = make_cache_key(a, kSm90);
  const std::vector<std::vector<std::string>> spellings = {
      {"-D N=4", "-I /opt/inc", "--std=c++17", "-use_fast_math"},
      {"--define-macro=N=4", "--include-path=/opt/inc", "-std=c++17", "--use_fast_math"},
      {"--define-macro N=4", "--include-path /opt/inc", "--std c++17", "--use_fast_math"},
      {"-D", "N=4", "-I", "/opt/inc", "-std", "c++17", "  --use_fast_math "},
      {"  -DN=4\t", "--include-path", "/opt/inc", "--std=c++17", "-use_fast_math"},
  };
  for (const auto& options : spellings) {
    CompileRequest b = base_request();
    b.options = options;
    EXPECT_EQ(make_cache_key(b, kSm90), expected) << ::testing::PrintToString(options);
    EXPECT_EQ(canonical_options(options), a.options) << ::testing::PrintToString(options);
  }
}

TEST(CacheKey, RejectsOptionsThatCompileRejects) {
  for (std::vector<std::string> options :
       {std::vector<std::string>{"-arch=sm_80"}, {"--gpu-architecture", "sm_80"}, {""}, {"-D"}, {"-ptx"}}) {
    CompileRequest request = base_request();
    request.options = options;
    EXPECT_THROW(make_cache_key(request, kSm90), InvalidArgument) << ::testing::PrintToString(options);
  }
}

TEST(CacheKey, ToolkitIncludePathIsNotInTheKey) {
  // The key must not depend on where the toolkit is installed; default_options() carries the
  // include path for NVRTC, but adding it explicitly as a user option does change the key.
  CompileRequest request = base_request();
  const CacheKey key = make_cache_key(request, kSm90);
  for (const std::string& option : default_options()) {
    if (option.rfind("-I", 0) != 0) continue;
    request.options.push_back(option);
    EXPECT_NE(make_cache_key(request, kSm90), key);
  }
}

TEST(CacheKey, HexRoundTrip) {
  std::mt19937 rng(std::random_device{}());
  for (int i = 0; i < 100; ++i) {
    CacheKey key;
    for (auto& byte : key.digest) byte = static_cast<unsigned char>(rng());
    const std::string hex = key.hex();
    ASSERT_EQ(hex.size(), 64u);
    EXPECT_EQ(hex.find_first_not_of("0123456789abcdef"), std::string::npos);
    const auto parsed = CacheKey::from_hex(hex);
    ASSERT_TRUE(parsed.has_value());
    EXPECT_EQ(*parsed, key);
  }
  const CacheKey real = make_cache_key(base_request(), kSm90);
  EXPECT_EQ(CacheKey::from_hex(real.hex()), real);
}

TEST(CacheKey, FromHexRejectsEverythingElse) {
  const std::string good(64, 'a');
  EXPECT_TRUE(CacheKey::from_hex(good).has_value());
  EXPECT_FALSE(CacheKey::from_hex("").has_value());
  EXPECT_FALSE(CacheKey::from_hex(good.substr(1)).has_value());
  EXPECT_FALSE(CacheKey::from_hex(good + "a").has_value());
  EXPECT_FALSE(CacheKey::from_hex(std::string(63, 'a') + "g").has_value());
  EXPECT_FALSE(CacheKey::from_hex(std::string(63, 'a') + "A").has_value());
  EXPECT_FALSE(CacheKey::from_hex(std::string(63, 'a') + "/").has_value());
  EXPECT_FALSE(CacheKey::from_hex(std::string(62, 'a') + "..").has_value());
}

TEST(CacheKey, HashSpreadsOverBuckets) {
  std::unordered_set<CacheKey, CacheKeyHash> keys;
  for (int i = 0; i < 64; ++i) {
    CompileRequest request = base_request();
    request.options.push_back("-DI=" + std::to_string(i));
    keys.insert(make_cache_key(request, kSm90));
    keys.insert(make_cache_key(request, kSm90));
  }
  EXPECT_EQ(keys.size(), 64u);
  std::set<std::size_t> hashes;
  for (const CacheKey& key : keys) hashes.insert(CacheKeyHash{}(key));
  EXPECT_EQ(hashes.size(), 64u);
}

// Run by SameKeyInAnotherProcess in a child process of this same binary (disabled otherwise, so
// it neither runs nor counts as skipped in a normal run).
TEST(CacheKey, DISABLED_PrintKeyForParent) {
  std::printf("KEY=%s\n", make_cache_key(base_request(), kSm90).hex().c_str());
}

TEST(CacheKey, SameKeyInAnotherProcess) {
  // popen runs a shell, for which /proc/self/exe is the shell: resolve our own path first.
  char self[4096];
  const ssize_t size = readlink("/proc/self/exe", self, sizeof self - 1);
  ASSERT_GT(size, 0);
  self[size] = '\0';
  const std::string run =
      "'" + std::string(self) +
      "' --gtest_also_run_disabled_tests --gtest_filter=CacheKey.DISABLED_PrintKeyForParent "
      "2>/dev/null";
  FILE* pipe = popen(run.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) output += buffer;
  ASSERT_EQ(pclose(pipe), 0) << output;
  const auto at = output.find("KEY=");
  ASSERT_NE(at, std::string::npos) << output;
  EXPECT_EQ(output.substr(at + 4, 64), make_cache_key(base_request(), kSm90).hex());
}

TEST(CacheTier, Names) {
  EXPECT_STREQ(to_string(CacheTier::memory), "memory");
  EXPECT_STREQ(to_string(CacheTier::disk), "disk");
  EXPECT_STREQ(to_string(CacheTier::compiled), "compiled");
}

}  // namespace
}  // namespace cuinline
