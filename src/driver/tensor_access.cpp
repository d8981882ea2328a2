#include "driver/tensor_access.hpp"

#include <string>

#include "cuinline/driver.hpp"
#include "cuinline/error.hpp"
#include "driver/driver_api.hpp"

namespace cuinline::detail {
namespace {

struct PointerFacts {
  unsigned memory_type = 0;  // CUmemorytype; 0: not a pointer the driver knows
  int ordinal = -2;
  unsigned managed = 0;
  CUdeviceptr range_start = 0;
  std::size_t range_size = 0;
};

PointerFacts facts(const DriverApi& api, CUdeviceptr p) {
  PointerFacts f;
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                 CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                 CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  void* data[] = {&f.memory_type, &f.ordinal, &f.managed, &f.range_start, &f.range_size};
  // For memory the driver does not know, the call succeeds with memory type 0 (driver 580); an
  // error is read the same way.
  if (api.cuPointerGetAttributes(5, attrs, data, p) != CUDA_SUCCESS) f = PointerFacts{};
  return f;
}

std::string where(const PointerFacts& f) {
  if (f.managed) return "managed memory";
  switch (f.memory_type) {
    case CU_MEMORYTYPE_DEVICE:
      return "device " + std::to_string(f.ordinal);
    case CU_MEMORYTYPE_HOST:
      return "registered host memory";
    default:
      return "memory the CUDA driver does not know";
  }
}

// Whether a kernel on `device` may read and write memory of device `owner` at `p`: peer access
// enabled through enable_peer_access, or a virtual-memory mapping (cuMemMap) with read-write access
// granted to `device`. (CU_POINTER_ATTRIBUTE_ACCESS_FLAGS answers read-write for cuMemAlloc memory
// of another device with peer access disabled — seen on two H200s, driver 580 — so it cannot tell.)
bool peer_accessible(const DriverApi& api, CUdeviceptr p, int owner, int device) {
  if (peer_access_enabled(device, owner)) return true;
  CUmemLocation where{};
  where.type = CU_MEM_LOCATION_TYPE_DEVICE;
  where.id = device;
  unsigned long long flags = 0;
  return api.cuMemGetAccess(&flags, &where, p) == CUDA_SUCCESS && flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
}

[[noreturn]] void refuse(const TensorView& t, const char* what, int device, const std::string& why) {
  throw InvalidArgument(std::string(what) + " " + t.describe() + " at " +
                        std::to_string(reinterpret_cast<std::uintptr_t>(t.data)) + ": " + why +
                        "; the stream is on device " + std::to_string(device) + " (nothing was launched)");
}

// One pointer: known, and usable from `device`.
PointerFacts check_one(const DriverApi& api, const TensorView& t, const char* what, int device, CUdeviceptr p,
                       const char* which) {
  const PointerFacts f = facts(api, p);
  if (f.managed || f.memory_type == CU_MEMORYTYPE_HOST) return f;
  if (f.memory_type != CU_MEMORYTYPE_DEVICE) {
    refuse(t, what, device,
           std::string(which) +
               " is not memory the CUDA driver knows (pageable host memory that is not registered, or freed "
               "device memory)");
  }
  if (f.ordinal != device && !peer_accessible(api, p, f.ordinal, device)) {
    refuse(t, what, device,
           std::string(which) + " is on device " + std::to_string(f.ordinal) + ", which device " +
               std::to_string(device) + " may not access (no peer access enabled through cuinline::enable_peer_access)");
  }
  return f;
}

}  // namespace

bool byte_span(const TensorView& t, std::uintptr_t& first, std::uintptr_t& last) noexcept {
  std::int64_t lo = 0, hi = 0;
  for (int d = 0; d < t.ndim; ++d) {
    if (t.shape[d] == 0) return false;
    const std::int64_t reach = (t.shape[d] - 1) * t.strides[d];
    (reach < 0 ? lo : hi) += reach;
  }
  const auto size = static_cast<std::int64_t>(dtype_size(t.dtype));
  const auto base = reinterpret_cast<std::uintptr_t>(t.data);
  first = base + static_cast<std::uintptr_t>(lo * size);
  last = base + static_cast<std::uintptr_t>(hi * size + size - 1);
  return true;
}

void check_tensor_access(const TensorView& t, const char* what, int device) {
  std::uintptr_t first = 0, last = 0;
  if (!byte_span(t, first, last)) return;  // no elements: nothing is read or written
  if (t.data == nullptr) refuse(t, what, device, "a null pointer with elements");
  const DriverApi& api = driver();
  const PointerFacts f = check_one(api, t, what, device, first, "its first element");
  if (f.range_size == 0) return;  // registered host memory reports no range on some drivers
  const std::uintptr_t end = static_cast<std::uintptr_t>(f.range_start) + f.range_size;
  if (last < end) return;
  // The extent leaves the allocation of the first byte: fine only if the last byte is usable too
  // (e.g. adjacent mappings of one virtual range), else the tensor is larger than its memory.
  const PointerFacts g = facts(api, last);
  if ((g.memory_type != CU_MEMORYTYPE_DEVICE && !g.managed && g.memory_type != CU_MEMORYTYPE_HOST) ||
      (g.memory_type == CU_MEMORYTYPE_DEVICE && g.ordinal != f.ordinal)) {
    refuse(t, what, device,
           "its last element lies past the end of the allocation that holds its first (" + where(g) + " there)");
  }
}

}  // namespace cuinline::detail
