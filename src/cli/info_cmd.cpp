// cuinline info: versions, GPUs and the cache. Works with no driver and no GPU.

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cuinline/cache.hpp>
#include <cuinline/compiler.hpp>
#include <cuinline/conv2d.hpp>
#include <cuinline/driver.hpp>
#include <cuinline/error.hpp>
#include <cuinline/version.hpp>

#include "cli/commands.hpp"
#include "cli/util.hpp"

namespace cuinline::cli {

int run_info(const InfoOptions& options) {
  std::printf("%-10s %s\n", "cuinline", CUINLINE_VERSION_STRING);

  NvrtcVersion nvrtc = nvrtc_version();
  const auto& archs = nvrtc_supported_archs();
  std::printf("%-10s %d.%d", "NVRTC", nvrtc.major, nvrtc.minor);
  if (!archs.empty())
    std::printf(" (CUBIN for %s .. %s)", archs.front().name().c_str(), archs.back().name().c_str());
  std::printf("\n");

  if (!driver_available()) {
    std::printf("%-10s no GPU / no driver (%s)\n", "driver", driver_unavailable_reason().c_str());
  } else {
    int version = driver_version();
    std::printf("%-10s CUDA %d.%d\n", "driver", version / 1000, (version % 1000) / 10);
    int count = device_count();
    if (count == 0) std::printf("%-10s no GPU\n", "GPUs");
    for (int i = 0; i < count; ++i) {
      try {
        DeviceInfo d = device_info(i);
        std::printf("%-10s %d: %s, %s, %d SMs, %s, L2 %s, %.2f TB/s, %zu KiB shared a block, conv2d target %s\n",
                    i == 0 ? "GPUs" : "", d.ordinal, d.name.c_str(), d.arch.name().c_str(), d.multiprocessors,
                    format_bytes(d.total_memory).c_str(), format_bytes(d.l2_bytes).c_str(), d.memory_bandwidth / 1e12,
                    d.max_shared_per_block_optin / 1024,
                    ops::to_string(ops::conv2d_variant_for_device(ops::Conv2dVariant{}, i).target));
      } catch (const Error& e) {
        std::printf("%-10s %d: %s\n", i == 0 ? "GPUs" : "", i, e.what());
      }
    }
  }

  CacheConfig env = CacheConfig::from_environment();
  CacheConfig config = cli_cache_config(options.cache_dir);
  config.create = false;  // info only looks: it creates nothing, not even the directory or its lock file
  DiskCache disk(config);
  std::printf("%-10s %s%s\n", "cache", disk.directory().c_str(),
              env.disk_enabled ? "" : " (the library's disk tier is off: CUINLINE_DISABLE_DISK_CACHE)");
  struct stat st {};
  if (disk.usable()) {
    std::printf("%-10s %zu entries, %s of %s\n", "", disk.list().size(),
                format_bytes(disk.total_bytes()).c_str(), format_bytes(disk.max_bytes()).c_str());
  } else if (::lstat(disk.directory().c_str(), &st) != 0 && errno == ENOENT) {
    std::printf("%-10s does not exist yet (0 entries, cap %s)\n", "", format_bytes(config.max_bytes).c_str());
  } else {
    std::printf("%-10s not usable (see the warning above)\n", "");
  }
  return kExitOk;
}

}  // namespace cuinline::cli
