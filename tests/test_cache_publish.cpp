// A publish whose temp file is removed while it is written (by a cleaner that did not know it was
// live, as an older `cache clear` was) fails, counted, and says why instead of a bare
// "renaming: No such file or directory".
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "disk_cache_test_util.hpp"

namespace cuinline {
namespace {

using test::TempDir;
namespace fs = std::filesystem;

TEST(Publish, ATempFileRemovedWhileWrittenIsAFailureThatSaysWhy) {
  TempDir dir;
  test::LogCapture log;
  DiskCache cache(test::config_for(dir.path()));
  ASSERT_TRUE(cache.usable());
  // 60 MiB (just under the entry size bound) takes long enough to write and flush that the remover
  // below sees the temp file first; should the rename still come first, the store succeeds and the
  // next attempt tries again.
  const CompiledProgram program = test::make_program("big", 60u << 20);
  std::atomic<bool> stop{false};
  std::atomic<int> removed{0};
  std::thread remover([&] {
    while (!stop) {
      std::error_code ec;
      for (const auto& item : fs::directory_iterator(dir.path(), ec)) {
        const std::string name = item.path().filename().string();
        if (name.rfind(".tmp-", 0) == 0 && ::unlink(item.path().c_str()) == 0) ++removed;
      }
    }
  });
  bool failed = false;
  for (int attempt = 0; attempt < 5 && !failed; ++attempt) failed = !cache.store(test::make_key("gone"), program);
  stop = true;
  remover.join();
  ASSERT_TRUE(failed) << "the temp file was never removed before its rename (" << removed << " removed)";
  EXPECT_GE(cache.stats().disk_write_failures, 1u);
  EXPECT_NE(log.text().find("publishing: the temp file was removed while it was written"), std::string::npos)
      << log.text();
  // Nothing half-written is left, and the next publish works.
  for (const auto& item : fs::directory_iterator(dir.path())) {
    EXPECT_NE(item.path().filename().string().rfind(".tmp-", 0), 0u) << item.path();
  }
  const CacheKey key = test::make_key("after");
  ASSERT_TRUE(cache.store(key, test::make_program("small")));
  EXPECT_TRUE(cache.load(key).has_value());
}

}  // namespace
}  // namespace cuinline
