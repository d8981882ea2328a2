#pragma once
// A fleet for the remote-cache tests: one private redis-server, one key file, and KernelCaches that
// each have a disk directory of their own (each stands for one machine).

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "cuinline/cuinline.hpp"
#include "redis_test_util.hpp"
#include "stress_kernels.hpp"

namespace cuinline::test {

struct Fleet {
  explicit Fleet(bool tcp = false, std::vector<std::string> redis_args = {})
      : redis(tcp, std::move(redis_args)) {
    key_file = write_key_file(dir.path(), "fleet.key", {{"k1", secret_hex}});
  }

  /// The configuration of "machine" `name`: its own disk directory, the shared Redis and key.
  CacheConfig config(const std::string& name) const {
    CacheConfig c;
    c.directory = dir.path() / ("disk-" + name);
    c.remote.url = redis.url();
    c.remote.key_file = key_file;
    return c;
  }
  std::string entry_key(const CacheKey& key) const { return "cuinline:e:" + key.hex(); }
  std::string lock_key(const CacheKey& key) const { return "cuinline:l:" + key.hex(); }

  TempDir dir{"fleet"};
  RedisServer redis;
  std::string secret_hex = random_hex(32);
  std::filesystem::path key_file;
};

inline const Arch& sm90() {
  static const Arch arch = Arch::parse("sm_90");
  return arch;
}

/// "" or what is wrong with a module answering stress kernel i.
inline std::string check_stress_module(const Module& m, int i, const CacheKey& key) {
  if (m.key() != key) return "module key differs";
  const CompiledProgram& p = m.program();
  if (p.arch != sm90()) return "arch " + p.arch.name();
  if (p.lowered_names.size() != 1 || p.lowered_names[0].second != stress_mangled(i)) return "lowered name";
  const std::string name = stress_mangled(i);
  if (std::search(p.binary.begin(), p.binary.end(), name.begin(), name.end()) == p.binary.end())
    return "binary lacks " + name;
  return "";
}

}  // namespace cuinline::test
