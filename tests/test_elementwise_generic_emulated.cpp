// The generic elementwise kernels (kernel_templates/ew_generic.cuh, their table in
// src/ops/elementwise/ew_generic.cu) compiled as host C++ and run block by block, thread by thread,
// over the grid launch_generic computes (detail::generic_launch), with the program and the
// row / column reciprocals it passes. Checks what a GPU-less machine can: every output element is
// written (and nothing around the output), every read falls inside an input, vectors past the end
// are neither read nor written, the head and tail, each operand pattern (whole tensor, scalar, row,
// column) and where's condition reach the right elements, and the 16-bit kernels' packed values
// come back in place. The step arithmetic is stood in for by plain host functions with the
// kernel's rounding (to opmath, one operation, back to storage), so the result is exact; the real
// arithmetic's bit identity with the specialized kernel is the GPU tests' (JitGpu).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cuinline/ops.hpp>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "elementwise_reference.hpp"
#include "host_emulation.hpp"
#include "ops/elementwise/generic.hpp"
#include "ops/elementwise/plan.hpp"
#include "test_support.hpp"
#define CUINLINE_EW_OPS_CUH  // the host stand-ins below instead
#define CUINLINE_EWG_HOST_EMULATED 1
#define __grid_constant__

namespace {
Dim3 gridDim;

template <class T>
T checked_read(const T* p) {
  EXPECT_TRUE(in_a_tensor(p, sizeof(T))) << "a read outside every input";
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
}  // namespace

struct uint2 {
  unsigned x, y;
};
template <>
struct ew_raw<8> {
  typedef uint2 type;
};
template <>
struct ew_raw<16> {
  typedef uint4 type;
};
inline unsigned short __ldg(const unsigned short* p) {
  return checked_read(p);
}
inline unsigned __ldg(const unsigned* p) {
  return checked_read(p);
}
inline uint2 __ldg(const uint2* p) {
  return checked_read(p);
}
inline uint4 __ldg(const uint4* p) {
  return checked_read(p);
}
inline unsigned long long __ldg(const unsigned long long* p) {
  return checked_read(p);
}
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return static_cast<unsigned long long>((static_cast<unsigned __int128>(a) * b) >> 64);
}

// The step functions on storage values, each one opmath operation rounded back to storage.
template <class S>
using ew_op_t = typename ew_traits<S>::op;
template <class S>
ew_op_t<S> op_of(S x) {
  return ew_traits<S>::to_op(x);
}
template <class S>
S storage_of(ew_op_t<S> x) {
  return ew_traits<S>::from_op(x);
}
template <class S, class C>
S ew_add(S v, C c) {
  return storage_of<S>(op_of(v) + c);
}
template <class S, class C>
S ew_sub(S v, C c) {
  return storage_of<S>(op_of(v) - c);
}
template <class S, class C>
S ew_mul(S v, C c) {
  return storage_of<S>(op_of(v) * c);
}
template <class S>
S ew_relu(S v) {
  return op_of(v) > 0 ? v : storage_of<S>(0);
}
template <class S, class C>
S ew_leaky_relu(S v, C c) {
  return op_of(v) > 0 ? v : storage_of<S>(op_of(v) * c);
}
template <class S, class C>
S ew_clamp(S v, C lo, C hi) {
  return storage_of<S>(std::min(std::max(op_of(v), lo), hi));
}
template <class S>
S ew_add_tensor(S v, S o) {
  return storage_of<S>(op_of(v) + op_of(o));
}
template <class S>
S ew_sub_tensor(S v, S o) {
  return storage_of<S>(op_of(v) - op_of(o));
}
template <class S>
S ew_mul_tensor(S v, S o) {
  return storage_of<S>(op_of(v) * op_of(o));
}
template <class S>
S ew_div_tensor(S v, S o) {
  return storage_of<S>(op_of(v) / op_of(o));
}
template <class S>
S ew_where(S c, S a, S b) {
  return op_of(c) != 0 ? a : b;
}
// tanh in double, rounded to opmath: the reference's own (tanhf may differ by an ulp).
template <class S>
S ew_tanh(S v) {
  return storage_of<S>(static_cast<ew_op_t<S>>(std::tanh(static_cast<double>(op_of(v)))));
}
#define CUINLINE_EMU_UNUSED(name, ...) \
  template <class S, class... A>       \
  S name(S v, A...) {                  \
    ADD_FAILURE() << #name " called";  \
    return v;                          \
  }
CUINLINE_EMU_UNUSED(ew_sigmoid)
CUINLINE_EMU_UNUSED(ew_silu)
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

// The kernels as the library builds them: cuinline_ewg_f32_v4, ..._v1_light, as host functions.
#include "../src/ops/elementwise/ew_generic.cu"

namespace {

using namespace cuinline;
using namespace cuinline::ops;
namespace od = cuinline::ops::detail;

using Kernel = void (*)(ew_nary_args, long long, long long, ewg_program, ewg_divisors);

// The kernel launch_generic loads for a dtype (generic.cpp's kernel_symbol).
Kernel kernel_for(DType dt, bool vector, bool light) {
  switch (dt) {
    case DType::f32:
      return vector ? (light ? cuinline_ewg_f32_v4_light : cuinline_ewg_f32_v4)
                    : (light ? cuinline_ewg_f32_v1_light : cuinline_ewg_f32_v1);
    case DType::f64:
      return vector ? (light ? cuinline_ewg_f64_v2_light : cuinline_ewg_f64_v2)
                    : (light ? cuinline_ewg_f64_v1_light : cuinline_ewg_f64_v1);
    case DType::f16:
      return vector ? (light ? cuinline_ewg_f16_v8_light : cuinline_ewg_f16_v8)
                    : (light ? cuinline_ewg_f16_v1_light : cuinline_ewg_f16_v1);
    default:
      return vector ? (light ? cuinline_ewg_bf16_v8_light : cuinline_ewg_bf16_v8)
                    : (light ? cuinline_ewg_bf16_v1_light : cuinline_ewg_bf16_v1);
  }
}

// An input: its shape's kind against the [rows, cols] output.
enum class Shape { full, row, col, scalar };

struct Chain {
  const char* text;
  std::vector<Shape> inputs;  // input 0 first
  std::vector<bool> binary;   // 0/1 values (where's conditions)
  // The result from each input's value at the element, one opmath operation at a time; `r` rounds
  // to the dtype.
  std::function<double(const double* in, const std::function<double(double)>& r)> f;
};

// Opmath: float for all but f64; each step's result rounded to the storage dtype.
template <class O>
O as_op(double v) {
  return static_cast<O>(v);
}

const Chain kChains[] = {
    {"add(in1)|mul(0.5)|leaky_relu(0.125)",
     {Shape::full, Shape::row},
     {false, false},
     [](const double* in, const std::function<double(double)>& r) {
       const double a = r(in[0] + in[1]);
       const double m = r(a * 0.5);
       return m > 0 ? m : r(m * 0.125);
     }},
    {"mul(in1)|sub(in2)|add(in4)|where(in3, in1)|tanh",
     {Shape::full, Shape::full, Shape::col, Shape::full, Shape::scalar},
     {false, false, false, true, false},
     [](const double* in, const std::function<double(double)>& r) {
       double y = r(in[0] * in[1]);
       y = r(y - in[2]);
       y = r(y + in[4]);
       y = in[3] != 0 ? y : in[1];
       return r(std::tanh(y));
     }},
    {"clamp(-1, 2)|where(in1, 0.25)|sub(in2)",
     {Shape::full, Shape::col, Shape::row},
     {false, true, false},
     [](const double* in, const std::function<double(double)>& r) {
       double y = r(std::min(std::max(in[0], -1.0), 2.0));
       y = in[1] != 0 ? y : 0.25;
       return r(y - in[2]);
     }},
    {"add(in1)|mul(in2)|relu",
     {Shape::full, Shape::full, Shape::scalar},
     {false, false, false},
     [](const double* in, const std::function<double(double)>& r) {
       const double y = r(r(in[0] + in[1]) * in[2]);
       return y > 0 ? y : 0.0;
     }},
};

// Storage types of the dtypes.
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

// Which kernels and heads the cases reached: [light][vectors with a head, vectors without, single
// elements].
bool g_seen[2][3];

// One chain on [rows, cols] with every tensor `offset` elements past an allocation's start (a head
// for 16-byte vectors where no input is a row or a column).
template <DType D>
void run_case(const Chain& c, std::int64_t rows, std::int64_t cols, int offset, std::mt19937_64& rng) {
  using T = typename Storage<D>::type;
  using O = typename ew_traits<T>::op;
  const std::int64_t n = rows * cols;
  const std::size_t ni = c.inputs.size();
  const auto count = [&](Shape s) -> std::int64_t {
    return s == Shape::full ? n : s == Shape::row ? cols : s == Shape::col ? rows : 1;
  };
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<std::vector<double>> vals(ni);
  std::vector<std::vector<T>> stored(ni);
  for (std::size_t k = 0; k < ni; ++k) {
    const std::int64_t m = count(c.inputs[k]);
    vals[k].resize(static_cast<std::size_t>(m));
    stored[k].resize(static_cast<std::size_t>(m + offset));
    for (std::int64_t i = 0; i < m; ++i) {
      const std::uint64_t bits = test::bits_of(D, c.binary[k] ? static_cast<double>(rng() % 2) : normal(rng));
      vals[k][static_cast<std::size_t>(i)] = test::value_of(D, bits);
      std::memcpy(&stored[k][static_cast<std::size_t>(i + offset)], &bits, sizeof(T));
    }
  }
  // The output between guards: unwritten elements keep all-ones bits (NaN in every dtype).
  constexpr std::int64_t kGuard = 64;
  std::vector<T> out(static_cast<std::size_t>(n + offset + 2 * kGuard));
  std::memset(out.data(), 0xFF, out.size() * sizeof(T));
  T* y = out.data() + kGuard + offset;

  std::vector<TensorView> ins;
  g_tensors.clear();
  for (std::size_t k = 0; k < ni; ++k) {
    T* p = stored[k].data() + offset;
    g_tensors.push_back({p, vals[k].size() * sizeof(T)});
    switch (c.inputs[k]) {
      case Shape::full:
        ins.push_back(TensorView::contiguous(p, D, {rows, cols}));
        break;
      case Shape::row:
        ins.push_back(TensorView::contiguous(p, D, {cols}));
        break;
      case Shape::col:
        ins.push_back(TensorView::contiguous(p, D, {rows, 1}));
        break;
      case Shape::scalar:
        ins.push_back(TensorView::contiguous(p, D, {1}));
        break;
    }
  }
  const Op op = parse_op(c.text);
  const od::NaryPlan np = od::plan_nary(op, ins, {TensorView::contiguous(y, D, {rows, cols})});
  ASSERT_FALSE(np.key.strided);
  const od::GenericProgram hprog = od::generic_program(op, np.key);
  const od::GenericLaunch g = od::generic_launch(hprog, np);
  static_assert(sizeof(hprog) == sizeof(ewg_program) && sizeof(g.divisors) == sizeof(ewg_divisors) &&
                sizeof(np.args) == sizeof(ew_nary_args));
  static ewg_program prog;  // 1.5 KB: passed by value as the kernel takes it
  std::memcpy(&prog, &hprog, sizeof(prog));
  ewg_divisors dv;
  std::memcpy(&dv, &g.divisors, sizeof(dv));
  ew_nary_args args;
  std::memcpy(&args, &np.args, sizeof(args));
  const Kernel kernel = kernel_for(D, g.vector, g.light);
  g_seen[g.light ? 1 : 0][!g.vector ? 2 : g.head > 0 ? 0 : 1] = true;
  gridDim = {g.blocks, 1, 1};
  for (unsigned b = 0; b < g.blocks; ++b) {
    for (unsigned t = 0; t < EW_BLOCK; ++t) {
      blockIdx = {b, 0, 0};
      threadIdx = {t, 0, 0};
      kernel(args, static_cast<long long>(g.numel), static_cast<long long>(g.head), prog, dv);
    }
  }

  const std::string where = std::string(c.text) + " " + to_string(D) + " [" + std::to_string(rows) + ", " +
                            std::to_string(cols) + "] +" + std::to_string(offset) +
                            (g.vector ? " vectors" : " elements") + (g.light ? " light" : "") + " head " +
                            std::to_string(g.head);
  const auto round = [](double v) {
    return test::value_of(D, test::bits_of(D, static_cast<double>(as_op<O>(v))));
  };
  for (std::int64_t i = -kGuard - offset; i < n + kGuard; ++i) {
    T got;
    std::memcpy(&got, y + i, sizeof(T));
    std::uint64_t bits = 0;
    std::memcpy(&bits, &got, sizeof(T));
    if (i < 0 || i >= n) {
      ASSERT_EQ(bits, sizeof(T) == 2   ? 0xFFFFu
                      : sizeof(T) == 4 ? 0xFFFFFFFFu
                                       : ~std::uint64_t{0})
          << where << ": written outside the output at " << i;
      continue;
    }
    double in[8];
    const std::int64_t r = i / cols, col = i % cols;
    for (std::size_t k = 0; k < ni; ++k) {
      const Shape s = c.inputs[k];
      in[k] = vals[k][static_cast<std::size_t>(s == Shape::full  ? i
                                               : s == Shape::row ? col
                                               : s == Shape::col ? r
                                                                 : 0)];
    }
    const double want = c.f(in, round);
    ASSERT_EQ(bits, test::bits_of(D, want))
        << where << ": element " << i << " = " << test::value_of(D, bits) << ", want " << want;
  }
}

struct Size {
  std::int64_t rows, cols;
};
// Rows of a whole number of vectors (16-byte vectors with a row or a column) and not (single
// elements); grids of one partial block and of several, the last partial (vectors past the end).
const Size kSizes[] = {{1, 3}, {3, 40}, {17, 64}, {5, 333}, {260, 24}, {9, 512}};

TEST(ElementwiseGenericEmulated, EveryDtypePatternHeadAndTail) {
  std::mt19937_64 rng(test::fresh_seed());
  for (const Chain& c : kChains) {
    for (const Size& s : kSizes) {
      for (int offset : {0, 1, 3}) {
        run_case<DType::f32>(c, s.rows, s.cols, offset, rng);
        run_case<DType::f64>(c, s.rows, s.cols, offset, rng);
        run_case<DType::f16>(c, s.rows, s.cols, offset, rng);
        run_case<DType::bf16>(c, s.rows, s.cols, offset, rng);
        if (testing::Test::HasFatalFailure()) return;
      }
    }
  }
  for (int light = 0; light < 2; ++light) {
    for (int kind = 0; kind < 3; ++kind) {
      EXPECT_TRUE(g_seen[light][kind]) << "light " << light << ": no case ran "
                                       << (kind == 0   ? "vectors with a head"
                                           : kind == 1 ? "vectors"
                                                       : "single elements");
    }
  }
}

// The reciprocal division the kernels index rows and columns with (ewg_divmod) against / and %,
// at the edges of its proof: periods 1, powers of two, near 2^32 and 2^63; dividends to 2^63 - 1.
TEST(ElementwiseGenericEmulated, ReciprocalDivisionIsExact) {
  std::mt19937_64 rng(test::fresh_seed());
  ew_nary_args a{};
  ewg_divisors dv{};
  const auto check = [&](long long e, long long d) {
    a.period[0] = d;
    dv.m[0] = ~0ULL / static_cast<unsigned long long>(d);
    long long r = -1;
    const long long q = ewg_divmod(dv, a, 0, e, r);
    ASSERT_EQ(q, e / d) << e << " / " << d;
    ASSERT_EQ(r, e % d) << e << " % " << d;
  };
  const long long kMax = 0x7fffffffffffffffLL;
  for (long long d :
       {1LL, 2LL, 3LL, 7LL, 8LL, 28672LL, 1LL << 31, (1LL << 32) - 1, 1LL << 32, (1LL << 62) + 1, kMax}) {
    for (long long e :
         {0LL, 1LL, d - 1, d, d < kMax ? d + 1 : d, (1LL << 32) - 1, 1LL << 32, kMax - 1, kMax}) {
      check(e, d);
    }
    for (int i = 0; i < 2000; ++i) check(static_cast<long long>(rng() >> 1), d);
  }
  for (int i = 0; i < 20000; ++i) {
    const long long d = std::max<long long>(1, static_cast<long long>(rng() >> (1 + rng() % 63)));
    check(static_cast<long long>(rng() >> (1 + rng() % 63)), d);
  }
}

}  // namespace
