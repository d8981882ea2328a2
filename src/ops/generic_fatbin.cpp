// The fatbins nvcc built from src/ops/elementwise/ew_generic.cu and src/ops/conv2d/conv2d_generic_rt.cu
// (CMakeLists.txt), embedded with the assembler's .incbin: no generated source of megabytes, and the bytes
// stay in .rodata.
#include "ops/generic_fatbin.hpp"

#include <cuinline/jit.hpp>
#include <memory>
#include <mutex>

#include "driver/module_state.hpp"

#if CUINLINE_HAVE_GENERIC_KERNELS
__asm__(
    ".section .rodata\n"
    ".balign 16\n"
    ".globl cuinline_ewg_fatbin_begin\n"
    ".hidden cuinline_ewg_fatbin_begin\n"
    "cuinline_ewg_fatbin_begin:\n"
    ".incbin \"" CUINLINE_GENERIC_FATBIN_PATH
    "\"\n"
    ".globl cuinline_ewg_fatbin_end\n"
    ".hidden cuinline_ewg_fatbin_end\n"
    "cuinline_ewg_fatbin_end:\n"
    ".balign 16\n"
    ".globl cuinline_convg_fatbin_begin\n"
    ".hidden cuinline_convg_fatbin_begin\n"
    "cuinline_convg_fatbin_begin:\n"
    ".incbin \"" CUINLINE_GENERIC_CONV_FATBIN_PATH
    "\"\n"
    ".globl cuinline_convg_fatbin_end\n"
    ".hidden cuinline_convg_fatbin_end\n"
    "cuinline_convg_fatbin_end:\n"
    ".previous\n");
extern "C" __attribute__((visibility("hidden"))) const char cuinline_ewg_fatbin_begin[];
extern "C" __attribute__((visibility("hidden"))) const char cuinline_ewg_fatbin_end[];
extern "C" __attribute__((visibility("hidden"))) const char cuinline_convg_fatbin_begin[];
extern "C" __attribute__((visibility("hidden"))) const char cuinline_convg_fatbin_end[];
#endif

namespace cuinline {

bool generic_kernels_built() noexcept {
  return detail::generic_fatbin_built();
}

namespace detail {

bool generic_fatbin_built() noexcept {
  return CUINLINE_HAVE_GENERIC_KERNELS != 0;
}

std::string_view generic_fatbin() noexcept {
#if CUINLINE_HAVE_GENERIC_KERNELS
  return std::string_view(cuinline_ewg_fatbin_begin,
                          static_cast<std::size_t>(cuinline_ewg_fatbin_end - cuinline_ewg_fatbin_begin));
#else
  return {};
#endif
}

std::string_view generic_conv_fatbin() noexcept {
#if CUINLINE_HAVE_GENERIC_KERNELS
  return std::string_view(cuinline_convg_fatbin_begin,
                          static_cast<std::size_t>(cuinline_convg_fatbin_end - cuinline_convg_fatbin_begin));
#else
  return {};
#endif
}

const Module& generic_module(GenericFatbin which) {
  static std::mutex mutex;
  static Module* modules[2] = {};  // never destroyed: ops may run during static teardown
  const bool conv = which == GenericFatbin::conv2d;
  std::lock_guard<std::mutex> lock(mutex);
  Module*& module = modules[conv ? 1 : 0];
  if (module != nullptr) return *module;
  const std::string_view fatbin = conv ? generic_conv_fatbin() : generic_fatbin();
  CompiledProgram program;
  program.kind = BinaryKind::cubin;  // a fatbin: the driver picks the device's code
  program.program_name = conv ? "conv2d_generic_rt.fatbin" : "ew_generic.fatbin";
  program.binary.assign(fatbin.begin(), fatbin.end());
  auto state = std::make_shared<ModuleState>(std::move(program), CacheKey{}, CacheTier::memory);
  module = new Module(std::move(state));
  return *module;
}

}  // namespace detail
}  // namespace cuinline
