#pragma once
// The generic conv2d kernels (kernel_templates/conv2d_generic_rt.cuh): which variants they can run,
// the shape parameters and epilogue program a variant becomes, and the launch.
#include <cuda.h>

#include <cstdint>
#include <cuinline/arch.hpp>
#include <cuinline/conv2d.hpp>
#include <string>

#include "ops/elementwise/generic.hpp"

namespace cuinline::ops::conv2d_impl {

inline constexpr int kGenericConvThreads = 128;  // CUINLINE_CONV2D_RT_THREADS
inline constexpr int kGenericConvCoTile = 8;     // CUINLINE_CONV2D_RT_CO_TILE
inline constexpr int kGenericConvDwRows = 4;     // CUINLINE_CONV2D_RT_DW_ROWS
inline constexpr int kGenericConvPixels = 4;     // CUINLINE_CONV2D_RT_PIXELS
/// Mode 0 becomes mode 4 (kGenericConvPixels pixels a thread) where the launch then still has at
/// least this many blocks a multiprocessor (plan_generic_conv): a small conv keeps one pixel a
/// thread and its blocks.
inline constexpr int kGenericConvPixelsMinBlocksPerSm = 8;
/// The f32 implicit GEMM form (mode 5, conv2d_generic_rt_gemm.cuh): its block and tile, and the
/// output channels a group from which it takes a scalar-read input (where its tiles fill a wave).
inline constexpr int kGenericConvGemmThreads = 128;  // CUINLINE_CONV2D_RT_GEMM_THREADS
inline constexpr int kGenericConvGemmTileM = 128;    // CUINLINE_CONV2D_RT_GEMM_BM
inline constexpr int kGenericConvGemmTileN = 64;     // CUINLINE_CONV2D_RT_GEMM_BN
inline constexpr int kGenericConvGemmMinChannels = 32;
inline constexpr int kGenericConvMmaThreads = 128;  // CUINLINE_CONV2D_RT_MMA_THREADS
inline constexpr int kGenericConvMmaTile = 64;      // CUINLINE_CONV2D_RT_MMA_BM and _BN
inline constexpr int kGenericConvMmaTileK = 32;     // its kBK: input channels of one tap a K tile
/// The vector form's wide tiling (mode 6; CUINLINE_CONV2D_RT_MMAW_BM and _BN, TileWide): 128 pixels
/// x 128 channels a block of kGenericConvMmaThreads, its four K tiles in flight in dynamic shared
/// memory. Taken where a group has at least kGenericConvWideMinChannels output channels (a
/// 128-channel tile of fewer would mostly compute zeros), the reduction at least
/// kGenericConvWideMinKTiles K tiles, and its tiles fill the multiprocessors, or do with their K
/// tiles split into at most kGenericConvMaxSlices slices of at least kGenericConvWideMinSliceTiles.
/// NVIDIA H200, ResNet-50, UNet and 3 x 3 layers on 7²-12² planes, f16 channels-last, batches 1, 8
/// and 32 (bench/conv2d_networks.py --generic-only, CUINLINE_CONV2D_GENERIC_WIDE=0 / 1 / unset,
/// one process each), against the 64 x 64 form: unsplit, UNet's 3 x 3 layers of 64-1024 channels
/// at batches 8 and 32 0.59-0.81x its time, ResNet-50's at batch 32 0.76-0.93x; the 1 x 1 layers
/// of 2-8 K tiles 1.2-1.7x (hence kGenericConvWideMinKTiles); split, slices of 18-58 K tiles
/// 0.60-0.92x (UNet's layers of 128-1024 channels at batch 1, 512-channel 3 x 3 on 7²-12² at
/// batches 8 and 32); slices of 8-16 mostly lost, 1.05-1.48x (ResNet-50's 1 x 1 and 128-channel 3 x 3
/// layers at batch 8; two won, 0.85x and 0.94x): hence kGenericConvWideMinSliceTiles.
inline constexpr int kGenericConvWideTile = 128;
inline constexpr unsigned kGenericConvWideSharedBytes =
    4 * (128 + 128) * (32 + 8) * 2;  // TileWide::kSharedBytes
inline constexpr int kGenericConvWideMinChannels = 128;
inline constexpr int kGenericConvWideMinKTiles = 16;
inline constexpr int kGenericConvWideMinSliceTiles = 18;
/// Split K of the tensor-core kernel (plan_generic_conv): only reductions of at least
/// kGenericConvMinSplitKTiles K tiles; at least kGenericConvMinSliceTiles K tiles a slice, at most
/// kGenericConvMaxSlices slices. The floor, against 96 (NVIDIA H200, ResNet-50 f16 channels-last,
/// batches 1 and 8, bench/conv2d_networks.py --generic, CUINLINE_CONV2D_GENERIC_SPLIT_K=64): the
/// 256-channel 3 x 3 layers on 14² (72 K tiles) 0.041 -> 0.018 ms at batch 1, the 2048 -> 512 1 x 1
/// on 7² 0.037 -> 0.017 (batch 1) and 0.026 (batch 8); no other layer changed by more than 3 %.
inline constexpr int kGenericConvMinSplitKTiles = 64;
inline constexpr int kGenericConvMinSliceTiles = 8;
inline constexpr int kGenericConvMaxSlices = 16;
/// The gathered form reads its weight from a K-major copy (rows of K rounded up to the K tile, zero
/// past K; packed by a small kernel into the launch's workspace) where the launch has at least this
/// many tiles a multiprocessor: each block otherwise gathers its whole weight tile element by
/// element. (The stem of ResNet-50, f16 channels-last, NVIDIA H200: 0.287 -> 0.239 ms at batch 32,
/// 0.0758 -> 0.063 at batch 8; at batch 1, 196 tiles, the pack's launch would cost about what it
/// saves.)
inline constexpr int kGenericConvPackMinTilesPerSm = 8;
/// Output channels a group below which the tensor-core kernel's 64-channel tiles would mostly
/// compute zeros (depthwise, heads of a few channels): those take the direct or depthwise kernel.
inline constexpr int kGenericConvMmaMinChannels = 16;

/// cuinline_conv2d_rt_params (conv2d_generic_rt.cuh): same layout.
struct GenericConvParams {
  std::int64_t in_n = 0, in_c = 0, in_y = 0, in_x = 0;
  std::int64_t out_n = 0, out_c = 0, out_y = 0, out_x = 0;
  std::int64_t w_o = 0, w_i = 0, w_y = 0, w_x = 0;
  std::int32_t cin = 0, h = 0, w = 0, cout = 0, kh = 0, kw = 0, sh = 0, sw = 0, ph = 0, pw = 0, dh = 0, dw = 0,
               oh = 0, ow = 0;
  std::int32_t cin_g = 0, cout_g = 0, co_tiles = 0;
  std::int32_t has_bias = 0, has_residual = 0;
  std::int32_t vec_in = 0;
  std::int32_t mode = 0;   ///< 0: a pixel's tile of channels a thread; 1: depthwise, channels fastest;
                           ///< 2: tensor cores, vector form; 3: tensor cores, gathered form
                           ///< (conv2d_generic_rt_mma.cuh); 4: mode 0 on kGenericConvPixels pixels
                           ///< of a row a thread (plan_generic_conv); 5: f32 implicit GEMM
                           ///< (conv2d_generic_rt_gemm.cuh); 6: mode 2 on the wide tiling
                           ///< (kGenericConvWideTile)
  std::int32_t vec_w = 0;  ///< with vec_in: the channels-last weight read 16 bytes a load too
  std::int32_t images = 1;  ///< modes 2, 3, 5 and 6: the launch's images (one M dimension over all of them)
  /// mode 1: adjacent output channels a thread: 2 for a 16-bit input with one output channel a
  /// group and an even Cout (an input pair read as one word), else 1
  std::int32_t dw_channels = 1;
  /// modes 2 and 3: the K tiles split into k_slices parts (the grid's z), 1: not split
  std::int32_t k_slices = 1;
  std::int32_t reserved = 0;
  std::uint64_t partials = 0;  ///< k_slices > 1: the slices' fp32 tiles (device pointer)
  std::uint64_t counters = 0;  ///< k_slices > 1: a counter a tile, zeroed before the launch
};
static_assert(sizeof(GenericConvParams) == 12 * 8 + 26 * 4 + 2 * 8, "must match cuinline_conv2d_rt_params");

/// The launch of a variant on the generic kernel for a batch of n images.
struct GenericConvGrid {
  std::int64_t blocks_x = 0;
  int blocks_y = 0;
  int threads = 0;
  unsigned shared_bytes = 0;  ///< dynamic shared memory a block (the wide form's)
};

/// Whether a (valid) variant can run on the generic conv2d kernel: the kernels are built in, its
/// epilogue is a chain (not an expression) of at most kGenericMaxSteps lowered steps, and its grid
/// fits (at most 2^31 - 1 blocks an image).
bool generic_conv_applies(const Conv2dVariant& v);

/// Whether the variant takes the tensor-core generic kernel on a device of the arch: f16 / bf16,
/// sm_80 or newer, at least kGenericConvMmaMinChannels output channels a group. Its vector form
/// (mode 2) where the input is channels-last with whole 16-byte channel runs a group (and, at the
/// launch, 16-byte aligned), else the gathered form (mode 3).
bool generic_conv_mma_applies(const Conv2dVariant& v, const Arch& arch);

/// The kernel's symbol for a work split (GenericConvParams::mode): "cuinline_conv2d_rt_f32",
/// "cuinline_conv2d_rt_dw_bf16", "cuinline_conv2d_rt_mma_f16", "cuinline_conv2d_rt_mmag_bf16",
/// "cuinline_conv2d_rt_px_f64", "cuinline_conv2d_rt_mmaw_f16", ...
std::string generic_conv_symbol(DType dtype, int mode = 0);
/// The gathered form's weight-packing kernel: "cuinline_conv2d_rt_wpack_f16" / "_bf16".
std::string generic_conv_pack_symbol(DType dtype);

/// The shape, layouts and work split of a variant (mma: the tensor-core kernel, where
/// generic_conv_mma_applies; else the direct or depthwise kernel), for one image: the tensor-core
/// kernel's launch multiplies its pixel tiles (blocks_x) by the batch and sets `images`.
GenericConvParams generic_conv_params(const Conv2dVariant& v, bool mma = false);
GenericConvGrid generic_conv_grid(const Conv2dVariant& v, bool mma = false);

/// The epilogue as the kernel's program: lower_chain at the opmath dtype (fp32 for f32, f16 and
/// bf16; fp64 for f64), the specialized conv's rendered functor's steps and constants. Throws
/// InvalidArgument for an expression or more than kGenericMaxSteps steps.
ops::detail::GenericProgram generic_conv_program(const Op& epilogue, DType dtype);

/// What launch_generic_conv launches for n images on a device of the arch with `multiprocessors`
/// SMs, given the call's input and weight pointers (their alignment picks the tensor-core kernel's
/// form and its weight loads): the work split (params.mode), its parameters and grid. The
/// tensor-core kernel's vector form takes its wide tiling where the launch has tiles enough
/// (multiprocessors 0: never), and splits its K tiles (params.k_slices) where its tiles would fill
/// less than half of the SMs (multiprocessors 0: never); the launch then needs
/// split_workspace_bytes of workspace. Throws InvalidArgument where the grid cannot be launched.
struct GenericConvLaunch {
  GenericConvParams params;
  GenericConvGrid grid;   ///< (blocks_x: for the tensor-core and GEMM kernels, their tiles of all n images)
  unsigned grid_z = 1;    ///< n for the direct and depthwise kernels, k_slices for the tensor-core ones
                          ///< (1 for the GEMM kernel)
  std::uint64_t partial_bytes = 0;  ///< k_slices > 1: the partial tiles' bytes (the counters follow)
  std::uint64_t counter_bytes = 0;
  /// The gathered form's packed weight (pack_kpad > 0): params.vec_w is 1 and params.w_o is
  /// pack_kpad, the packed rows' length; weight_w_o the weight's own channel stride (the pack
  /// kernel's). pack_bytes of workspace after the split-K part (16-byte aligned).
  std::int64_t pack_kpad = 0;
  std::int64_t weight_w_o = 0;
  std::uint64_t pack_bytes = 0;
};
GenericConvLaunch plan_generic_conv(const Conv2dVariant& v, std::int64_t n, const Arch& arch, const void* input,
                                    const void* weight, int multiprocessors = 0);

/// Runs the variant on the generic kernel (loaded once per process) for n images at the given
/// device pointers on device `device` (its arch picks the tensor-core kernel where it applies);
/// chan: the epilogue's channel operands (kMaxConv2dChannelOperands, null past those it reads).
/// Counts a generic launch.
void launch_generic_conv(const Conv2dVariant& v, std::int64_t n, const void* input, const void* weight,
                         const void* bias, void* output, const void* residual, const void* const* chan,
                         CUstream stream, int device);

}  // namespace cuinline::ops::conv2d_impl
