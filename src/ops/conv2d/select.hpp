#pragma once
// Which conv2d kernel computes a variant: the one place where the forms' predicates are tested, in
// one order. conv2d_tiling, kernel_name, make_request and make_stage_request are this selection's
// parts; the launch dispatches on its algorithm.
//
// The target comes first: a variant is selected for v.target (its shared memory a block, its
// instructions: sm75 has no cp.async, mma.sync for f16 / bf16, TF32; wgmma only on sm90), so the
// target must be set before anything is selected or planned — conv2d_variant_for_arch (warm, tests)
// and conv2d_variant_for_device (a call, before its map entry is made) set it; a variant made
// without either is sm90's. (The pointers' alignment flags, part of the variant as called and so of
// its map key, are set before the target, by the call's plan_call: set_hmma_alignment evaluates
// the sm90 plan's forms and makes the flags hold for the other targets' plans too.)
#include <cuinline/conv2d.hpp>
#include <optional>
#include <string>

#include "ops/conv2d/tiling.hpp"

namespace cuinline::ops::conv2d_impl {

/// The kernel forms, one a decision of the selector (sub-forms that the planner picks from a form's
/// tile figures are its tiling's flags: the window form and batch tiles of hmma_wgmma and
/// hmma_staged, row_fast / channel_fast of generic).
enum class Conv2dAlgo {
  hmma_halo,        ///< f16 / bf16, the wgmma tiling's halo form (up to 8 input channels; never staged)
  hmma_wgmma,       ///< f16 / bf16 in the cp.async form (channels-last, Cin % 8 == 0, aligned) on wgmma
  hmma_staged,      ///< f16 / bf16: a staging copy into channels-last, then the conv of that copy
  hmma_mma,         ///< f16 / bf16 on the mma.sync tilings as the tensors are (register gather; off sm90)
  pointwise,        ///< 1 x 1 stride-1 on an NCHW input: the pointwise GEMM (f16, bf16, f32 in tf32)
  tf32_wgmma,       ///< f32 in tf32 on the wgmma kernel (always staged: channels-last TF32 copies)
  fp32_transposed,  ///< f32 with a channels-last tensor: the NCHW kernel of the shape between transposing
                    ///< copies
  generic,          ///< the general direct kernel (conv2d_generic.cuh; depthwise row_fast / channel_fast)
  fp32_mma,         ///< f32 in tf32 / tf32x3 on mma.sync (conv2d_mma.cuh)
  fp32_winograd,    ///< f32 3 x 3 stride 1 with 8 input channels: Winograd (conv2d_winograd.cuh)
  fp32_direct,      ///< f32 on the FMA direct kernel (conv2d.cuh)
};
const char* to_string(Conv2dAlgo algo) noexcept;

/// The name expression of the f16 / bf16 / TF32 tensor-core kernel (conv2d_hmma.cuh).
inline constexpr const char* kHmmaKernel =
    "cuinline_conv2d_hmma<cuinline_conv2d_shape, cuinline_conv2d_epilogue>";
/// Its split form's (HmmaTiling::split_k > 0): the kernel with the split-K workspace arguments.
inline constexpr const char* kHmmaSplitKernel =
    "cuinline_conv2d_hmma_split<cuinline_conv2d_shape, cuinline_conv2d_epilogue>";
/// Its TMA form's (HmmaTiling::tma()): the kernel that takes the input and weight as tensor maps.
inline constexpr const char* kHmmaTmaKernel =
    "cuinline_conv2d_hmma_tma<cuinline_conv2d_shape, cuinline_conv2d_epilogue>";
/// The TMA form's split form's.
inline constexpr const char* kHmmaTmaSplitKernel =
    "cuinline_conv2d_hmma_tma_split<cuinline_conv2d_shape, cuinline_conv2d_epilogue>";
/// The kernel of a conv2d_hmma.cuh tiling.
inline const char* hmma_kernel_name(const HmmaTiling& t) {
  if (t.split_k > 0) return t.tma() ? kHmmaTmaSplitKernel : kHmmaSplitKernel;
  return t.tma() ? kHmmaTmaKernel : kHmmaKernel;
}

/// A variant's kernel: its algorithm, tiling, compile request (the conv's module), the staging or
/// transposing copy's request where the algorithm has one, and the kernel's name expression in
/// `request`. For fp32_transposed, `kernel_algo` is the algorithm of the NCHW kernel between the
/// copies (else the same as `algo`).
struct Conv2dSelection {
  Conv2dAlgo algo = Conv2dAlgo::fp32_direct;
  Conv2dAlgo kernel_algo = Conv2dAlgo::fp32_direct;
  Conv2dTiling tiling;
  CompileRequest request;
  std::optional<CompileRequest> stage_request;
  std::string kernel_name;
};

/// The selection of a variant (validated; for v.target: see above). Throws InvalidArgument for an
/// invalid variant, or one whose form cannot hold its tile.
Conv2dSelection select_conv2d(const Conv2dVariant& v);
/// The algorithm alone: the selector's decision, without planning the tiling or rendering a source
/// (the predicates are not validated: a valid variant's algorithm).
Conv2dAlgo conv2d_algo(const Conv2dVariant& v);

/// The parts of select_conv2d(v), each for the algorithm `algo` = conv2d_algo(v).
Conv2dTiling conv2d_tiling_of(Conv2dAlgo algo, const Conv2dVariant& v);
CompileRequest make_request_of(Conv2dAlgo algo, const Conv2dVariant& v);
std::optional<CompileRequest> make_stage_request_of(Conv2dAlgo algo);
std::string kernel_name_of(Conv2dAlgo algo, const Conv2dVariant& v);
/// The split-K form's tiling (split_k > 0: its most slices; docs/conv2d.md, "Split-K") of a variant
/// whose algorithm `algo` has one (hmma_wgmma, and hmma_staged on the wgmma tiling) and whose
/// reduction the process's CUINLINE_CONV2D_SPLIT_K splits; nullopt for every other variant. The
/// plain tiling, request and kernel (the parts above) are the same either way.
std::optional<HmmaTiling> split_tiling_of(Conv2dAlgo algo, const Conv2dVariant& v);

}  // namespace cuinline::ops::conv2d_impl
