#pragma once
// Specialization of the elementwise templates: scalar constants → exact source literals, ops →
// functors, variants → CompileRequests.
#include <cstdint>
#include <optional>
#include <vector>
#include <cuinline/ops.hpp>
#include <cuinline/tensor.hpp>
#include <string>
#include <string_view>

namespace cuinline::detail {

/// The C++ type a dtype is stored as in the templates: "float", "ew_half", "ew_bf16", "double".
const char* storage_type(DType dtype);

/// A literal of the opmath type of `dtype` (float for f32/f16/bf16, double for f64) holding
/// `value` converted to that type (round to nearest, as PyTorch's Scalar::to<opmath_t>() does).
/// Finite values are hex float literals ("0x1.47ae14p-7f", "-0x0p+0f"), so the constant in the
/// source round-trips bit-exactly; ±Inf and NaN are written by their bits
/// ("__int_as_float(0x7f800000)", "__longlong_as_double(0x7ff8000000000000ll)").
std::string opmath_literal(double value, DType dtype);

/// The bits of a scalar converted to `dtype` storage as PyTorch converts a Python scalar for a
/// tensor of that dtype (torch.where's `other`): double → float (round to nearest) → f16 / bf16
/// (round to nearest even; NaN → the quiet NaN 0x7e00 with its sign / 0x7fc0); f64 keeps the double.
std::uint64_t scalar_storage_bits(double value, DType dtype);
/// That storage value as a source expression of type storage_type(dtype), bit-exact:
/// "__int_as_float(0x3dcccccd)", "ew_half{0x2e66}", "__longlong_as_double(0x...ll)".
std::string storage_literal(double value, DType dtype);

/// The functions a chain's steps lower to: the ew_ops.cuh functions both the specialized kernel's
/// rendered functor and the generic kernel (kernel_templates/ew_generic.cuh, EWG_*: same order)
/// call. div is a product with the reciprocal, div_leaky_relu two steps, selu / celu are elu.
enum class LoweredFn : int {
  add, sub, mul, relu, leaky_relu, clamp, add_tensor, sub_tensor, mul_tensor, div_tensor, where_tensor,
  where_scalar, sigmoid, tanh, silu, gelu, gelu_tanh, mish, softplus, elu, hardswish, hardsigmoid, exp, log,
  sqrt, abs, neg, softsign, tanhshrink, logsigmoid, hardshrink, softshrink, threshold,
};
inline constexpr int kLoweredFnCount = static_cast<int>(LoweredFn::threshold) + 1;

/// One lowered step: its function, tensor operand and condition inputs, up to three constants (as
/// doubles; each becomes an opmath value: opmath_literal in source, opmath_value in a generic
/// program) and a storage-typed constant (storage_literal / scalar_storage_bits).
struct LoweredStep {
  LoweredFn fn = LoweredFn::relu;
  int operand = 0;
  int cond = 0;
  double c[3] = {0, 0, 0};
  bool has_storage = false;
  double storage = 0;
  std::optional<double> divisor;  ///< a division's divisor (the source names it in a comment)
};

/// A chain's steps lowered, with every constant as PyTorch's kernels hold it. The one definition of
/// what a chain computes: the rendered functor and the generic kernel's program are both made from it.
std::vector<LoweredStep> lower_chain(const ops::Op& op, DType dtype);

/// The storage bits of a scalar add, sub or mul step's constant where the step can be the storage
/// type's own instruction (ew_ops.cuh's ew_add_exact / ew_sub_exact / ew_mul_exact: one rounding of
/// the exact result) with the bits of PyTorch's float computation, else nothing. f16 and bf16 only,
/// the constant finite and held by the storage type exactly. The float result of x + c and x - c
/// then rounds to the same storage value as the exact one (float's 24 bits are at least 2p + 2 of
/// the storage type's p: double rounding is innocuous), and x * c is exact in float (2p bits) unless
/// it falls among float's subnormals with bits under 2^-149, which bf16 (float's exponent range)
/// reaches: so a bf16 product's constant has no bit under 2^-16 (x has none under 2^-133).
std::optional<std::uint16_t> exact_16bit_constant(const LoweredStep& step, DType dtype);

/// Whether every step of the chain is a scalar add, sub or mul (div by a scalar included: a product
/// with its reciprocal): one float operation and a rounding a step, or one 16-bit instruction where
/// exact_16bit_constant holds, and no register kept past the step. What the row reductions' light
/// prologue is (reductions.cuh's rd_light); read on every planned call, so it allocates nothing.
/// False for an empty chain and an expression.
bool chain_is_scalar_arithmetic(const ops::Op& op) noexcept;

/// `value` converted to the opmath type of `dtype` (float for f32/f16/bf16), as a double: the
/// value opmath_literal(value, dtype) writes.
double opmath_value(double value, DType dtype);

/// The functor `struct <name> { __device__ __forceinline__ S operator()(S x) const { ... } };` of an
/// op on storage type S = storage_type(dtype). Needs "ew_ops.cuh" included before it. With
/// DType::f32 it is an epilogue for kernels on float values (e.g. conv2d): see ew_ops.cuh.
/// Throws InvalidArgument for an invalid op.
std::string render_op_functor(const ops::Op& op, DType dtype, std::string_view name);

/// The functor of an N-ary op: `struct <name> { __device__ void operator()(const S (&xs)[inputs],
/// S (&ys)[outputs]) const; }`. Expression inputs are named by op.input_names (default "x" for one
/// input, "a", "b", ... for several); output k > 0 may use y0..y(k-1), the earlier outputs as stored.
/// A chain starts from xs[0]. Needs "ew_ops.cuh".
std::string render_nary_functor(const ops::Op& op, DType dtype, int inputs, std::string_view name);

}  // namespace cuinline::detail
