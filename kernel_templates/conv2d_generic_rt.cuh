// conv2d_generic_rt.cuh — the generic conv2d kernel: the direct convolution of conv2d_generic.cuh
// with every shape, layout and the epilogue passed as run-time data, one binary per storage dtype,
// built with the library by nvcc (src/ops/conv2d/conv2d_generic_rt.cu). It serves a never-seen
// conv2d variant at once while the specialized kernel compiles in the background
// (src/ops/specialize.cpp, include/cuinline/jit.hpp).
//
// The arithmetic is conv2d_generic.cuh's: loads widened exactly to opmath A (fp32 for f32, f16 and
// bf16; fp64 for f64), the products summed by fused multiply-adds in A over kh, then kw, then the
// input channels, conv + bias rounded, + residual rounded, the epilogue in A, one rounding to the
// storage type at the store. The epilogue is a lowered chain (ewg_program; detail::lower_chain of
// the epilogue at the opmath dtype, as the specialized conv renders its functor) run by the
// elementwise generic kernel's step interpreter (ew_generic_steps.cuh) on A values; tensor operand
// k > 0 is channel operand k - 1 at the output channel (clamped to the last), operand 0 the conv
// value. The module is compiled as the specialized conv is (--fmad=false, no CUINLINE_EW_FMAD).
//
// Work split (mode 0): a thread computes one output pixel of one image for up to kCoTile
// consecutive output channels of one group (the block row's: every lane of a warp reads the same
// weights, broadcast loads); a channels-last input whose channel runs are 16-byte aligned is read
// 16 bytes a load, and a channels-last weight beside it too. Mode 4, for an input read element by
// element where a launch has blocks to spare (the host's rule): the same sums on
// CUINLINE_CONV2D_RT_PIXELS pixels of a row a thread (column j of each of the row's equal runs),
// each weight loaded once for all of them. Mode 1 (depthwise with a channels-last
// input): a thread computes one output channel, or a pair of a 16-bit input's, of
// CUINLINE_CONV2D_RT_DW_ROWS rows of one column, channels fastest, so a warp reads consecutive input
// channels (depthwise_rows).
// Grid: (blocks over the items, groups x channel tiles a group (mode 0) or 1, N); no shared memory.
// Each mode is its own kernel (cuinline_conv2d_rt_<dtype>, _px_<dtype> and _dw_<dtype>); f16 and
// bf16 convs with 16 or more output channels a group take the tensor-core kernel instead
// (conv2d_generic_rt_mma.cuh, modes 2 and 3), and f32 convs with a scalar-read input and 32 or more
// output channels a group the implicit GEMM where it fills the GPU (conv2d_generic_rt_gemm.cuh,
// mode 5).
#ifndef CUINLINE_CONV2D_GENERIC_RT_CUH
#define CUINLINE_CONV2D_GENERIC_RT_CUH

#include "conv2d_generic.cuh"
#include "ew_generic_steps.cuh"

#define CUINLINE_CONV2D_RT_THREADS 128
#define CUINLINE_CONV2D_RT_CO_TILE 8
#define CUINLINE_CONV2D_RT_PIXELS 4

// The shape and layouts (src/ops/conv2d/conv2d_generic_rt.hpp: same layout). Element strides of
// the input, output (image, channel, row, column) and weight (output channel, input channel, row,
// column); the input's image stride starts at its first group.
struct cuinline_conv2d_rt_params {
  long long in_n, in_c, in_y, in_x;
  long long out_n, out_c, out_y, out_x;
  long long w_o, w_i, w_y, w_x;
  int cin, h, w, cout, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow;
  int cin_g, cout_g, co_tiles;  // channels a group, channel tiles a group
  int has_bias, has_residual;
  int vec_in;  // a channels-last input read 16 bytes a load (its runs and pointer aligned)
  int mode;    // 0: pixels with a tile of channels; 1: depthwise, channels fastest; 2, 3: tensor cores
               // (_mma.cuh); 4: mode 0 on CUINLINE_CONV2D_RT_PIXELS pixels of a row a thread (vec_in 0);
               // 5: f32 implicit GEMM (_gemm.cuh)
  int vec_w;   // with vec_in: a channels-last weight read 16 bytes a load too
  int images;  // modes 2, 3 and 5: the images of the launch (its M dimension spans them)
  int dw_channels;  // mode 1: adjacent output channels a thread (2: a 16-bit input read a pair a load; else 1)
  int k_slices;     // modes 2 and 3: the K tiles split into k_slices parts (grid z), 1: not split
  int reserved;     // (0; keeps the pointers below 8-byte aligned)
  unsigned long long partials;  // k_slices > 1: float [tiles][k_slices][BM x BN], the slices' sums
  unsigned long long counters;  // k_slices > 1: unsigned [tiles], zero at the launch: slices arrived
};

namespace cuinline_conv2d_rt_detail {

using cuinline_conv2d_generic_detail::fma_op;
using cuinline_conv2d_generic_detail::load_op;

// The epilogue on the conv (+ bias [+ residual]) value x of output channel co.
template <class T, class A>
__device__ __forceinline__ A epilogue(const ewg_program& e, const cuinline_conv2d_chan& chan, A x, int co,
                                      int last) {
  if (e.steps == 0) return x;
  const int c = co < last ? co : last;
  const A x0 = x;
  A y[1] = {x};
  for (int s = 0; s < e.steps; ++s) {
    const ewg_step& st = e.step[s];
    const ewg_opmath<A> k(st);
    A o[1], cnd[1];
    if (st.fn >= EWG_ADD_T && st.fn <= EWG_WHERE_T) {
      o[0] = st.operand == 0 ? x0 : ew_channel_value<T>(chan.p[st.operand - 1], c);
    }
    if (st.fn == EWG_WHERE_T || st.fn == EWG_WHERE_S) {
      cnd[0] = st.cond == 0 ? x0 : ew_channel_value<T>(chan.p[st.cond - 1], c);
    }
    ewg_step_values<A, 1, true>(st, k, y, o, cnd);
  }
  return y[0];
}

// conv + bias, rounded, + residual, rounded, the epilogue, one rounding to T (conv2d_generic.cuh).
template <class T, class A>
__device__ __forceinline__ void finish(const cuinline_conv2d_rt_params& p, const ewg_program& e,
                                       const cuinline_conv2d_chan& chan, const T* bias, const T* residual,
                                       T* output, A acc, int co, long long at) {
  A v = acc + (p.has_bias ? load_op(bias + co) : A(0));
  if (p.has_residual) v += load_op(residual + at);
  output[at] = ew_traits<T>::from_op(epilogue<T, A>(e, chan, v, co, p.cout - 1));
}

// The sums of mode 0 for the channels co0 .. co0 + valid - 1 (Full: all kCoTile of them).
template <class T, class A, bool Full>
__device__ __forceinline__ void accumulate(const cuinline_conv2d_rt_params& p, const T* in_n, const T* w_co,
                                           int oy, int ox, int valid, bool vec_in, bool vec_w,
                                           A (&acc)[CUINLINE_CONV2D_RT_CO_TILE]) {
  constexpr int kCo = CUINLINE_CONV2D_RT_CO_TILE;
  constexpr int kVec = 16 / sizeof(T);
#pragma unroll 1
  for (int kh = 0; kh < p.kh; ++kh) {
    const int iy = oy * p.sh - p.ph + kh * p.dh;
    if (iy < 0 || iy >= p.h) continue;  // zero padding
#pragma unroll 1
    for (int kw = 0; kw < p.kw; ++kw) {
      const int ix = ox * p.sw - p.pw + kw * p.dw;
      if (ix < 0 || ix >= p.w) continue;
      const T* src = in_n + iy * p.in_y + ix * p.in_x;
      const T* wp = w_co + kh * p.w_y + kw * p.w_x;
      if (vec_in) {
        // The same sums in the same order as the loop below, 16 bytes of channels a load.
#pragma unroll 1
        for (int cv = 0; cv < p.cin_g; cv += kVec) {
          A xs[kVec];
          cuinline_conv2d_generic_detail::load16(src + cv, xs);
          if (vec_w) {
            // Each channel's kVec weights in one load: the same sums, each channel's in j order.
#pragma unroll
            for (int c = 0; c < kCo; ++c) {
              if (!Full && c >= valid) break;
              A ws[kVec];
              cuinline_conv2d_generic_detail::load16(wp + c * p.w_o + cv, ws);
#pragma unroll
              for (int j = 0; j < kVec; ++j) acc[c] = fma_op(xs[j], ws[j], acc[c]);
            }
            continue;
          }
#pragma unroll
          for (int j = 0; j < kVec; ++j) {
#pragma unroll
            for (int c = 0; c < kCo; ++c) {
              if (Full || c < valid) acc[c] = fma_op(xs[j], load_op(wp + c * p.w_o + (cv + j) * p.w_i), acc[c]);
            }
          }
        }
        continue;
      }
#pragma unroll 4
      for (int ci = 0; ci < p.cin_g; ++ci) {
        const A x = load_op(src + ci * p.in_c);
#pragma unroll
        for (int c = 0; c < kCo; ++c) {
          if (Full || c < valid) acc[c] = fma_op(x, load_op(wp + c * p.w_o + ci * p.w_i), acc[c]);
        }
      }
    }
  }
}

// The epilogue on N conv (+ bias [+ residual]) values y of output channel co, each step dispatched
// once for all N (the values as epilogue() computes them one at a time).
template <class T, class A, int N>
__device__ __forceinline__ void epilogue_values(const ewg_program& e, const cuinline_conv2d_chan& chan, A (&y)[N],
                                                int co, int last) {
  if (e.steps == 0) return;
  const int c = co < last ? co : last;
  A x0[N];
#pragma unroll
  for (int i = 0; i < N; ++i) x0[i] = y[i];
  for (int s = 0; s < e.steps; ++s) {
    const ewg_step& st = e.step[s];
    const ewg_opmath<A> k(st);
    A o[N], cnd[N];
    if (st.fn >= EWG_ADD_T && st.fn <= EWG_WHERE_T) {
      const A v = st.operand == 0 ? A(0) : ew_channel_value<T>(chan.p[st.operand - 1], c);
#pragma unroll
      for (int i = 0; i < N; ++i) o[i] = st.operand == 0 ? x0[i] : v;
    }
    if (st.fn == EWG_WHERE_T || st.fn == EWG_WHERE_S) {
      const A v = st.cond == 0 ? A(0) : ew_channel_value<T>(chan.p[st.cond - 1], c);
#pragma unroll
      for (int i = 0; i < N; ++i) cnd[i] = st.cond == 0 ? x0[i] : v;
    }
    ewg_step_values<A, N, true>(st, k, y, o, cnd);
  }
}

// Mode 4's sums: those of mode 0 (accumulate) for P pixels of one output row, columns ox[q] (ok[q]:
// the pixel exists), each pixel's in accumulate's order (kh, kw, then the channels). On the scalar
// path (an NCHW input) the P pixels share each weight load: one for P x kCoTile products instead of
// kCoTile. The host sets mode 4 only where vec_in is 0.
template <class T, class A, bool Full, int P>
__device__ __forceinline__ void accumulate_pixels(const cuinline_conv2d_rt_params& p, const T* in_n, const T* w_co,
                                                  int oy, const int (&ox)[P], const bool (&ok)[P], int valid,
                                                  A (&acc)[P][CUINLINE_CONV2D_RT_CO_TILE]) {
  constexpr int kCo = CUINLINE_CONV2D_RT_CO_TILE;
#pragma unroll 1
  for (int kh = 0; kh < p.kh; ++kh) {
    const int iy = oy * p.sh - p.ph + kh * p.dh;
    if (iy < 0 || iy >= p.h) continue;  // zero padding
#pragma unroll 1
    for (int kw = 0; kw < p.kw; ++kw) {
      bool in[P];
      const T* src[P];
      bool any = false;
#pragma unroll
      for (int q = 0; q < P; ++q) {
        const int ix = ox[q] * p.sw - p.pw + kw * p.dw;
        in[q] = ok[q] && ix >= 0 && ix < p.w;
        src[q] = in_n + iy * p.in_y + (in[q] ? ix : 0) * p.in_x;
        any = any || in[q];
      }
      if (!any) continue;
      const T* wp = w_co + kh * p.w_y + kw * p.w_x;
#pragma unroll 2
      for (int ci = 0; ci < p.cin_g; ++ci) {
        A wt[kCo];
#pragma unroll
        for (int c = 0; c < kCo; ++c) wt[c] = Full || c < valid ? load_op(wp + c * p.w_o + ci * p.w_i) : A(0);
#pragma unroll
        for (int q = 0; q < P; ++q) {
          if (!in[q]) continue;
          const A x = load_op(src[q] + ci * p.in_c);
#pragma unroll
          for (int c = 0; c < kCo; ++c) {
            if (Full || c < valid) acc[q][c] = fma_op(x, wt[c], acc[q][c]);
          }
        }
      }
    }
  }
}

// Mode 4 (the host's rule: an input read element by element, blocks to spare): P pixels of a row a
// thread, the row cut into P runs of ceil(ow / P) columns, item j of a row taking column j of each
// run, so a warp's lanes read consecutive columns in each load; each weight load serves the P pixels.
template <class T, class A>
__device__ __forceinline__ void pixel_rows(const T* __restrict__ input, const T* __restrict__ weight,
                                           const T* __restrict__ bias, T* __restrict__ output,
                                           const T* __restrict__ residual, const cuinline_conv2d_chan& chan,
                                           const cuinline_conv2d_rt_params& p, const ewg_program& e) {
  constexpr int kCo = CUINLINE_CONV2D_RT_CO_TILE;
  const long long item = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long n = blockIdx.z;
  const int g = (int)blockIdx.y / p.co_tiles;
  const int t = (int)blockIdx.y - g * p.co_tiles;
  const int co0 = g * p.cout_g + t * kCo;
  const int valid = min(kCo, p.cout_g - t * kCo);
  const T* in_n = input + n * p.in_n + (long long)g * p.cin_g * p.in_c;
  const T* w_co = weight + co0 * p.w_o;
  constexpr int P = CUINLINE_CONV2D_RT_PIXELS;
  const long long runs = (p.ow + P - 1) / P;
  if (item >= (long long)p.oh * runs) return;
  const int oy = (int)(item / runs);
  const int j = (int)(item - (long long)oy * runs);
  int ox[P];
  bool ok[P];
#pragma unroll
  for (int q = 0; q < P; ++q) {
    ox[q] = j + q * (int)runs;
    ok[q] = ox[q] < p.ow;
  }
  A acc[P][kCo];
#pragma unroll
  for (int q = 0; q < P; ++q)
#pragma unroll
    for (int c = 0; c < kCo; ++c) acc[q][c] = A(0);
  if (valid == kCo) {
    accumulate_pixels<T, A, true, P>(p, in_n, w_co, oy, ox, ok, valid, acc);
  } else {
    accumulate_pixels<T, A, false, P>(p, in_n, w_co, oy, ox, ok, valid, acc);
  }
#pragma unroll
  for (int q = 0; q < P; ++q) {
    if (!ok[q]) continue;
    const long long out_pix = n * p.out_n + oy * p.out_y + ox[q] * p.out_x;
#pragma unroll
    for (int c = 0; c < kCo; ++c) {
      if (c >= valid) break;
      finish<T, A>(p, e, chan, bias, residual, output, acc[q][c], co0 + c, out_pix + (co0 + c) * p.out_c);
    }
  }
}

// Mode 1, depthwise (one input channel a group) with a channels-last input: a thread computes
// dw_channels adjacent output channels (a pair where the host set 2: a 16-bit input with one output
// channel a group, read one 32-bit word a load where the pointer allows) of kRows consecutive output
// rows of one column; items channels fastest, then columns, then row groups, so a warp's loads are
// consecutive channels. KH x KW: the filter as constants (3 x 3: its weights held in registers, and
// with stride and dilation 1 along the rows each input row loaded once for every output row it
// feeds), or 0 x 0 (p.kh x p.kw at run time, the weights read where they are used). Each output's
// sum runs over kh, then kw, taps in the padding skipped: conv2d_generic.cuh's order. The epilogue
// runs once for each channel's kRows values.
// Rows a thread, measured on an H200 (bf16 channels-last 3 x 3, L2 flushed, median of 40; the
// specialized row-fast kernel 0.0120 ms at 8 x 96 x 56^2): 4 rows 0.0235 ms, 8 rows 0.0287, and
// the previous kernel (one output a thread, 64-bit index arithmetic) 0.0582; at 32 images 0.0739
// (8 rows 0.0756, previous 0.213, specialized 0.0351). A 5 x 5 filter at stride 2 (weights read at
// run time): 0.0476 ms against the previous kernel's 0.0451.
#ifndef CUINLINE_CONV2D_RT_DW_ROWS
#define CUINLINE_CONV2D_RT_DW_ROWS 4
#endif
template <class T, class A, int KH, int KW>
__device__ __forceinline__ void depthwise_rows(const T* __restrict__ input, const T* __restrict__ weight,
                                               const T* __restrict__ bias, T* __restrict__ output,
                                               const T* __restrict__ residual, const cuinline_conv2d_chan& chan,
                                               const cuinline_conv2d_rt_params& p, const ewg_program& e) {
  constexpr int kRows = CUINLINE_CONV2D_RT_DW_ROWS;
  constexpr int kMaxCh = sizeof(T) == 2 ? 2 : 1;
  constexpr int kTaps = KH ? KH * KW : 1;
  const int ch = kMaxCh == 2 ? p.dw_channels : 1;
  const int kh_n = KH ? KH : p.kh, kw_n = KW ? KW : p.kw;
  // (Items of an image: fewer than its output's elements, so 32-bit.)
  const unsigned cgroups = static_cast<unsigned>(kMaxCh == 2 && ch == 2 ? p.cout >> 1 : p.cout);
  const unsigned row_groups = static_cast<unsigned>((p.oh + kRows - 1) / kRows);
  const unsigned item = blockIdx.x * blockDim.x + threadIdx.x;
  if (item >= cgroups * static_cast<unsigned>(p.ow) * row_groups) return;
  const unsigned rest = item / cgroups;
  const int co = static_cast<int>(item - rest * cgroups) * ch;
  const int rg = static_cast<int>(rest / static_cast<unsigned>(p.ow));
  const int ox = static_cast<int>(rest - static_cast<unsigned>(rg) * static_cast<unsigned>(p.ow));
  const int oy0 = rg * kRows;
  const long long n = blockIdx.z;
  const T* in_c = input + n * p.in_n + static_cast<long long>(co / p.cout_g) * p.in_c;
  const T* w_co = weight + co * p.w_o;
  const bool words = kMaxCh == 2 && ch == 2 && (reinterpret_cast<unsigned long long>(input) & 3) == 0;
  A w[kMaxCh][kTaps];
  if (KH) {
#pragma unroll
    for (int c = 0; c < kMaxCh; ++c) {
#pragma unroll
      for (int t = 0; t < kTaps; ++t) {
        w[c][t] = c < ch ? load_op(w_co + c * p.w_o + (t / (KW ? KW : 1)) * p.w_y + (t % (KW ? KW : 1)) * p.w_x) : A(0);
      }
    }
  }
  A acc[kMaxCh][kRows];
#pragma unroll
  for (int c = 0; c < kMaxCh; ++c) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[c][r] = A(0);
  }
  const int ix0 = ox * p.sw - p.pw;
  // The input of one channel pair (or channel) at (row, ix).
  auto load_x = [&](const T* row, int ix, A (&x)[kMaxCh]) {
    if constexpr (kMaxCh == 2) {
      if (words) {
        cuinline_conv2d_generic_detail::load_pair(row + ix * p.in_x, x[0], x[1]);
      } else {
        x[0] = load_op(row + ix * p.in_x);
        x[1] = ch == 2 ? load_op(row + ix * p.in_x + p.in_c) : A(0);
      }
    } else {
      x[0] = load_op(row + ix * p.in_x);
    }
  };
  // Tap (kh, kw)'s products for output row r: the weights from registers (KH x KW constants) or
  // memory.
  auto add_tap = [&](const A (&x)[kMaxCh], int r, int kh, int kw) {
#pragma unroll
    for (int c = 0; c < kMaxCh; ++c) {
      if (c < ch) {
        const A wt = KH ? w[c][kh * (KW ? KW : 1) + kw] : load_op(w_co + c * p.w_o + kh * p.w_y + kw * p.w_x);
        acc[c][r] = fma_op(x[c], wt, acc[c][r]);
      }
    }
  };
  if (KH && p.sh == 1 && p.dh == 1) {
    // Input row j of the thread's span feeds output row r through filter row j - r.
#pragma unroll
    for (int j = 0; j < kRows + (KH ? KH : 1) - 1; ++j) {
      const int iy = oy0 - p.ph + j;
      if (iy < 0 || iy >= p.h) continue;  // zero padding
      const T* row = in_c + iy * p.in_y;
#pragma unroll
      for (int kw = 0; kw < (KW ? KW : 1); ++kw) {
        const int ix = ix0 + kw * p.dw;
        if (ix < 0 || ix >= p.w) continue;
        A x[kMaxCh];
        load_x(row, ix, x);
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          const int kh = j - r;
          if (kh >= 0 && kh < (KH ? KH : 1)) add_tap(x, r, kh, kw);
        }
      }
    }
  } else {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int oy = oy0 + r;
      if (oy >= p.oh) break;
#pragma unroll
      for (int kh = 0; kh < kh_n; ++kh) {
        const int iy = oy * p.sh - p.ph + kh * p.dh;
        if (iy < 0 || iy >= p.h) continue;  // zero padding
        const T* row = in_c + iy * p.in_y;
#pragma unroll
        for (int kw = 0; kw < kw_n; ++kw) {
          const int ix = ix0 + kw * p.dw;
          if (ix < 0 || ix >= p.w) continue;
          A x[kMaxCh];
          load_x(row, ix, x);
          add_tap(x, r, kh, kw);
        }
      }
    }
  }
  // conv + bias, rounded, + residual, rounded, the epilogue, one rounding to T (finish's steps).
  const long long at0 = n * p.out_n + ox * p.out_x;
#pragma unroll
  for (int c = 0; c < kMaxCh; ++c) {
    if (c >= ch) break;
    const int o = co + c;
    const A b = p.has_bias ? load_op(bias + o) : A(0);
    A v[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      v[r] = acc[c][r] + b;
      if (p.has_residual && oy0 + r < p.oh) v[r] += load_op(residual + at0 + (oy0 + r) * p.out_y + o * p.out_c);
    }
    epilogue_values<T, A, kRows>(e, chan, v, o, p.cout - 1);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (oy0 + r >= p.oh) break;
      output[at0 + (oy0 + r) * p.out_y + o * p.out_c] = ew_traits<T>::from_op(v[r]);
    }
  }
}

}  // namespace cuinline_conv2d_rt_detail

/// input, weight, output and residual as p describes them; bias [cout] (read where has_bias);
/// chan: the epilogue's channel operands. Block: CUINLINE_CONV2D_RT_THREADS or fewer whole warps.
/// kMode: p.mode as a constant (each work split its own kernel, so the depthwise one is not held to
/// the registers of the channel-tile one).
template <class T, int kMode>
__device__ __forceinline__ void cuinline_conv2d_rt_mode_body(const T* __restrict__ input, const T* __restrict__ weight,
                                                        const T* __restrict__ bias, T* __restrict__ output,
                                                        const T* __restrict__ residual,
                                                        const cuinline_conv2d_chan& chan,
                                                        const cuinline_conv2d_rt_params& p, const ewg_program& e) {
  using A = typename ew_traits<T>::op;
  using namespace cuinline_conv2d_rt_detail;
  constexpr int kCo = CUINLINE_CONV2D_RT_CO_TILE;
  const long long item = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long n = blockIdx.z;
  const long long pixels = (long long)p.oh * p.ow;
  if (kMode == 1) {
    if (p.kh == 3 && p.kw == 3) {
      depthwise_rows<T, A, 3, 3>(input, weight, bias, output, residual, chan, p, e);
    } else {
      depthwise_rows<T, A, 0, 0>(input, weight, bias, output, residual, chan, p, e);
    }
    return;
  }
  if (kMode == 4) {
    pixel_rows<T, A>(input, weight, bias, output, residual, chan, p, e);
    return;
  }
  if (item >= pixels) return;
  const int oy = (int)(item / p.ow);
  const int ox = (int)(item - (long long)oy * p.ow);
  const int g = (int)blockIdx.y / p.co_tiles;
  const int t = (int)blockIdx.y - g * p.co_tiles;
  const int co0 = g * p.cout_g + t * kCo;
  const int valid = min(kCo, p.cout_g - t * kCo);
  const T* in_n = input + n * p.in_n + (long long)g * p.cin_g * p.in_c;
  const T* w_co = weight + co0 * p.w_o;
  const bool vec_in = p.vec_in && (reinterpret_cast<unsigned long long>(input) & 15) == 0;
  const bool vec_w = vec_in && p.vec_w && (reinterpret_cast<unsigned long long>(weight) & 15) == 0;
  A acc[kCo];
#pragma unroll
  for (int c = 0; c < kCo; ++c) acc[c] = A(0);
  if (valid == kCo) {
    accumulate<T, A, true>(p, in_n, w_co, oy, ox, valid, vec_in, vec_w, acc);
  } else {
    accumulate<T, A, false>(p, in_n, w_co, oy, ox, valid, vec_in, vec_w, acc);
  }
  const long long out_pix = n * p.out_n + oy * p.out_y + ox * p.out_x;
#pragma unroll
  for (int c = 0; c < kCo; ++c) {
    if (c >= valid) break;
    finish<T, A>(p, e, chan, bias, residual, output, acc[c], co0 + c, out_pix + (co0 + c) * p.out_c);
  }
}

/// The work split p.mode picks at run time (the host emulation's entry).
template <class T>
__device__ __forceinline__ void cuinline_conv2d_rt_body(const T* __restrict__ input, const T* __restrict__ weight,
                                                        const T* __restrict__ bias, T* __restrict__ output,
                                                        const T* __restrict__ residual,
                                                        const cuinline_conv2d_chan& chan,
                                                        const cuinline_conv2d_rt_params& p, const ewg_program& e) {
  if (p.mode == 1) {
    cuinline_conv2d_rt_mode_body<T, 1>(input, weight, bias, output, residual, chan, p, e);
  } else if (p.mode == 4) {
    cuinline_conv2d_rt_mode_body<T, 4>(input, weight, bias, output, residual, chan, p, e);
  } else {
    cuinline_conv2d_rt_mode_body<T, 0>(input, weight, bias, output, residual, chan, p, e);
  }
}

#endif  // CUINLINE_CONV2D_GENERIC_RT_CUH
