// The launch path of the elementwise ops. Per call: checks and planning (elementwise_plan.cpp), a
// lookup of (variant, device) in a small in-process map, Kernel::launch. Only a miss renders the
// source and goes to KernelCache::get (SHA-256 key, memory / disk tier, NVRTC).
#include <atomic>
#include <cstring>
#include <cuinline/driver.hpp>
#include <cuinline/error.hpp>
#include <cuinline/module.hpp>
#include <cuinline/ops.hpp>
#include <mutex>
#include <unordered_map>

#include "ops/elementwise_plan.hpp"

namespace cuinline::ops {

namespace {

struct MapEntry {
  Variant variant;
  int device = 0;
  Kernel kernel;
};

struct KernelMap {
  std::mutex mutex;
  std::unordered_multimap<std::uint64_t, MapEntry> entries;
  std::atomic<std::uint64_t> launches{0}, map_hits{0}, cache_lookups{0};
};

KernelMap& kernel_map() {
  static KernelMap* map = new KernelMap;  // never destroyed: ops may run during static destruction
  return *map;
}

struct Fnv {
  std::uint64_t h = 1469598103934665603ull;
  void bytes(const void* p, std::size_t n) {
    const auto* c = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i) h = (h ^ c[i]) * 1099511628211ull;
  }
  template <class T>
  void value(const T& v) {
    bytes(&v, sizeof v);
  }
};

std::uint64_t hash_of(const Op& op, const detail::PlanCore& p, int device) {
  Fnv f;
  f.value(p.dtype);
  f.value(p.vector_width);
  f.value(p.index);
  f.value(p.layout);
  f.value(device);
  for (const Step& s : op.steps) {
    f.value(s.kind);
    f.value(s.a);
    f.value(s.b);
  }
  f.bytes(op.expression.data(), op.expression.size());
  for (const NamedConstant& c : op.constants) {
    f.bytes(c.name.data(), c.name.size());
    f.value(c.value);
  }
  return f.h;
}

bool matches(const MapEntry& e, const Op& op, const detail::PlanCore& p, int device) {
  return e.device == device && e.variant.dtype == p.dtype && e.variant.vector_width == p.vector_width &&
         e.variant.index == p.index && e.variant.layout == p.layout && e.variant.op == op;
}

Kernel find_kernel(const Op& op, const detail::PlanCore& p, int device) {
  KernelMap& map = kernel_map();
  const std::uint64_t h = hash_of(op, p, device);
  {
    std::lock_guard<std::mutex> lock(map.mutex);
    auto [first, last] = map.entries.equal_range(h);
    for (auto it = first; it != last; ++it) {
      if (matches(it->second, op, p, device)) {
        map.map_hits.fetch_add(1, std::memory_order_relaxed);
        return it->second.kernel;
      }
    }
  }
  // Miss: compile or fetch without holding the map (KernelCache is single-flight per key).
  map.cache_lookups.fetch_add(1, std::memory_order_relaxed);
  Variant variant{op, p.dtype, p.vector_width, p.index, p.layout};
  Module module = default_cache().get(make_request(variant), device_arch(device));
  Kernel kernel = module.kernel(kernel_name(variant));
  std::lock_guard<std::mutex> lock(map.mutex);
  auto [first, last] = map.entries.equal_range(h);
  for (auto it = first; it != last; ++it) {
    if (matches(it->second, op, p, device)) return it->second.kernel;
  }
  map.entries.emplace(h, MapEntry{std::move(variant), device, kernel});
  return kernel;
}

}  // namespace

LaunchPlan plan(const Op& op, const TensorView& in, const TensorView& out) {
  const detail::PlanCore p = detail::plan_core(op, in, out);
  LaunchPlan plan;
  plan.variant = Variant{op, p.dtype, p.vector_width, p.index, p.layout};
  plan.numel = p.numel;
  plan.head = p.head;
  plan.grid = p.grid;
  plan.block = p.numel == 0 ? 0 : detail::kBlock;
  plan.in = p.in;
  plan.out = p.out;
  plan.ndim = p.strided.ndim;
  for (int d = 0; d < p.strided.ndim; ++d) {
    plan.shape[d] = p.strided.shape[d];
    plan.in_strides[d] = p.strided.in_strides[d];
    plan.out_strides[d] = p.strided.out_strides[d];
  }
  return plan;
}

void apply(const Op& op, const TensorView& in, const TensorView& out, CUstream stream) {
  const detail::PlanCore p = detail::plan_core(op, in, out);
  if (p.numel == 0) return;
  const int device = stream_device(stream);
  const Kernel kernel = find_kernel(op, p, device);
  LaunchConfig cfg;
  cfg.grid = Dim3(p.grid);
  cfg.block = Dim3(detail::kBlock);
  cfg.stream = stream;
  kernel_map().launches.fetch_add(1, std::memory_order_relaxed);
  if (p.layout == Layout::strided) {
    kernel.launch(cfg, p.in, p.out, static_cast<long long>(p.numel), p.strided);
  } else if (p.index == IndexWidth::i64) {
    kernel.launch(cfg, p.in, p.out, static_cast<long long>(p.numel), static_cast<long long>(p.head));
  } else {
    kernel.launch(cfg, p.in, p.out, static_cast<unsigned>(p.numel), static_cast<unsigned>(p.head));
  }
}

void relu(const TensorView& in, const TensorView& out, CUstream stream) {
  static const Op op = Op::relu();
  apply(op, in, out, stream);
}

void leaky_relu(const TensorView& in, const TensorView& out, double slope, CUstream stream) {
  apply(Op::leaky_relu(slope), in, out, stream);
}

void div_leaky_relu(const TensorView& in, const TensorView& out, double divisor, double slope,
                    CUstream stream) {
  apply(Op::div_leaky_relu(divisor, slope), in, out, stream);
}

OpsStats stats() {
  KernelMap& map = kernel_map();
  OpsStats s;
  s.launches = map.launches.load(std::memory_order_relaxed);
  s.map_hits = map.map_hits.load(std::memory_order_relaxed);
  s.cache_lookups = map.cache_lookups.load(std::memory_order_relaxed);
  return s;
}

void clear_kernel_map() {
  KernelMap& map = kernel_map();
  std::lock_guard<std::mutex> lock(map.mutex);
  map.entries.clear();
}

}  // namespace cuinline::ops
