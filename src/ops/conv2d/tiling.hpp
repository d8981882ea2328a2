#pragma once
// How a conv2d variant is split into blocks: the tiling that one selector, conv2d_tiling, chooses on
// the host and that is rendered into the kernel's source. Internal: the public API (conv2d.hpp) is
// the variant and the call; tests, benchmarks and the conv2d sources read the tiling from here.
//
// Each kernel template has its own tiling type, holding only the fields that kernel's rendering and
// launch read (DirectTiling, WinogradTiling, MmaTiling, HmmaTiling, GenericTiling); each starts with
// the grid every launch reads (Conv2dGrid). A planner returns its kernel's type, and the code that
// renders or launches that kernel takes it. Conv2dTiling holds one of them (the selection's) and the
// copies around it, and answers the planner's and the launch's questions about kernel and form.
#include <cstddef>
#include <cuinline/conv2d.hpp>
#include <type_traits>
#include <variant>

namespace cuinline::ops {

/// The most dynamic shared memory a block may use on the target's archs (bytes).
unsigned conv2d_max_shared_bytes(Conv2dTarget target) noexcept;

/// The kernel template a tiling is for (the order of Conv2dTiling's alternatives).
enum class Conv2dKernel : unsigned char {
  direct,    ///< conv2d.cuh: f32 on FMA (DirectTiling)
  winograd,  ///< conv2d_winograd.cuh: f32 Winograd F(2x2, 3x3) (WinogradTiling)
  mma,       ///< conv2d_mma.cuh: f32 in tf32 / tf32x3 on mma.sync (MmaTiling)
  hmma,      ///< conv2d_hmma.cuh: f16 / bf16, and f32 in tf32 on its wgmma and pointwise forms (HmmaTiling)
  generic,   ///< conv2d_generic.cuh: the general direct kernel, no shared memory (GenericTiling)
};

/// conv2d_hmma.cuh's forms (HmmaTiling::form): its main loop and how a block's tile is laid out.
/// wgmma, batch, window and halo are the wgmma tiling (one or two warpgroups of m64 tiles).
enum class HmmaForm : unsigned char {
  mma_sync,   ///< the mma.sync tilings as the tensors are: cp.async or the register gather (kAsync)
  pointwise,  ///< 1 x 1, stride 1, NCHW input: a GEMM per image, copied as laid out (kPointwise)
  wgmma,      ///< the wgmma tiling, cp.async form (kWgmma)
  batch,      ///< the wgmma tiling's batch tiles: a tile's pixels span the batch (kBatchTiles)
  window,     ///< the wgmma tiling's window form: a tile's input staged once a k chunk (kWindow)
  halo,       ///< the wgmma tiling's halo form: up to 8 input channels, a tile's window staged once (kHalo)
  tma,        ///< the wgmma tiling's TMA form: a producer warp's tensor copies, mbarriers (kTma)
};

/// The general direct kernel's thread order (GenericTiling::order).
enum class GenericOrder : unsigned char {
  pixels,        ///< a thread is one pixel x channels_per_thread channels, pixels fastest
  channel_fast,  ///< depthwise, channels-last, more than 49 taps: channels fastest
  row_fast,      ///< depthwise, up to 49 taps: a thread computes consecutive rows of one column
};

/// What the launch reads of every kernel's tiling: the block's shared memory and the grid's tiles
/// (the kernel's plan computes the same figures: render_plan_checks asserts them in the source).
struct Conv2dGrid {
  unsigned shared_bytes = 0;     ///< dynamic shared memory per block
  int tiles_x = 0, tiles_y = 0;  ///< blocks an image along x and y (the plan's kTilesX, kTilesY)
  /// Most row tiles one block computes in turn (the direct and mma kernels' pipelines 1 and 3,
  /// Winograd, the halo and window forms; else 1): an upper bound, the launch picks the number from
  /// the batch size and the device.
  int row_tiles = 0;
};

/// The f32 FMA direct kernel (conv2d.cuh). The block is threads_x x threads_y x channel_groups
/// threads; a thread computes pixels_per_thread consecutive output columns x channels_per_thread
/// output channels. (The planner's Fp32Plan has the figures beyond these: the rows of one thread set,
/// the thread sets that split a channel chunk, the filter-row unroll and the column phases.)
struct DirectTiling : Conv2dGrid {
  int threads_x = 0;            ///< threads along the output columns
  int threads_y = 0;            ///< thread rows, of all the thread sets that split a channel chunk
  int channel_groups = 0;       ///< thread groups along the output channels
  int pixels_per_thread = 0;    ///< consecutive output columns per thread
  int channels_per_thread = 0;  ///< output channels per thread
  int ci_chunk = 0;             ///< input channels per shared-memory stage
  int ci_unroll = 0;            ///< channels of one unrolled step of the channel loop
  int min_blocks = 0;  ///< resident blocks per multiprocessor asked of ptxas (caps registers)
  /// 0: one buffer per stage; 1: row-tile pipeline (all channels in one stage, the next row tile's
  /// input copied during this one's math); 2: channel-chunk pipeline (the next chunk's input and
  /// weights copied during this chunk's math).
  int pipeline = 0;

  int threads() const noexcept { return threads_x * threads_y * channel_groups; }
  int block_channels() const noexcept { return channel_groups * channels_per_thread; }
};

/// f32 Winograd F(m x m, 3x3), m = 2 (conv2d_winograd.cuh: 3 x 3 stride-1 filters with 8 input
/// channels): a block walks down up to row_tiles tile rows, the next tile row's input copied during
/// this one's transform and products. The block is warps_x warps along the tiles x warps_c warps
/// along the channels; a warp is tile_lanes tile lanes x (32 / tile_lanes) channel lanes; a thread
/// computes pixels_per_thread / m tiles of m x m outputs x channels_per_thread channels; tiles_y
/// counts tile rows (m output rows each).
struct WinogradTiling : Conv2dGrid {
  int m = 0;                    ///< the output tile's side (2)
  int tile_lanes = 0;           ///< tile lanes of a warp (the template's kLX)
  int warps_x = 0;              ///< warps along the tiles (kWX)
  int warps_c = 0;              ///< warps along the output channels (kWC)
  int pixels_per_thread = 0;    ///< output columns of a thread: m x its tiles
  int channels_per_thread = 0;  ///< output channels per thread
  int ci_chunk = 0;             ///< input channels per stage (all 8: one stage a tile row)
  int ci_unroll = 0;            ///< unroll of the channel loop (1: rolled)
  int min_blocks = 0;           ///< resident blocks per multiprocessor asked of ptxas (caps registers)
  /// The products on tensor cores (mma.sync m16n8k8 in 3xTF32, fp32 accuracy) instead of fp32 FMA:
  /// every Winograd tiling but sm75's (no TF32 tensor cores; plain copies for cp.async there).
  bool tc_products = false;

  int threads() const noexcept { return 32 * warps_x * warps_c; }
  int block_channels() const noexcept { return warps_c * (32 / tile_lanes) * channels_per_thread; }
};

/// f32 in tf32 / tf32x3 on mma.sync m16n8k8 (conv2d_mma.cuh): the block is warps_m x warps_n warps;
/// each warp computes m_tiles 16-pixel x n_tiles 8-channel mma tiles; the block's pixels are
/// tile_rows output rows x tile_cols output columns.
struct MmaTiling : Conv2dGrid {
  int warps_m = 0, warps_n = 0, m_tiles = 0, n_tiles = 0, tile_rows = 0, tile_cols = 0;
  int ci_chunk = 0;    ///< input channels per shared-memory stage (multiples of 8)
  int ci_unroll = 0;   ///< 8-channel steps of one unrolled step of the channel loop
  int kh_unroll = 0;   ///< unroll of the filter-row loop
  int kw_unroll = 0;   ///< unroll of the filter-column loop: kernel_w or 1
  int min_blocks = 0;  ///< resident blocks per multiprocessor asked of ptxas (caps registers)
  /// Row streaming: 0, or the passes in which a warp writes its output tile through shared memory
  /// (stored as aligned float4 runs instead of the mma fragments' scattered 4-byte stores).
  int out_stage = 0;
  /// 0: one buffer per stage; 1: row-tile pipeline (all channels in one stage, the next row tile's
  /// input copied during this one's math); 2: channel-chunk pipeline (the next chunk's input and
  /// weights copied during this chunk's math); 3: row streaming (one step of tile_rows output rows
  /// at a time, weights staged once, input rows in a ring: each step stages only the input rows the
  /// previous one did not read, two rows ahead).
  int pipeline = 0;

  int threads() const noexcept { return 32 * warps_m * warps_n; }
  int block_channels() const noexcept { return 8 * warps_n * n_tiles; }
};

/// conv2d_hmma.cuh: an implicit GEMM with fp32 accumulators — f16 / bf16 on mma.sync m16n8k16 or
/// wgmma, and f32 in TF32 (tf32) on its wgmma and pointwise forms. The block is warps_m x warps_n
/// warps of m_tiles x n_tiles mma tiles over tile_cols consecutive pixels of the flattened OH x OW
/// plane (tiles_x blocks an image) x block_channels() output channels; a k step is ci_chunk input
/// channels (16, 32 or 64; channels padded to 16; up to 8 channels: padded to 8, a step of 16 is
/// two filter taps) of one filter tap, the next steps' loads or copies in flight during this one's
/// mma. Its forms (form):
///
/// The wgmma tiling (wgmma, batch, window, halo; f16 / bf16 in the cp.async form — channels-last
/// input and weight, Cin % 8 == 0, 16-byte aligned — or staged): one warpgroup (warps_m = 4,
/// warps_n = 1; or two, warps_m = 8) of m_tiles 64-pixel wgmma tiles x block_channels() channels,
/// tiles swizzled for wgmma, `stages` cp.async buffers. Compiled for an arch-specific target
/// (sm_90a: wgmma.mma_async); on any other arch the same tiling runs on mma.sync.
///
/// The halo form (up to 8 input channels, column stride 1, no residual; any layout, never staged):
/// a tile is tile_cols consecutive columns of one output row (tiles_x = 1, tiles_y = OH x ceil(OW /
/// tile_cols) tiles an image); a block computes up to row_tiles tiles in turn (the launch picks how
/// many), every k step's weights staged once (stages = 1); a tile's input window (every filter
/// tap's rows, 8 channels a pixel) is staged once in shared memory, each tap's A tile read from it
/// in place.
///
/// The window form (more than 8 input channels in the cp.async form, column stride 1, no residual,
/// output rows of a multiple of 64 columns that a tile's tile_cols pixels cover whole or in equal
/// parts, at least stages - 1 filter taps): the input rows and columns a tile reads are staged once
/// a k chunk (ci_chunk channels) instead of once a filter tap, each tap's A tile read from them in
/// place; the k steps run chunk-major. With two or more k chunks (row_tiles > 1) a block computes up
/// to row_tiles of the batch's tiles in turn, the next tile's first copies issued while this one's
/// outputs are stored (the launch's grid: ceil(tiles_x / its row_tiles) blocks along x).
///
/// Batch tiles (conv2d_hmma.cuh's kBatchTiles; the cp.async form without the halo or window forms,
/// f32 in TF32 on an output plane of at most half a two-warpgroup tile: ResNet's 7 x 7 layers): a
/// block's tile_cols pixels are consecutive pixels of the whole batch (image-major), not of one
/// image, so one weight tile serves several images; one warpgroup of 128 pixels. The launch's grid:
/// ceil(N x OH x OW / tile_cols) blocks along x, one along z (tiles_x stays the per-image count).
///
/// TF32 (tf32; f32 variants in precision tf32 with at least 16 input channels, a filter of more
/// than one tap and Cout x taps / (stride_h x stride_w) >= 512 on an sm90-class target, unless
/// CUINLINE_CONV2D_TF32_WGMMA=0): the wgmma tiling with TF32 operands (float storage, m64nNk8,
/// fp32 accumulators; tf32_wgmma()). The input and weight are always staged (stage_channels: Cin
/// rounded up to 8, channels-last), each value rounded to TF32 on the way; ci_chunk is 8, 16 or 32
/// channels (32, 64 or 128 bytes a row).
///
/// The pointwise form (f16, bf16, and f32 in precision tf32): a 1 x 1 filter, stride 1, no
/// padding, groups 1, an NCHW input (any output layout) whose H x W plane and input channels are
/// whole 16-byte runs (multiples of 8 f16 / bf16 or 4 f32 elements; at least 16 f16 / bf16 or 8 f32
/// channels), input and weight 16-byte aligned, on an sm_80+ target, unless
/// CUINLINE_CONV2D_POINTWISE=0: a GEMM per image — pixels x output channels over the input channels
/// — whose tiles cp.async copies from the tensors as they are (no staging copy), on mma.sync
/// (m16n8k16 for f16 / bf16; m16n8k8 for f32, each operand rounded to TF32 as it is read), ci_chunk
/// channels a k step, `stages` cp.async buffers; tiles_x counts pixel tiles x channel blocks
/// (channel blocks fastest: the blocks that read one input tile run together), one block column.
struct HmmaTiling : Conv2dGrid {
  HmmaForm form = HmmaForm::mma_sync;
  bool tf32 = false;  ///< f32 operands rounded to TF32 (the wgmma and pointwise forms), not f16 / bf16
  int warps_m = 0, warps_n = 0, m_tiles = 0, n_tiles = 0;
  /// Pixels of a block: consecutive pixels of the OH x OW plane (batch tiles: of the whole batch).
  int tile_cols = 0;
  int ci_chunk = 0;    ///< input channels of a k step (the template's kBK)
  int min_blocks = 0;  ///< resident blocks per multiprocessor asked of ptxas (caps registers)
  /// cp.async buffers: the wgmma and pointwise forms', and an mma.sync tiling's where the plan's
  /// default did not fit the target (0: the plan's).
  int stages = 0;
  /// The split form's tiles are its own, not the plain kernel's: per-image m64 tiles of a mid plane
  /// (wgmma_tiling), which a launch whose plain tiles are few runs whole (1 slice) or split.
  bool few_tiles = false;
  /// The TMA form's input copies: one im2col copy of tile_cols consecutive output pixels' input a k
  /// step (any plane and stride), not one box of whole output rows or of a row's part (stride 1).
  bool tma_im2col = false;
  /// The wgmma tiling's split form (conv2d_hmma.cuh's kSplitK; f16 / bf16, few tiles an image, a
  /// long reduction): 0 (every variant's own tiling, conv2d_tiling), or in the split form's tiling
  /// (split_tiling_of, the variant's second kernel) the most slices its k steps may be cut into.
  /// The launch runs it where its tiles are few (split_k_choice) with 2 or more slices: the grid's
  /// z axis is images x slices, each block sums its slice's k steps, writes its fp32 partial tile
  /// to a workspace, and the last block of a tile to arrive sums the partials in slice order and
  /// runs the epilogue. With few_tiles (above), in 1 slice or more.
  int split_k = 0;
  /// The staging copy: f16 / bf16 variants whose input or weight is not channels-last with a
  /// multiple of 8 channels (an NCHW model, an RGB first layer), from CUINLINE_CONV2D_STAGE's size
  /// on, and every TF32 variant: 0, or the channels (Cin rounded up to 8, zeros past Cin) of
  /// channels-last copies of the input (stage_input) and / or the weight (stage_weight) that a
  /// staging kernel (conv2d_stage.cuh) writes into stream-ordered scratch memory before the conv,
  /// which then reads them with cp.async. The other fields are the tiling of that conv.
  int stage_channels = 0;
  bool stage_input = false, stage_weight = false;

  int threads() const noexcept { return 32 * warps_m * warps_n; }
  int block_channels() const noexcept { return 8 * warps_n * n_tiles; }
  /// f16 / bf16 operands.
  bool half_mma() const noexcept { return !tf32; }
  /// The wgmma tiling (any of its forms).
  bool wgmma() const noexcept {
    return form == HmmaForm::wgmma || form == HmmaForm::batch || form == HmmaForm::window ||
           form == HmmaForm::halo || form == HmmaForm::tma;
  }
  bool tma() const noexcept { return form == HmmaForm::tma; }
  /// The threads a block is launched with: threads() (the plan's kThreads), and the TMA form's
  /// producer warpgroup.
  int block_threads() const noexcept { return threads() + (tma() ? 128 : 0); }
  bool halo() const noexcept { return form == HmmaForm::halo; }
  bool window() const noexcept { return form == HmmaForm::window; }
  bool batch_tiles() const noexcept { return form == HmmaForm::batch; }
  bool pointwise() const noexcept { return form == HmmaForm::pointwise; }
  /// f32 in TF32 on the wgmma tiling.
  bool tf32_wgmma() const noexcept { return tf32 && wgmma(); }
};

/// The general direct kernel (conv2d_generic.cuh), no shared memory (shared_bytes 0, tiles_y 1).
/// Order pixels: a block is block_threads consecutive output pixels of the flattened OH x OW plane
/// (tiles_x blocks an image), a thread one pixel x channels_per_thread output channels
/// (pixels_per_thread = 1). channel_fast (a channels-last input, groups = Cin > 1, more than 49
/// filter taps): a thread is one output channel of pixels_per_thread columns of a row, channels
/// fastest (consecutive threads read consecutive input channels); tiles_x blocks an image cover OH x
/// OW x Cout, one block column (channels_per_thread = 1). row_fast (groups = Cin > 1, up to 49
/// taps): a thread computes pixels_per_thread consecutive output rows of one column of
/// channels_per_thread output channels, columns fastest (NCHW input) or channels fastest
/// (channels-last input); tiles_x blocks an image cover Cout x ceil(OH / pixels_per_thread) x OW,
/// one block column.
struct GenericTiling : Conv2dGrid {
  GenericOrder order = GenericOrder::pixels;
  int block_threads = 0;        ///< threads a block (the template's kThreads)
  int channels_per_thread = 0;  ///< output channels per thread (kCoTile)
  int pixels_per_thread = 0;    ///< channel_fast: columns a thread; row_fast: rows a thread; else 1

  int threads() const noexcept { return block_threads; }
  int block_channels() const noexcept { return channels_per_thread; }
  bool channel_fast() const noexcept { return order == GenericOrder::channel_fast; }
  bool row_fast() const noexcept { return order == GenericOrder::row_fast; }
};

/// fp32_transposed's copies (f32 variants with a channels-last tensor, from 2^22 multiply-adds an
/// image, or with CUINLINE_CONV2D_TRANSPOSE=1; =0: never): the f32 NCHW kernel of the same shape (the
/// tiling is its own, and make_request gives its module) runs on NCHW copies in stream-ordered
/// scratch memory. input / weight: the channels-last input / weight is copied to NCHW first; output:
/// the conv writes NCHW scratch that is then copied into the channels-last output (a residual,
/// channels-last like the output, is copied to NCHW first). The copies are one shape-generic kernel
/// (make_stage_request). Where no scratch memory can be had, the call runs on the general direct
/// kernel instead.
struct Conv2dTransposes {
  bool input = false, weight = false, output = false;
  bool any() const noexcept { return input || weight || output; }
};

/// [[noreturn]]: a Conv2dTiling asked for another kernel's tiling (an internal error: throws Error).
[[noreturn]] void conv2d_tiling_mismatch(Conv2dKernel held, Conv2dKernel asked);

/// How a variant is split into blocks (chosen on the host; rendered into the source): its kernel
/// template's tiling (kernel() says which; as_direct(), as_hmma(), ... give it, and throw Error for
/// any other kernel), and the transposing copies around it (transpose).
class Conv2dTiling {
 public:
  using Tilings = std::variant<DirectTiling, WinogradTiling, MmaTiling, HmmaTiling, GenericTiling>;

  Conv2dTiling() = default;  // (an empty direct tiling)
  Conv2dTiling(const DirectTiling& t) : tiling_(t) {}
  Conv2dTiling(const WinogradTiling& t) : tiling_(t) {}
  Conv2dTiling(const MmaTiling& t) : tiling_(t) {}
  Conv2dTiling(const HmmaTiling& t) : tiling_(t) {}
  Conv2dTiling(const GenericTiling& t) : tiling_(t) {}

  Conv2dKernel kernel() const noexcept { return static_cast<Conv2dKernel>(tiling_.index()); }
  const DirectTiling& as_direct() const { return as<DirectTiling, Conv2dKernel::direct>(); }
  const WinogradTiling& as_winograd() const { return as<WinogradTiling, Conv2dKernel::winograd>(); }
  const MmaTiling& as_mma() const { return as<MmaTiling, Conv2dKernel::mma>(); }
  const HmmaTiling& as_hmma() const { return as<HmmaTiling, Conv2dKernel::hmma>(); }
  const GenericTiling& as_generic() const { return as<GenericTiling, Conv2dKernel::generic>(); }
  /// The shared memory and grid, whichever the kernel.
  const Conv2dGrid& grid() const noexcept {
    return std::visit([](const auto& t) -> const Conv2dGrid& { return t; }, tiling_);
  }
  int threads() const noexcept {
    return std::visit([](const auto& t) { return t.threads(); }, tiling_);
  }
  /// The threads a block is launched with (threads(), and the TMA form's producer warpgroup).
  int block_threads() const noexcept {
    const HmmaTiling* t = std::get_if<HmmaTiling>(&tiling_);
    return t != nullptr ? t->block_threads() : threads();
  }
  int block_channels() const noexcept {
    return std::visit([](const auto& t) { return t.block_channels(); }, tiling_);
  }

  // What the kernel and form are, as the planner and the launch ask.
  bool tensor_cores() const noexcept {
    return kernel() == Conv2dKernel::mma || kernel() == Conv2dKernel::hmma;
  }
  bool winograd() const noexcept { return kernel() == Conv2dKernel::winograd; }
  bool generic() const noexcept { return kernel() == Conv2dKernel::generic; }
  /// hmma on f16 / bf16 operands.
  bool half_mma() const noexcept { return hmma_and(&HmmaTiling::half_mma); }
  /// hmma on the wgmma tiling (any of its forms).
  bool wgmma() const noexcept { return hmma_and(&HmmaTiling::wgmma); }
  bool halo() const noexcept { return hmma_and(&HmmaTiling::halo); }
  bool window() const noexcept { return hmma_and(&HmmaTiling::window); }
  bool batch_tiles() const noexcept { return hmma_and(&HmmaTiling::batch_tiles); }
  bool pointwise() const noexcept { return hmma_and(&HmmaTiling::pointwise); }
  bool tma() const noexcept { return hmma_and(&HmmaTiling::tma); }
  /// f32 in tf32 on the wgmma tiling.
  bool tf32_wgmma() const noexcept { return hmma_and(&HmmaTiling::tf32_wgmma); }
  /// hmma behind the staging copy (HmmaTiling::stage_channels > 0).
  bool staged() const noexcept {
    const HmmaTiling* t = std::get_if<HmmaTiling>(&tiling_);
    return t != nullptr && t->stage_channels > 0;
  }
  /// The split-K form's kernel (HmmaTiling::split_k > 0).
  bool split() const noexcept {
    const HmmaTiling* t = std::get_if<HmmaTiling>(&tiling_);
    return t != nullptr && t->split_k > 0;
  }
  /// The mma kernel's row streaming (MmaTiling::pipeline 3).
  bool row_streaming() const noexcept {
    const MmaTiling* t = std::get_if<MmaTiling>(&tiling_);
    return t != nullptr && t->pipeline == 3;
  }
  bool channel_fast() const noexcept {
    const GenericTiling* t = std::get_if<GenericTiling>(&tiling_);
    return t != nullptr && t->channel_fast();
  }
  bool row_fast() const noexcept {
    const GenericTiling* t = std::get_if<GenericTiling>(&tiling_);
    return t != nullptr && t->row_fast();
  }
  bool transposes() const noexcept { return transpose.any(); }

  /// fp32_transposed's copies around the kernel (none for every other algorithm).
  Conv2dTransposes transpose;

 private:
  template <class T, Conv2dKernel K>
  const T& as() const {
    static_assert(std::is_same_v<std::variant_alternative_t<static_cast<std::size_t>(K), Tilings>, T>);
    if (const T* t = std::get_if<T>(&tiling_)) return *t;
    conv2d_tiling_mismatch(kernel(), K);
  }
  bool hmma_and(bool (HmmaTiling::*form)() const noexcept) const noexcept {
    const HmmaTiling* t = std::get_if<HmmaTiling>(&tiling_);
    return t != nullptr && (t->*form)();
  }

  Tilings tiling_;
};
Conv2dTiling conv2d_tiling(const Conv2dVariant& variant);

}  // namespace cuinline::ops
