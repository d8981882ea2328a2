// The generic conv2d kernels (kernel_templates/conv2d_generic_rt.cuh, conv2d_generic_rt_mma.cuh,
// conv2d_generic_rt_gemm.cuh) run on the host with the work split, parameters, grid and epilogue program the library launches them
// with (conv2d_impl::plan_generic_conv, generic_conv_program), against a float64 reference: every
// dtype, NCHW and channels-last tensors in mixed layouts, groups and depthwise (both work splits),
// stride / padding / dilation, bias and residual, epilogues with constants and channel operands, the
// 16-byte channels-last loads. f16 and bf16 cases run twice: as on sm_75 (the direct and depthwise
// kernels) and as on sm_90, where the tensor-core kernel's vector or gathered form takes those with
// 16 or more output channels a group — its blocks' threads as lanes (fibers) with ldmatrix, mma.sync
// and cp.async emulated (emulated_sm80.hpp), the input misaligned once to take the gathered form;
// f32 cases with a device's SM count take the implicit GEMM (its shared tiles emulated the same way).
// Outputs are poisoned first (NaN) and every read is checked to fall inside a tensor. The step
// functions are host stand-ins for the ones the cases use (ew_ops.cuh's exact forms run in the GPU
// tests, test_jit_conv2d_gpu): this checks the kernels' indexing, layouts, work split and epilogue
// plumbing without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cuinline/conv2d.hpp>
#include <cuinline/jit.hpp>
#include <random>
#include <string>
#include <vector>

#include "elementwise_reference.hpp"
#include "ops/conv2d/conv2d_generic_rt.hpp"
#include "test_support.hpp"

#include "host_emulation.hpp"
#define CUINLINE_EW_OPS_CUH  // the host stand-ins below instead
#define CUINLINE_EWG_HOST_EMULATED 1
// A block's threads are lanes: thread i is lane i (a kernel's barriers and warp-wide instructions
// switch between them).
#define threadIdx (Dim3{static_cast<unsigned>(cuinline::test::lanes::lane_index()), 0, 0})
#include "emulated_sm80.hpp"
#define CUINLINE_ARCH_MMA_SM80_CUH  // emulated_sm80.hpp's, through the using-directive below
#define CUINLINE_ARCH_COPY_SM80_CUH
#define CUINLINE_CONV2D_RT_MMA_EMULATED 1
namespace cuinline_arch {
using namespace cuinline_emulated_sm80;
}

namespace {
Dim3 blockDim, gridDim;
int g_split_launches = 0;  // launches that split K (the sm_90 test checks it had some)
int g_pixel_launches = 0;  // launches of the direct kernel's pixel-row form (mode 4)
int g_gemm_launches = 0;   // launches of the f32 implicit GEMM (mode 5)
int g_pack_launches = 0;   // gathered-form launches on a packed weight
int g_wide_launches = 0;   // launches of the tensor-core kernel's wide tiling (mode 6)

template <class T>
T checked_read(const T* p) {
  EXPECT_TRUE(in_a_tensor(p, sizeof(T))) << "a read outside every tensor";
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
}  // namespace

struct float4 {
  float x, y, z, w;
};
struct double2 {
  double x, y;
};
inline float __ldg(const float* p) { return checked_read(p); }
inline double __ldg(const double* p) { return checked_read(p); }
inline unsigned short __ldg(const unsigned short* p) { return checked_read(p); }
inline unsigned __ldg(const unsigned* p) { return checked_read(p); }
inline float4 __ldg(const float4* p) { return checked_read(p); }
inline double2 __ldg(const double2* p) { return checked_read(p); }
inline uint4 __ldg(const uint4* p) { return checked_read(p); }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
// (Split K: the blocks run one after another, so arrivals are plain adds and loads.)
inline unsigned atomicAdd(unsigned* p, unsigned v) {
  const unsigned old = *p;
  *p = old + v;
  return old;
}
inline void __threadfence() {}
inline float4 __ldcg(const float4* p) { return *p; }
using std::min;

template <>
struct ew_raw<8> {
  typedef unsigned long long type;
};
struct cuinline_conv2d_chan {
  const void* p[4];
};
template <class S>
typename ew_traits<S>::op ew_channel_value(const void* p, int co) {
  if constexpr (sizeof(S) == 2) {
    S s;
    s.bits = __ldg(static_cast<const unsigned short*>(p) + co);
    return ew_traits<S>::to_op(s);
  } else {
    return __ldg(static_cast<const S*>(p) + co);
  }
}

// The step functions the cases use, on opmath values; the others are not called.
template <class S>
S ew_add(S v, S c) { return v + c; }
template <class S>
S ew_sub(S v, S c) { return v - c; }
template <class S>
S ew_mul(S v, S c) { return v * c; }
template <class S>
S ew_relu(S v) { return v > 0 ? v : S(0); }
template <class S>
S ew_leaky_relu(S v, S s) { return v > 0 ? v : v * s; }
template <class S>
S ew_clamp(S v, S lo, S hi) { return std::min(std::max(v, lo), hi); }
template <class S>
S ew_add_tensor(S v, S o) { return v + o; }
template <class S>
S ew_sub_tensor(S v, S o) { return v - o; }
template <class S>
S ew_mul_tensor(S v, S o) { return v * o; }
template <class S>
S ew_div_tensor(S v, S o) { return v / o; }
template <class S>
S ew_where(S c, S a, S b) { return c != 0 ? a : b; }
template <class S>
S ew_tanh(S v) { return std::tanh(v); }
template <class S>
S ew_silu(S v) { return v / (1 + std::exp(-v)); }
template <class S>
S ew_sigmoid(S v) { return 1 / (1 + std::exp(-v)); }
#define CUINLINE_EMU_UNUSED(name, ...) \
  template <class S, class... A>       \
  S name(S v, A...) {                  \
    ADD_FAILURE() << #name " called";  \
    return v;                          \
  }
CUINLINE_EMU_UNUSED(ew_gelu)
CUINLINE_EMU_UNUSED(ew_gelu_tanh)
CUINLINE_EMU_UNUSED(ew_mish)
CUINLINE_EMU_UNUSED(ew_softplus)
CUINLINE_EMU_UNUSED(ew_elu)
CUINLINE_EMU_UNUSED(ew_hardswish)
CUINLINE_EMU_UNUSED(ew_hardsigmoid)
CUINLINE_EMU_UNUSED(ew_exp)
CUINLINE_EMU_UNUSED(ew_log)
CUINLINE_EMU_UNUSED(ew_sqrt)
CUINLINE_EMU_UNUSED(ew_abs)
CUINLINE_EMU_UNUSED(ew_neg)
CUINLINE_EMU_UNUSED(ew_softsign)
CUINLINE_EMU_UNUSED(ew_tanhshrink)
CUINLINE_EMU_UNUSED(ew_logsigmoid)
CUINLINE_EMU_UNUSED(ew_hardshrink)
CUINLINE_EMU_UNUSED(ew_softshrink)
CUINLINE_EMU_UNUSED(ew_threshold)

#include "../kernel_templates/conv2d_generic_rt_mma.cuh"
#include "../kernel_templates/conv2d_generic_rt_gemm.cuh"

namespace {

using namespace cuinline;
using namespace cuinline::ops;
namespace ci = cuinline::ops::conv2d_impl;

// Host types of the storage dtypes.
template <DType D>
struct Storage;
template <>
struct Storage<DType::f32> {
  using type = float;
};
template <>
struct Storage<DType::f64> {
  using type = double;
};
template <>
struct Storage<DType::f16> {
  using type = ew_half;
};
template <>
struct Storage<DType::bf16> {
  using type = ew_bf16;
};

struct Epilogue {
  const char* text;
  int operands;
  double (*f)(double x, const double* ch);
};
const Epilogue kEpilogues[] = {
    {"", 0, [](double x, const double*) { return x; }},
    {"div(4)|leaky_relu(0.125)", 0,
     [](double x, const double*) {
       const double y = x / 4;
       return y > 0 ? y : 0.125 * y;
     }},
    {"mul(in1)|add(in2)|relu|clamp(-1, 3)", 2,
     [](double x, const double* ch) { return std::min(std::max(x * ch[0] + ch[1], 0.0), 3.0); }},
    {"where(in1, 0.5)|silu|mul(in2)", 2,
     [](double x, const double* ch) {
       const double s = ch[0] != 0 ? x : 0.5;
       return s / (1 + std::exp(-s)) * ch[1];
     }},
    {"sub(in1)|tanh|where(in2, in1)", 2,
     [](double x, const double* ch) { return ch[1] != 0 ? std::tanh(x - ch[0]) : ch[0]; }},
};

struct Case {
  int n, cin, h, w, cout, kh, kw, stride, pad, dilation, groups;
  bool x_nhwc, w_nhwc, y_nhwc, bias, residual;
  int epilogue;
};

// A case on one dtype: random values rounded to the dtype, the kernel over its grid, the reference.
template <DType D>
void run_case(const Case& c, std::mt19937_64& rng, const Arch& arch = Arch::parse("sm_75"),
              bool misaligned_input = false, int multiprocessors = 0) {
  using T = typename Storage<D>::type;
  Conv2dParams p;
  p.stride_h = p.stride_w = c.stride;
  p.pad_h = p.pad_w = c.pad;
  p.dilation_h = p.dilation_w = c.dilation;
  p.groups = c.groups;
  const Epilogue& ep = kEpilogues[c.epilogue];
  Conv2dVariant v = make_conv2d_variant(c.cin, c.h, c.w, c.cout, c.kh, c.kw, p, c.bias,
                                        *ep.text ? parse_op(ep.text) : Op::chain({}));
  v.dtype = D;
  v.has_residual = c.residual;
  v.input_layout = c.x_nhwc ? Conv2dLayout::nhwc : Conv2dLayout::nchw;
  v.weight_layout = c.w_nhwc ? Conv2dLayout::nhwc : Conv2dLayout::nchw;
  v.output_layout = c.y_nhwc ? Conv2dLayout::nhwc : Conv2dLayout::nchw;
  v.validate();
  ASSERT_TRUE(ci::generic_conv_applies(v) || !generic_kernels_built());
  const int oh = static_cast<int>(v.out_height()), ow = static_cast<int>(v.out_width());
  const int cin_g = c.cin / c.groups, cout_g = c.cout / c.groups;
  std::normal_distribution<double> normal(0.0, 1.0);
  const auto draw = [&](std::size_t count, bool binary) {
    std::vector<double> vals(count);
    for (double& x : vals) x = binary ? static_cast<double>(rng() % 2) : test::value_of(D, test::bits_of(D, normal(rng)));
    return vals;
  };
  // Logical NCHW values; the stored copies in each tensor's layout.
  const std::vector<double> x = draw(static_cast<std::size_t>(c.n) * c.cin * c.h * c.w, false);
  const std::vector<double> w = draw(static_cast<std::size_t>(c.cout) * cin_g * c.kh * c.kw, false);
  const std::vector<double> b = draw(static_cast<std::size_t>(c.cout), false);
  const std::vector<double> r = draw(static_cast<std::size_t>(c.n) * c.cout * oh * ow, false);
  std::vector<std::vector<double>> ch;
  for (int k = 0; k < ep.operands; ++k) ch.push_back(draw(static_cast<std::size_t>(c.cout), k == 0 && ep.text[0] == 'w' ? true : k == 1 && std::string(ep.text).find("where(in2") != std::string::npos));
  const auto store = [](const std::vector<double>& vals, int n, int chans, int hh, int ww, bool nhwc) {
    std::vector<T> out(vals.size());
    for (int i = 0; i < n; ++i)
      for (int cc = 0; cc < chans; ++cc)
        for (int y = 0; y < hh; ++y)
          for (int xx = 0; xx < ww; ++xx) {
            const std::size_t logical = ((static_cast<std::size_t>(i) * chans + cc) * hh + y) * ww + xx;
            const std::size_t at = nhwc ? ((static_cast<std::size_t>(i) * hh + y) * ww + xx) * chans + cc : logical;
            const std::uint64_t bits = test::bits_of(D, vals[logical]);
            std::memcpy(&out[at], &bits, sizeof(T));
          }
    return out;
  };
  const std::vector<T> sx = store(x, c.n, c.cin, c.h, c.w, c.x_nhwc);
  const std::vector<T> sw = store(w, c.cout, cin_g, c.kh, c.kw, c.w_nhwc);
  const std::vector<T> sb = store(b, 1, c.cout, 1, 1, false);
  const std::vector<T> sr = store(r, c.n, c.cout, oh, ow, c.y_nhwc);
  std::vector<std::vector<T>> sch;
  for (const auto& vals : ch) sch.push_back(store(vals, 1, c.cout, 1, 1, false));
  std::vector<T> out(r.size());
  std::memset(out.data(), 0xFF, out.size() * sizeof(T));  // NaN in every dtype
  g_tensors = {{sx.data(), sx.size() * sizeof(T)}, {sw.data(), sw.size() * sizeof(T)}};
  if (c.bias) g_tensors.push_back({sb.data(), sb.size() * sizeof(T)});
  if (c.residual) g_tensors.push_back({sr.data(), sr.size() * sizeof(T)});
  for (const auto& s : sch) g_tensors.push_back({s.data(), s.size() * sizeof(T)});

  // The launch's arguments, packed as launch_generic_conv packs them. The input's copy shifted by one
  // element (misaligned) where the case asks for it.
  std::vector<T> shifted;
  const T* in = sx.data();
  if (misaligned_input) {
    shifted.resize(sx.size() + 1);
    std::memcpy(shifted.data() + 1, sx.data(), sx.size() * sizeof(T));
    in = shifted.data() + 1;
    g_tensors[0] = {in, sx.size() * sizeof(T)};
  }
  const ci::GenericConvLaunch l = ci::plan_generic_conv(v, c.n, arch, in, sw.data(), multiprocessors);
  ci::GenericConvParams hp = l.params;
  // Split K: the slices' tiles and the tiles' counters, zero at the launch, zero again after it.
  std::vector<float> partials(static_cast<std::size_t>(l.partial_bytes / 4));
  std::vector<unsigned> counters(static_cast<std::size_t>(l.counter_bytes / 4), 0u);
  if (hp.k_slices > 1) {
    EXPECT_GE(hp.mode, 2) << "only the tensor-core kernel splits K";
    EXPECT_EQ(l.grid_z, static_cast<unsigned>(hp.k_slices));
    hp.partials = reinterpret_cast<std::uintptr_t>(partials.data());
    hp.counters = reinterpret_cast<std::uintptr_t>(counters.data());
    ++g_split_launches;
  }
  if (hp.mode == 2 || hp.mode == 3) EXPECT_EQ(hp.mode, misaligned_input || hp.vec_in == 0 ? 3 : 2);
  if (hp.mode == 6) {
    EXPECT_EQ(hp.vec_in, 1) << "the wide tiling is the vector form's";
    EXPECT_FALSE(misaligned_input);
    EXPECT_EQ(l.grid.shared_bytes,
              sizeof(cuinline_conv2d_rt_mma_detail::Tiles<T, cuinline_conv2d_rt_mma_detail::TileWide>));
    ++g_wide_launches;
  } else {
    EXPECT_EQ(l.grid.shared_bytes, 0u);
  }
  if (hp.mode == 4) ++g_pixel_launches;
  if (hp.mode == 5) ++g_gemm_launches;
  // The gathered form's packed weight: the packing kernel (its threads as lanes) into a poisoned
  // buffer with the weight's own strides, then the form reads that buffer as its weight.
  std::vector<T> packed;
  const T* wk = sw.data();
  if (l.pack_kpad > 0) {
    EXPECT_EQ(hp.mode, 3) << "only the gathered form packs its weight";
    EXPECT_EQ(hp.vec_w, 1);
    EXPECT_EQ(hp.w_o, l.pack_kpad);
    EXPECT_EQ(l.pack_kpad % ci::kGenericConvMmaTileK, 0);
    EXPECT_GE(l.pack_kpad, std::int64_t{c.kh} * c.kw * cin_g);
    EXPECT_EQ(l.pack_bytes, static_cast<std::uint64_t>(c.cout * l.pack_kpad) * sizeof(T));
    if constexpr (D == DType::f16 || D == DType::bf16) {
      packed.assign(static_cast<std::size_t>(c.cout * l.pack_kpad), T{0xFFFF});
      ci::GenericConvParams original = hp;
      original.w_o = l.weight_w_o;
      cuinline_conv2d_rt_params op;
      std::memcpy(&op, &original, sizeof(op));
      blockDim = {static_cast<unsigned>(ci::kGenericConvThreads), 1, 1};
      for (std::size_t bx = 0; bx * ci::kGenericConvThreads < packed.size(); ++bx) {
        blockIdx = {static_cast<unsigned>(bx), 0, 0};
        cuinline::test::lanes::run_lanes(blockDim.x, [&] {
          cuinline_conv2d_rt_pack_weight_body<T>(sw.data(), packed.data(), op, static_cast<int>(l.pack_kpad));
        });
      }
      g_tensors.push_back({packed.data(), packed.size() * sizeof(T)});
      wk = packed.data();
      ++g_pack_launches;
    }
  }
  const ops::detail::GenericProgram hprog = ci::generic_conv_program(v.epilogue, D);
  static_assert(sizeof(hp) == sizeof(cuinline_conv2d_rt_params) && sizeof(hprog) == sizeof(ewg_program));
  cuinline_conv2d_rt_params dp;
  std::memcpy(&dp, &hp, sizeof(dp));
  static ewg_program dprog;
  std::memcpy(&dprog, &hprog, sizeof(dprog));
  cuinline_conv2d_chan chan{};
  for (std::size_t k = 0; k < sch.size(); ++k) chan.p[k] = sch[k].data();
  const unsigned threads = static_cast<unsigned>(l.grid.threads);
  blockDim = {threads, 1, 1};
  gridDim = {static_cast<unsigned>(l.grid.blocks_x), static_cast<unsigned>(l.grid.blocks_y), l.grid_z};
  using Block = cuinline_emulated_sm80::Block;
  for (unsigned z = 0; z < l.grid_z; ++z)
    for (unsigned y = 0; y < static_cast<unsigned>(l.grid.blocks_y); ++y)
      for (unsigned bx = 0; bx < static_cast<unsigned>(l.grid.blocks_x); ++bx) {
        blockIdx = {bx, y, z};
        Block block;
        namespace mma = cuinline_conv2d_rt_mma_detail;
        block.smem.assign(hp.mode == 2 || hp.mode == 3 ? sizeof(mma::Tiles<T, mma::Tile64>)
                          : hp.mode == 6               ? l.grid.shared_bytes
                          : hp.mode == 5               ? sizeof(cuinline_conv2d_rt_gemm_detail::Shared)
                                                       : 0,
                          0xA5);
        block.block = std::make_unique<cuinline::test::lanes::LaneBarrier>(threads);
        for (unsigned w = 0; w < threads / 32; ++w) {
          block.warp.push_back(std::make_unique<cuinline::test::lanes::LaneBarrier>(32));
        }
        cuinline_emulated_sm80::g_block = &block;
        cuinline_emulated_sm80::g_copies.assign(threads, {});
        cuinline::test::lanes::run_lanes(threads, [&] {
          T* const o = out.data();
          const T* const bias = c.bias ? sb.data() : nullptr;
          const T* const res = c.residual ? sr.data() : nullptr;
          if constexpr (D == DType::f16 || D == DType::bf16) {
            if (hp.mode == 2) return cuinline_conv2d_rt_mma_body<T, false>(in, wk, bias, o, res, chan, dp, dprog);
            if (hp.mode == 3) return cuinline_conv2d_rt_mma_body<T, true>(in, wk, bias, o, res, chan, dp, dprog);
            if (hp.mode == 6) {
              return cuinline_conv2d_rt_mma_body<T, false, cuinline_conv2d_rt_mma_detail::TileWide>(
                  in, wk, bias, o, res, chan, dp, dprog);
            }
          }
          if constexpr (D == DType::f32) {
            if (hp.mode == 5) return cuinline_conv2d_rt_gemm_body<T>(in, sw.data(), bias, o, res, chan, dp, dprog);
          }
          cuinline_conv2d_rt_body<T>(in, sw.data(), bias, o, res, chan, dp, dprog);
        });
        cuinline_emulated_sm80::g_block = nullptr;
      }
  for (unsigned k : counters) EXPECT_EQ(k, 0u) << "a split tile's counter left for the next launch";

  double num = 0, den = 0;
  for (int i = 0; i < c.n; ++i)
    for (int co = 0; co < c.cout; ++co)
      for (int oy = 0; oy < oh; ++oy)
        for (int ox = 0; ox < ow; ++ox) {
          double acc = c.bias ? b[static_cast<std::size_t>(co)] : 0.0;
          const int grp = co / cout_g;
          for (int cl = 0; cl < cin_g; ++cl)
            for (int ky = 0; ky < c.kh; ++ky) {
              const int iy = oy * c.stride - c.pad + ky * c.dilation;
              if (iy < 0 || iy >= c.h) continue;
              for (int kx = 0; kx < c.kw; ++kx) {
                const int ix = ox * c.stride - c.pad + kx * c.dilation;
                if (ix < 0 || ix >= c.w) continue;
                acc += x[((static_cast<std::size_t>(i) * c.cin + grp * cin_g + cl) * c.h + iy) * c.w + ix] *
                       w[((static_cast<std::size_t>(co) * cin_g + cl) * c.kh + ky) * c.kw + kx];
              }
            }
          const std::size_t logical = ((static_cast<std::size_t>(i) * c.cout + co) * oh + oy) * ow + ox;
          if (c.residual) acc += r[logical];
          double chv[4] = {};
          for (std::size_t k = 0; k < ch.size(); ++k) chv[k] = ch[k][static_cast<std::size_t>(co)];
          const double want = ep.f(acc, chv);
          const std::size_t at =
              c.y_nhwc ? ((static_cast<std::size_t>(i) * oh + oy) * ow + ox) * c.cout + co : logical;
          std::uint64_t bits = 0;
          std::memcpy(&bits, &out[at], sizeof(T));
          const double got = test::value_of(D, bits);
          ASSERT_FALSE(std::isnan(got)) << "unwritten: image " << i << " channel " << co << " (" << oy << ", " << ox
                                        << ")";
          num += (got - want) * (got - want);
          den += want * want;
        }
  const double err = std::sqrt(num / (den > 0 ? den : 1));
  const double tol = D == DType::f16 ? 2e-3 : D == DType::bf16 ? 1.6e-2 : D == DType::f64 ? 1e-12 : 1e-5;
  EXPECT_LE(err, tol) << v.name() << " mode " << hp.mode << " vec " << hp.vec_in << " on " << arch.name();
}

const Case kCases[] = {
    // n cin h  w cout kh kw s p d g  x:nhwc w:nhwc y:nhwc bias res ep
    {2, 12, 9, 8, 20, 3, 3, 1, 0, 1, 1, false, false, false, true, false, 1},   // tiles 8, 8, 4
    {2, 16, 7, 9, 24, 3, 3, 2, 1, 1, 1, true, true, true, true, true, 2},       // 16-byte loads (f16)
    {1, 8, 11, 9, 10, 3, 2, 1, 2, 2, 1, true, false, false, false, true, 3},    // 8 channels: f32 vectors
    {2, 12, 9, 9, 20, 3, 3, 1, 1, 1, 4, false, true, true, true, false, 4},     // groups of 3 -> 5
    {2, 32, 6, 7, 32, 3, 3, 1, 1, 1, 32, true, false, true, true, true, 1},     // depthwise, channels fastest
    {1, 16, 6, 7, 32, 5, 5, 2, 2, 1, 16, false, false, false, false, false, 0}, // depthwise x2, pixel-fast
    {1, 16, 6, 7, 32, 3, 3, 1, 2, 2, 16, true, true, false, true, false, 2},    // x2, channels fastest
    {3, 5, 4, 3, 3, 1, 1, 1, 0, 1, 1, false, false, true, true, true, 0},       // 1 x 1
    {1, 64, 5, 5, 40, 3, 3, 1, 1, 1, 2, true, true, true, true, false, 2},      // grouped, 32-channel runs
    // For the tensor-core kernel: a 1 x 1 filter's NCHW weight read as vectors; a stem (3 channels,
    // gathered); tiles across images, a partial K tile (40 channels) and an NCHW output.
    {3, 24, 5, 7, 32, 1, 1, 1, 0, 1, 1, true, false, true, true, true, 2},
    {2, 3, 13, 11, 16, 7, 7, 2, 3, 1, 1, true, true, true, true, false, 1},
    {3, 40, 7, 5, 72, 3, 3, 1, 1, 1, 1, true, true, false, true, true, 3},
    // The gathered form's taps stepped across filter rows: 5 channels, a 5 x 3 filter dilated 2,
    // an NCHW input and weight; the same channels-last at stride 2 with a residual.
    {2, 5, 9, 10, 24, 5, 3, 1, 2, 2, 1, false, false, true, true, false, 3},
    {1, 5, 9, 10, 24, 5, 3, 2, 2, 2, 1, true, true, false, false, true, 1},
    // Depthwise on the row kernel: channel pairs over row groups with a partial last one and a
    // residual; an odd channel count (one channel a thread), a 5 x 3 filter read at run time,
    // stride 2; the 3 x 3 path at stride and dilation 2 (no row reuse).
    {2, 6, 19, 5, 6, 3, 3, 1, 1, 1, 6, true, true, true, true, true, 2},
    {1, 7, 17, 9, 7, 5, 3, 2, 2, 1, 7, true, false, false, true, false, 1},
    {2, 8, 12, 10, 8, 3, 3, 2, 2, 2, 8, true, true, true, false, true, 4},
};

TEST(Conv2dGenericRtEmulated, EveryDtypeLayoutGroupingAndEpilogue) {
  std::mt19937_64 rng(test::fresh_seed());
  for (const Case& c : kCases) {
    SCOPED_TRACE("case " + std::to_string(&c - kCases));
    run_case<DType::f32>(c, rng);
    run_case<DType::f16>(c, rng);
    run_case<DType::bf16>(c, rng);
    run_case<DType::f64>(c, rng);
  }
}

// The direct kernel's pixel-row form (mode 4: kGenericConvPixels pixels of a row a thread), taken
// where a launch has kGenericConvPixelsMinBlocksPerSm blocks a multiprocessor to spare (here of a
// device of one) on an input read element by element: rows of 21, 7 and 11 columns (runs of 6, 2
// and 3 columns, the last one short), padding (a thread's pixels outside the input), an NCHW input and a
// channels-last one of 5 channels, groups, stride 2 and dilation 2, in every dtype.
TEST(Conv2dGenericRtEmulated, DirectKernelPixelRows) {
  std::mt19937_64 rng(test::fresh_seed());
  const Case cases[] = {
      // n cin h  w cout kh kw s p d g  x:nhwc w:nhwc y:nhwc bias res ep
      {4, 3, 20, 21, 24, 3, 3, 1, 1, 1, 1, false, false, false, true, true, 2},
      {5, 5, 12, 13, 16, 3, 3, 2, 1, 1, 1, true, true, true, true, false, 1},
      {4, 12, 10, 11, 20, 3, 3, 1, 2, 2, 4, false, true, false, false, true, 4},
  };
  g_pixel_launches = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE("case " + std::to_string(&c - cases));
    run_case<DType::f32>(c, rng, Arch::parse("sm_75"), false, 1);
    run_case<DType::f64>(c, rng, Arch::parse("sm_75"), false, 1);
    run_case<DType::f16>(c, rng, Arch::parse("sm_75"), false, 1);
    run_case<DType::bf16>(c, rng, Arch::parse("sm_75"), false, 1);
  }
  EXPECT_EQ(g_pixel_launches, 12) << "launches of the pixel-row form";
  // Without a multiprocessor count (or with blocks too few for it): one pixel a thread.
  g_pixel_launches = 0;
  run_case<DType::f32>(cases[0], rng);
  run_case<DType::f32>(cases[0], rng, Arch::parse("sm_75"), false, 132);
  EXPECT_EQ(g_pixel_launches, 0);
}

// The f32 implicit GEMM (mode 5), taken where a scalar-read input has 32 or more output channels a
// group and tiles enough for a wave (here of a device of one): 128-pixel tiles spanning images, a
// partial 64-channel tile (40 and 72 channels), K tiles of 8 cut short (27, 6 and 75 elements) and
// K tiles of one tap's 8 channels (8 and 16 channels a group),
// groups with stride 2, padding 2 and dilation 2, a channels-last input of 5 channels, NCHW and
// channels-last outputs (each its own store order), residuals and channel operands. The
// reference's tolerance is f32's; padding taps add 0 x w (finite weights here).
TEST(Conv2dGenericRtEmulated, ImplicitGemmForm) {
  std::mt19937_64 rng(test::fresh_seed());
  const Case cases[] = {
      // n cin h  w cout kh kw s p d g  x:nhwc w:nhwc y:nhwc bias res ep
      {2, 3, 13, 11, 40, 3, 3, 1, 1, 1, 1, false, false, false, true, true, 2},
      {3, 8, 9, 10, 64, 3, 3, 2, 2, 2, 2, false, true, true, true, false, 3},
      {2, 5, 12, 9, 72, 5, 3, 1, 2, 1, 1, true, true, true, false, true, 4},
      {4, 6, 7, 7, 33, 1, 1, 1, 0, 1, 1, false, false, true, true, false, 1},
      // Whole K tiles of one tap's channels (8 and 16 channels a group): padding, stride, dilation.
      {2, 8, 10, 9, 40, 3, 3, 1, 1, 1, 1, false, false, false, true, true, 1},
      {2, 32, 8, 9, 64, 3, 2, 2, 2, 2, 2, false, false, true, false, true, 2},
  };
  g_gemm_launches = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE("case " + std::to_string(&c - cases));
    run_case<DType::f32>(c, rng, Arch::parse("sm_90"), false, 1);
  }
  EXPECT_EQ(g_gemm_launches, 6) << "launches of the implicit GEMM";
  // The same convs with no SM count, and f64: the direct kernel.
  g_gemm_launches = 0;
  run_case<DType::f32>(cases[0], rng);
  run_case<DType::f64>(cases[1], rng, Arch::parse("sm_90"), false, 1);
  EXPECT_EQ(g_gemm_launches, 0);
}

// The f16 / bf16 cases as on sm_90: the tensor-core kernel where a group has 16 or more output
// channels (its vector form, and its gathered form on an input shifted off 16 bytes), else the same
// kernels as above.
TEST(Conv2dGenericRtEmulated, TensorCoreFormsOnSm90) {
  std::mt19937_64 rng(test::fresh_seed());
  const Arch sm90 = Arch::parse("sm_90");
  int mma_cases = 0;
  for (const Case& c : kCases) {
    SCOPED_TRACE("case " + std::to_string(&c - kCases));
    run_case<DType::f16>(c, rng, sm90);
    run_case<DType::bf16>(c, rng, sm90, true);
    if (c.cout / c.groups >= ci::kGenericConvMmaMinChannels) ++mma_cases;
  }
  EXPECT_GE(mma_cases, 5) << "cases that take the tensor-core kernel";
}

// The gathered form on a launch of many tiles (here 8 or more on a device of one): the weight packed
// K-major first (K 75, 27 and 63 rounded up to 96, 32 and 64), then read 8 K elements a load: a
// 5 x 5 stem-like filter on 3 channels-last channels, an NCHW input, weight and output with 3
// channels, groups of 2 x 7 channels with dilation and a partial channel tile (40); f16 and bf16.
TEST(Conv2dGenericRtEmulated, TensorCoreGatheredFormPackedWeightOnSm90) {
  std::mt19937_64 rng(test::fresh_seed());
  const Arch sm90 = Arch::parse("sm_90");
  const Case cases[] = {
      // n cin h  w cout kh kw s p d g  x:nhwc w:nhwc y:nhwc bias res ep
      {4, 3, 30, 30, 24, 5, 5, 1, 2, 1, 1, true, true, true, true, true, 2},
      {3, 3, 26, 25, 16, 3, 3, 1, 1, 1, 1, false, false, false, true, false, 1},
      {2, 14, 26, 24, 80, 3, 3, 1, 2, 2, 2, true, false, true, false, true, 3},
  };
  g_pack_launches = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE("case " + std::to_string(&c - cases));
    run_case<DType::f16>(c, rng, sm90, false, 1);
    run_case<DType::bf16>(c, rng, sm90, false, 1);
  }
  EXPECT_EQ(g_pack_launches, 6) << "launches on a packed weight";
  // With the tiles of a device of 132 (too few) the same cases gather their weight.
  g_pack_launches = 0;
  for (const Case& c : cases) run_case<DType::f16>(c, rng, sm90, false, 132);
  EXPECT_EQ(g_pack_launches, 0);
}

// Few tiles of a long reduction on a device of 132 multiprocessors: the tensor-core kernel splits
// its K tiles, each slice's tile summed by the tile's last block (99 K tiles of 32 in 11 slices of
// 9, in the vector form and the gathered one). The cases above, whose reductions are short, run
// whole there.
TEST(Conv2dGenericRtEmulated, TensorCoreSplitKOnSm90) {
  std::mt19937_64 rng(test::fresh_seed());
  const Arch sm90 = Arch::parse("sm_90");
  const Case split[] = {
      // n cin h w cout kh kw s p d g  x:nhwc w:nhwc y:nhwc bias res ep
      {1, 352, 3, 3, 32, 3, 3, 1, 1, 1, 1, true, true, true, true, true, 2},     // vector form, residual
      {2, 352, 4, 5, 72, 3, 3, 1, 1, 1, 1, true, false, false, true, false, 1},  // NCHW weight and output
  };
  g_split_launches = 0;
  for (const Case& c : split) {
    SCOPED_TRACE("split case " + std::to_string(&c - split));
    run_case<DType::f16>(c, rng, sm90, false, 132);
    run_case<DType::bf16>(c, rng, sm90, true, 132);  // (the gathered form)
  }
  EXPECT_EQ(g_split_launches, 4) << "launches that split K";
  g_split_launches = 0;
  for (const Case& c : kCases) run_case<DType::f16>(c, rng, sm90, false, 132);
  EXPECT_EQ(g_split_launches, 0) << "short reductions run whole";
}

// The vector form's wide tiling (128 pixels x 128 channels, four K tiles in flight) where a group
// has 128 output channels or more, the reduction 16 K tiles or more, and the launch's wide tiles
// fill the multiprocessors (here a device of one): partial pixel, channel and K tiles with a
// residual; a stride-2 conv with an NCHW weight (gathered element by element) and an NCHW output;
// two groups of 64 -> 128 channels. On a device of three, two tiles of 36 K tiles split in two
// slices of 18 (the slices' 128 x 128 tiles summed by the last block). On a device of 132 multiprocessors
// the same launches keep the 64 x 64 tiles (the plan's rule: CUINLINE_CONV2D_GENERIC_WIDE is unset
// here), as does a reduction of 9 K tiles.
TEST(Conv2dGenericRtEmulated, TensorCoreWideFormOnSm90) {
  std::mt19937_64 rng(test::fresh_seed());
  const Arch sm90 = Arch::parse("sm_90");
  const Case wide[] = {
      // n cin h w cout kh kw s p d g  x:nhwc w:nhwc y:nhwc bias res ep
      {2, 40, 9, 10, 136, 3, 3, 1, 1, 1, 1, true, true, true, true, true, 2},
      {1, 64, 8, 9, 128, 3, 3, 2, 1, 1, 1, true, false, false, true, false, 3},
      {2, 128, 6, 6, 256, 3, 3, 1, 1, 1, 2, true, true, true, false, true, 1},
  };
  const Case split = {1, 128, 7, 9, 144, 3, 3, 1, 1, 1, 1, true, true, true, true, true, 2};
  const Case short_k = {2, 32, 9, 10, 128, 3, 3, 1, 1, 1, 1, true, true, true, true, false, 1};
  g_wide_launches = g_split_launches = 0;
  for (const Case& c : wide) {
    SCOPED_TRACE("wide case " + std::to_string(&c - wide));
    run_case<DType::f16>(c, rng, sm90, false, 1);
    run_case<DType::bf16>(c, rng, sm90, false, 1);
  }
  EXPECT_EQ(g_split_launches, 0);
  run_case<DType::f16>(split, rng, sm90, false, 3);
  run_case<DType::bf16>(split, rng, sm90, false, 3);
  EXPECT_EQ(g_wide_launches, 8) << "launches on the wide tiling";
  EXPECT_EQ(g_split_launches, 2) << "wide launches that split K";
  g_wide_launches = 0;
  for (const Case& c : wide) run_case<DType::f16>(c, rng, sm90, false, 132);
  run_case<DType::f16>(split, rng, sm90, false, 132);
  run_case<DType::f16>(short_k, rng, sm90, false, 1);
  run_case<DType::f16>(wide[0], rng, sm90, true, 1);  // (a misaligned input: the gathered form)
  EXPECT_EQ(g_wide_launches, 0);
}

}  // namespace
