#pragma once
// conv2d internals shared by the FMA path (conv2d.cpp) and the tensor-core path (conv2d_mma.cpp).
#include <cstdint>
#include <cuinline/conv2d.hpp>
#include <string>

#include "ops/conv2d/tiling.hpp"
#include "ops/conv2d/tuning.hpp"

namespace cuinline::ops::conv2d_impl {

inline int ceil_div(std::int64_t a, std::int64_t b) {
  return static_cast<int>((a + b - 1) / b);
}
inline int pow2_at_least(int x) {
  int p = 1;
  while (p < x) p *= 2;
  return p;
}

/// `struct cuinline_conv2d_epilogue { cuinline_conv2d_chan chan; float operator()(float x, int co) }`
/// for an epilogue (its per-channel operands read as `dtype` storage values from chan.p[k], at most
/// out_channels of them).
std::string render_conv2d_epilogue(const Op& epilogue, DType dtype, int out_channels);
/// "  static constexpr int name = value;\n", a member of a rendered parameter struct.
std::string render_constant(const char* name, std::int64_t value);
/// The members every conv2d parameter struct starts with: kCin ... kOW, kHasBias.
std::string render_shape_constants(const Conv2dVariant& v);
/// static_asserts that the template's Plan (`plan`: its C++ name) agrees with the host's launch
/// figures (the grid's shared bytes and tiles, the block's threads): a mismatch is a compile error,
/// never a wrong launch.
std::string render_plan_checks(const std::string& plan, const Conv2dGrid& grid, int threads);
/// Whether an f32 NCHW variant that the fp32 direct kernel would compute needs more shared memory a
/// block than its target has (a very tall, dilated filter on a wide image): the general direct
/// kernel computes it instead.
bool f32_direct_too_large(const Conv2dVariant& v);
/// The defines a target needs before the fp32 kernels' headers: CUINLINE_CONV2D_SYNC_COPIES for
/// sm75 (no cp.async), else nothing.
std::string render_target_defines(const Conv2dVariant& v);
/// The tiling of a tensor-core variant (precision tf32 or tf32x3); the variant is validated.
MmaTiling mma_tiling(const Conv2dVariant& v);
/// The CompileRequest of a tensor-core variant (conv2d_mma.cuh).
CompileRequest make_mma_request(const Conv2dVariant& v);
/// Whether an fp32 variant is computed by Winograd F(2x2, 3x3) (conv2d_winograd.cuh): 3 x 3
/// filter, stride 1, dilation 1, 8 input and at least 16 output channels, unless the environment
/// sets CUINLINE_CONV2D_WINOGRAD=0 (read once). The variant must be valid.
bool winograd_applies(const Conv2dVariant& v);
/// Whether a tensor-core variant (tf32, tf32x3) runs on the tensor-core kernel: its tile fits the
/// shared memory. Otherwise (very large filters with many channels) the fp32 direct kernel computes
/// it — at fp32 accuracy, better than the mode asked for.
bool uses_tensor_cores(const Conv2dVariant& v);
/// Whether a variant runs on the f16 / bf16 tensor-core kernel (conv2d_hmma.cuh): every f16 and bf16
/// variant (any layouts), unless the environment sets CUINLINE_CONV2D_HMMA=0 (read once).
bool hmma_applies(const Conv2dVariant& v);
/// The input channels of the f16 / bf16 tensor-core kernel's K axis: 8 for up to 8 channels (a k
/// step of 16 is then two filter taps), else in_channels rounded up to 16.
int hmma_ci_pad(int in_channels);
/// Whether the f16 / bf16 tensor-core kernel reads v's weight as channels-last: a channels-last
/// weight, or a 1 x 1 filter's, whose two layouts are the same bytes (a staged call then copies only
/// the input; ResNet-50's 8192 -> 2048 1 x 1 over 7 x 7 images spent 0.85 of its 0.91 ms copying an
/// NCHW weight into the layout it already had).
bool hmma_weight_channels_last(const Conv2dVariant& v);
/// Whether a variant on the f16 / bf16 tensor-core kernel copies its tiles by cp.async where its
/// input and weight pointers are 16-byte aligned: channels-last input and weight
/// (hmma_weight_channels_last), Cin % 8 == 0.
bool hmma_async_layout(const Conv2dVariant& v);
/// The outputs one store of the f16 / bf16 tensor-core kernel writes where the output pointer is
/// aligned to them: the largest of 8 (the wgmma tiling without a residual, which rounds in
/// registers), 4, 2 dividing the output's contiguous run (the OH x OW plane for NCHW, Cout for
/// channels-last), else 1 (conv2d_hmma.cuh's Plan<S>::kOutVec). Needs v.inputs_aligned set.
int hmma_out_vec(const Conv2dVariant& v);
/// Sets v.inputs_aligned and v.output_aligned from the pointers where they change the f16 / bf16
/// tensor-core kernel (hmma_applies(v): cp.async layouts; outputs with vector stores); true
/// everywhere else, so equal kernels keep one key.
void set_hmma_alignment(Conv2dVariant& v, const void* input, const void* weight, const void* output,
                        const void* residual);
/// The tiling of a variant on the f16 / bf16 tensor-core kernel (hmma_applies(v)); validates. For a
/// staged variant (hmma_stages) the tiling of its channels-last copy, with stage_channels,
/// stage_input and stage_weight set.
HmmaTiling hmma_tiling(const Conv2dVariant& v);
/// The CompileRequest of a variant on the f16 / bf16 tensor-core kernel (hmma_applies(v)). A staged
/// variant's is its conv's, the request of hmma_staged_variant(v) (one kernel, kernel_name(v)): a
/// channels-last variant with as many channels shares the entry. The staging copy is a module of
/// its own, make_hmma_stage_request().
CompileRequest make_hmma_request(const Conv2dVariant& v);
/// The tiling of the split-K form of an f16 / bf16 variant on the tensor-core kernel: hmma_tiling(v)
/// with split_k the most slices (split_k_most under the process's knob; 0 where v has no split form).
HmmaTiling hmma_split_tiling(const Conv2dVariant& v);
/// The split form's CompileRequest (kSplitK, the kernel kHmmaSplitKernel; a staged variant's is that
/// of hmma_staged_variant(v)), or nullopt where hmma_split_tiling(v).split_k is 0. A second module
/// beside make_hmma_request(v), which is the same with or without split-K.
std::optional<CompileRequest> make_hmma_split_request(const Conv2dVariant& v);
/// The staging copy's CompileRequest (kernel_templates/conv2d_stage.cuh, the one kernel
/// kHmmaStageKernel): shape-generic, the same for every staged variant (one cache entry an arch).
CompileRequest make_hmma_stage_request();
/// The name expressions of the staging copies in make_hmma_stage_request(): 16-bit values, and
/// 32-bit values rounded to TF32 (the tf32 wgmma variants).
inline constexpr const char* kHmmaStageKernel = "cuinline_conv2d_stage";
inline constexpr const char* kTf32StageKernel = "cuinline_conv2d_stage_tf32";
/// Whether a variant runs on the TF32 wgmma implicit GEMM (conv2d_hmma.cuh with float storage):
/// f32, precision tf32, groups 1, at least tf32_wgmma_min_channels input channels (conv2d_tuning:
/// fewer stay on the mma.sync kernel, whose row streaming keeps their rows in shared memory), a
/// filter of more than one tap (a 1 x 1 conv stays on the mma.sync kernel: no staging pass), at
/// least tf32_wgmma_min_work products a staged input value (Cout x taps / (stride_h x stride_w);
/// below, the staging copy costs more than the kernel saves), an sm90-class
/// target, unless CUINLINE_CONV2D_WGMMA=0 or CUINLINE_CONV2D_TF32_WGMMA=0 (read once). Always
/// staged: the input and weight are copied channels-last, channels padded to 8, rounded to TF32.
bool tf32_wgmma_applies(const Conv2dVariant& v);
/// Its tiling (HmmaTiling::tf32_wgmma(); validates) and request (the conv of the copies: the
/// request of hmma_staged_variant(v), float storage).
HmmaTiling tf32_wgmma_tiling(const Conv2dVariant& v);
CompileRequest make_tf32_wgmma_request(const Conv2dVariant& v);
/// Whether a variant's shape and layouts fit the pointwise form (HmmaForm::pointwise): all its
/// conditions but the pointers' alignment (v.inputs_aligned). The variant must be valid.
bool pointwise_shape(const Conv2dVariant& v);
/// Whether a variant runs the pointwise form: pointwise_shape(v) and v.inputs_aligned.
bool pointwise_applies(const Conv2dVariant& v);
/// Its tiling (validates) and request (conv2d_hmma.cuh with kPointwise; float storage for f32).
HmmaTiling pointwise_tiling(const Conv2dVariant& v);
CompileRequest make_pointwise_request(const Conv2dVariant& v);
/// Whether an f16 / bf16 variant's conv runs the wgmma tiling (hmma_tiling(v).wgmma(), without
/// planning): the selector's hmma_halo or hmma_wgmma, or hmma_staged where the wgmma tilings are
/// enabled.
bool hmma_uses_wgmma(const Conv2dVariant& v);
/// Whether an f16 / bf16 variant runs the wgmma tiling's halo form (hmma_tiling(v).halo(); never
/// staged): at most 8 input channels, column stride 1, no residual, at least 32 output columns,
/// its window and weights within a block's shared memory; unless CUINLINE_CONV2D_WGMMA=0 or
/// CUINLINE_CONV2D_HALO=0.
bool hmma_halo(const Conv2dVariant& v);
/// Whether an f16 / bf16 variant runs as a staging copy into a workspace (channels-last, channels
/// padded to a multiple of 8) followed by the conv of that copy: the selector's hmma_staged
/// (select.hpp: hmma_applies(v), neither pointwise nor the halo form nor already in the cp.async
/// form, and hmma_stage_rule(v)).
bool hmma_stages(const Conv2dVariant& v);
/// The staging rule of an f16 / bf16 variant not already in a form that reads its tensors directly:
/// CUINLINE_CONV2D_STAGE "0" never, "1" always, else batch-tiled shapes from 64 input channels and
/// from stage_min_elements input elements an image (conv2d_tuning).
bool hmma_stage_rule(const Conv2dVariant& v);
/// Whether the wgmma tilings may run v: an sm90 target, CUINLINE_CONV2D_WGMMA not 0.
bool hmma_wgmma_enabled(const Conv2dVariant& v);
/// The variant the conv kernel of a staged call computes: channels-last input and weight with
/// in_channels rounded up to 8.
Conv2dVariant hmma_staged_variant(const Conv2dVariant& v);
/// The variant whose kernel a call of v on tiling t launches, the one its request compiled: a staged
/// call's conv runs on the copies (hmma_staged_variant), any other on v.
Conv2dVariant launched_variant(const Conv2dTiling& t, const Conv2dVariant& v);

/// The TMA form's two tensor maps (conv2d_launch.cpp's tma_maps) as cuTensorMapEncodeTiled /
/// cuTensorMapEncodeIm2col take them, for a launch of n images of v (the launched variant) on
/// tiling t: 16-bit elements, strides in bytes, the 128-byte swizzle.
struct TmaMapShapes {
  bool im2col = false;
  std::uint64_t in_dims[4] = {};     // {C, W, H, N}
  std::uint64_t in_strides[3] = {};  // W, H and N's, bytes
  std::uint32_t in_box[4] = {};      // tiled: {k chunk, columns, rows, 1}
  int lower[2] = {}, upper[2] = {};  // im2col: the bounding box's corners, W first
  std::uint32_t channels_per_pixel = 0, pixels_per_column = 0;
  std::uint32_t element_strides[4] = {1, 1, 1, 1};  // im2col: {1, stride w, stride h, 1}
  std::uint64_t w_dims[2] = {};                     // {KH KW C, Cout}
  std::uint64_t w_strides[1] = {};                  // bytes
  std::uint32_t w_box[2] = {};                      // {k chunk, the block's channels}
};
TmaMapShapes tma_map_shapes(const HmmaTiling& t, const Conv2dVariant& v, std::int64_t n);
/// Which of cuTensorMapEncodeTiled's / cuTensorMapEncodeIm2col's documented limits the maps break
/// (dimensions within 2^32, strides multiples of 16 bytes under 2^40, boxes of 1-256 elements whose
/// inner row is a multiple of 16 bytes and at most the 128-byte swizzle, element strides 1-8,
/// im2col corners within [-128, 127], channels a pixel 1-256, pixels a column 1-1024), "" where none.
std::string tma_map_problem(const TmaMapShapes& s);
/// The channels of one tile of the staging copy for cp (stage_channels) channels: the largest of
/// 64, 32, 16, 8 that divides cp (the kernel's `tc`).
int hmma_stage_tile_channels(int cp);
/// Blocks of the staging copy for one image of `pixels` pixels: channel tiles x pixel tiles of
/// 4096 / tc pixels.
std::int64_t hmma_stage_tiles(int stage_channels, std::int64_t pixels);
/// n / d for n < 2^31 as a multiply and a shift (conv2d_stage.cuh's FastDiv; mul 0 for d = 1).
struct StageFastDiv {
  std::uint32_t mul = 0, shift = 0;
};
StageFastDiv fast_div_of(std::uint32_t d);
/// The staging copy's parameters for one tensor: conv2d_stage.cuh's cuinline_conv2d_stage_tensor,
/// member for member (64 bytes; the launch checks the size against the kernel's parameter).
struct StageTensor {
  const void* src = nullptr;
  void* dst = nullptr;
  std::int64_t pixels = 0;
  std::int32_t channels = 0, nhwc = 0, vec = 0;
  std::uint32_t blocks = 0, tiles = 0, tiles_c = 0;
  StageFastDiv by_tiles, by_tiles_c;
};
static_assert(sizeof(StageTensor) == 64, "conv2d_stage.cuh's cuinline_conv2d_stage_tensor");
/// The copy of `images` x `channels` x `pixels` values at src (channels-last where nhwc, else
/// [channels][pixels] an image) into images x [pixels][cp] at dst: the 16-byte loads where the
/// source is NCHW, pixels % 8 == 0 and src is 16-byte aligned. Throws InvalidArgument past 2^31 - 1
/// blocks (the launch checks that first).
StageTensor hmma_stage_tensor(const void* src, void* dst, std::int64_t images, int channels,
                              std::int64_t pixels, bool nhwc, int cp);
/// The tiling and request of v on the tensor-core kernel reading its tensors as they are (no
/// staging): the fallback where no workspace can be had.
HmmaTiling hmma_direct_tiling(const Conv2dVariant& v);
CompileRequest make_hmma_direct_request(const Conv2dVariant& v);
/// The name expression of the general direct kernel (conv2d_generic.cuh).
inline constexpr const char* kGenericKernel = "cuinline_conv2d_generic<cuinline_conv2d_shape, cuinline_conv2d_epilogue>";
/// The tiling and request of an f32 variant on the FMA direct kernel (conv2d.cuh).
DirectTiling fp32_direct_tiling(const Conv2dVariant& v);
CompileRequest make_fp32_direct_request(const Conv2dVariant& v);
/// The tiling of a variant on the general direct kernel (v.uses_generic_kernel()).
GenericTiling generic_tiling(const Conv2dVariant& v);
/// The CompileRequest of a variant on the general direct kernel (conv2d_generic.cuh).
CompileRequest make_generic_request(const Conv2dVariant& v);
/// Whether an f32 variant with a channels-last tensor runs the f32 NCHW kernel of its shape
/// (f32_nchw_variant(v)) between transposing copies: from conv2d_tuning's transpose_min_macs
/// multiply-adds an image,
/// unless CUINLINE_CONV2D_TRANSPOSE says otherwise ("0": never, "1": every such variant; read once).
bool f32_transposes(const Conv2dVariant& v);
/// v with every tensor NCHW.
Conv2dVariant f32_nchw_variant(const Conv2dVariant& v);
/// The variant whose kernel a transposing call runs: f32_nchw_variant(v), except that a channels-last
/// output stays channels-last where the kernel is Winograd's (it writes either layout: no output
/// copy). Its tiling and request (f32_kernel_tiling, make_f32_kernel_request: conv2d_tiling and
/// make_request of it would see a channels-last f32 variant and transpose again).
Conv2dVariant f32_kernel_variant(const Conv2dVariant& v);
Conv2dTiling f32_kernel_tiling(const Conv2dVariant& k);
CompileRequest make_f32_kernel_request(const Conv2dVariant& k);
/// The transposing copy's CompileRequest (kernel_templates/conv2d_transpose.cuh, the one kernel
/// kTransposeKernel): shape-generic, the same for every transposing variant.
CompileRequest make_transpose_request();
inline constexpr const char* kTransposeKernel = "cuinline_conv2d_transpose";
/// One launch of the transposing copy: batch x [rows][cols] 32-bit words -> batch x [cols][rows].
struct TransposeGrid {
  std::int64_t blocks = 0;  ///< grid x: row tiles x col_tiles (at most 2^31 - 1 to launch)
  std::uint32_t col_tiles = 0;
  std::int32_t lc = 0;  ///< log2 of the tile's columns
  std::int32_t lt = 0;  ///< log2 of the tile's elements
};
/// log2 of the elements one block of the transposing copy moves: kTransposeLogTile (tuning.hpp), or
/// CUINLINE_CONV2D_TRANSPOSE_TILE (10-12).
int transpose_log_tile();
/// The grid of one transposing copy of batch x [rows][cols] with tiles of 2^lt elements.
TransposeGrid transpose_grid(std::int64_t rows, std::int64_t cols, int lt = transpose_log_tile());
/// Split-K (the f16 / bf16 wgmma tiling's split form; docs/conv2d.md, "Split-K"): the most slices
/// a reduction is cut into, and the fewest k steps a slice.
inline constexpr int kSplitKMaxSlices = 8;
inline constexpr int kSplitKMinSteps = 4;
/// The fewest k steps a reduction has for auto (CUINLINE_CONV2D_SPLIT_K unset or auto) to have a split
/// form: on an H200, 3 x 3 layers of 256 channels (36 steps) on 7-14 planes at batch 1 ran 0.57-0.64
/// of their unsplit time in 8 slices of 4-5 steps, 128 channels (18 steps) 0.93-0.95 at batch 1 and
/// within 3 % at batch 8 (docs/conv2d.md, "Split-K").
inline constexpr int kSplitKAutoMinSteps = 16;
/// Most output tiles an image for which a variant is compiled in the split form: larger ones fill a
/// GPU from one image on (an H200 has 132 multiprocessors), and the launch would never split them.
inline constexpr int kSplitKMaxImageTiles = 64;
/// The most slices the split form of tiling `t` of v may cut its k steps into (what
/// HmmaTiling::split_k records), or 0 where v is not compiled in that form: `knob` (the
/// CUINLINE_CONV2D_SPLIT_K value: 0 off, -1 auto, N forced) not 0; the f16 / bf16 wgmma tiling as
/// block_tile runs it (not the halo, window, batch-tile or pointwise forms); at most
/// kSplitKMaxImageTiles tiles an image; at least 2 kSplitKMinSteps k steps. Forced: N, or fewer
/// where the steps allow fewer slices of kSplitKMinSteps; auto: up to kSplitKMaxSlices, for
/// reductions of kSplitKAutoMinSteps k steps or more.
int split_k_most(const Conv2dVariant& v, const HmmaTiling& t, int k_steps, int knob);
/// The slices a launch of a split-form kernel cuts its reduction into (1: no split; the kernel then
/// runs its tiles whole). `tiles`: the launch's output tiles (pixel tiles x channel blocks x
/// images); `most`: HmmaTiling::split_k; `forced`: the knob gives the number (most, always).
/// Auto: only where the tiles fill at most half of the multiprocessors (a larger grid already
/// keeps most of them busy, and every slice costs a write and a read of its fp32 tile), as many
/// slices as keep the blocks within one wave of one a multiprocessor, at most `most`.
int split_k_slices(std::int64_t tiles, int most, int multiprocessors, bool forced);
/// The output tiles of a launch of tiling `t` (the cp.async wgmma tiling, not batch tiles) over
/// `images` images: pixel tiles x channel blocks x images.
std::int64_t split_k_tiles(const HmmaTiling& t, int out_channels, std::int64_t images);
/// The launch's choice between a variant's two kernels (docs/conv2d.md, "Split-K"): `wanted` where
/// split_k_slices gives more than one slice (and the grid's z extent, images x slices, holds them);
/// then the split kernel with those slices where it is loaded (`split_loaded`), else the plain
/// kernel (slices 1). One slice is the plain kernel, never the split one over the same tiles. A
/// split form of its own tiles (`few_tiles`, HmmaTiling::few_tiles): wanted where the plain
/// kernel's `tiles` fill at most half of the multiprocessors (or `forced`), in the slices
/// split_k_slices gives over its own `split_tiles` (1 or more).
struct SplitKChoice {
  bool wanted = false;  ///< the split form is worth having for this launch
  bool split = false;   ///< launch the split kernel
  int slices = 1;       ///< its slices (1: the plain kernel, or the few-tiles form whole)
};
SplitKChoice split_k_choice(std::int64_t tiles, std::int64_t images, int most, int multiprocessors, bool forced,
                            bool split_loaded, bool few_tiles = false, std::int64_t split_tiles = 0);
/// The workspace of a split launch: the fp32 partial tiles (tiles x slices x block pixels x block
/// channels), then one arrival counter a tile, each part aligned to 256 bytes.
struct SplitKWorkspace {
  std::int64_t partial_bytes = 0, counter_bytes = 0;
};
SplitKWorkspace split_k_workspace(const HmmaTiling& t, std::int64_t tiles, int slices);

/// The name expression of the Winograd kernel (conv2d_winograd.cuh).
inline constexpr const char* kWinogradKernel = "cuinline_conv2d_winograd<cuinline_conv2d_shape, cuinline_conv2d_epilogue>";
/// The tiling of a Winograd variant (winograd_applies(v)).
WinogradTiling winograd_tiling(const Conv2dVariant& v);
/// The CompileRequest of a Winograd variant (winograd_applies(v)).
CompileRequest make_winograd_request(const Conv2dVariant& v);

}  // namespace cuinline::ops::conv2d_impl
