#pragma once
// The elementwise family's variant (docs/ops-families.md: the "variant" piece): what selects one
// compiled kernel — the op and a NaryKey (dtype, inputs, outputs, each input's pattern, vector width,
// index width, strided or not). The public ops::Variant (what `cuinline warm` enumerates for the
// one-input ops) is the one-input, whole-tensor case of it: key_of(variant).
#include <array>
#include <cstdint>
#include <cuinline/compiler.hpp>
#include <cuinline/ops.hpp>
#include <string>

#include "ops/variant_map.hpp"

namespace cuinline::ops::detail {

/// How an input is read (EWN_* in ew_nary.cuh).
enum Pattern : std::uint8_t { kFull = 0, kScalar = 1, kRow = 2, kCol = 3 };

/// What selects the kernel besides the op. The scalar head and reps are run-time arguments, so one
/// key serves every alignment that allows its vector width.
struct NaryKey {
  DType dtype = DType::f32;
  std::uint8_t inputs = 0, outputs = 0;
  std::uint8_t vector_width = 1;
  bool strided = false;
  bool index64 = false;
  /// Two 16-byte vectors a thread (ew_nary's Sh::kWide), with the registers for them: chosen for an
  /// expression over one whole tensor and broadcast operands (plan.cpp says why).
  bool wide = false;
  /// The bf16 table form (kernel_templates/ew_table.cuh; table.hpp): the planner's choice for a
  /// large call of a chain that has one. Its own module, so a variant's small calls compile none of it.
  bool table = false;
  std::array<std::uint8_t, kMaxInputs> patterns{};
  friend bool operator==(const NaryKey& a, const NaryKey& b) noexcept {
    return a.dtype == b.dtype && a.inputs == b.inputs && a.outputs == b.outputs &&
           a.vector_width == b.vector_width && a.strided == b.strided && a.index64 == b.index64 &&
           a.wide == b.wide && a.table == b.table && a.patterns == b.patterns;
  }
};

/// One compiled elementwise kernel: the key of the in-process map.
struct NaryVariant {
  Op op;
  NaryKey key;
};

/// The key of a public one-input variant (one input read whole, op.outputs() outputs).
NaryKey key_of(const Variant& variant);

/// The public variant of a one-input key (inputs == 1, whole-tensor pattern).
Variant variant_of(const Op& op, const NaryKey& key);

/// "ew_nary<cuinline_ewn_shape, cuinline_ewn_op, float, 4, unsigned int>",
/// "ew_nary_strided<cuinline_ewn_shape, cuinline_ewn_op, float>" or, for key.table,
/// "ew_nary_table<cuinline_ewn_shape, cuinline_ewn_pre, cuinline_ewn_run, unsigned int>".
std::string kernel_name(const NaryKey& key);

/// The program of (op, key): ew_nary.cuh, the shape struct and the op's functor; or, for key.table,
/// ew_table.cuh with the chain's steps before its table run and the run as two functors. One name
/// expression, kernel_name(key). Does not validate (the callers did).
CompileRequest make_request(const Op& op, const NaryKey& key);

/// Whether a chain has activation / math steps (is_function_step): compiled with contraction and
/// CUINLINE_EW_FMAD, and its one-input kernel has no two-tile body (kernel_templates/ew_nary.cuh).
bool has_function_steps(const Op& op) noexcept;

/// The in-process map's hash of (op, key) (equality is still checked field by field).
std::uint64_t hash_of(const Op& op, const NaryKey& key);

}  // namespace cuinline::ops::detail
