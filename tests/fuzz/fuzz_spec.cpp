// libFuzzer target: the warm-spec parser (src/cli/spec.hpp) on arbitrary bytes. parse_spec either
// returns a Spec or throws cuinline::Error (InvalidArgument naming the bad field); any other
// exception escaping it, a crash, a sanitizer report or a hang is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cli/spec.hpp"
#include "cuinline/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const cuinline::cli::Spec spec = cuinline::cli::parse_spec(text);
    for (const auto& entry : spec.entries) {
      if (entry.path.empty()) __builtin_trap();  // every entry can be named in a message
    }
  } catch (const cuinline::Error&) {
    // A clear error: what bad input must get.
  }
  return 0;
}
