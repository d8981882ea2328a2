#pragma once
/// @file ops.hpp
/// Ready-made elementwise ops (relu, leaky_relu, div_leaky_relu), fused chains of elementwise
/// steps and jiterator-style expressions, compiled at run time into one vectorized kernel per
/// variant and cached (memory + disk).
///
/// Results are bit-identical to PyTorch's CUDA kernels (eager mode): every step computes in the
/// "opmath" type (float for f16/bf16/f32, double for f64) and rounds once to the tensor's dtype,
/// as the PyTorch op of the same name does; a chain rounds between steps exactly as a sequence of
/// eager PyTorch ops does. Division by a scalar is multiplication by the reciprocal computed in
/// opmath on the host (PyTorch's div_true_kernel_cuda does the same).
///
/// Non-contiguous (strided) tensors are supported through a slower path: 64-bit indexing, one
/// element per thread, an index decomposition per element (after merging dimensions that are
/// contiguous in both tensors, so a view that is dense after all takes the fast path).

#include <cuda.h>

#include <cstdint>
#include <cuinline/compiler.hpp>
#include <cuinline/tensor.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cuinline::ops {

/// One elementwise step. The scalar arguments are kept as given (double) and converted the way
/// PyTorch converts them when the variant is rendered.
enum class StepKind : std::uint8_t {
  add,             ///< x + a
  sub,             ///< x - a
  mul,             ///< x * a
  div,             ///< x / a, computed as x * (1 / a) with 1 / a rounded to opmath (PyTorch's way)
  relu,            ///< NaN stays NaN (the input's bits), else max(x, 0)
  leaky_relu,      ///< x > 0 ? x : x * a
  clamp,           ///< NaN stays NaN, else min(max(x, a), b)
  div_leaky_relu,  ///< leaky_relu(x / a, b): two steps, rounded between them like two PyTorch ops
};

/// "add", "sub", ..., "div_leaky_relu".
const char* to_string(StepKind kind) noexcept;

struct Step {
  StepKind kind = StepKind::relu;
  double a = 0;  ///< scalar, divisor, slope (leaky_relu), lower bound (clamp)
  double b = 0;  ///< upper bound (clamp), slope (div_leaky_relu)

  static Step add(double s) { return {StepKind::add, s, 0}; }
  static Step sub(double s) { return {StepKind::sub, s, 0}; }
  static Step mul(double s) { return {StepKind::mul, s, 0}; }
  static Step div(double s) { return {StepKind::div, s, 0}; }
  static Step relu() { return {StepKind::relu, 0, 0}; }
  static Step leaky_relu(double slope) { return {StepKind::leaky_relu, slope, 0}; }
  static Step clamp(double lo, double hi) { return {StepKind::clamp, lo, hi}; }
  static Step div_leaky_relu(double divisor, double slope) {
    return {StepKind::div_leaky_relu, divisor, slope};
  }

  /// Equal when kind and the bits of the used scalars are equal (so NaN == NaN, -0.0 != 0.0).
  friend bool operator==(const Step& x, const Step& y) noexcept;
  friend bool operator!=(const Step& x, const Step& y) noexcept { return !(x == y); }
};

/// A named scalar constant of an expression, baked into the source bit-exactly.
struct NamedConstant {
  std::string name;  ///< a C identifier other than `x`, not starting with "ew_" or "cuinline"
  double value = 0;
  friend bool operator==(const NamedConstant& p, const NamedConstant& q) noexcept;
  friend bool operator!=(const NamedConstant& p, const NamedConstant& q) noexcept { return !(p == q); }
};

/// What one elementwise kernel computes: either a chain of steps (applied in order), or a
/// jiterator-style expression of `x` (the input converted to opmath) and named constants, e.g.
/// `"x > 0 ? x : x * s"` with {"s", 0.01}; the expression is evaluated in opmath and rounded once.
struct Op {
  std::vector<Step> steps;
  std::string expression;  ///< non-empty: an expression op (then `steps` must be empty)
  std::vector<NamedConstant> constants;

  static Op relu() { return Op{{Step::relu()}, {}, {}}; }
  static Op leaky_relu(double slope) { return Op{{Step::leaky_relu(slope)}, {}, {}}; }
  static Op div_leaky_relu(double divisor, double slope) {
    return Op{{Step::div_leaky_relu(divisor, slope)}, {}, {}};
  }
  static Op chain(std::vector<Step> steps) { return Op{std::move(steps), {}, {}}; }
  static Op expr(std::string expression, std::vector<NamedConstant> constants = {}) {
    return Op{{}, std::move(expression), std::move(constants)};
  }

  /// "relu", "leaky_relu(0.01)", "div(2)|leaky_relu(0.01)", "expr(x > 0 ? x : x * s; s=0.01)".
  std::string describe() const;
  /// Throws InvalidArgument for an empty op, both steps and expression, or a bad constant name. A
  /// divisor of zero is allowed, as in PyTorch (x / 0 gives ±inf, 0 / 0 NaN).
  void validate() const;

  friend bool operator==(const Op& p, const Op& q) noexcept;
  friend bool operator!=(const Op& p, const Op& q) noexcept { return !(p == q); }
};

/// Parses an op as written on a command line (for `cuinline warm` and tools):
///   "relu", "leaky_relu(0.01)", "div_leaky_relu(2,0.01)", "add(1)", "sub(1)", "mul(0.5)",
///   "div(2)", "clamp(0,6)", steps joined by '|' ("div(2)|leaky_relu(0.01)"), or an expression
///   "expr(x > 0 ? x : x * s; s=0.01, t=2)". Numbers are parsed as C doubles (as Python does).
/// Throws InvalidArgument naming the bad part.
Op parse_op(std::string_view text);

enum class IndexWidth : std::uint8_t { i32, i64 };
enum class Layout : std::uint8_t {
  contiguous,  ///< flat, vectorized: scalar prologue, vector_width-element body, scalar epilogue
  strided,     ///< any strides (vector_width 1, 64-bit indexing)
};

/// One compiled kernel: what `cuinline warm` writes and the library looks up at run time. Equal
/// variants give equal CompileRequests, and so one cache entry.
struct Variant {
  Op op;
  DType dtype = DType::f32;
  int vector_width = 1;  ///< elements per access: 1, 2, 4, 8 with vector_width * dtype size <= 16
  IndexWidth index = IndexWidth::i32;
  Layout layout = Layout::contiguous;

  /// e.g. "relu<f32,v4,i32>", "leaky_relu(0.01)<bf16,v8,i64>", "relu<f32,strided>".
  std::string name() const;
  /// Throws InvalidArgument for a bad op, dtype or vector width.
  void validate() const;

  friend bool operator==(const Variant& p, const Variant& q) noexcept;
  friend bool operator!=(const Variant& p, const Variant& q) noexcept { return !(p == q); }
};

/// The vector widths the run-time choice can pick for `dtype` (1 up to 16 bytes), ascending.
std::vector<int> vector_widths(DType dtype);

/// The CompileRequest of a variant (source rendered from the embedded templates, or from
/// CUINLINE_TEMPLATE_DIR when set; headers; options; the kernel's name expression). The request
/// has exactly one name expression: kernel_name(variant).
CompileRequest make_request(const Variant& variant);
/// The name expression of the variant's kernel in make_request(variant).
std::string kernel_name(const Variant& variant);

/// Which variants to enumerate for `cuinline warm`.
struct VariantSet {
  bool index32 = true;   ///< tensors of up to 2^31 - 1 elements
  bool index64 = false;  ///< larger tensors
  bool strided = false;  ///< non-contiguous tensors
};
/// Every variant a request of `op` on `dtype` tensors can map to at run time, within `which`:
/// each vector width × the chosen index widths (contiguous), plus the strided variant.
std::vector<Variant> enumerate_variants(const Op& op, DType dtype, VariantSet which = {});

/// y = relu(x), exactly torch.relu. `out` may be `in` (in place); otherwise they must not
/// overlap. Shapes and dtypes must match. 0 elements: nothing is launched. Asynchronous on `stream`
/// (nullptr: the legacy default stream of the current device).
void relu(const TensorView& in, const TensorView& out, CUstream stream = nullptr);
/// y = F.leaky_relu(x, slope).
void leaky_relu(const TensorView& in, const TensorView& out, double slope, CUstream stream = nullptr);
/// y = F.leaky_relu(x / divisor, slope), in one pass, bit-identical to the two PyTorch ops.
void div_leaky_relu(const TensorView& in, const TensorView& out, double divisor, double slope,
                    CUstream stream = nullptr);
/// y = op(x) for any op (chain or expression), in one kernel.
void apply(const Op& op, const TensorView& in, const TensorView& out, CUstream stream = nullptr);

/// How a call would run, without running it (exposed for tests and tools). Throws
/// InvalidArgument for bad input, exactly as the ops do.
struct LaunchPlan {
  Variant variant;
  std::int64_t numel = 0;    ///< 0: nothing to launch
  std::int64_t head = 0;     ///< scalar elements before the first aligned vector (contiguous)
  std::uint32_t grid = 0;    ///< blocks
  std::uint32_t block = 0;   ///< threads per block
  const void* in = nullptr;  ///< after merging dimensions
  void* out = nullptr;
  int ndim = 0;  ///< strided: merged dimensions
  std::int64_t shape[TensorView::kMaxDims] = {};
  std::int64_t in_strides[TensorView::kMaxDims] = {};
  std::int64_t out_strides[TensorView::kMaxDims] = {};
};
LaunchPlan plan(const Op& op, const TensorView& in, const TensorView& out);

/// Counters of the ops' in-process kernel map (in front of the KernelCache).
struct OpsStats {
  std::uint64_t launches = 0;
  std::uint64_t map_hits = 0;       ///< calls served by the in-process map (no hashing of source)
  std::uint64_t cache_lookups = 0;  ///< calls that went to KernelCache::get
};
OpsStats stats();
/// Empties the in-process map (the next call of each variant goes to KernelCache::get again).
void clear_kernel_map();

}  // namespace cuinline::ops
