// conv2d_hmma.cuh — conv2d in f16 or bf16 (and f32 in precision tf32) on tensor cores, with the
// contract of conv2d_generic.cuh: any valid shape with groups = 1, input / weight / output each NCHW
// or channels-last, bias, residual, an fp32 epilogue E, one rounding to nearest even at the store.
// Every shape and layout is a compile-time constant; the design and the measurements behind it are
// in docs/conv2d.md ("f16 / bf16 on tensor cores").
//
// GEMM view: M = output pixels of one image (the flattened OH x OW plane; of the whole batch with
// kBatchTiles), N = output channels, K = (filter tap, input channel), channel innermost. Input
// channels are padded with zeros to kCiPad, so a k step of kBK channels lies in one tap and a pixel
// is bounds-checked once a step; up to 8 channels (kCiPad = 8) a k step of 16 is two taps. Products
// of two f16 / bf16 values are exact in fp32, so results differ from the general kernel's only in
// summation order.
//
// Why several main loops: the operands must reach the tensor cores as 16-byte runs of channels.
//   register gather: any layout, 16-bit loads into registers, then shared memory (mma.sync);
//   cp.async: channels-last input and weight, 16-byte aligned (kInAligned), copied straight to
//     shared memory; on sm_90a (kWgmma) wgmma reads them through matrix descriptors from wgmma's
//     swizzled K-major layout, so no warp re-reads fragments with ldmatrix (what limited mma.sync);
//     elsewhere the same tiling runs ldmatrix + mma.sync, so the launch does not depend on the arch;
//   kHalo (up to 8 channels) and kWindow (more): the input a tile reads is staged once and each
//     tap's A tile is read from it in place, instead of copying every pixel once a tap;
//   kPointwise (1 x 1, NCHW): A copied as the input lays it out, nothing staged;
//   float storage (TF32): the cp.async wgmma tiling with 4-byte elements, on a staged copy the
//     staging kernel rounded to TF32.
// Only the loop a variant needs is compiled: the host plans it and renders the flags.
// Epilogue: the accumulators go through shared memory in the output's contiguous order so that
// stores are coalesced vectors (kOutVec, kOutAligned); on the f16 / bf16 wgmma tiling the bias, the
// residual, E and the rounding happen in registers and the tile is 16-bit (half the shared bytes).
//
// Required members of S (all `static constexpr int` unless said):
//   typedef storage (ew_half, ew_bf16, or float: TF32, the cp.async wgmma tiling only);
//   kCin, kH, kW, kCout, kKH, kKW, kSH, kSW, kPH, kPW, kDH, kDW, kOH, kOW, kHasBias, kHasResidual,
//   kInNhwc, kWNhwc, kOutNhwc (0 or 1), kWarpsM, kWarpsN, kMT, kNT (even), kCiPad (8 for kCin <= 8,
//   else kCin rounded up to 16), kBK, kMinBlocks, kInAligned (input and weight pointers 16-byte
//   aligned, 0 or 1), kOutAligned (the output pointer aligned to 2 * the vector kOutVec would be
//   with it, 0 or 1), kAsyncDepth (cp.async buffers; 0: the default), kCopyL2 (1: cp.async.cg,
//   cached in L2 only; 0: .ca), kWgmma (0 or 1: the wgmma tiling above; needs the cp.async form,
//   4 x 1 or 8 x 1 warps, kBM a multiple of 64, kBN of 16, 32, 64 or 128, at least 3 buffers),
//   kHalo, kWindow (0 or 1: the wgmma tiling's forms, below), kWindowTiles (0 or 1: the window
//   form's blocks compute several tiles in turn, the next tile's first copies issued while this
//   one's outputs are stored), kPointwise (0 or 1: the pointwise form above; kAsyncDepth buffers),
//   kBatchTiles (0 or 1: the cp.async wgmma tiling's batch tiles, plan.cuh), kTma (0; 1: the
//   cp.async wgmma tiling's TMA form, its own kernel cuinline_conv2d_hmma_tma, a box of the input a
//   tile; 2: the same with im2col copies), kHaloWeightBatch (0 or
//   1: the halo form's weight gather in batches), kStoreBatch (0 or 1: store_tile_half's loads and
//   stores in batches). The split kernel (cuinline_conv2d_hmma_split below) also needs kSplitK = 1
//   (the f16 / bf16 cp.async wgmma tiling without its window and batch-tile forms). The kernel
//   trusts the two alignment flags.
// No standard or toolkit headers (ew_common.cuh has the half types and their conversions).
//
// Files (each included once, in this order; the sub-files need what the earlier ones declare):
//   conv2d_hmma/plan.cuh                 Plan<S>: tiling, shared-memory layout, launch figures
//   arch/mma_sm80.cuh, arch/copy_sm80.cuh  mma.sync, ldmatrix; shared addresses, cp.async
//   arch/wgmma_sm90.cuh                  wgmma, its fences, stmatrix (sm_90a only)
//   arch/wgmma_desc_sm90.cuh             wgmma matrix descriptors (sm_90a and the emulated tests)
//   conv2d_hmma/gather.cuh               accumulators; the register gather of a k step
//   conv2d_hmma/kstep.cuh                a k step from shared tiles; B tile copies; pixel origins
//   conv2d_hmma/mainloop_registers.cuh   the main loop through registers (any layout)
//   conv2d_hmma/mainloop_async.cuh       the cp.async main loop (mma.sync or wgmma; pointwise)
//   conv2d_hmma/mainloop_window.cuh      the window form
//   conv2d_hmma/mainloop_halo.cuh        the halo form
//   conv2d_hmma/epilogue.cuh             the store paths (bias, residual, E, rounding, vectors)
//   conv2d_hmma/split.cuh                the split form's partial tiles and their sum
//   conv2d_hmma/tiles.cuh                a block's tile or tiles: main loop, then epilogue
//   arch/tma_sm90.cuh                    tensor maps, TMA copies, mbarriers (not emulated)
//   conv2d_hmma/mainloop_tma.cuh         the TMA form: a producer warp and mbarriers (sm_90a)
// The arch/ wrappers are in namespace cuinline_arch, which the kernel's namespace uses; the
// host-emulated tests leave them out and supply their own in cuinline_conv2d_hmma_detail.

#ifndef CUINLINE_CONV2D_HMMA_CUH
#define CUINLINE_CONV2D_HMMA_CUH

// tests/test_conv2d_hmma_emulated.cpp compiles this file on the host with
// CUINLINE_CONV2D_HMMA_EMULATED defined: it supplies the half types, the mma, ldmatrix and the
// shared memory (a warp's lanes as threads), and checks the kernel's indexing against a reference.
#ifndef CUINLINE_CONV2D_HMMA_EMULATED
#include "ew_common.cuh"
#endif

// The wgmma main loop is compiled for sm_90a (and by the emulated test, which supplies wgmma).
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(CUINLINE_CONV2D_WGMMA_EMULATED)
#define CUINLINE_CONV2D_HMMA_WGMMA 1
#else
#define CUINLINE_CONV2D_HMMA_WGMMA 0
#endif

#include "conv2d_hmma/plan.cuh"

#ifndef CUINLINE_CONV2D_HMMA_EMULATED
#include "arch/mma_sm80.cuh"
#include "arch/copy_sm80.cuh"
#if CUINLINE_CONV2D_HMMA_WGMMA
#include "arch/wgmma_sm90.cuh"
#endif
#include "arch/tma_sm90.cuh"
#endif  // CUINLINE_CONV2D_HMMA_EMULATED
#if CUINLINE_CONV2D_HMMA_WGMMA
#include "arch/wgmma_desc_sm90.cuh"
#endif

namespace cuinline_arch {}
namespace cuinline_conv2d_hmma_detail {
using namespace cuinline_arch;
}  // namespace cuinline_conv2d_hmma_detail

#include "conv2d_hmma/gather.cuh"
#include "conv2d_hmma/kstep.cuh"
#include "conv2d_hmma/mainloop_registers.cuh"
#include "conv2d_hmma/mainloop_async.cuh"
#include "conv2d_hmma/mainloop_window.cuh"
#include "conv2d_hmma/mainloop_halo.cuh"
#include "conv2d_hmma/epilogue.cuh"
#include "conv2d_hmma/split.cuh"
#include "conv2d_hmma/tiles.cuh"
#ifndef CUINLINE_CONV2D_HMMA_EMULATED
#include "conv2d_hmma/mainloop_tma.cuh"
#endif

/// input, weight, output and residual in the layouts of S; bias [kCout] (ignored unless kHasBias);
/// residual of the output's shape and layout (ignored unless kHasResidual); every tensor of the
/// storage type. Grid: (kTilesX, ceil(kCout / kBN), N); block: kThreads; dynamic shared memory:
/// kSmemBytes. row_tiles is unused (the launch passes the same arguments to every conv2d kernel).
template <class S, class E>
__global__ void __launch_bounds__(cuinline_conv2d_hmma_detail::Plan<S>::kThreads,
                                  cuinline_conv2d_hmma_detail::Plan<S>::kMinBlocks)
    cuinline_conv2d_hmma(const typename S::storage* __restrict__ input,
                         const typename S::storage* __restrict__ weight,
                         const typename S::storage* __restrict__ bias,
                         typename S::storage* __restrict__ output, int row_tiles,
                         const typename S::storage* __restrict__ residual,
                         const cuinline_conv2d_chan chan) {
  using P = cuinline_conv2d_hmma_detail::Plan<S>;
  const E ep{chan};
  namespace d = cuinline_conv2d_hmma_detail;
#ifdef CUINLINE_CONV2D_HMMA_EMULATED
  unsigned char* smem = cuinline_emulated_smem();
#else
  extern __shared__ __align__(16) unsigned char smem_raw[];
  // The wgmma tiling's stages start at a multiple of 1024 bytes (the swizzle's period).
  unsigned char* smem = smem_raw + (P::kWgmma ? (1024u - (d::smem_address(smem_raw) & 1023u)) & 1023u : 0u);
#endif
  if constexpr (P::kHalo) {
    d::halo_tiles<S, E>(smem, input, weight, bias, output, blockIdx.y * P::kBN, row_tiles, ep);
  } else if constexpr (P::kWindowTiles) {
    d::window_tiles<S, E>(smem, input, weight, bias, output, row_tiles, ep);
  } else {
    // (row_tiles: the images, for batch tiles; else unused)
    d::block_tile<S, E>(smem, input, weight, bias, output, residual, row_tiles, ep);
  }
}

/// The split form (S::kSplitK; split-K: the reduction's k steps cut into `slices` slices): the
/// arguments of cuinline_conv2d_hmma (the images' slot carries the slices), then the workspace —
/// `partials`, tiles x slices fp32 tiles of kBM x kBN, and `counters`, one a tile, zero at the
/// launch (null, like partials, for one slice). Grid: (kTilesX, ceil(kCout / kBN), N x slices);
/// block z = image x slices + slice computes steps [slice kSteps / slices, (slice + 1) kSteps /
/// slices) of its tile, and the last block of a tile to arrive sums the slices' partials in slice
/// order (the same bits run to run) and runs the epilogue (conv2d_hmma/split.cuh). One slice: each
/// block computes its tile whole.
template <class S, class E>
__global__ void __launch_bounds__(cuinline_conv2d_hmma_detail::Plan<S>::kThreads,
                                  cuinline_conv2d_hmma_detail::Plan<S>::kMinBlocks)
    cuinline_conv2d_hmma_split(const typename S::storage* __restrict__ input,
                               const typename S::storage* __restrict__ weight,
                               const typename S::storage* __restrict__ bias,
                               typename S::storage* __restrict__ output, int slices,
                               const typename S::storage* __restrict__ residual,
                               const cuinline_conv2d_chan chan, float* __restrict__ partials,
                               unsigned* __restrict__ counters) {
  using P = cuinline_conv2d_hmma_detail::Plan<S>;
  static_assert(S::kSplitK == 1 && P::kHalfEpi && P::kAsync && !P::kWindow && !P::kHalo && !P::kBatchTiles &&
                    !P::kPointwise,
                "the split form: the f16 / bf16 cp.async wgmma tiling without its window and batch-tile forms");
  const E ep{chan};
  namespace d = cuinline_conv2d_hmma_detail;
#ifdef CUINLINE_CONV2D_HMMA_EMULATED
  unsigned char* smem = cuinline_emulated_smem();
#else
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024u - (d::smem_address(smem_raw) & 1023u)) & 1023u);
#endif
  d::block_tile<S, E, true>(smem, input, weight, bias, output, residual, 1, ep, d::SplitK{partials, counters, slices});
}

#ifndef CUINLINE_CONV2D_HMMA_EMULATED
/// The TMA form (S::kTma; conv2d_hmma/mainloop_tma.cuh): the arguments of cuinline_conv2d_hmma with
/// the input and the weight as tensor maps the launch encodes for the call — in_map the
/// channels-last input {kCin, kW, kH, N}, with a box of {kBK, kBoxCols, kBoxRows, 1} (kTma 1) or as
/// an im2col map of kBK channels a pixel, kBM pixels a copy, the convolution's strides as element
/// strides and its padding as the bounding box (kTmaIm2col); w_map the channels-last weight {kKH kKW
/// kCin, kCout} with a box of {kBK, kBN}; both 16-bit, the 128-byte swizzle, zeros outside the
/// tensor. Grid: (kTilesX, ceil(kCout / kBN), N); block: kThreads + 128 (the producer warpgroup);
/// dynamic shared memory: kSmemBytes. sm_90a only (elsewhere it traps; the planner takes it on sm_90
/// only).
template <class S, class E>
__global__ void __launch_bounds__(cuinline_conv2d_hmma_detail::Plan<S>::kThreads + 128,
                                  cuinline_conv2d_hmma_detail::Plan<S>::kTmaMinBlocks)
    cuinline_conv2d_hmma_tma(const __grid_constant__ cuinline_tensor_map in_map,
                             const __grid_constant__ cuinline_tensor_map w_map,
                             const typename S::storage* __restrict__ bias,
                             typename S::storage* __restrict__ output, int row_tiles,
                             const typename S::storage* __restrict__ residual,
                             const cuinline_conv2d_chan chan) {
  using P = cuinline_conv2d_hmma_detail::Plan<S>;
  static_assert(P::kTma, "the TMA form's kernel");
  (void)row_tiles;
#if CUINLINE_CONV2D_HMMA_WGMMA
  const E ep{chan};
  namespace d = cuinline_conv2d_hmma_detail;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024u - (d::smem_address(smem_raw) & 1023u)) & 1023u);
  d::tma_tile<S, E>(smem, &in_map, &w_map, bias, output, residual, ep);
#else
  (void)in_map, (void)w_map, (void)bias, (void)output, (void)residual, (void)chan;
  __trap();
#endif
}

/// The TMA form's split form (S::kTma and S::kSplitK): the arguments of cuinline_conv2d_hmma_tma
/// (the images' slot carries the slices), then the workspace of cuinline_conv2d_hmma_split, whose
/// grid, slices and reduction it keeps. One block a multiprocessor: the sum's loads in flight beside
/// the accumulators take more than 128 registers (an m64 tile's split spilled 60 bytes there).
template <class S, class E>
__global__ void __launch_bounds__(cuinline_conv2d_hmma_detail::Plan<S>::kThreads + 128, 1)
    cuinline_conv2d_hmma_tma_split(const __grid_constant__ cuinline_tensor_map in_map,
                                   const __grid_constant__ cuinline_tensor_map w_map,
                                   const typename S::storage* __restrict__ bias,
                                   typename S::storage* __restrict__ output, int slices,
                                   const typename S::storage* __restrict__ residual,
                                   const cuinline_conv2d_chan chan, float* __restrict__ partials,
                                   unsigned* __restrict__ counters) {
  using P = cuinline_conv2d_hmma_detail::Plan<S>;
  static_assert(P::kTma && S::kSplitK == 1, "the TMA form's split kernel");
#if CUINLINE_CONV2D_HMMA_WGMMA
  const E ep{chan};
  namespace d = cuinline_conv2d_hmma_detail;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024u - (d::smem_address(smem_raw) & 1023u)) & 1023u);
  d::tma_tile<S, E, true>(smem, &in_map, &w_map, bias, output, residual, ep,
                          d::SplitK{partials, counters, slices});
#else
  (void)in_map, (void)w_map, (void)bias, (void)output, (void)slices, (void)residual, (void)chan,
      (void)partials, (void)counters;
  __trap();
#endif
}
#endif  // CUINLINE_CONV2D_HMMA_EMULATED

#endif  // CUINLINE_CONV2D_HMMA_CUH
