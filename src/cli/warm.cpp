// cuinline warm: compiles every variant of a spec into the disk cache, in parallel, skipping the
// ones already there. Writes the same entries (same keys, same DiskCache) as the library's own
// lookups, so a later process gets a disk hit.

#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <functional>
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
#include "cli/spec_confine.hpp"
#include "cli/util.hpp"

namespace cuinline::cli {
namespace {

// One (variant, arch) to warm. Light: the request is rebuilt from the expansion when it is compiled,
// so the jobs of a large spec take little memory (a worker rebuilds only what it compiles).
struct WarmJob {
  std::size_t source = 0;  // the variant's index in the expansion, or the copy module's
  bool copy = false;       // a copy module (CopyModules)
  std::uint32_t arch = 0;  // index into WarmPlan::archs
  CacheKey key;
  std::string label;                        // "leaky_relu f16 v8 slope=0.01 sm_90"
  const std::string* entry_path = nullptr;  // the spec entry it came from
  bool long_compile = false;                // a conv2d variant or copy module: started first
};

// What the jobs are built from, and rebuilt from when compiled.
struct WarmPlan {
  const SpecExpansion& expansion;
  const CopyModules& copies;
  const std::vector<Arch>& archs;

  // The job's request for its arch, as it was keyed (checked: a request that came out differently
  // would be stored under another program's key).
  CompileRequest request(const WarmJob& job) const {
    const Arch& arch = archs[job.arch];
    const Variant variant = job.copy ? copies.modules()[job.source] : expansion.at(job.source);
    std::optional<CompileRequest> request = variant.for_arch ? variant.for_arch(arch) : variant.request;
    if (!request || !(make_cache_key(*request, arch) == job.key)) {
      throw Error(job.label + ": the variant's program came out differently when it was built again");
    }
    return std::move(*request);
  }
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

// Builds every (variant, arch) job with its key, one per key, the variants built one at a time:
// computing the keys first also checks every variant's options before anything is compiled. The
// copy modules the conv2d variants launch come last, once each.
std::vector<WarmJob> make_jobs(const Spec& spec, const WarmPlan& plan, CopyModules& copies, std::size_t* duplicates) {
  std::vector<WarmJob> jobs;
  std::unordered_set<CacheKey, CacheKeyHash> seen;
  *duplicates = 0;
  auto add = [&](const Variant& variant, std::size_t source, bool copy, const std::string* entry_path) {
    for (std::uint32_t a = 0; a < plan.archs.size(); ++a) {
      const Arch& arch = plan.archs[a];
      WarmJob job;
      job.source = source;
      job.copy = copy;
      job.arch = a;
      job.entry_path = entry_path;
      try {
        std::optional<CompileRequest> request = variant.for_arch ? variant.for_arch(arch) : variant.request;
        if (!request) continue;  // (a module that arch does not launch)
        job.key = make_cache_key(*request, arch);
      } catch (const InvalidArgument& e) {
        throw InvalidArgument(variant.entry_path + " (" + variant.label + "): " + e.what());
      }
      if (!seen.insert(job.key).second) {
        ++*duplicates;
        continue;
      }
      job.label = variant.label + " " + arch.name();
      job.long_compile = copy || variant.conv2d.has_value();
      jobs.push_back(std::move(job));
    }
  };
  for (std::size_t i = 0; i < plan.expansion.size(); ++i) {
    const Variant variant = plan.expansion.at(i);
    copies.add(variant);
    add(variant, i, false, &spec.entries[plan.expansion.entry_of(i)].path);
  }
  for (std::size_t m = 0; m < copies.modules().size(); ++m) {
    add(copies.modules()[m], m, true, &copies.modules()[m].entry_path);
  }
  // The longest compiles first (a conv2d variant takes 4-10 times an elementwise one), so that with
  // several workers the short ones fill in beside them rather than the long ones starting last.
  std::stable_partition(jobs.begin(), jobs.end(), [](const WarmJob& job) { return job.long_compile; });
  return jobs;
}

// A compile error's message, with NVRTC's diagnostics in files outside the spec's directory withheld
// (NVRTC echoes the lines they point at), --allow-outside-paths or not: a spec that may read a file
// still must not show it.
std::string compile_error_text(const CompileError& e, const SpecConfinement& confinement, const CompileRequest* request) {
  std::string what = e.what();
  std::string log = e.log();
  if (request != nullptr && !log.empty()) {
    const std::string redacted = confinement.redact_log(log, *request);
    if (const std::size_t at = what.find(log); at != std::string::npos) what.replace(at, log.size(), redacted);
    log = redacted;
  }
  // The library's message carries the log; add it where it does not.
  if (!log.empty() && what.find(log) == std::string::npos) what += "\n" + log;
  return what;
}

// --remote: the remote entry is what counts. Already there (its TTL refreshed) → cached; on the local
// disk → published from there (cached); else compiled under the fleet-wide lease and published to
// both tiers. The local entry is written before the remote one, so a Redis that is down (or refuses
// the write) costs the publish, not the compile: the variant is reported failed, its entry stays on
// disk and a later `warm --remote` publishes it from there.
Outcome warm_one_remote(DiskCache& disk, RemoteCache& remote, const WarmJob& job, const Arch& arch,
                        const std::function<const CompileRequest&()>& request, std::string* error) {
  if (remote.load(job.key)) return Outcome::cached;
  // The locks in the library's order (KernelCache: disk, then remote); without a lease (Redis down)
  // the disk lock still keeps two processes of this machine from compiling one key.
  auto lock = disk.lock(job.key);
  auto lease = remote.lock_key(job.key);
  if (remote.load(job.key)) return Outcome::cached;
  std::optional<CompiledProgram> program = disk.load(job.key);
  const bool compiled = !program;
  if (compiled) program = compile(request(), arch);
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
Outcome warm_one(DiskCache& disk, RemoteCache* remote, const WarmPlan& plan, const WarmJob& job, std::string* error) {
  const Arch& arch = plan.archs[job.arch];
  std::optional<CompileRequest> built;
  const std::function<const CompileRequest&()> request = [&]() -> const CompileRequest& {
    if (!built) built = plan.request(job);
    return *built;
  };
  try {
    if (remote != nullptr) return warm_one_remote(disk, *remote, job, arch, request, error);
    if (disk.load(job.key)) return Outcome::cached;
    auto lock = disk.lock(job.key);
    if (disk.load(job.key)) return Outcome::cached;
    CompiledProgram program = compile(request(), arch);
    if (!disk.store(job.key, program)) {
      *error = "compiled, but the entry could not be written to " + disk.directory().string();
      return Outcome::failed;
    }
    return Outcome::compiled;
  } catch (const CompileError& e) {
    *error = compile_error_text(e, plan.expansion.confinement(), built ? &*built : nullptr);
  } catch (const std::exception& e) {
    *error = e.what();
  }
  return Outcome::failed;
}

// Lists the jobs without touching the entries (no load: that would refresh their use times), and
// without creating anything: a cache directory that does not exist yet holds nothing.
int dry_run(const DiskCache* disk, const std::string& directory, const std::vector<WarmJob>& jobs) {
  std::unordered_set<CacheKey, CacheKeyHash> present;
  if (disk != nullptr) {
    for (const auto& entry : disk->list()) present.insert(entry.key);
  }
  std::size_t cached = 0;
  for (const auto& job : jobs) {
    bool hit = present.count(job.key) > 0;
    cached += hit ? 1 : 0;
    std::printf("%-10s %s  %s  (%s)\n", hit ? "cached" : "compile", job.key.hex().substr(0, 16).c_str(),
                job.label.c_str(), job.entry_path->c_str());
  }
  std::printf("dry run: %zu variants, %zu already cached, %zu would be compiled into %s%s\n", jobs.size(), cached,
              jobs.size() - cached, directory.c_str(), disk != nullptr ? "" : " (does not exist yet)");
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
};
struct SharedPool {
  std::atomic<std::size_t> next;
  std::atomic<std::uint64_t> evictions;  // the workers' DiskCache evictions, for the summary
};
// Each job's error message has a slot of its own after the jobs, written only when the job failed:
// the pages of the jobs that succeed are never touched.
constexpr std::size_t kErrorBytes = 1536;
static_assert(std::atomic<std::size_t>::is_always_lock_free && std::atomic<int>::is_always_lock_free,
              "shared-memory counters must be lock-free");

// Returns the evictions the workers did.
std::uint64_t run_worker_processes(DiskCache& disk, const RemoteCacheConfig* remote_config, const WarmPlan& plan,
                                   const std::vector<WarmJob>& jobs, int workers, Progress& progress) {
  const std::size_t bytes = sizeof(SharedPool) + jobs.size() * (sizeof(SharedJob) + kErrorBytes);
  void* mem = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED)
    throw Error(std::string("warm: mapping shared memory failed: ") + std::strerror(errno));
  auto* pool = static_cast<SharedPool*>(mem);  // zero-filled by mmap: every job pending
  auto* slots = reinterpret_cast<SharedJob*>(static_cast<char*>(mem) + sizeof(SharedPool));
  char* errors = reinterpret_cast<char*>(slots + jobs.size());
  // NVRTC's one-time start-up (its builtins loaded and initialized: 0.1-0.5 s) paid once, here,
  // rather than by each worker: the workers inherit it across fork. A trivial program through the
  // public compiler, on this thread (no thread may exist at the fork), where some job's entry is not
  // on the disk yet; a failure is left to the jobs.
  std::unordered_set<CacheKey, CacheKeyHash> present;
  for (const auto& entry : disk.list()) present.insert(entry.key);
  const bool compiles =
      std::any_of(jobs.begin(), jobs.end(), [&](const WarmJob& job) { return present.count(job.key) == 0; });
  if (compiles) try {
    CompileRequest start_up;
    start_up.name = "cuinline_warm_start_up.cu";
    start_up.source = "extern \"C\" __global__ void cuinline_warm_start_up() {}\n";
    start_up.options = {"-minimal"};
    (void)compile(start_up, plan.archs.front());
  } catch (const std::exception&) {
  }
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
        SharedJob& slot = slots[i];
        slot.state.store(1);
        const auto job_start = std::chrono::steady_clock::now();
        std::string error;
        slot.outcome = static_cast<int>(warm_one(disk, remote.get(), plan, jobs[i], &error));
        slot.seconds = seconds_since(job_start);
        if (!error.empty()) std::snprintf(errors + i * kErrorBytes, kErrorBytes, "%s", error.c_str());
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
      const int state = slots[i].state.load();
      if (state >= 1 && shown[i] == 0) {
        progress.started(i, jobs[i].label);
        shown[i] = 1;
      }
      if (state == 2 && shown[i] == 1) {
        const SharedJob& slot = slots[i];
        progress.finished(i, jobs[i].label, static_cast<Outcome>(slot.outcome), slot.seconds,
                          std::string(errors + i * kErrorBytes));
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
  std::vector<Arch> archs = select_archs(options.archs);
  // The bound is on compiles, variants × archs, computed from the lengths of the spec's lists
  // before a single variant is built.
  const std::size_t variants = count_variants(spec);
  const std::size_t compiles = variants > SIZE_MAX / archs.size() ? SIZE_MAX : variants * archs.size();
  if (compiles > options.max_variants) {
    auto count = [](std::size_t n) { return n == SIZE_MAX ? "more than " + std::to_string(SIZE_MAX - 1) : std::to_string(n); };
    throw InvalidArgument("spec: " + count(variants) + " variants × " + std::to_string(archs.size()) + " arch" +
                          (archs.size() == 1 ? "" : "s") + " = " + count(compiles) + ", more than the limit of " +
                          std::to_string(options.max_variants) + " (raise it with --max-variants if that many are meant)");
  }
  SpecExpansion expansion(spec, spec_path.parent_path(), options.allow_outside_paths);
  CopyModules copies;
  const WarmPlan plan{expansion, copies, archs};
  std::size_t duplicates = 0;
  std::vector<WarmJob> jobs = make_jobs(spec, plan, copies, &duplicates);

  CacheConfig config = cli_cache_config(options.cache_dir);
  config.create = !options.dry_run;  // a dry run creates nothing, not even the directory or its lock file
  if (!options.signing_key.empty()) config.remote.signing_key_file = options.signing_key;
  const bool signs = !config.remote.signing_key_file.empty();
  DiskCache disk(config);
  if (!disk.usable()) {
    struct stat st {};
    if (options.dry_run && ::lstat(disk.directory().c_str(), &st) != 0 && errno == ENOENT) {
      return dry_run(nullptr, disk.directory().string(), jobs);
    }
    std::fprintf(stderr, "cuinline warm: the cache directory %s cannot be used\n", disk.directory().c_str());
    return kExitFailure;
  }
  if (options.dry_run) return dry_run(&disk, disk.directory().string(), jobs);
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
    worker_evictions = run_worker_processes(disk, remote ? &config.remote : nullptr, plan, jobs, workers, progress);
  } else {
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      const auto job_start = std::chrono::steady_clock::now();
      progress.started(i, jobs[i].label);
      std::string error;
      const Outcome outcome = warm_one(disk, remote.get(), plan, jobs[i], &error);
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
