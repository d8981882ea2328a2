#pragma once
// The f16 / bf16 / TF32 tensor-core kernel's host parts shared by its planners (hmma_tiling.cpp:
// the block tilings) and its rendering (conv2d_hmma.cpp: sources, requests, alignment, staging).
// Internal to those two files; each definition's comment says why it is so.
#include <cuinline/conv2d.hpp>

#include "conv2d_hmma/plan.cuh"
#include "ops/conv2d/tiling.hpp"

namespace cuinline::ops::conv2d_impl::hmma_parts {

namespace hmma_plan = cuinline_conv2d_hmma_detail;

/// Not the wgmma tilings: the target is not sm90, or CUINLINE_CONV2D_WGMMA is 0.
bool wgmma_off(const Conv2dVariant& v);
/// CUINLINE_CONV2D_HMMA_TILE's block tiling "wm,wn,mt,nt,bk,min_blocks" where set (f).
bool tile_override(int (&f)[6]);
/// An output plane of at most 128 pixels, more than 5 k steps, more than one filter tap.
bool long_small_plane(const Conv2dVariant& v, int steps);
/// Whether the cp.async wgmma tiling of v takes batch tiles (f32 in TF32 on a long small plane).
bool batch_tiles_apply(const Conv2dVariant& v, int steps);
/// The padded input channels of the kernel's K axis.
int ci_pad_of(const Conv2dVariant& v);
/// Bytes of one element of the kernel's storage type.
int elem_bytes(const Conv2dVariant& v);
/// CUINLINE_CONV2D_HMMA_PIPE: cp.async buffers (0: the plan's) and cp.async.cg (1).
struct Pipe {
  int depth = 0, l2 = 0;
  bool set = false;
};
Pipe pipe_override();
/// cp.async.cg (1) or .ca (0) for the conv's tiles.
int copy_l2(const Conv2dVariant& v);
/// Whether the halo form would copy an NCHW input as laid out.
bool halo_nchw_copy(const Conv2dVariant& v);
/// conv2d_hmma/plan.cuh's shape and figures of the tiling t of v (what the kernel's Plan<S> compiles).
hmma_plan::PlanShape hmma_plan_shape_of(const Conv2dVariant& v, const HmmaTiling& t);
hmma_plan::PlanFigures hmma_figures_of(const Conv2dVariant& v, const HmmaTiling& t);
int k_steps(const Conv2dVariant& v, const HmmaTiling& t);
unsigned shared_bytes(const Conv2dVariant& v, const HmmaTiling& t);
/// t's shared memory and grid from its plan.
void set_hmma_plan_figures(const Conv2dVariant& v, HmmaTiling& t);
/// conv2d_hmma/plan.cuh's kOutVec for v with its output aligned, on a wgmma tiling or not.
int out_vec_of(const Conv2dVariant& v, bool wgmma);
/// The halo form's tiling of v into t, where it applies (false where not, or its window does not fit).
bool halo_tiling(const Conv2dVariant& v, HmmaTiling& t);
/// The wgmma tiling of v in the cp.async form (hmma_tiling.cpp says how it is chosen); `window`: the
/// window form may be chosen; `few_tiles`: the split form's tiling.
HmmaTiling wgmma_tiling(const Conv2dVariant& v, bool window = true, bool few_tiles = false);

}  // namespace cuinline::ops::conv2d_impl::hmma_parts
