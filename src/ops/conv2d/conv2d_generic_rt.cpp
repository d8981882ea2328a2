// conv2d on the generic kernels (kernel_templates/conv2d_generic_rt.cuh): a variant's shape as run-time
// parameters and its epilogue as a program of lowered steps (the lowering the specialized conv's
// epilogue functor is printed from), and their launch. The kernels are a fatbin nvcc built with the
// library, loaded once for every device (src/ops/generic_fatbin.cpp).
#include "ops/conv2d/conv2d_generic_rt.hpp"

#include <algorithm>
#include <cstdint>
#include <cuinline/driver.hpp>
#include <cuinline/error.hpp>
#include <cuinline/module.hpp>
#include <limits>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "driver/driver_api.hpp"
#include "driver/workspace.hpp"
#include "ops/conv2d/tuning.hpp"
#include "ops/elementwise/plan.hpp"
#include "ops/elementwise/render.hpp"
#include "ops/generic_fatbin.hpp"
#include "ops/specialize.hpp"

namespace cuinline::ops::conv2d_impl {
namespace {

// The epilogue's dtype: the specialized conv renders its functor on opmath values.
DType opmath_dtype(DType dtype) {
  return dtype == DType::f64 ? DType::f64 : DType::f32;
}

bool depthwise_channels_last(const Conv2dVariant& v) {
  return v.params.groups > 1 && v.in_channels == v.params.groups && v.input_layout == Conv2dLayout::nhwc;
}

// The depthwise kernel's output channels a thread: a pair of a 16-bit input's channels where each
// group has one output channel.
int depthwise_channels(const Conv2dVariant& v) {
  const bool half = v.dtype == DType::f16 || v.dtype == DType::bf16;
  return half && v.out_channels == v.params.groups && v.out_channels % 2 == 0 ? 2 : 1;
}

// The direct kernel's block and blocks over `items` threads' work: whole warps, at most
// kGenericConvThreads threads (fewer for fewer items).
void set_direct_blocks(std::int64_t items, GenericConvGrid& g) {
  g.threads = static_cast<int>(std::clamp<std::int64_t>((items + 31) / 32 * 32, 32, kGenericConvThreads));
  g.blocks_x = (items + g.threads - 1) / g.threads;
}

// mode -1: the gathered form's weight-packing kernel.
Kernel generic_conv_kernel(DType dtype, int mode) {
  static std::mutex mutex;
  static Kernel kernels[4][8];  // [dtype][mode + 1]
  const auto d = static_cast<std::size_t>(dtype) & 3;
  Kernel& k = kernels[d][mode >= -1 && mode <= 6 ? static_cast<std::size_t>(mode + 1) : 1];
  std::lock_guard<std::mutex> lock(mutex);
  if (!k) {
    using cuinline::detail::GenericFatbin;
    k = cuinline::detail::generic_module(GenericFatbin::conv2d)
            .kernel(mode < 0 ? generic_conv_pack_symbol(dtype) : generic_conv_symbol(dtype, mode));
  }
  return k;
}

// The wide form's shared memory allowed on a device, once per kernel and device (an attribute of
// the kernel, not of a launch: nothing on the stream, so inside a capture too).
void allow_dynamic_shared(const Kernel& kernel, DType dtype, unsigned bytes, int device) {
  static std::mutex mutex;
  static std::vector<std::uint64_t> done;  // (device << 8 | dtype) allowed
  const std::uint64_t key = static_cast<std::uint64_t>(device) << 8 | static_cast<std::uint64_t>(dtype);
  std::lock_guard<std::mutex> lock(mutex);
  if (std::find(done.begin(), done.end(), key) != done.end()) return;
  kernel.set_max_dynamic_shared_bytes(bytes, device);
  done.push_back(key);
}

bool aligned16(const void* p) {
  return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0;
}

// cuinline_conv2d_chan (ew_common.cuh).
struct ChannelPointers {
  const void* p[kMaxConv2dChannelOperands];
};

}  // namespace

std::string generic_conv_symbol(DType dtype, int mode) {
  static const char* const kSplit[] = {"", "dw_", "mma_", "mmag_", "px_", "gemm_", "mmaw_"};
  return std::string("cuinline_conv2d_rt_") + kSplit[mode >= 0 && mode <= 6 ? mode : 0] + to_string(dtype);
}

std::string generic_conv_pack_symbol(DType dtype) {
  return std::string("cuinline_conv2d_rt_wpack_") + to_string(dtype);
}

bool generic_conv_mma_applies(const Conv2dVariant& v, const Arch& arch) {
  if (v.dtype != DType::f16 && v.dtype != DType::bf16) return false;
  return arch.major >= 8 && v.out_channels / v.params.groups >= kGenericConvMmaMinChannels;
}

GenericConvParams generic_conv_params(const Conv2dVariant& v, bool mma) {
  GenericConvParams p;
  const bool in_nhwc = v.input_layout == Conv2dLayout::nhwc;
  const bool w_nhwc = v.weight_layout == Conv2dLayout::nhwc;
  const bool out_nhwc = v.output_layout == Conv2dLayout::nhwc;
  const std::int64_t oh = v.out_height(), ow = v.out_width();
  const int groups = v.params.groups;
  p.cin = v.in_channels, p.h = v.height, p.w = v.width, p.cout = v.out_channels;
  p.kh = v.kernel_h, p.kw = v.kernel_w;
  p.sh = v.params.stride_h, p.sw = v.params.stride_w, p.ph = v.params.pad_h, p.pw = v.params.pad_w;
  p.dh = v.params.dilation_h, p.dw = v.params.dilation_w;
  p.oh = static_cast<std::int32_t>(oh), p.ow = static_cast<std::int32_t>(ow);
  p.cin_g = v.in_channels / groups;
  p.cout_g = v.out_channels / groups;
  p.co_tiles = (p.cout_g + kGenericConvCoTile - 1) / kGenericConvCoTile;
  p.has_bias = v.has_bias ? 1 : 0;
  p.has_residual = v.has_residual ? 1 : 0;
  const std::int64_t hw = std::int64_t{v.height} * v.width;
  p.in_n = v.in_channels * hw;
  p.in_c = in_nhwc ? 1 : hw;
  p.in_y = in_nhwc ? std::int64_t{v.width} * v.in_channels : v.width;
  p.in_x = in_nhwc ? v.in_channels : 1;
  p.out_n = v.out_channels * oh * ow;
  p.out_c = out_nhwc ? 1 : oh * ow;
  p.out_y = out_nhwc ? ow * v.out_channels : ow;
  p.out_x = out_nhwc ? v.out_channels : 1;
  const std::int64_t taps = std::int64_t{v.kernel_h} * v.kernel_w;
  p.w_o = p.cin_g * taps;
  p.w_i = w_nhwc ? 1 : taps;
  p.w_y = w_nhwc ? std::int64_t{v.kernel_w} * p.cin_g : v.kernel_w;
  p.w_x = w_nhwc ? p.cin_g : 1;
  // 16 bytes of a pixel's channels a load where every group's run starts on a 16-byte boundary (the
  // kernel checks the input pointer).
  const int vec = static_cast<int>(16 / dtype_size(v.dtype));
  p.vec_in = in_nhwc && p.cin_g % vec == 0 && v.in_channels % vec == 0 ? 1 : 0;
  // The weight's channels are contiguous where it is channels-last, and for a 1 x 1 filter in either
  // layout (its NCHW and channels-last strides are the same; as the tensor-core kernels read it,
  // conv2d_hmma.cpp). Its runs start at multiples of cin_g.
  p.vec_w = p.vec_in && (w_nhwc || taps == 1) ? 1 : 0;
  p.mode = mma ? (p.vec_in ? 2 : 3) : depthwise_channels_last(v) ? 1 : 0;
  p.dw_channels = p.mode == 1 ? depthwise_channels(v) : 1;
  return p;
}

GenericConvGrid generic_conv_grid(const Conv2dVariant& v, bool mma) {
  GenericConvGrid g;
  const std::int64_t pixels = v.out_height() * v.out_width();
  if (mma) {
    const int cout_g = v.out_channels / v.params.groups;
    g.threads = kGenericConvMmaThreads;
    g.blocks_x = (pixels + kGenericConvMmaTile - 1) / kGenericConvMmaTile;
    g.blocks_y = v.params.groups * ((cout_g + kGenericConvMmaTile - 1) / kGenericConvMmaTile);
    return g;
  }
  if (depthwise_channels_last(v)) {
    // A thread: depthwise_channels of kGenericConvDwRows rows of one column.
    const std::int64_t items = std::int64_t{v.out_channels / depthwise_channels(v)} * v.out_width() *
                               ((v.out_height() + kGenericConvDwRows - 1) / kGenericConvDwRows);
    g.threads = kGenericConvThreads;
    g.blocks_x = (items + g.threads - 1) / g.threads;
    g.blocks_y = 1;
    return g;
  }
  set_direct_blocks(pixels, g);  // (one pixel a thread)
  const int cout_g = v.out_channels / v.params.groups;
  g.blocks_y = v.params.groups * ((cout_g + kGenericConvCoTile - 1) / kGenericConvCoTile);
  return g;
}

bool generic_conv_applies(const Conv2dVariant& v) {
  if (!cuinline::detail::generic_fatbin_built()) return false;
  if (!v.epilogue.expression.empty() || !v.epilogue.more_outputs.empty()) return false;
  if (ops::detail::lowered_step_count(v.epilogue) > static_cast<std::size_t>(ops::detail::kGenericMaxSteps)) return false;
  if (v.dtype != DType::f32 && v.dtype != DType::f16 && v.dtype != DType::bf16 && v.dtype != DType::f64) return false;
  const GenericConvGrid g = generic_conv_grid(v);
  return g.blocks_x >= 1 && g.blocks_x <= 0x7fffffffLL && g.blocks_y >= 1 && g.blocks_y <= 65535;
}

ops::detail::GenericProgram generic_conv_program(const Op& epilogue, DType dtype) {
  if (!epilogue.expression.empty()) {
    throw InvalidArgument("generic conv2d kernel: an expression epilogue has no generic form");
  }
  const DType a = opmath_dtype(dtype);
  const std::vector<cuinline::detail::LoweredStep> steps = cuinline::detail::lower_chain(epilogue, a);
  if (steps.size() > static_cast<std::size_t>(ops::detail::kGenericMaxSteps)) {
    throw InvalidArgument("generic conv2d kernel: an epilogue of " + std::to_string(steps.size()) +
                          " steps (at most " + std::to_string(ops::detail::kGenericMaxSteps) + ")");
  }
  ops::detail::GenericProgram p;
  p.steps = static_cast<std::int32_t>(steps.size());
  p.inputs = conv2d_epilogue_operands(epilogue) + 1;  // the conv value and the channel operands
  for (std::size_t i = 0; i < steps.size(); ++i) p.step[i] = ops::detail::generic_step(steps[i], a);
  return p;
}

GenericConvLaunch plan_generic_conv(const Conv2dVariant& v, std::int64_t n, const Arch& arch, const void* input,
                                    const void* weight, int multiprocessors) {
  const std::int64_t mma_tiles = (n * v.out_height() * v.out_width() + kGenericConvMmaTile - 1) / kGenericConvMmaTile;
  const bool mma = generic_conv_mma_applies(v, arch) && mma_tiles <= 0x7fffffffLL;
  GenericConvLaunch l;
  l.grid = generic_conv_grid(v, mma);
  if (mma) l.grid.blocks_x = mma_tiles;  // (one M dimension over the batch)
  if (l.grid.blocks_x > 0x7fffffffLL || (!mma && n > 65535)) {  // (grid z: the images)
    throw InvalidArgument("generic conv2d kernel: variant " + v.name() + " has too many blocks");
  }
  l.grid_z = mma ? 1u : static_cast<unsigned>(n);
  l.params = generic_conv_params(v, mma);
  if (mma && l.params.mode == 2 && !aligned16(input)) l.params.mode = 3, l.params.vec_in = l.params.vec_w = 0;
  if (mma && !aligned16(weight)) l.params.vec_w = 0;  // the weight gathered element by element
  l.params.images = static_cast<std::int32_t>(n);
  // An f32 conv on a scalar-read input (NCHW, or channel runs not whole 16-byte vectors) with
  // channels enough for the implicit GEMM's 64-channel tiles and tiles enough for a wave: the GEMM
  // form (mode 5), whose products come from shared memory instead of a load each few of them. (Its
  // offsets from a pixel's input origin and in the weight are 32-bit: the largest, a tap's channel
  // up to 8 past the group's (a K tile's elements past K), must fit.)
  constexpr std::int64_t k32 = std::int64_t{1} << 31;
  const GenericConvParams& gp = l.params;
  const std::int64_t gemm_offsets = (gp.cin_g + 8) * gp.in_c + std::int64_t{gp.kh - 1} * gp.dh * gp.in_y +
                                    std::int64_t{gp.kw - 1} * gp.dw * gp.in_x;
  if (!mma && v.dtype == DType::f32 && gp.mode == 0 && gp.vec_in == 0 && multiprocessors > 0 &&
      gp.cout_g >= kGenericConvGemmMinChannels && gemm_offsets < k32 &&
      std::int64_t{v.out_channels} * gp.w_o < k32) {
    GenericConvGrid gemm;
    gemm.threads = kGenericConvGemmThreads;
    gemm.blocks_x = (n * v.out_height() * v.out_width() + kGenericConvGemmTileM - 1) / kGenericConvGemmTileM;
    gemm.blocks_y = v.params.groups * ((gp.cout_g + kGenericConvGemmTileN - 1) / kGenericConvGemmTileN);
    if (gemm.blocks_x <= 0x7fffffffLL && gemm.blocks_x * gemm.blocks_y >= multiprocessors) {
      l.params.mode = 5;
      l.grid = gemm;
      l.grid_z = 1;
    }
  }
  // A direct launch on a scalar-read input (NCHW, or channel runs not whole 16-byte vectors) with
  // blocks to spare: kGenericConvPixels pixels of a row a thread, so the pixels share their weight
  // loads (the seed's 128 x 8 x 128² -> 64 3 x 3 f32, NCHW: a weight load for every product on one
  // pixel a thread).
  if (!mma && l.params.mode == 0 && l.params.vec_in == 0 && multiprocessors > 0) {
    GenericConvGrid rows = l.grid;
    set_direct_blocks(v.out_height() * ((v.out_width() + kGenericConvPixels - 1) / kGenericConvPixels), rows);
    const std::int64_t blocks = rows.blocks_x * rows.blocks_y * n;
    if (blocks >= std::int64_t{kGenericConvPixelsMinBlocksPerSm} * multiprocessors) {
      l.params.mode = 4;
      l.grid = rows;
    }
  }
  // The K tiles of the tensor-core kernel's reduction (32 input channels of one tap each; the
  // gathered form's K is flat over taps x channels).
  const GenericConvParams& q = l.params;
  constexpr std::int64_t bk = kGenericConvMmaTileK;
  const std::int64_t ktiles = q.mode == 3 ? (std::int64_t{q.kh} * q.kw * q.cin_g + bk - 1) / bk
                                          : std::int64_t{q.kh} * q.kw * ((q.cin_g + bk - 1) / bk);
  // The vector form on a long reduction: the wide tiling (mode 6), whose warps compute 64 x 64 each
  // (twice the products a shared load of the 64 x 64 form's 32 x 32) with four K tiles in flight.
  // Where its tiles are fewer than the multiprocessors, its K tiles split into the fewest slices
  // that fill them, each at least kGenericConvWideMinSliceTiles long (else the 64 x 64 form,
  // below).
  // CUINLINE_CONV2D_GENERIC_WIDE: 0 never, 1 wherever the vector form runs.
  std::int64_t slices = 1;
  if (mma && l.params.mode == 2 && multiprocessors > 0) {
    const int knob = conv2d_knobs().generic_wide;
    GenericConvGrid wide;
    wide.threads = kGenericConvMmaThreads;
    wide.blocks_x = (n * v.out_height() * v.out_width() + kGenericConvWideTile - 1) / kGenericConvWideTile;
    wide.blocks_y = v.params.groups * ((l.params.cout_g + kGenericConvWideTile - 1) / kGenericConvWideTile);
    wide.shared_bytes = kGenericConvWideSharedBytes;
    const std::int64_t wide_tiles = wide.blocks_x * wide.blocks_y;
    const std::int64_t wide_slices =
        wide_tiles >= multiprocessors ? 1 : (multiprocessors + wide_tiles - 1) / wide_tiles;
    const bool pays = l.params.cout_g >= kGenericConvWideMinChannels && ktiles >= kGenericConvWideMinKTiles &&
                      (wide_slices == 1 || (wide_slices <= kGenericConvMaxSlices &&
                                            ktiles >= wide_slices * kGenericConvWideMinSliceTiles));
    if (knob == 1 || (knob < 0 && pays)) {
      l.params.mode = 6;
      l.grid = wide;
      slices = std::clamp<std::int64_t>(
          std::min<std::int64_t>(wide_slices, ktiles / kGenericConvMinSliceTiles), 1, kGenericConvMaxSlices);
    }
  }
  // The 64 x 64 form: few tiles of a long reduction (a small plane of many channels: ResNet-50's
  // 512-channel 3 x 3 layers on 7 x 7 make 8 tiles of 144 K tiles at batch 1): the K tiles split so
  // the blocks fill about one wave, each slice at least kGenericConvMinSliceTiles K tiles, at most
  // kGenericConvMaxSlices slices. (Shorter reductions lose more to the workspace, its memset and the
  // last block's sum than the split gains: ResNet-50's 1 x 1 layers of 256-2048 channels at batch 1
  // ran 1.2-2.0x slower split in 16 slices of at least 4.)
  const std::int64_t tiles = l.grid.blocks_x * l.grid.blocks_y;
  if (mma && l.params.mode != 6 && multiprocessors > 0 && 2 * tiles <= multiprocessors) {
    const int knob = conv2d_knobs().generic_split_k_min;
    const std::int64_t min_ktiles = knob < 0    ? kGenericConvMinSplitKTiles
                                    : knob == 0 ? std::numeric_limits<std::int64_t>::max()
                                                : knob;
    slices = ktiles < min_ktiles
                 ? 1
                 : std::min<std::int64_t>(
                       {multiprocessors / tiles, ktiles / kGenericConvMinSliceTiles, kGenericConvMaxSlices});
  }
  if (slices >= 2) {
    const std::int64_t per = (ktiles + slices - 1) / slices;
    slices = (ktiles + per - 1) / per;  // (no empty slice)
    const std::int64_t tile = l.params.mode == 6 ? kGenericConvWideTile : kGenericConvMmaTile;
    l.params.k_slices = static_cast<std::int32_t>(slices);
    l.grid_z = static_cast<unsigned>(slices);
    l.partial_bytes = static_cast<std::uint64_t>(tiles * slices * tile * tile) * 4;
    l.counter_bytes = static_cast<std::uint64_t>(tiles) * 4;
  }
  // The gathered form with many tiles: its weight packed K-major first (kGenericConvPackMinTilesPerSm).
  if (mma && l.params.mode == 3 && multiprocessors > 0 &&
      tiles >= std::int64_t{kGenericConvPackMinTilesPerSm} * multiprocessors) {
    const std::int64_t k_total = std::int64_t{l.params.kh} * l.params.kw * l.params.cin_g;
    l.pack_kpad = (k_total + bk - 1) / bk * bk;
    l.weight_w_o = l.params.w_o;
    l.pack_bytes = static_cast<std::uint64_t>(v.out_channels * l.pack_kpad) * dtype_size(v.dtype);
    l.params.w_o = l.pack_kpad;
    l.params.vec_w = 1;
  }
  return l;
}

void launch_generic_conv(const Conv2dVariant& v, std::int64_t n, const void* input, const void* weight,
                         const void* bias, void* output, const void* residual, const void* const* chan,
                         CUstream stream, int device) {
  GenericConvLaunch l = plan_generic_conv(v, n, device_arch(device), input, weight, ops::detail::multiprocessors(device));
  const ops::detail::GenericProgram program = generic_conv_program(v.epilogue, v.dtype);
  // Split K: the slices' tiles and the tiles' counters in stream-ordered scratch memory, the counters
  // zeroed on the stream; a packed weight after them. None to be had: the tiles run whole, the
  // weight is gathered.
  CUdeviceptr ws = 0;
  const std::uint64_t split_bytes = l.params.k_slices > 1 ? (l.partial_bytes + l.counter_bytes + 15) / 16 * 16 : 0;
  if (split_bytes + l.pack_bytes > 0) {
    ws = cuinline::detail::workspace_alloc(device, static_cast<std::size_t>(split_bytes + l.pack_bytes), stream);
  }
  if (l.params.k_slices > 1) {
    if (ws == 0) {
      l.params.k_slices = 1, l.grid_z = 1;
    } else {
      l.params.partials = ws;
      l.params.counters = ws + l.partial_bytes;
    }
  }
  if (l.pack_kpad > 0 && ws == 0) l.params.vec_w = 0, l.params.w_o = l.weight_w_o, l.pack_kpad = 0;
  cuinline::detail::WorkspaceGuard guard(ws, stream);  // freed after the launch (or a throw)
  if (l.pack_kpad > 0) {
    // The weight K-major into the workspace: a thread an element of cout x pack_kpad.
    GenericConvParams original = l.params;
    original.w_o = l.weight_w_o;
    const auto packed = static_cast<CUdeviceptr>(ws + split_bytes);
    const std::int64_t elements = std::int64_t{v.out_channels} * l.pack_kpad;
    LaunchConfig pc;
    pc.grid = Dim3(static_cast<unsigned>((elements + kGenericConvThreads - 1) / kGenericConvThreads));
    pc.block = Dim3(static_cast<unsigned>(kGenericConvThreads));
    pc.stream = stream;
    const int kpad = static_cast<int>(l.pack_kpad);
    generic_conv_kernel(v.dtype, -1).launch(pc, weight, packed, original, kpad);
    weight = reinterpret_cast<const void*>(static_cast<std::uintptr_t>(packed));
  }
  if (ws != 0) {
    check_driver(cuinline::detail::driver().cuMemsetD32Async(static_cast<CUdeviceptr>(l.params.counters), 0,
                                                              static_cast<std::size_t>(l.counter_bytes / 4), stream),
                 "zeroing the generic conv2d kernel's split-K counters");
  }
  ChannelPointers channels{};
  for (int k = 0; k < kMaxConv2dChannelOperands; ++k) channels.p[k] = chan[k];
  LaunchConfig cfg;
  cfg.grid = Dim3(static_cast<unsigned>(l.grid.blocks_x), static_cast<unsigned>(l.grid.blocks_y), l.grid_z);
  cfg.block = Dim3(static_cast<unsigned>(l.grid.threads));
  cfg.shared_bytes = l.grid.shared_bytes;
  cfg.stream = stream;
  const Kernel kernel = generic_conv_kernel(v.dtype, l.params.mode);
  if (l.grid.shared_bytes > 48 * 1024) allow_dynamic_shared(kernel, v.dtype, l.grid.shared_bytes, device);
  kernel.launch(cfg, input, weight, bias, output, residual, channels, l.params, program);
  ops::detail::count_generic_launch();
}

}  // namespace cuinline::ops::conv2d_impl
