#pragma once
// The kernels of the stress tests: kernel i is stress_t<i>, one instantiation of a tiny template,
// so each has its own cache key and a lowered name that no other kernel's name contains.

#include <string>

#include "cuinline/compiler.hpp"

namespace cuinline::test {

inline constexpr const char* kStressTemplate = R"(
template <int K>
__global__ void stress_t(int* out, int salt) {
  out[threadIdx.x] = K * 1000 + (int)threadIdx.x + salt;
}
)";

inline std::string stress_expression(int i) {
  return "stress_t<" + std::to_string(i) + ">";
}
/// Itanium mangling of `void stress_t<i>(int*, int)`.
inline std::string stress_mangled(int i) {
  return "_Z8stress_tILi" + std::to_string(i) + "EEvPii";
}

inline CompileRequest stress_request(int i) {
  CompileRequest r;
  r.name = "stress.cu";
  r.source = kStressTemplate;
  r.name_expressions = {stress_expression(i)};
  return r;
}

}  // namespace cuinline::test
