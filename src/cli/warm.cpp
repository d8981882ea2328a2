// cuinline warm: compiles every variant of a spec into the disk cache, in parallel, skipping the
// ones already there. Writes the same entries (same keys, same DiskCache) as the library's own
// lookups, so a later process gets a disk hit.

#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cuinline/cache.hpp>
#include <cuinline/compiler.hpp>
#include <cuinline/driver.hpp>
#include <cuinline/error.hpp>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>
#include <unordered_set>

#include "cli/commands.hpp"
#include "cli/progress.hpp"
#include "cli/spec.hpp"
#include "cli/util.hpp"

namespace cuinline::cli {
namespace {

struct WarmJob {
  const Variant* variant = nullptr;
  CompileRequest request;  // the variant's for this arch (Variant::for_arch)
  Arch arch;
  CacheKey key;
  std::string label;  // "leaky_relu f16 v8 slope=0.01 sm_90"
};

// The archs to compile for: --arch, else those of the present GPUs.
std::vector<Arch> select_archs(const std::vector<std::string>& requested) {
  std::vector<Arch> archs;
  if (!requested.empty()) {
    const auto& supported = nvrtc_supported_archs();
    for (const auto& text : requested) {
      Arch arch;
      try {
        arch = Arch::parse(text);
      } catch (const InvalidArgument& e) {
        throw InvalidArgument(std::string("--arch: ") + e.what());
      }
      if (!supported.empty() && arch.number() < supported.front().number()) {
        throw InvalidArgument("--arch: " + arch.name() + " is older than this NVRTC supports (oldest: " +
                              supported.front().name() + ")");
      }
      if (std::find(archs.begin(), archs.end(), arch) == archs.end()) archs.push_back(arch);
    }
    return archs;
  }
  int count = device_count();
  if (count == 0) {
    std::string reason = driver_available() ? "the driver reports no device" : driver_unavailable_reason();
    throw Error("no GPU to take the architecture from (" + reason + "); pass --arch, e.g. --arch sm_90");
  }
  for (int i = 0; i < count; ++i) {
    Arch arch = device_arch(i);
    if (std::find(archs.begin(), archs.end(), arch) == archs.end()) archs.push_back(arch);
  }
  return archs;
}

std::string join_archs(const std::vector<Arch>& archs) {
  std::string out;
  for (const auto& arch : archs) out += (out.empty() ? "" : ",") + arch.name();
  return out;
}

// Builds every (variant, arch) job with its key, one per key: computing the keys first also checks
// every variant's options before anything is compiled.
std::vector<WarmJob> make_jobs(const std::vector<Variant>& variants, const std::vector<Arch>& archs,
                               std::size_t* duplicates) {
  std::vector<WarmJob> jobs;
  std::unordered_set<CacheKey, CacheKeyHash> seen;
  *duplicates = 0;
  for (const auto& variant : variants) {
    for (const auto& arch : archs) {
      WarmJob job;
      job.variant = &variant;
      job.arch = arch;
      try {
        if (variant.for_arch) {
          std::optional<CompileRequest> request = variant.for_arch(arch);
          if (!request) continue;  // (a module that arch does not launch)
          job.request = std::move(*request);
        } else {
          job.request = variant.request;
        }
        job.key = make_cache_key(job.request, arch);
      } catch (const InvalidArgument& e) {
        throw InvalidArgument(variant.entry_path + " (" + variant.label + "): " + e.what());
      }
      if (!seen.insert(job.key).second) {
        ++*duplicates;
        continue;
      }
      job.label = variant.label + " " + arch.name();
      jobs.push_back(std::move(job));
    }
  }
  return jobs;
}

// --remote: the remote entry is what counts. Already there (its TTL refreshed) → cached; on the local
// disk → published from there (cached); else compiled under the fleet-wide lease and published to
// both tiers. The local entry is written before the remote one, so a Redis that is down (or refuses
// the write) costs the publish, not the compile: the variant is reported failed, its entry stays on
// disk and a later `warm --remote` publishes it from there.
Outcome warm_one_remote(DiskCache& disk, RemoteCache& remote, const WarmJob& job, std::string* error) {
  if (remote.load(job.key)) return Outcome::cached;
  // The locks in the library's order (KernelCache: disk, then remote); without a lease (Redis down)
  // the disk lock still keeps two processes of this machine from compiling one key.
  auto lock = disk.lock(job.key);
  auto lease = remote.lock_key(job.key);
  if (remote.load(job.key)) return Outcome::cached;
  std::optional<CompiledProgram> program = disk.load(job.key);
  const bool compiled = !program;
  if (compiled) program = compile(job.request, job.arch);
  const bool on_disk = !compiled || disk.store(job.key, *program);
  if (!remote.store(job.key, *program)) {
    const std::string where = "the remote cache " + remote.endpoint() + " (see the warning above)";
    if (!on_disk) {
      *error =
          "compiled, but written to neither the local cache " + disk.directory().string() + " nor " + where;
    } else {
      *error = std::string(compiled ? "compiled into" : "found in") + " the local cache " +
               disk.directory().string() + ", but not published to " + where;
    }
    return Outcome::failed;
  }
  return compiled ? Outcome::compiled : Outcome::cached;
}

// Looks the key up; compiles and publishes it when missing. The per-key lock makes a concurrent
// warm (or a library process) wait instead of compiling the same entry twice.
Outcome warm_one(DiskCache& disk, RemoteCache* remote, const WarmJob& job, std::string* error) {
  try {
    if (remote != nullptr) return warm_one_remote(disk, *remote, job, error);
    if (disk.load(job.key)) return Outcome::cached;
    auto lock = disk.lock(job.key);
    if (disk.load(job.key)) return Outcome::cached;
    CompiledProgram program = compile(job.request, job.arch);
    if (!disk.store(job.key, program)) {
      *error = "compiled, but the entry could not be written to " + disk.directory().string();
      return Outcome::failed;
    }
    return Outcome::compiled;
  } catch (const CompileError& e) {
    *error = e.what();  // the library's message carries the log; add it where it does not
    if (!e.log().empty() && error->find(e.log()) == std::string::npos) *error += "\n" + e.log();
  } catch (const std::exception& e) {
    *error = e.what();
  }
  return Outcome::failed;
}

// Lists the jobs without touching the entries (no load: that would refresh their use times).
int dry_run(DiskCache& disk, const std::vector<WarmJob>& jobs) {
  std::unordered_set<CacheKey, CacheKeyHash> present;
  for (const auto& entry : disk.list()) present.insert(entry.key);
  std::size_t cached = 0;
  for (const auto& job : jobs) {
    bool hit = present.count(job.key) > 0;
    cached += hit ? 1 : 0;
    std::printf("%-10s %s  %s  (%s)\n", hit ? "cached" : "compile", job.key.hex().substr(0, 16).c_str(),
                job.label.c_str(), job.variant->entry_path.c_str());
  }
  std::printf("dry run: %zu variants, %zu already cached, %zu would be compiled into %s\n", jobs.size(),
              cached, jobs.size() - cached, disk.directory().c_str());
  return kExitOk;
}

// -j N runs N worker *processes*, not threads: NVRTC serializes compiles within a process (on the
// H200 machine, 200 variants took 2.76 s with one thread and 2.96 s with 16). The workers are
// forked once the jobs are built (no threads exist yet), take jobs from a counter in shared
// memory and report each outcome there; the parent draws the progress and reaps them. A worker
// that dies takes only its current job down with it, which is reported as failed.
struct SharedJob {
  std::atomic<int> state;  // 0 pending, 1 running, 2 finished
  int outcome;
  double seconds;
  char error[1536];
};
struct SharedPool {
  std::atomic<std::size_t> next;
  std::atomic<std::uint64_t> evictions;  // the workers' DiskCache evictions, for the summary
  SharedJob jobs[1];                     // really jobs.size() of them
};
static_assert(std::atomic<std::size_t>::is_always_lock_free && std::atomic<int>::is_always_lock_free,
              "shared-memory counters must be lock-free");

// Returns the evictions the workers did.
std::uint64_t run_worker_processes(DiskCache& disk, const RemoteCacheConfig* remote_config,
                                   const std::vector<WarmJob>& jobs, int workers, Progress& progress) {
  const std::size_t bytes = sizeof(SharedPool) + jobs.size() * sizeof(SharedJob);
  void* mem = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED)
    throw Error(std::string("warm: mapping shared memory failed: ") + std::strerror(errno));
  auto* pool = static_cast<SharedPool*>(mem);  // zero-filled by mmap: every job pending
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> children;
  const pid_t parent = ::getpid();
  for (int w = 0; w < workers; ++w) {
    const pid_t pid = ::fork();
    if (pid < 0) break;  // run with the workers there are (at least the parent's loop below)
    if (pid == 0) {
      // A worker dies with its parent (killed `cuinline warm`: no orphans compiling on). A parent
      // that died between fork and prctl sent nothing: the worker ends itself the same way.
      if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) ::_exit(1);
      if (::getppid() != parent) ::kill(::getpid(), SIGKILL);
      // Each worker has Redis connections of its own (never shared across a fork).
      std::unique_ptr<RemoteCache> remote;
      if (remote_config != nullptr) remote = std::make_unique<RemoteCache>(*remote_config);
      for (std::size_t i = pool->next.fetch_add(1); i < jobs.size(); i = pool->next.fetch_add(1)) {
        SharedJob& slot = pool->jobs[i];
        slot.state.store(1);
        const auto job_start = std::chrono::steady_clock::now();
        std::string error;
        slot.outcome = static_cast<int>(warm_one(disk, remote.get(), jobs[i], &error));
        slot.seconds = seconds_since(job_start);
        std::snprintf(slot.error, sizeof slot.error, "%s", error.c_str());
        slot.state.store(2);
      }
      pool->evictions.fetch_add(disk.stats().evictions);
      std::fflush(nullptr);
      ::_exit(0);  // no static destructors or atexit handlers of the parent's state
    }
    children.push_back(pid);
  }
  if (children.empty())
    throw Error(std::string("warm: starting worker processes failed: ") + std::strerror(errno));

  std::vector<int> shown(jobs.size(), 0);
  auto report = [&] {
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      const int state = pool->jobs[i].state.load();
      if (state >= 1 && shown[i] == 0) {
        progress.started(i, jobs[i].label);
        shown[i] = 1;
      }
      if (state == 2 && shown[i] == 1) {
        const SharedJob& slot = pool->jobs[i];
        progress.finished(i, jobs[i].label, static_cast<Outcome>(slot.outcome), slot.seconds, slot.error);
        shown[i] = 2;
      }
    }
  };
  std::size_t running = children.size();
  std::string deaths;
  while (running > 0) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      --running;
      if (WIFSIGNALED(status))
        deaths = "a worker process was killed by signal " + std::to_string(WTERMSIG(status));
      continue;
    }
    if (pid < 0 && errno != EINTR) break;
    report();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  report();
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (shown[i] == 2) continue;
    if (shown[i] == 0) progress.started(i, jobs[i].label);
    progress.finished(
        i, jobs[i].label, Outcome::failed, 0.0,
        deaths.empty() ? "no worker process finished this variant" : deaths + " while compiling it");
  }
  const std::uint64_t evictions = pool->evictions.load();
  ::munmap(mem, bytes);
  return evictions;
}
}  // namespace

int run_warm(const WarmOptions& options) {
  auto start = std::chrono::steady_clock::now();
  // Everything that can be wrong with the input is found here, before the first compile.
  std::filesystem::path spec_path(options.spec_file);
  Spec spec = parse_spec(read_text_file(spec_path, "--spec"));
  std::vector<Variant> variants = expand_spec(spec, spec_path.parent_path(), options.max_variants, options.allow_outside_paths);
  std::vector<Arch> archs = select_archs(options.archs);
  std::size_t duplicates = 0;
  std::vector<WarmJob> jobs = make_jobs(variants, archs, &duplicates);

  CacheConfig config = cli_cache_config(options.cache_dir);
  if (!options.signing_key.empty()) config.remote.signing_key_file = options.signing_key;
  const bool signs = !config.remote.signing_key_file.empty();
  DiskCache disk(config);
  if (!disk.usable()) {
    std::fprintf(stderr, "cuinline warm: the cache directory %s cannot be used\n", disk.directory().c_str());
    return kExitFailure;
  }
  if (options.dry_run) return dry_run(disk, jobs);
  // A verifier's entries would be refused by everyone, itself included: say so before compiling.
  if (config.allow_shared_directory && !config.remote.trusted_keys_file.empty() && !signs) {
    throw Error(
        "the team cache " + disk.directory().string() +
        " takes only entries signed by a trusted key (CUINLINE_CACHE_TRUSTED_KEYS is set), and this machine "
        "holds no signing key: pass --signing-key or set CUINLINE_CACHE_SIGNING_KEY on the signing machine");
  }
  if (signs && !config.allow_shared_directory && !options.remote) {
    std::fprintf(
        stderr,
        "cuinline warm: note: %s is a private cache (CUINLINE_CACHE_SHARED is not set): its entries are not "
        "signed; signatures are for a team cache and the remote cache (--remote)\n",
        disk.directory().c_str());
  }
  // Checked before forking; the remote cache connects on first use, so nothing is shared.
  std::unique_ptr<RemoteCache> remote = options.remote ? open_remote_cache(config.remote) : nullptr;
  if (remote && remote->signing_key_id().empty()) {
    throw Error("the remote cache " + remote->endpoint() +
                " takes only entries signed by a trusted key, and this machine holds no signing key: pass "
                "--signing-key or set CUINLINE_CACHE_SIGNING_KEY on the signing machine");
  }

  int workers =
      options.jobs > 0 ? options.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  workers = static_cast<int>(
      std::min<std::size_t>(static_cast<std::size_t>(workers), std::max<std::size_t>(jobs.size(), 1)));
  Progress progress(jobs.size(), options.progress && stdout_is_terminal());
  std::printf("warming %zu variant%s for %s into %s with %d worker%s\n", jobs.size(),
              jobs.size() == 1 ? "" : "s", join_archs(archs).c_str(), disk.directory().c_str(), workers,
              workers == 1 ? "" : "s");
  std::fflush(stdout);

  std::uint64_t worker_evictions = 0;
  if (workers > 1) {
    worker_evictions = run_worker_processes(disk, remote ? &config.remote : nullptr, jobs, workers, progress);
  } else {
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      const auto job_start = std::chrono::steady_clock::now();
      progress.started(i, jobs[i].label);
      std::string error;
      const Outcome outcome = warm_one(disk, remote.get(), jobs[i], &error);
      progress.finished(i, jobs[i].label, outcome, seconds_since(job_start), error);
    }
  }

  Progress::Totals totals = progress.done();
  CacheStats stats = disk.stats();
  stats.evictions += worker_evictions;
  std::printf("warm: %zu compiled, %zu already cached, %zu failed in %s (%d worker%s)", totals.compiled,
              totals.cached, totals.failed, format_seconds(seconds_since(start)).c_str(), workers,
              workers == 1 ? "" : "s");
  if (duplicates > 0)
    std::printf("; %zu duplicate variant%s skipped", duplicates, duplicates == 1 ? "" : "s");
  std::printf("\ncache: %s, %s of %s\n", disk.directory().c_str(), format_bytes(disk.total_bytes()).c_str(),
              format_bytes(disk.max_bytes()).c_str());
  if (remote) std::printf("remote: %s (key '%s')\n", remote->endpoint().c_str(), remote->signing_key_id().c_str());
  if (stats.evictions > 0) {
    std::fprintf(stderr,
                 "cuinline warm: warning: %llu entries were evicted to stay under the cache cap; raise "
                 "CUINLINE_CACHE_MAX_BYTES or some warmed variants will be compiled again\n",
                 static_cast<unsigned long long>(stats.evictions));
  }
  if (totals.failed > 0) {
    std::fprintf(stderr, "cuinline warm: %zu variant%s failed:\n", totals.failed,
                 totals.failed == 1 ? "" : "s");
    for (const auto& label : progress.failed_labels()) std::fprintf(stderr, "  %s\n", label.c_str());
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace cuinline::cli
