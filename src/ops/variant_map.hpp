#pragma once
// The in-process map every op keeps in front of the KernelCache: (variant, device) → what a launch
// needs. A hit costs a small hash, a mutex and a field compare — no source rendering and no
// SHA-256; only a miss goes to KernelCache::get (which is itself single-flight per key).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cuinline/ops.hpp>
#include <mutex>
#include <optional>
#include <type_traits>
#include <unordered_map>
#include <utility>

namespace cuinline::ops::detail {

// FNV-1a over the fields that select a kernel (equality is still checked field by field).
struct Fnv {
  std::uint64_t h = 1469598103934665603ull;
  void bytes(const void* p, std::size_t n) {
    const auto* c = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i) h = (h ^ c[i]) * 1099511628211ull;
  }
  template <class T>
  void value(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>, "hash plain values only");
    bytes(&v, sizeof v);
  }
  void op(const Op& o) {
    for (const Step& s : o.steps) {
      value(s.kind);
      value(s.a);
      value(s.b);
      value(s.operand);  // tensor steps: which input
      value(s.cond);     // where: the condition input
    }
    bytes(o.expression.data(), o.expression.size());
    for (const NamedConstant& c : o.constants) {
      bytes(c.name.data(), c.name.size());
      value(c.value);
    }
  }
};

template <class Key, class Value>
class VariantMap {
 public:
  // The value for (key, device): from the map when `equal(entry_key)` holds for an entry with this
  // hash and device, else `make()` → pair<Key, Value>, run without holding the lock, then inserted
  // (unless another thread inserted it meanwhile: then that one is returned).
  template <class Equal, class Make>
  Value find_or_make(std::uint64_t hash, int device, Equal&& equal, Make&& make) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (const Entry* e = find_locked(hash, device, equal); e != nullptr && e->state == State::ready) {
        map_hits_.fetch_add(1, std::memory_order_relaxed);
        return e->value;
      }
    }
    cache_lookups_.fetch_add(1, std::memory_order_relaxed);
    std::pair<Key, Value> made = make();
    std::lock_guard<std::mutex> lock(mutex_);
    if (Entry* e = find_locked(hash, device, equal)) {
      if (e->state == State::ready) return e->value;
      e->value = made.second;  // a pending or failed background specialization: this call made it
      e->state = State::ready;
      return made.second;
    }
    entries_.emplace(hash, Entry{std::move(made.first), device, made.second, State::ready});
    return made.second;
  }

  /// What the map holds for (key, device), without making anything.
  enum class State { ready, pending, failed };
  template <class Equal>
  std::optional<State> find(std::uint64_t hash, int device, Equal&& equal, Value* value) {
    std::lock_guard<std::mutex> lock(mutex_);
    const Entry* e = find_locked(hash, device, equal);
    if (e == nullptr) return std::nullopt;
    if (e->state == State::ready) {
      map_hits_.fetch_add(1, std::memory_order_relaxed);
      *value = e->value;
    }
    return e->state;
  }

  /// Records `key` on `device` as pending (a background specialization was submitted for it):
  /// false when the map already holds it (ready, pending or failed).
  template <class Equal>
  bool begin_pending(std::uint64_t hash, int device, Equal&& equal, Key key) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (find_locked(hash, device, equal) != nullptr) return false;
    entries_.emplace(hash, Entry{std::move(key), device, Value{}, State::pending});
    return true;
  }

  /// A pending entry's outcome: its value (ready), or failed (calls keep the generic kernel).
  /// An entry that is no longer there (clear()) is left absent.
  template <class Equal>
  void finish_pending(std::uint64_t hash, int device, Equal&& equal, const Value* value) {
    std::lock_guard<std::mutex> lock(mutex_);
    Entry* e = find_locked(hash, device, equal);
    if (e == nullptr || e->state != State::pending) return;
    if (value != nullptr) {
      e->value = *value;
      e->state = State::ready;
    } else {
      e->state = State::failed;
    }
  }

  /// Drops a pending entry whose job could not be queued (the next call submits again).
  template <class Equal>
  void cancel_pending(std::uint64_t hash, int device, Equal&& equal) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto [first, last] = entries_.equal_range(hash);
    for (auto it = first; it != last; ++it) {
      if (it->second.device == device && it->second.state == State::pending && equal(it->second.key)) {
        entries_.erase(it);
        return;
      }
    }
  }

  void count_launch() { launches_.fetch_add(1, std::memory_order_relaxed); }

  OpsStats counts() const {
    OpsStats s;
    s.launches = launches_.load(std::memory_order_relaxed);
    s.map_hits = map_hits_.load(std::memory_order_relaxed);
    s.cache_lookups = cache_lookups_.load(std::memory_order_relaxed);
    return s;
  }

  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.clear();
  }

 private:
  struct Entry {
    Key key;
    int device;
    Value value;
    State state;
  };

  template <class Equal>
  Entry* find_locked(std::uint64_t hash, int device, Equal& equal) {
    auto [first, last] = entries_.equal_range(hash);
    for (auto it = first; it != last; ++it) {
      if (it->second.device == device && equal(it->second.key)) return &it->second;
    }
    return nullptr;
  }

  mutable std::mutex mutex_;
  std::unordered_multimap<std::uint64_t, Entry> entries_;
  std::atomic<std::uint64_t> launches_{0}, map_hits_{0}, cache_lookups_{0};
};

}  // namespace cuinline::ops::detail
