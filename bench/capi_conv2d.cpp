// C API over cuinline::ops::conv2d for bench/conv2d_peers.py (ctypes): the script passes torch
// tensors' data pointers and torch's current stream, so cuinline and PyTorch run in one process,
// on the same buffers and the same stream, timed by the same CUDA events.
#include <array>
#include <chrono>
#include <cstdint>
#include <cuinline/compiler.hpp>
#include <cuinline/conv2d.hpp>
#include <cuinline/driver.hpp>
#include <cuinline/error.hpp>
#include <exception>
#include <string>

#include "ops/conv2d/tiling.hpp"

namespace {

thread_local std::string g_last_error;
thread_local cuinline::ops::Conv2dPrecision g_precision = cuinline::ops::Conv2dPrecision::fp32;

// epilogue: 0 identity, 1 div(a) | leaky_relu(b), 2 relu
cuinline::ops::Op make_epilogue(int kind, double a, double b) {
  using cuinline::ops::Op;
  switch (kind) {
    case 0:
      return Op::chain({});
    case 1:
      return cuinline::ops::div_leaky_relu_epilogue(a, b);
    case 2:
      return Op::relu();
  }
  throw cuinline::InvalidArgument("capi_conv2d: unknown epilogue kind " + std::to_string(kind));
}

}  // namespace

extern "C" {

/// The last error message of this thread ("" when none).
const char* cuinline_conv2d_last_error() {
  return g_last_error.c_str();
}

/// Sets the precision of this thread's next cuinline_conv2d_f32 / cuinline_conv2d_compile_ms
/// calls: 0 fp32 (default), 1 tf32, 2 tf32x3. Returns 0, or -1 for another value.
int cuinline_conv2d_set_precision(int precision) {
  if (precision < 0 || precision > 2) return -1;
  g_precision = static_cast<cuinline::ops::Conv2dPrecision>(precision);
  return 0;
}

/// One fused conv2d launch (f32, NCHW). shape = {N, Cin, H, W, Cout, KH, KW}; params = {sh, sw, ph,
/// pw, dh, dw}; bias may be null. Returns 0, or -1 with cuinline_conv2d_last_error() set.
int cuinline_conv2d_f32(const void* input, const void* weight, const void* bias, void* output,
                        const std::int64_t* shape, const int* params, int epilogue, double a, double b,
                        void* stream) {
  try {
    using cuinline::DType;
    using cuinline::TensorView;
    const cuinline::ops::Conv2dParams p{params[0], params[1], params[2], params[3], params[4], params[5]};
    const std::int64_t oh = cuinline::ops::conv2d_out_extent(shape[2], static_cast<int>(shape[5]), p.stride_h,
                                                             p.pad_h, p.dilation_h);
    const std::int64_t ow = cuinline::ops::conv2d_out_extent(shape[3], static_cast<int>(shape[6]), p.stride_w,
                                                             p.pad_w, p.dilation_w);
    const TensorView in = TensorView::contiguous(const_cast<void*>(input), DType::f32,
                                                 {shape[0], shape[1], shape[2], shape[3]});
    const TensorView w = TensorView::contiguous(const_cast<void*>(weight), DType::f32,
                                                {shape[4], shape[1], shape[5], shape[6]});
    const TensorView bv =
        bias ? TensorView::contiguous(const_cast<void*>(bias), DType::f32, {shape[4]}) : TensorView{};
    const TensorView out = TensorView::contiguous(output, DType::f32, {shape[0], shape[4], oh, ow});
    cuinline::ops::conv2d(in, w, bv, out, p, make_epilogue(epilogue, a, b), static_cast<CUstream>(stream),
                          g_precision);
    return 0;
  } catch (const std::exception& e) {
    g_last_error = e.what();
    return -1;
  }
}

/// One fused conv2d launch in any dtype and layout: dtype 0 f32, 1 f16, 2 bf16; layouts bit 0 input
/// channels-last, bit 1 weight, bit 2 output. shape and params as cuinline_conv2d_f32 (the logical
/// NCHW extents); the pointers are the tensors' storage in those layouts. kernel, when non-null,
/// gets the kernel the plan uses: 0 fp32 direct, 1 TF32 tensor cores, 2 Winograd, 3 general direct,
/// 4 f16/bf16 tensor cores. Returns 0, or -1 with cuinline_conv2d_last_error() set.
int cuinline_conv2d_any(const void* input, const void* weight, const void* bias, void* output,
                        const std::int64_t* shape, const int* params, int dtype, int layouts, int epilogue,
                        double a, double b, void* stream, int* kernel) {
  try {
    using cuinline::DType;
    using cuinline::TensorView;
    const DType dt = dtype == 1 ? DType::f16 : dtype == 2 ? DType::bf16 : DType::f32;
    const cuinline::ops::Conv2dParams p{params[0], params[1], params[2], params[3], params[4], params[5]};
    const std::int64_t oh = cuinline::ops::conv2d_out_extent(shape[2], static_cast<int>(shape[5]), p.stride_h,
                                                             p.pad_h, p.dilation_h);
    const std::int64_t ow = cuinline::ops::conv2d_out_extent(shape[3], static_cast<int>(shape[6]), p.stride_w,
                                                             p.pad_w, p.dilation_w);
    auto view = [&](const void* data, bool nhwc, std::int64_t n, std::int64_t c, std::int64_t h,
                    std::int64_t w) {
      void* d = const_cast<void*>(data);
      return nhwc ? TensorView::strided(d, dt, {n, c, h, w}, {h * w * c, 1, w * c, c})
                  : TensorView::contiguous(d, dt, {n, c, h, w});
    };
    const TensorView in = view(input, layouts & 1, shape[0], shape[1], shape[2], shape[3]);
    const TensorView w = view(weight, layouts & 2, shape[4], shape[1], shape[5], shape[6]);
    const TensorView bv =
        bias ? TensorView::contiguous(const_cast<void*>(bias), dt, {shape[4]}) : TensorView{};
    const TensorView out = view(output, layouts & 4, shape[0], shape[4], oh, ow);
    const cuinline::ops::Op epi = make_epilogue(epilogue, a, b);
    if (kernel) {
      // (What the call runs: planned for the stream's device.)
      const cuinline::ops::Conv2dVariant v = cuinline::ops::conv2d_variant_for_device(
          cuinline::ops::conv2d_variant_for(in, w, bv, out, p, epi, g_precision),
          cuinline::stream_device(static_cast<CUstream>(stream)));
      const cuinline::ops::Conv2dTiling t = cuinline::ops::conv2d_tiling(v);
      // (+10: f32 channels-last on that kernel between transposing copies)
      *kernel = (t.half_mma() ? 4 : t.generic() ? 3 : t.winograd() ? 2 : t.tensor_cores() ? 1 : 0) + (t.transposes() ? 10 : 0);
    }
    cuinline::ops::conv2d(in, w, bv, out, p, epi, static_cast<CUstream>(stream), g_precision);
    return 0;
  } catch (const std::exception& e) {
    g_last_error = e.what();
    return -1;
  }
}

/// A tiling's block as the C API reports it: {tx, ty, groups, px, ch, ci_chunk, ci_unroll, pipeline}.
/// The direct kernel's fields; Winograd's tile lanes, warps along the tiles and the channels, ...,
/// pipeline 4; the general kernel's threads x 1 x 1, its channels a stage all `in_channels`; the
/// tensor-core kernels' channels a stage (mma: its unroll and pipeline too), the rest 0.
static std::array<int, 8> block_fields(const cuinline::ops::Conv2dTiling& t, int in_channels) {
  using cuinline::ops::Conv2dKernel;
  switch (t.kernel()) {
    case Conv2dKernel::direct: {
      const cuinline::ops::DirectTiling& d = t.as_direct();
      return {d.threads_x,           d.threads_y, d.channel_groups, d.pixels_per_thread,
              d.channels_per_thread, d.ci_chunk,  d.ci_unroll,      d.pipeline};
    }
    case Conv2dKernel::winograd: {
      const cuinline::ops::WinogradTiling& w = t.as_winograd();
      return {w.tile_lanes,          w.warps_x,  w.warps_c,   w.pixels_per_thread,
              w.channels_per_thread, w.ci_chunk, w.ci_unroll, 4};
    }
    case Conv2dKernel::mma: {
      const cuinline::ops::MmaTiling& m = t.as_mma();
      return {0, 0, 0, 0, 0, m.ci_chunk, m.ci_unroll, m.pipeline};
    }
    case Conv2dKernel::hmma:
      return {0, 0, 0, 0, 0, t.as_hmma().ci_chunk, 0, 0};
    case Conv2dKernel::generic: {
      const cuinline::ops::GenericTiling& g = t.as_generic();
      return {g.block_threads, 1, 1, g.pixels_per_thread, g.channels_per_thread, in_channels, 0, 0};
    }
  }
  return {};
}

/// The tiling the library picks for an fp32 variant: tiling[0..12] = {tx, ty, groups, px, ch, ci_chunk,
/// ci_unroll, row_tiles, shared_bytes, tiles_x, tiles_y, block_channels, pipeline} (block_fields).
/// Returns 0, or -1.
int cuinline_conv2d_tiling(const std::int64_t* shape, const int* params, int* tiling) {
  try {
    const cuinline::ops::Conv2dParams p{params[0], params[1], params[2], params[3], params[4], params[5]};
    const cuinline::ops::Conv2dVariant v = cuinline::ops::make_conv2d_variant(
        static_cast<int>(shape[1]), static_cast<int>(shape[2]), static_cast<int>(shape[3]),
        static_cast<int>(shape[4]), static_cast<int>(shape[5]), static_cast<int>(shape[6]), p, true,
        cuinline::ops::Op::relu());
    const cuinline::ops::Conv2dTiling t = cuinline::ops::conv2d_tiling(v);
    const std::array<int, 8> f = block_fields(t, v.in_channels);
    const cuinline::ops::Conv2dGrid& g = t.grid();
    for (int i = 0; i < 7; ++i) tiling[i] = f[i];
    tiling[7] = g.row_tiles;
    tiling[8] = static_cast<int>(g.shared_bytes);
    tiling[9] = g.tiles_x;
    tiling[10] = g.tiles_y;
    tiling[11] = t.block_channels();
    tiling[12] = f[7];
    return 0;
  } catch (const std::exception& e) {
    g_last_error = e.what();
    return -1;
  }
}

/// NVRTC compile time (ms) of one variant for `arch` (e.g. "sm_90"), bypassing every cache; the
/// tiling is written to tiling[0..8] = {tx, ty, groups, px, ch, ci_chunk, ci_unroll, row_tiles,
/// shared_bytes} when non-null. Returns a negative value on error.
double cuinline_conv2d_compile_ms(const std::int64_t* shape, const int* params, int has_bias, int epilogue,
                                  double a, double b, const char* arch, int* tiling) {
  try {
    const cuinline::ops::Conv2dParams p{params[0], params[1], params[2], params[3], params[4], params[5]};
    cuinline::ops::Conv2dVariant v = cuinline::ops::make_conv2d_variant(
        static_cast<int>(shape[1]), static_cast<int>(shape[2]), static_cast<int>(shape[3]),
        static_cast<int>(shape[4]), static_cast<int>(shape[5]), static_cast<int>(shape[6]), p, has_bias != 0,
        make_epilogue(epilogue, a, b));
    v.precision = g_precision;
    if (tiling) {
      const cuinline::ops::Conv2dTiling t = cuinline::ops::conv2d_tiling(v);
      const std::array<int, 8> f = block_fields(t, v.in_channels);
      for (int i = 0; i < 7; ++i) tiling[i] = f[i];
      tiling[7] = t.grid().row_tiles;
      tiling[8] = static_cast<int>(t.grid().shared_bytes);
    }
    const cuinline::CompileRequest request = cuinline::ops::make_request(v);
    const auto start = std::chrono::steady_clock::now();
    cuinline::compile(request, cuinline::Arch::parse(arch));
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  } catch (const std::exception& e) {
    g_last_error = e.what();
    return -1.0;
  }
}

}  // extern "C"
