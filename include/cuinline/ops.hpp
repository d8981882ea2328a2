#pragma once
/// @file ops.hpp
/// Ready-made elementwise ops (relu, leaky_relu, div_leaky_relu), fused chains of elementwise
/// steps and jiterator-style expressions, compiled at run time into one vectorized kernel per
/// variant and cached (memory + disk).
///
/// Results are bit-identical to PyTorch's CUDA kernels (eager mode): every step computes in the
/// "opmath" type (float for f16/bf16/f32, double for f64) and rounds once to the tensor's dtype,
/// as the PyTorch op of the same name does; a chain rounds between steps exactly as a sequence of
/// eager PyTorch ops does. Division by a scalar is multiplication by the reciprocal computed on the
/// host in double and rounded to opmath (PyTorch 2.11's div_true_kernel_cuda does the same).
///
/// One kernel template serves every op: the one-input ops (relu, ..., apply(op, in, out)) are the
/// one-input case of apply over tensor lists. Contiguous tensors take a vectorized path (16-byte
/// accesses whenever every whole tensor shares its misalignment: a few scalar elements first, then
/// aligned vectors). Non-contiguous (strided) tensors are supported through a slower path: 64-bit
/// indexing, one element per thread, an index decomposition per element (after merging dimensions
/// that are contiguous in every tensor, so a view that is dense after all takes the fast path).

#include <cuda.h>

#include <cstdint>
#include <cuinline/compiler.hpp>
#include <initializer_list>
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
  // Steps with a tensor operand (N-ary ops): `operand` is the index of the input tensor (1..7),
  // written "add(in1)" etc. Each rounds once to the dtype, like the PyTorch op on two tensors.
  add_tensor,  ///< x + in[k]
  sub_tensor,  ///< x - in[k]
  mul_tensor,  ///< x * in[k]
  div_tensor,  ///< x / in[k] (true division in opmath, as torch.div of two tensors)
  // Selects (no arithmetic, so bit-exact, NaN payloads included): `cond` is the condition input
  // (1..7), true where nonzero in its dtype — NaN is nonzero (true), -0.0 is zero (false), as
  // tensor.bool() in PyTorch. An N-ary call has one dtype, so the condition is a tensor of that
  // dtype: `where(in1, in2)` is torch.where(in1 != 0, x, in2) (PyTorch's where takes a bool tensor).
  where_tensor,  ///< x = in[cond] != 0 ? x : in[operand], written "where(in1, in2)"
  where_scalar,  ///< x = in[cond] != 0 ? x : a, written "where(in1, 0.5)"; see Step::where_scalar
  // Activations and math functions, each the formula of PyTorch's CUDA kernel of that name (eager,
  // in opmath, rounded once to the dtype), with its constants converted as PyTorch converts them.
  // Elementwise kernels of a chain with these steps are compiled with FMA contraction on, as
  // PyTorch's kernels are (sigmoid's 1 + exp(-x) is one FFMA there), while the arithmetic steps
  // keep explicit roundings; so a chain matches the PyTorch ops bit for bit (docs/ops-families.md).
  sigmoid,      ///< 1 / (1 + exp(-x))  (torch.sigmoid)
  tanh,         ///< tanh(x)  (torch.tanh)
  silu,         ///< x / (1 + exp(-x))  (F.silu; "swish" is read as silu)
  gelu,         ///< x * 0.5 * (1 + erf(x / sqrt(2)))  (F.gelu)
  gelu_tanh,    ///< 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))  (F.gelu(approximate="tanh"))
  mish,         ///< x * tanh(log1p(exp(x)))  (F.mish)
  softplus,     ///< x * a > b ? x : log1p(exp(x * a)) / a; a = beta (1), b = threshold (20)  (F.softplus)
  elu,          ///< x > 0 ? x : expm1(x) * a; a = alpha (1)  (F.elu)
  selu,         ///< scale * (x > 0 ? x : alpha * expm1(x)) with PyTorch's constants  (F.selu)
  celu,         ///< x > 0 ? x : expm1(x / a) * a; a = alpha (1), not 0  (F.celu)
  hardswish,    ///< x * min(max(x + 3, 0), 6) / 6  (F.hardswish; NaN propagates)
  hardsigmoid,  ///< min(max(x + 3, 0), 6) / 6  (F.hardsigmoid; NaN propagates)
  exp,          ///< exp(x)  (torch.exp)
  log,          ///< log(x)  (torch.log)
  sqrt,         ///< sqrt(x), correctly rounded  (torch.sqrt)
  abs,          ///< |x| (the sign bit cleared)  (torch.abs)
  neg,          ///< -x (the sign bit flipped)  (torch.neg)
  // The rest of torch.nn's elementwise activations. softsign and tanhshrink are
  // composites in PyTorch (F.softsign = x / (x.abs() + 1), F.tanhshrink = x - x.tanh()): their
  // intermediate is rounded to the dtype, as between those ops. The scalars of hardshrink,
  // softshrink and threshold are converted to the dtype first, as ATen's kernels take them
  // (Scalar::to<scalar_t>), and compared / subtracted in opmath.
  softsign,     ///< x / (|x| + 1)  (F.softsign)
  tanhshrink,   ///< x - tanh(x)  (F.tanhshrink)
  logsigmoid,   ///< min(x, 0) - log1p(exp(-|x|))  (F.logsigmoid)
  hardshrink,   ///< -a <= x <= a ? 0 : x; a = lambd (0.5)  (F.hardshrink)
  softshrink,   ///< NaN stays; x > a ? x - a : x < -a ? x + a : 0; a = lambd (0.5), >= 0  (F.softshrink)
  threshold,    ///< x <= a ? b : x; a = threshold, b = value  (F.threshold)
};

/// Whether `kind` is one of the activation / math steps (sigmoid ... threshold) above.
bool is_function_step(StepKind kind) noexcept;

/// "add", "sub", ..., "div_leaky_relu".
const char* to_string(StepKind kind) noexcept;

struct Step {
  StepKind kind = StepKind::relu;
  double a = 0;  ///< scalar, divisor, slope (leaky_relu), lower bound (clamp)
  double b = 0;  ///< upper bound (clamp), slope (div_leaky_relu)
  int operand = 0;  ///< the input tensor of a *_tensor step (1..7); where_tensor: the other input
  int cond = 0;     ///< where_tensor / where_scalar: the condition input (1..7); 0 for other steps

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
  /// x + in[k], x - in[k], x * in[k], x / in[k] for input tensor k of an N-ary call.
  static Step add_input(int k) { return {StepKind::add_tensor, 0, 0, k}; }
  static Step sub_input(int k) { return {StepKind::sub_tensor, 0, 0, k}; }
  static Step mul_input(int k) { return {StepKind::mul_tensor, 0, 0, k}; }
  static Step div_input(int k) { return {StepKind::div_tensor, 0, 0, k}; }
  /// x = in[cond] != 0 ? x : in[other] (torch.where(in[cond] != 0, x, in[other])). cond and other
  /// are inputs 1..7 (input 0 is the chain's start: to select the original input, pass it again as
  /// another input, e.g. inputs {x, mask, x} and `relu|where(in1, in2)`).
  static Step where_input(int cond, int other) { return {StepKind::where_tensor, 0, 0, other, cond}; }
  /// x = in[cond] != 0 ? x : s. The scalar is converted to the dtype as PyTorch converts the Python
  /// scalar of torch.where(c != 0, x, s) for a tensor x of that dtype: double → float (round to
  /// nearest) → the dtype (round to nearest even; f64 keeps the double), i.e. c10::Half(float(s)).
  /// So where(in1, 0.1) on f16 selects exactly the bits of torch.tensor(0.1, dtype=torch.float16);
  /// a NaN scalar becomes the dtype's quiet NaN. A step after it sees a value already in the dtype.
  static Step where_scalar(int cond, double s) { return {StepKind::where_scalar, s, 0, 0, cond}; }
  /// An activation or math step without arguments (sigmoid, tanh, silu, gelu, gelu_tanh, mish, selu,
  /// hardswish, hardsigmoid, exp, log, sqrt, abs, neg), e.g. Step::function(StepKind::gelu), or by
  /// name: Step::gelu().
  static Step function(StepKind kind) { return {kind, 0, 0}; }
  static Step sigmoid() { return function(StepKind::sigmoid); }
  static Step tanh() { return function(StepKind::tanh); }
  static Step silu() { return function(StepKind::silu); }
  static Step gelu() { return function(StepKind::gelu); }
  static Step gelu_tanh() { return function(StepKind::gelu_tanh); }
  static Step mish() { return function(StepKind::mish); }
  static Step selu() { return function(StepKind::selu); }
  static Step hardswish() { return function(StepKind::hardswish); }
  static Step hardsigmoid() { return function(StepKind::hardsigmoid); }
  static Step exp() { return function(StepKind::exp); }
  static Step log() { return function(StepKind::log); }
  static Step sqrt() { return function(StepKind::sqrt); }
  static Step abs() { return function(StepKind::abs); }
  static Step neg() { return function(StepKind::neg); }
  static Step softsign() { return function(StepKind::softsign); }
  static Step tanhshrink() { return function(StepKind::tanhshrink); }
  static Step logsigmoid() { return function(StepKind::logsigmoid); }
  static Step hardshrink(double lambd = 0.5) { return {StepKind::hardshrink, lambd, 0}; }
  static Step softshrink(double lambd = 0.5) { return {StepKind::softshrink, lambd, 0}; }
  /// F.threshold(x, threshold, value): x <= threshold ? value : x.
  static Step threshold(double threshold, double value) { return {StepKind::threshold, threshold, value}; }
  /// F.rrelu in evaluation mode (training=False) is leaky_relu with the slope (lower + upper) / 2,
  /// as ATen computes it; the training mode's random slopes are not an elementwise kernel's.
  static Step rrelu(double lower = 1.0 / 8, double upper = 1.0 / 3) { return leaky_relu((lower + upper) / 2); }
  /// F.hardtanh(min_val, max_val) and F.relu6 are clamps, as ATen computes them.
  static Step hardtanh(double lo = -1, double hi = 1) { return clamp(lo, hi); }
  static Step relu6() { return clamp(0, 6); }
  static Step softplus(double beta = 1, double threshold = 20) { return {StepKind::softplus, beta, threshold}; }
  static Step elu(double alpha = 1) { return {StepKind::elu, alpha, 0}; }
  static Step celu(double alpha = 1) { return {StepKind::celu, alpha, 0}; }

  /// Equal when kind, operands and the bits of the scalars are equal (so NaN == NaN, -0.0 != 0.0).
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
///
/// N-ary ops (ops::apply over several inputs / outputs):
///  - a chain starts from input 0 and may use input k through add_input(k) ... div_input(k)
///    ("add(in1)" as text) and select with where_input / where_scalar ("where(in1, in2)",
///    "where(in1, 0.5)"); it has one output;
///  - an expression names its inputs: `input_names` (default: "x" for one input, "a", "b", ... for
///    several), e.g. SwiGLU `expr(a / (1.0f + expf(-a)) * b)`; `more_outputs` holds the expressions of
///    outputs 1..3, which may use the earlier outputs as y0, y1, y2 — their values rounded to the
///    dtype, as if read back from the tensor (so `y = a + b; z = relu(y)` matches eager PyTorch).
struct Op {
  std::vector<Step> steps;
  std::string expression;  ///< non-empty: an expression op (then `steps` must be empty)
  std::vector<NamedConstant> constants;
  std::vector<std::string> input_names;   ///< expression ops: the inputs' names (see above)
  std::vector<std::string> more_outputs;  ///< expression ops: outputs 1..3

  static Op relu() { return Op{{Step::relu()}, {}, {}, {}, {}}; }
  static Op leaky_relu(double slope) { return Op{{Step::leaky_relu(slope)}, {}, {}, {}, {}}; }
  static Op div_leaky_relu(double divisor, double slope) {
    return Op{{Step::div_leaky_relu(divisor, slope)}, {}, {}, {}, {}};
  }
  static Op chain(std::vector<Step> steps) { return Op{std::move(steps), {}, {}, {}, {}}; }
  static Op expr(std::string expression, std::vector<NamedConstant> constants = {}) {
    return Op{{}, std::move(expression), std::move(constants), {}, {}};
  }
  /// Expressions over named inputs, one per output (1-4), e.g.
  /// `Op::exprs({"a", "b"}, {"a / (1.0f + expf(-a)) * b"})` (SwiGLU). Empty names: "a", "b", ...
  static Op exprs(std::vector<std::string> input_names, std::vector<std::string> outputs,
                  std::vector<NamedConstant> constants = {}) {
    Op op{{}, outputs.empty() ? std::string() : outputs[0], std::move(constants), std::move(input_names), {}};
    if (!outputs.empty()) op.more_outputs.assign(outputs.begin() + 1, outputs.end());
    return op;
  }
  /// Inputs and outputs the op needs at least: a chain, 1 + its largest operand (where: the
  /// condition and the other input); an expression,
  /// its named inputs (1 when unnamed), 1 + more_outputs.
  int min_inputs() const noexcept;
  int outputs() const noexcept { return expression.empty() ? 1 : 1 + static_cast<int>(more_outputs.size()); }

  /// "relu", "leaky_relu(0.01)", "div(2)|leaky_relu(0.01)", "expr(x > 0 ? x : x * s; s=0.01)".
  std::string describe() const;
  /// Throws InvalidArgument for an empty op, both steps and expression, or a bad constant name. A
  /// divisor of zero is allowed, as in PyTorch (x / 0 gives ±inf, 0 / 0 NaN).
  void validate() const;

  friend bool operator==(const Op& p, const Op& q) noexcept;
  friend bool operator!=(const Op& p, const Op& q) noexcept { return !(p == q); }
};

/// Parses an op as written on a command line (for `cuinline warm` and tools):
///   "relu", "leaky_relu(0.01)" ("leaky_relu": 0.01), "div_leaky_relu(2,0.01)", "add(1)", "sub(1)", "mul(0.5)",
///   "div(2)", "clamp(0,6)", tensor operands "add(in1)", selects "where(in1, in2)" and
///   "where(in1, 0.5)", the activations and functions "sigmoid", "tanh", "silu" (or "swish"),
///   "gelu", "gelu_tanh", "mish", "softplus" / "softplus(beta, threshold)", "elu" / "elu(alpha)",
///   "selu", "celu" / "celu(alpha)", "hardswish", "hardsigmoid", "hardtanh" / "hardtanh(min, max)"
///   and "relu6" (both read as clamp, as PyTorch computes them), "exp", "log", "sqrt", "abs", "neg",
///   "softsign", "tanhshrink", "logsigmoid", "hardshrink" / "hardshrink(lambd)", "softshrink" /
///   "softshrink(lambd)", "threshold(threshold, value)", "rrelu" / "rrelu(lower, upper)" (evaluation
///   mode: read as leaky_relu((lower + upper) / 2)), steps joined by '|' ("div(2)|leaky_relu(0.01)", "add(in1)|gelu"), or an expression
///   "expr(x > 0 ? x : x * s; s=0.01, t=2)". Numbers are parsed as C doubles (as Python does).
/// Throws InvalidArgument naming the bad part.
Op parse_op(std::string_view text);

enum class IndexWidth : std::uint8_t { i32, i64 };
enum class Layout : std::uint8_t {
  contiguous,  ///< flat, vectorized: scalar head, vector_width-element body, scalar tail
  strided,     ///< any strides (vector_width 1, 64-bit indexing)
};

/// One compiled kernel of the one-input ops: what `cuinline warm` writes and ops::relu / apply(op,
/// in, out) look up at run time — the N-ary kernel (ew_nary / ew_nary_strided) with one input, read
/// whole. The scalar head and the vectors per thread are run-time arguments, so one variant serves
/// every alignment and size. Equal variants give equal CompileRequests, and so one cache entry; a
/// one-input call and an N-ary call with the same single input map to the same request. The op must
/// be a one-input, one-output op (validate() throws otherwise: use make_request(op, inputs, outputs)).
struct Variant {
  Op op;
  DType dtype = DType::f32;
  int vector_width = 1;  ///< elements per access: 1, 2, 4, 8 with vector_width * dtype size <= 16
  IndexWidth index = IndexWidth::i32;
  Layout layout = Layout::contiguous;

  /// e.g. "relu<f32,v4,i32>", "leaky_relu(0.01)<bf16,v8,i64>", "relu<f32,strided>".
  std::string name() const;
  /// Throws InvalidArgument for a bad op (or one over several tensors), dtype or vector width.
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
/// The name expression of the variant's kernel in make_request(variant), e.g.
/// "ew_nary<cuinline_ewn_shape, cuinline_ewn_op, float, 4, unsigned int>" or
/// "ew_nary_strided<cuinline_ewn_shape, cuinline_ewn_op, float>".
std::string kernel_name(const Variant& variant);

/// Which variants to enumerate for `cuinline warm`.
struct VariantSet {
  bool index32 = true;   ///< tensors of up to 2^31 - 1 elements
  bool index64 = false;  ///< larger tensors
  bool strided = false;  ///< non-contiguous tensors
};
/// Every variant a one-input call of `op` on `dtype` tensors can map to at run time, within `which`:
/// each vector width × the chosen index widths (contiguous), plus the strided variant. (Head and
/// reps are run-time arguments: nothing to enumerate.)
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

/// A non-owning list of tensors (an initializer list, a std::vector or an array of TensorView).
class TensorList {
 public:
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"  // a TensorList is a parameter: the list outlives it
#endif
  TensorList(std::initializer_list<TensorView> list) noexcept : data_(list.begin()), size_(list.size()) {}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  TensorList(const std::vector<TensorView>& list) noexcept : data_(list.data()), size_(list.size()) {}
  TensorList(const TensorView* data, std::size_t size) noexcept : data_(data), size_(size) {}
  const TensorView* begin() const noexcept { return data_; }
  const TensorView* end() const noexcept { return data_ + size_; }
  const TensorView& operator[](std::size_t i) const noexcept { return data_[i]; }
  std::size_t size() const noexcept { return size_; }

 private:
  const TensorView* data_;
  std::size_t size_;
};

inline constexpr int kMaxInputs = 8;
inline constexpr int kMaxOutputs = 4;

/// outputs = op(inputs), in one kernel, over 1-8 input tensors and 1-4 outputs (jiterator's and
/// CuPy ElementwiseKernel's model):
///  - broadcasting exactly as PyTorch: inputs are aligned at their last dimension; each dimension
///    is equal to the output's or 1 (a missing leading dimension counts as 1; a 0-dim tensor or a
///    one-element tensor is a scalar). Every output has the broadcast shape. Shapes that do not
///    broadcast → InvalidArgument naming both, before anything is compiled;
///  - one dtype for every tensor (f32, f16, bf16 or f64), arithmetic in opmath (float; double for
///    f64); mixed dtypes are rejected (PyTorch would promote: convert first);
///  - an output may be exactly one of the inputs (the same pointer and strides: in place); any
///    other overlap of an output with an input or another output → InvalidArgument;
///  - the kernel is specialized on the number of inputs and outputs, each input's broadcast pattern
///    (the whole tensor, a scalar, a row repeated along leading dimensions — a bias —, a column
///    repeated along trailing ones), the dtype and the vector width; contiguous outputs take a
///    vectorized path (16-byte accesses when the pointers allow), anything else a strided path.
/// Asynchronous on `stream`; capturable into a CUDA graph; tensors are checked as for the
/// one-input ops (docs/graphs.md). 0 elements: nothing is launched.
void apply(const Op& op, TensorList inputs, TensorList outputs, CUstream stream = nullptr);

/// The CompileRequest (and, through kernel_name_for, the kernel) an N-ary call with these tensors
/// would use — planned exactly as apply plans it (the pointers' alignment picks the vector width,
/// the shapes the patterns), without touching a GPU: for `cuinline warm` and tests. Throws
/// InvalidArgument as apply does.
CompileRequest make_request(const Op& op, TensorList inputs, TensorList outputs);

/// Counters of the ops' in-process kernel map (in front of the KernelCache).
struct OpsStats {
  std::uint64_t launches = 0;
  std::uint64_t map_hits = 0;       ///< calls served by the in-process map (no hashing of source)
  std::uint64_t cache_lookups = 0;  ///< calls that went to KernelCache::get
};
/// The one-input ops (relu, leaky_relu, div_leaky_relu, apply(op, in, out) of a one-input op).
OpsStats stats();
/// The N-ary ops' map (apply over TensorLists).
OpsStats nary_stats();
/// Empties the in-process maps, of the one-input and the N-ary calls (the next call of each variant
/// goes to KernelCache::get again).
void clear_kernel_map();

}  // namespace cuinline::ops
