// The fatbins nvcc built from src/ops/elementwise/ew_generic.cu, src/ops/conv2d/conv2d_generic_rt.cu and
// src/ops/reductions/rd_generic.cu (CMakeLists.txt), embedded with the assembler's .incbin: no generated source of megabytes, and the bytes
// stay in .rodata.
#include "ops/generic_fatbin.hpp"

#include <cuinline/jit.hpp>
#include <memory>
#include <mutex>

#include "common/log.hpp"
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
    ".balign 16\n"
    ".globl cuinline_rdg_fatbin_begin\n"
    ".hidden cuinline_rdg_fatbin_begin\n"
    "cuinline_rdg_fatbin_begin:\n"
    ".incbin \"" CUINLINE_GENERIC_ROWS_FATBIN_PATH
    "\"\n"
    ".globl cuinline_rdg_fatbin_end\n"
    ".hidden cuinline_rdg_fatbin_end\n"
    "cuinline_rdg_fatbin_end:\n"
    ".previous\n");
extern "C" __attribute__((visibility("hidden"))) const char cuinline_ewg_fatbin_begin[];
extern "C" __attribute__((visibility("hidden"))) const char cuinline_ewg_fatbin_end[];
extern "C" __attribute__((visibility("hidden"))) const char cuinline_convg_fatbin_begin[];
extern "C" __attribute__((visibility("hidden"))) const char cuinline_convg_fatbin_end[];
extern "C" __attribute__((visibility("hidden"))) const char cuinline_rdg_fatbin_begin[];
extern "C" __attribute__((visibility("hidden"))) const char cuinline_rdg_fatbin_end[];
#endif

namespace cuinline {

bool generic_kernels_built() noexcept {
  return detail::generic_fatbin_built();
}

namespace detail {

bool generic_fatbin_built() noexcept {
  return CUINLINE_HAVE_GENERIC_KERNELS != 0;
}

std::string_view generic_fatbin(GenericFatbin which) noexcept {
#if CUINLINE_HAVE_GENERIC_KERNELS
  const auto span = [](const char* begin, const char* end) {
    return std::string_view(begin, static_cast<std::size_t>(end - begin));
  };
  switch (which) {
    case GenericFatbin::elementwise:
      return span(cuinline_ewg_fatbin_begin, cuinline_ewg_fatbin_end);
    case GenericFatbin::conv2d:
      return span(cuinline_convg_fatbin_begin, cuinline_convg_fatbin_end);
    case GenericFatbin::reductions:
      return span(cuinline_rdg_fatbin_begin, cuinline_rdg_fatbin_end);
  }
#else
  (void)which;
#endif
  return {};
}

const Module& generic_module(GenericFatbin which) {
  static std::mutex mutex;
  static Module* modules[3] = {};  // never destroyed: ops may run during static teardown
  static const char* const names[3] = {"ew_generic.fatbin", "conv2d_generic_rt.fatbin", "rd_generic.fatbin"};
  const auto index = static_cast<std::size_t>(which);
  std::lock_guard<std::mutex> lock(mutex);
  Module*& module = modules[index];
  if (module != nullptr) return *module;
#if CUINLINE_HAVE_GENERIC_KERNELS && CUINLINE_GENERIC_UNOPTIMIZED
  // (CMakeLists.txt: a build that only checks that the kernels compile.)
  logger()->warn("the generic kernels ({}) were built with CUINLINE_GENERIC_UNOPTIMIZED=ON (NVVM and ptxas at "
                 "-O0): correct, but far slower than a release build's",
                 names[index]);
#endif
  const std::string_view fatbin = generic_fatbin(which);
  CompiledProgram program;
  program.kind = BinaryKind::cubin;  // a fatbin: the driver picks the device's code
  program.program_name = names[index];
  program.binary.assign(fatbin.begin(), fatbin.end());
  auto state = std::make_shared<ModuleState>(std::move(program), CacheKey{}, CacheTier::memory);
  module = new Module(std::move(state));
  return *module;
}

}  // namespace detail
}  // namespace cuinline
