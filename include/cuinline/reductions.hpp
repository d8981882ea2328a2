#pragma once
/// @file reductions.hpp
/// Row reductions over the last dimension, compiled at run time per (op, dtype, row-length class,
/// vector width) and cached like the elementwise ops (docs/reductions.md):
///
///   softmax(x) = exp(x - max) / sum(exp(x - max))          torch.softmax(x, -1)
///   log_softmax(x) = (x - max) - log(sum(exp(x - max)))    torch.log_softmax(x, -1)
///   rms_norm(x, w) = x * rsqrt(mean(x^2) + eps) * w        F.rms_norm(x, (n,), w, eps)
///   add_rms_norm: residual = x + residual (rounded to the dtype), out = rms_norm(residual, w)
///                                                          vLLM's fused_add_rms_norm
///   layer_norm(x, w, b) = (x - mean) * rsqrt(var + eps) * w + b (biased variance)
///                                                          F.layer_norm(x, (n,), w, b, eps)
///
/// Every tensor has one dtype (f32, f16, bf16: accumulated in float; f64: in double), results are
/// rounded once to it. x is any shape (a 0-dim tensor is one row of one element); its rows (all
/// dimensions but the last) must be evenly spaced (one row stride, any value) and its last
/// dimension contiguous; the output (and the residual) has x's shape, its own row stride, a
/// contiguous last dimension and rows that do not overlap. out may be x itself (in place); no other
/// overlap of a written tensor with any other is allowed. The weight and bias are 1-D of the row
/// length, contiguous; a view whose data is null means absent (w = 1, b = 0). eps must be finite
/// and >= 0 (0 is allowed). Special values behave as in PyTorch: NaN propagates through its row, a
/// row holding +inf or all -inf softmaxes to NaN, a row holding ±inf layer_norms to NaN and
/// rms_norms to ±0 at its finite elements and NaN at its infinite ones (x * rsqrt(mean(x^2) + eps),
/// docs/reductions.md). Empty tensors are a no-op. Bad input throws
/// InvalidArgument before anything is compiled or launched. The calls can be captured into a CUDA
/// graph.
///
/// Each op also takes a RowFusion: an elementwise chain applied to every input element as it is
/// loaded (the prologue: softmax(x * 0.125) is prologue "mul(0.125)"), and one applied to every
/// output element before it is stored (the epilogue: rms_norm(x, w) * gate is epilogue "mul(in1)"
/// with the gate as its input 1), fused into the one kernel (docs/reductions.md).

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <cuinline/compiler.hpp>
#include <cuinline/ops.hpp>
#include <cuinline/tensor.hpp>
#include <string>
#include <vector>

namespace cuinline::ops {

void softmax(const TensorView& in, const TensorView& out, CUstream stream = nullptr);
void log_softmax(const TensorView& in, const TensorView& out, CUstream stream = nullptr);
void rms_norm(const TensorView& in, const TensorView& weight, const TensorView& out, double eps,
              CUstream stream = nullptr);
/// residual = in + residual, then out = rms_norm(residual, weight); out may be `in`.
void add_rms_norm(const TensorView& in, const TensorView& residual, const TensorView& weight, const TensorView& out,
                  double eps, CUstream stream = nullptr);
void layer_norm(const TensorView& in, const TensorView& weight, const TensorView& bias, const TensorView& out,
                double eps, CUstream stream = nullptr);

/// Elementwise chains fused into a reduction, written and rounded as the elementwise family's
/// (ops.hpp, parse_op): every step computes in the accumulation type and rounds to the dtype, as
/// the eager PyTorch op before / after the reduction does. An empty Op is no chain.
///  - prologue: a one-input chain (no tensor operands) on each element of the input as it is read,
///    before add_rms_norm's add (the residual written back is prologue(x) + residual);
///  - epilogue: a chain on each output element (rounded to the dtype) before it is stored; its
///    tensor operands in1..in7 are `epilogue_inputs[0..6]`, each of the output's shape and dtype,
///    with its own row stride and a contiguous last dimension, overlapping no written tensor.
///    Their number must be the chain's (the largest k of an ink it names).
/// Expressions (expr(...)) are not taken; neither is a change of dtype.
struct RowFusion {
  Op prologue;
  Op epilogue;
  std::vector<TensorView> epilogue_inputs;
};

void softmax(const TensorView& in, const TensorView& out, const RowFusion& fusion, CUstream stream = nullptr);
void log_softmax(const TensorView& in, const TensorView& out, const RowFusion& fusion, CUstream stream = nullptr);
void rms_norm(const TensorView& in, const TensorView& weight, const TensorView& out, double eps,
              const RowFusion& fusion, CUstream stream = nullptr);
void add_rms_norm(const TensorView& in, const TensorView& residual, const TensorView& weight, const TensorView& out,
                  double eps, const RowFusion& fusion, CUstream stream = nullptr);
void layer_norm(const TensorView& in, const TensorView& weight, const TensorView& bias, const TensorView& out,
                double eps, const RowFusion& fusion, CUstream stream = nullptr);

enum class RowOp : std::uint8_t { softmax, log_softmax, rms_norm, add_rms_norm, layer_norm };
/// "softmax", "log_softmax", "rms_norm", "add_rms_norm", "layer_norm".
const char* to_string(RowOp op) noexcept;

/// How a row is reduced: lanes of a warp per row (1 to 32, as few as cover the row; 128 / lanes rows
/// a block), a block per row (both with the row in registers), long rows split into chunks of a
/// block each — two kernels, split_stats writing each chunk's statistics to a workspace, split_write
/// merging a row's and writing the chunk —, the same chunks held in the registers of a thread block
/// cluster a row (sm_90 and later: one kernel, the row read once), or, where no workspace can be
/// had, a block looping over a row of any length.
enum class RowForm : std::uint8_t { warp, block, looped, split_stats, split_write, cluster };

/// What selects one compiled reduction kernel (the row length, row count, strides, eps and pointers
/// are run-time arguments).
struct RowVariant {
  RowOp op = RowOp::softmax;
  DType dtype = DType::f32;
  RowForm form = RowForm::warp;
  int vector_width = 1;  ///< elements per access: 1, or 16 bytes' worth
  int per_thread = 1;    ///< warp / block: elements a thread holds (a power of two, a multiple of vector_width)
  int threads = 32;      ///< threads per row: 1-32 (warp), 128-1024 (block), 1024 (looped); a chunk: 256
                         ///< (split); a block of the cluster form: 256 a chunk it holds (256-1024)
  int cluster = 0;       ///< the cluster form: blocks a row (its cluster, 2-8); 0 for the other forms
  Op prologue;           ///< RowFusion's chains (empty: none)
  Op epilogue;
  int epilogue_inputs = 0;  ///< the epilogue's extra tensors (in1..in7)
  /// The warp form: rows a group of lanes takes in turn, all their loads issued before the first
  /// row's reductions (1, 2, 4 or 8; 1 for the other forms). The same bits as one row a group.
  int rows_per_group = 1;

  /// "softmax<f32,warp,v4,e16>" (a whole warp a row), "softmax<bf16,warp,v8,e8,t16>" (fewer lanes),
  /// "layer_norm<bf16,block,v8,e16,t1024>", "rms_norm<f64,looped,v2>",
  /// "softmax<f32,split_stats,v4,e32,t256>", "rms_norm<bf16,cluster,v8,e64,t512,c8>"; with chains
  /// "softmax<f32,warp,v4,e16,pro=mul(0.125)>", "rms_norm<bf16,block,v8,e8,t512,epi=mul(in1)>";
  /// rows a group past one: "rms_norm<bf16,warp,v8,e8,t16,r4>".
  std::string name() const;
  /// Throws InvalidArgument for a combination the kernels do not have.
  void validate() const;
  /// The longest row this variant handles (looped, split: any).
  std::int64_t max_row() const noexcept;
  /// The lowest arch number (Arch::number()) whose GPUs launch this variant's kernel: 90 for the
  /// cluster form (thread block clusters; before, its calls run RowPlan::split), 0 for the others.
  int min_arch() const noexcept;
  friend bool operator==(const RowVariant& a, const RowVariant& b) noexcept {
    return a.op == b.op && a.dtype == b.dtype && a.form == b.form && a.vector_width == b.vector_width &&
           a.per_thread == b.per_thread && a.threads == b.threads && a.cluster == b.cluster &&
           a.prologue == b.prologue && a.epilogue == b.epilogue && a.epilogue_inputs == b.epilogue_inputs &&
           a.rows_per_group == b.rows_per_group;
  }
  friend bool operator!=(const RowVariant& a, const RowVariant& b) noexcept { return !(a == b); }
};

/// The program of a variant (kernel_templates/reductions.cuh, one name expression).
CompileRequest make_request(const RowVariant& variant);
std::string kernel_name(const RowVariant& variant);

/// How a call would run, without running it (exposed for tests and tools). Throws InvalidArgument
/// for bad input exactly as the ops do. weight / bias / residual: data null where absent (the
/// residual is add_rms_norm's only).
struct RowPlan {
  RowVariant variant;
  std::int64_t rows = 0;  ///< 0 (or n == 0): nothing to launch
  std::int64_t n = 0;     ///< the row length
  std::int64_t in_stride = 0, out_stride = 0, residual_stride = 0;  ///< between rows, in elements
  std::uint32_t grid = 0, block = 0;
  /// Dynamic shared memory a block, in bytes: 64 KiB for an f32 block form of 1024 threads of 32
  /// elements that parks half of them there (unchained softmax, log_softmax, rms_norm), else 0. A
  /// launch on a GPU where two such blocks do not fit a multiprocessor (sm_75, sm_86, sm_89,
  /// sm_120) takes none: that kernel keeps the row in registers.
  std::uint32_t shared_bytes = 0;
  /// The split form's workspace (two accumulation-type values a chunk), 0 for the others but the
  /// cluster form, whose split form takes it. Where it cannot be had the call runs the looped form
  /// instead.
  std::size_t workspace_bytes = 0;
  /// The split form's first kernel (split_stats) where `variant` is the cluster form: what the call
  /// runs on a GPU without thread block clusters (before sm_90); for the other forms `variant`.
  RowVariant split;
  /// The variant the call runs where the split form's workspace cannot be had (out of memory, a
  /// device without memory pools): the looped form; for the other forms the same as `variant`.
  RowVariant fallback;
};
RowPlan plan_rows(RowOp op, const TensorView& in, const TensorView& out, const TensorView& weight = {},
                  const TensorView& bias = {}, const TensorView& residual = {}, double eps = 0);
RowPlan plan_rows(RowOp op, const TensorView& in, const TensorView& out, const TensorView& weight,
                  const TensorView& bias, const TensorView& residual, double eps, const RowFusion& fusion);

/// Counters of the reductions' in-process kernel map.
OpsStats reduction_stats();
void clear_reduction_map();

}  // namespace cuinline::ops
