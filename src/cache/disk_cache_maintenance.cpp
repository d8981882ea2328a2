// The disk tier's bookkeeping: directory scans, LRU eviction, stale temp files, and the
// management calls behind `cuinline cache` (list, total_bytes, verify, prune, clear).

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <tuple>

#include "cache/disk_cache_entry.hpp"
#include "cache/disk_cache_impl.hpp"
#include "common/log.hpp"
#include "cuinline/error.hpp"

namespace cuinline {
namespace detail {

bool is_entry_name(std::string_view name) noexcept {
  if (name.size() != 64) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool is_temp_name(std::string_view name) noexcept {
  return name.substr(0, kTempPrefix.size()) == kTempPrefix;
}

}  // namespace detail

namespace {

using detail::ScannedFile;
using detail::UniqueFd;

bool older_than(const struct timespec& t, std::chrono::seconds age) {
  return static_cast<std::int64_t>(std::time(nullptr)) - static_cast<std::int64_t>(t.tv_sec) > age.count();
}

bool same_time(const struct timespec& a, const struct timespec& b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

std::filesystem::file_time_type to_file_time(const struct timespec& t) {
  // file_time_type's clock is not system_clock in C++17; convert through the two clocks' now().
  using namespace std::chrono;
  const auto since_epoch = seconds(t.tv_sec) + nanoseconds(t.tv_nsec);
  const auto system_now = system_clock::now();
  const auto file_now = std::filesystem::file_time_type::clock::now();
  const auto age =
      duration_cast<std::filesystem::file_time_type::duration>(system_now.time_since_epoch() - since_epoch);
  return file_now - age;
}

// Reads one whole entry file (no symlinks, regular files only, at most kMaxEntryBytes; without
// `auth`, only files this user or root owns and no one else can write; with `auth`, sealed with a
// tag that verifies under `key`). The header is checked against the file's size (and `key`, if
// given) before the rest is read, as load() does. On ok the entry is bytes[offset..].
EntryCheck read_entry(int dir_fd, const std::string& name, std::string& bytes, std::size_t& offset,
                      struct stat& st, const detail::EntryAuth* auth, const CacheKey* key) {
  UniqueFd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return EntryCheck::io_error;
  if (!detail::entry_file_trusted(st, auth != nullptr)) return EntryCheck::untrusted_owner;
  // The tag covers the key: without one given, the file's name is the key to check it under.
  std::optional<CacheKey> named;
  if (auth != nullptr && key == nullptr && (named = CacheKey::from_hex(name))) key = &*named;
  return detail::read_entry_file(fd.get(), static_cast<std::uint64_t>(st.st_size), auth, key, bytes, offset);
}

// An entry name over kMaxEntryBytes is no entry (load and verify refuse it unread): counting it, a
// sparse file someone planted with a huge size would have every real entry evicted to make room.
void drop_oversized(std::vector<ScannedFile>& files) {
  files.erase(std::remove_if(files.begin(), files.end(),
                             [](const ScannedFile& f) { return f.entry && f.size > detail::kMaxEntryBytes; }),
              files.end());
}

}  // namespace

std::vector<ScannedFile> DiskCache::Impl::scan() const {
  UniqueFd fd(::openat(dir_fd.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  DIR* stream = fd ? ::fdopendir(fd.get()) : nullptr;
  if (stream == nullptr) {
    throw CacheError("reading the cache directory '" + directory.string() +
                     "': " + detail::errno_text(errno));
  }
  fd.release();  // owned by the DIR stream now
  std::unique_ptr<DIR, int (*)(DIR*)> owner(stream, &::closedir);
  std::vector<ScannedFile> files;
  while (const dirent* item = ::readdir(stream)) {
    const std::string_view name(item->d_name);
    const bool entry = detail::is_entry_name(name);
    if (!entry && !detail::is_temp_name(name)) continue;
    struct stat st {};
    if (::fstatat(dir_fd.get(), item->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone meanwhile
    if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) continue;
    ScannedFile file;
    file.name = std::string(name);
    file.entry = entry;
    file.size = static_cast<std::uint64_t>(st.st_size);
    file.mtime = st.st_mtim;
    file.dev = st.st_dev;
    file.ino = st.st_ino;
    files.push_back(std::move(file));
  }
  return files;
}

std::uint64_t DiskCache::Impl::remove_stale_temp_files(const std::vector<ScannedFile>& files) {
  std::uint64_t removed = 0;
  for (const auto& file : files) {
    if (file.entry || !older_than(file.mtime, detail::kStaleTempAge)) continue;
    if (remove_if_same(file.name, file.dev, file.ino)) {
      ++removed;
      logger()->debug("disk cache: removed temp file '{}'", file.name);
    }
  }
  return removed;
}

std::uint64_t DiskCache::Impl::evict_down_to(std::vector<ScannedFile>& files, std::uint64_t target,
                                             std::uint64_t& total) {
  std::sort(files.begin(), files.end(), [](const ScannedFile& a, const ScannedFile& b) {
    return std::tie(a.mtime.tv_sec, a.mtime.tv_nsec, a.name) <
           std::tie(b.mtime.tv_sec, b.mtime.tv_nsec, b.name);
  });
  std::uint64_t removed = 0;
  // Least recently used first, in two passes. The first spares an entry used (mtime refreshed) or
  // replaced since the scan. Under steady use nearly every entry is one of those by the time it is
  // checked, and the directory would stay over the cap for as long as the use lasts; so if the first
  // pass does not reach the target, the second takes the oldest regardless. Evicting an entry just
  // used costs a recompile later, never a wrong answer (a reader holds its own descriptor).
  std::vector<bool> done(files.size(), false);
  for (int pass = 0; pass < 2 && total > target; ++pass) {
    for (std::size_t i = 0; i < files.size() && total > target; ++i) {
      const ScannedFile& file = files[i];
      if (!file.entry || done[i]) continue;
      struct stat now {};
      if (::fstatat(dir_fd.get(), file.name.c_str(), &now, AT_SYMLINK_NOFOLLOW) != 0) {
        total -= std::min(total, file.size);  // someone else removed it
        done[i] = true;
        continue;
      }
      const bool changed =
          now.st_ino != file.ino || now.st_dev != file.dev || !same_time(now.st_mtim, file.mtime);
      if (pass == 0 && changed) continue;
      if (::unlinkat(dir_fd.get(), file.name.c_str(), 0) == 0) {
        total -= std::min(total, static_cast<std::uint64_t>(now.st_size));
        ++removed;
        done[i] = true;
        logger()->debug("disk cache: evicted '{}' ({} bytes)", file.name, now.st_size);
      }
    }
  }
  evictions += removed;
  return removed;
}

void DiskCache::Impl::evict_if_needed(std::uint64_t added_bytes) {
  {
    // The estimate only sees this process's stores; rescanning after every max_bytes/16 written also
    // picks up what other processes wrote, bounding how far they can push the directory past the cap.
    std::lock_guard<std::mutex> guard(size_mutex);
    estimated_bytes += added_bytes;
    bytes_since_scan += added_bytes;
    if (size_known && estimated_bytes <= config.max_bytes && bytes_since_scan <= config.max_bytes / 16)
      return;
  }
  // Only one process evicts at a time; if another one is at it, it brings the total down.
  const detail::HeldLock directory_lock = lock_byte(0, /*wait=*/false);
  if (!directory_lock.held()) return;
  try {
    auto files = scan();
    remove_stale_temp_files(files);
    drop_oversized(files);
    std::uint64_t total = 0;
    for (const auto& file : files) total += file.entry ? file.size : 0;
    if (total > config.max_bytes) {
      // Down to a low-water mark, so the next few stores do not each trigger a rescan.
      const std::uint64_t low_water = config.max_bytes - config.max_bytes / 10;
      const std::uint64_t removed = evict_down_to(files, low_water, total);
      logger()->debug("disk cache: evicted {} entries, {} bytes remain", removed, total);
    }
    std::lock_guard<std::mutex> guard(size_mutex);
    estimated_bytes = total;
    bytes_since_scan = 0;
    size_known = true;
  } catch (const std::exception& e) {
    logger()->warn("disk cache: eviction failed: {}", e.what());
  }
}

std::vector<DiskEntryInfo> DiskCache::list() const {
  impl_->require_usable("listing");
  std::vector<DiskEntryInfo> entries;
  for (const auto& file : impl_->scan()) {
    if (!file.entry) continue;
    std::string bytes;
    std::size_t offset = 0;
    struct stat st {};
    if (read_entry(impl_->dir_fd.get(), file.name, bytes, offset, st, impl_->auth ? &*impl_->auth : nullptr,
                   nullptr) != EntryCheck::ok)
      continue;
    DiskEntryInfo info;
    // info is filled for every intact entry, including those of another NVRTC (shown, not used).
    detail::decode_entry(std::string_view(bytes).substr(offset), nullptr, nvrtc_version(), nullptr, &info);
    if (info.size_bytes == 0) continue;
    info.path = impl_->directory / file.name;
    info.size_bytes = static_cast<std::uint64_t>(st.st_size);
    info.last_use = to_file_time(st.st_mtim);
    entries.push_back(std::move(info));
  }
  return entries;
}

std::uint64_t DiskCache::total_bytes() const {
  impl_->require_usable("measuring");
  std::uint64_t total = 0;
  for (const auto& file : impl_->scan()) total += file.entry ? file.size : 0;
  return total;
}

VerifyReport DiskCache::verify(bool fix) {
  impl_->require_usable("verifying");
  if (fix) impl_->require_writable("repairing");
  VerifyReport report;
  const auto files = impl_->scan();
  for (const auto& file : files) {
    if (!file.entry) continue;
    ++report.checked;
    std::string bytes;
    std::size_t offset = 0;
    struct stat st {};
    const auto key = CacheKey::from_hex(file.name);
    const detail::EntryAuth* auth = impl_->auth ? &*impl_->auth : nullptr;
    EntryCheck check = key ? read_entry(impl_->dir_fd.get(), file.name, bytes, offset, st, auth, &*key)
                           : EntryCheck::wrong_key;
    if (check == EntryCheck::ok) check = check_entry_bytes(std::string_view(bytes).substr(offset), &*key, nullptr);
    if (check == EntryCheck::ok) continue;
    report.bad.emplace_back(impl_->directory / file.name, check);
    // In a team cache without the fleet key, a sealed entry and another member's entry are reported
    // (this user cannot trust them) but never removed: that does not make them bad for the others.
    const bool others = impl_->config.allow_shared_directory && auth == nullptr &&
                        (check == EntryCheck::unauthenticated || check == EntryCheck::untrusted_owner);
    if (!fix || others) continue;
    // Remove the regular file that was read (the same inode only), or a symlink under an entry name;
    // anything else (a directory, a FIFO) is reported and left alone.
    struct stat now {};
    if (!S_ISREG(st.st_mode) &&
        (::fstatat(impl_->dir_fd.get(), file.name.c_str(), &now, AT_SYMLINK_NOFOLLOW) != 0 ||
         !S_ISLNK(now.st_mode))) {
      continue;
    }
    const struct stat& target = S_ISREG(st.st_mode) ? st : now;
    if (impl_->remove_if_same(file.name, target.st_dev, target.st_ino)) {
      ++report.removed;
      logger()->info("disk cache: removed bad entry '{}' ({})", file.name, to_string(check));
    }
  }
  if (fix) report.stale_temp_files_removed = impl_->remove_stale_temp_files(files);
  return report;
}

std::uint64_t DiskCache::prune(std::uint64_t max_bytes) {
  impl_->require_usable("pruning");
  impl_->require_writable("pruning");
  const detail::HeldLock directory_lock = impl_->lock_byte(0, /*wait=*/true);
  auto files = impl_->scan();
  impl_->remove_stale_temp_files(files);
  drop_oversized(files);
  std::uint64_t total = 0;
  for (const auto& file : files) total += file.entry ? file.size : 0;
  const std::uint64_t removed = impl_->evict_down_to(files, max_bytes, total);
  std::lock_guard<std::mutex> guard(impl_->size_mutex);
  impl_->estimated_bytes = total;
  return removed;
}

std::uint64_t DiskCache::clear() {
  impl_->require_usable("clearing");
  impl_->require_writable("clearing");
  const detail::HeldLock directory_lock = impl_->lock_byte(0, /*wait=*/true);
  const auto files = impl_->scan();
  std::uint64_t removed = 0;
  for (const auto& file : files) {
    if (file.entry && ::unlinkat(impl_->dir_fd.get(), file.name.c_str(), 0) == 0) ++removed;
  }
  // Only stale temp files (older than kStaleTempAge: their writer is gone): a young one belongs to a
  // writer still at work, whose publish would otherwise fail.
  impl_->remove_stale_temp_files(files);
  std::lock_guard<std::mutex> guard(impl_->size_mutex);
  impl_->estimated_bytes = 0;
  return removed;
}

}  // namespace cuinline
