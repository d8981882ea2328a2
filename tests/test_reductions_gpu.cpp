// GPU tests of the row reductions against a float64 reference computed on the host: every op in
// every dtype over row lengths from 1 to 2^20 + 3 (each form: warp, block, cluster, split), short rows on
// fewer lanes of a warp (sub-warp rows, the output and residual past the last row poisoned and
// kept so), fresh random data each run, special values (NaN, ±inf, a row all -inf, -0.0,
// subnormals, eps 0), outputs poisoned before each launch (gaps between strided rows must stay
// poisoned), strided and misaligned rows, in place, add_rms_norm's residual bit for bit, CUDA-graph
// capture, and fused prologue / epilogue chains (RowFusion) in each form. The suite runs under the
// sync policy (tests/CMakeLists.txt): every call runs the specialized kernel; the generic kernels
// (the JIT's no-wait path) have their own cases at the end, under the policies they serve.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cuinline/driver.hpp>
#include <cuinline/jit.hpp>
#include <cuinline/kernel_cache.hpp>
#include <cuinline/module.hpp>
#include <cuinline/reductions.hpp>
#include <random>
#include <string>
#include <vector>

#include "reductions_reference.hpp"
#include "test_support.hpp"

namespace {

using cuinline::DType;
using cuinline::TensorView;
using cuinline::ops::RowOp;
using cuinline::test::bits_of;
using cuinline::test::make_problem;
using cuinline::test::Problem;
using cuinline::test::random_values;
using cuinline::test::set_bits;

constexpr std::uint32_t kPoison = cuinline::test::kRowPoison;

#define SKIP_WITHOUT_GPU() \
  if (cuinline::device_count() == 0) GTEST_SKIP() << "no CUDA device"

const RowOp kOps[] = {RowOp::softmax, RowOp::log_softmax, RowOp::rms_norm, RowOp::add_rms_norm, RowOp::layer_norm};
const DType kDtypes[] = {DType::f32, DType::f16, DType::bf16, DType::f64};

struct DeviceProblem {
  cuinline::DeviceBuffer x, y, w, b, r;
  TensorView xv, yv, wv, bv, rv;
  std::vector<cuinline::DeviceBuffer> e;  // the epilogue's tensors
  cuinline::ops::RowFusion fusion;
};

cuinline::DeviceBuffer upload(const std::vector<unsigned char>& host) {
  cuinline::DeviceBuffer buf((host.size() + 3) / 4 * 4 + 4);
  buf.copy_from_host(host.data(), host.size());
  return buf;
}

TensorView rows_view(const cuinline::DeviceBuffer& buf, const Problem& p, std::int64_t stride) {
  void* at = reinterpret_cast<unsigned char*>(buf.ptr()) + p.offset * cuinline::dtype_size(p.dt);
  return TensorView::strided(at, p.dt, {p.rows, p.n}, {stride, 1});
}

// The residual's host bits followed by `tail` poisoned bytes.
std::vector<unsigned char> with_tail(const std::vector<unsigned char>& host, std::size_t tail) {
  std::vector<unsigned char> out = host;
  out.resize(host.size() + tail, 0x5a);  // kPoison's bytes
  return out;
}

// Device copies of p; the output poisoned, `in_place`: the output is x. The output and the residual
// run on `tail_rows` rows past the last, poisoned (check_tails).
DeviceProblem to_device(const Problem& p, bool in_place = false, std::int64_t tail_rows = 0) {
  const std::size_t es = cuinline::dtype_size(p.dt);
  DeviceProblem d;
  d.x = upload(p.x);
  d.xv = rows_view(d.x, p, p.sx);
  if (!in_place) {
    d.y =
        cuinline::DeviceBuffer((static_cast<std::size_t>(p.span(p.sy) + tail_rows * p.sy) * es + 3) / 4 * 4);
    d.y.fill_u32(kPoison);
    d.yv = rows_view(d.y, p, p.sy);
  } else {
    d.yv = d.xv;
  }
  if (p.has_w()) {
    d.w = upload(p.w);
    d.wv = TensorView::contiguous(reinterpret_cast<unsigned char*>(d.w.ptr()) + p.offset * cuinline::dtype_size(p.dt),
                                  p.dt, {p.n});
  }
  if (p.has_b()) {
    d.b = upload(p.b);
    d.bv = TensorView::contiguous(reinterpret_cast<unsigned char*>(d.b.ptr()) + p.offset * cuinline::dtype_size(p.dt),
                                  p.dt, {p.n});
  }
  if (p.op == RowOp::add_rms_norm) {
    d.r = upload(with_tail(p.r, static_cast<std::size_t>(tail_rows * p.sr) * es));
    d.rv = rows_view(d.r, p, p.sr);
  }
  d.fusion.prologue = p.prologue;
  d.fusion.epilogue = p.epilogue;
  for (const auto& host : p.extra) {
    d.e.push_back(upload(host));
    d.fusion.epilogue_inputs.push_back(rows_view(d.e.back(), p, p.se));
  }
  return d;
}

void call(const Problem& p, const DeviceProblem& d, CUstream stream = nullptr) {
  if (!p.prologue.steps.empty() || !p.epilogue.steps.empty()) {
    switch (p.op) {
      case RowOp::softmax:
        return cuinline::ops::softmax(d.xv, d.yv, d.fusion, stream);
      case RowOp::log_softmax:
        return cuinline::ops::log_softmax(d.xv, d.yv, d.fusion, stream);
      case RowOp::rms_norm:
        return cuinline::ops::rms_norm(d.xv, d.wv, d.yv, p.eps, d.fusion, stream);
      case RowOp::add_rms_norm:
        return cuinline::ops::add_rms_norm(d.xv, d.rv, d.wv, d.yv, p.eps, d.fusion, stream);
      case RowOp::layer_norm:
        return cuinline::ops::layer_norm(d.xv, d.wv, d.bv, d.yv, p.eps, d.fusion, stream);
    }
  }
  switch (p.op) {
    case RowOp::softmax:
      return cuinline::ops::softmax(d.xv, d.yv, stream);
    case RowOp::log_softmax:
      return cuinline::ops::log_softmax(d.xv, d.yv, stream);
    case RowOp::rms_norm:
      return cuinline::ops::rms_norm(d.xv, d.wv, d.yv, p.eps, stream);
    case RowOp::add_rms_norm:
      return cuinline::ops::add_rms_norm(d.xv, d.rv, d.wv, d.yv, p.eps, stream);
    case RowOp::layer_norm:
      return cuinline::ops::layer_norm(d.xv, d.wv, d.bv, d.yv, p.eps, stream);
  }
}

// The output (the input where in place) and the residual read back, checked against the reference.
void check(const Problem& p, const DeviceProblem& d, bool in_place = false) {
  const std::size_t es = cuinline::dtype_size(p.dt);
  std::vector<unsigned char> y(static_cast<std::size_t>(in_place ? p.span(p.sx) : p.span(p.sy)) * es);
  (in_place ? d.x : d.y).copy_to_host(y.data(), y.size());
  std::vector<unsigned char> r;
  if (p.op == RowOp::add_rms_norm) {
    r.resize(p.r.size());
    d.r.copy_to_host(r.data(), r.size());
  }
  cuinline::test::check_rows(p, y, in_place ? p.sx : p.sy, r, !in_place);
}

// What follows the output's and the residual's last row (tail_rows rows of each, to_device's) kept
// its poison.
void check_tails(const Problem& p, const DeviceProblem& d, std::int64_t tail_rows) {
  const std::size_t es = cuinline::dtype_size(p.dt);
  const auto check = [&](const cuinline::DeviceBuffer& buf, std::int64_t stride, const char* name) {
    const std::size_t end = static_cast<std::size_t>(p.span(stride)) * es;
    std::vector<unsigned char> host(end + static_cast<std::size_t>(tail_rows * stride) * es);
    buf.copy_to_host(host.data(), host.size());
    const auto first = std::find_if(host.begin() + static_cast<std::ptrdiff_t>(end), host.end(),
                                    [](unsigned char c) { return c != 0x5a; });
    EXPECT_EQ(first, host.end()) << cuinline::test::what(p) << ": the " << name
                                 << " was written past its last row, at byte "
                                 << (first - host.begin()) - static_cast<std::ptrdiff_t>(end) << " after it";
  };
  check(d.y, p.sy, "output");
  if (p.op == RowOp::add_rms_norm) check(d.r, p.sr, "residual");
}

class ReductionsGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    cuinline::set_device(0);
    seed_ = cuinline::test::fresh_seed();
    rng_.seed(seed_);
  }
  std::uint64_t seed_ = 0;
  std::mt19937_64 rng_;
};

// The cluster form's kernels fit the GPU (cuOccupancyMaxActiveClusters, which the launch asks before
// the first launch of each on a device, a cluster past the portable 8 blocks allowed first): one and
// two chunks a block, clusters of 3 to 16, in bf16 and f32; on a GPU before sm_90 the planner's
// cluster variants run their split form (not asked here).
TEST_F(ReductionsGpu, ClusterKernelsFitTheGpu) {
  if (cuinline::device_arch(0).number() < 90) GTEST_SKIP() << "no thread block clusters before sm_90";
  for (const DType dt : {DType::bf16, DType::f32}) {
    for (const std::int64_t n :
         {std::int64_t{40000}, std::int64_t{65536}, std::int64_t{131072}, std::int64_t{262144}}) {
      const cuinline::TensorView x = cuinline::TensorView::contiguous(reinterpret_cast<void*>(1ull << 30), dt, {64, n});
      const cuinline::TensorView y = cuinline::TensorView::contiguous(reinterpret_cast<void*>(2ull << 30), dt, {64, n});
      const cuinline::TensorView w = cuinline::TensorView::contiguous(reinterpret_cast<void*>(3ull << 30), dt, {n});
      const cuinline::ops::RowPlan plan = cuinline::ops::plan_rows(RowOp::rms_norm, x, y, w, {}, {}, 1e-6);
      SCOPED_TRACE(plan.variant.name());
      ASSERT_EQ(plan.variant.form, cuinline::ops::RowForm::cluster);
      const cuinline::Module module =
          cuinline::default_cache().get(cuinline::ops::make_request(plan.variant), cuinline::device_arch(0));
      const cuinline::Kernel kernel = module.kernel(cuinline::ops::kernel_name(plan.variant));
      if (plan.variant.cluster > 8) kernel.allow_non_portable_clusters(0);  // (past the portable size)
      cuinline::LaunchConfig cfg;
      cfg.grid = cuinline::Dim3(static_cast<unsigned>(plan.variant.cluster));
      cfg.block = cuinline::Dim3(plan.block);
      EXPECT_GE(kernel.max_active_clusters(cfg, 0), 8) << "an H100 / H200 holds a cluster a GPC at least";
    }
  }
}

// More rows than the GPU holds clusters at once (the cluster form's grid is one cluster a row: they
// run in waves): every op in f32, f16 and bf16, a row's chunks from 3 to 14 and the last one short,
// rows strided with their gaps poisoned, in place, and nothing written past the last row; where
// the planner keeps the split form (cluster_pays), that form on the same rows.
TEST_F(ReductionsGpu, ClusterFormOnMoreRowsThanTheGpuHolds) {
  if (cuinline::device_arch(0).number() < 90) GTEST_SKIP() << "no thread block clusters before sm_90";
  SCOPED_TRACE("seed " + std::to_string(seed_) + " (CUINLINE_TEST_SEED replays it)");
  const std::int64_t tail_rows = 3;
  int k = 0;
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    const std::int64_t chunk = cuinline::dtype_size(dt) == 2 ? 16384 : 8192;
    for (RowOp op : kOps) {
      // 2.5 chunks (3 blocks a cluster), 8 whole ones and 13.5 (14 blocks: past the portable size),
      // in turn; 1100, 300 and 200 rows (an H200 holds 66 clusters of 3 blocks of 64 registers and 256
      // threads a multiprocessor at most).
      const std::int64_t n = k % 3 == 0 ? chunk * 5 / 2 : k % 3 == 1 ? chunk * 8 : chunk * 27 / 2;
      const std::int64_t rows = k % 3 == 0 ? 1100 : k % 3 == 1 ? 300 : 200;
      const bool in_place = k % 4 == 1;
      ++k;
      Problem p = make_problem(op, dt, rows, n, rng_, in_place ? 0 : 16, in_place ? 0 : 8);
      p.eps = op == RowOp::layer_norm ? 1e-5 : 1e-6;
      const DeviceProblem d = to_device(p, in_place, in_place ? 0 : tail_rows);
      const cuinline::ops::RowPlan plan =
          cuinline::ops::plan_rows(op, d.xv, d.yv, d.wv, d.bv, d.rv, p.eps);
      SCOPED_TRACE(plan.variant.name() + (in_place ? ", in place" : ""));
      call(p, d);
      check(p, d, in_place);
      if (!in_place) check_tails(p, d, tail_rows);
    }
  }
}

// Each op, dtype and row length (warp, block, cluster and split forms, odd lengths on the scalar path), fresh
// data.
TEST_F(ReductionsGpu, RowLengthsDtypesAndOps) {
  SCOPED_TRACE("seed " + std::to_string(seed_) + " (CUINLINE_TEST_SEED replays it)");
  const std::int64_t lengths[] = {1, 7, 64, 128, 1000, 4096, 32768, 65537, 131072, 262144, (1 << 20) + 3};
  for (DType dt : kDtypes) {
    for (RowOp op : kOps) {
      for (std::int64_t n : lengths) {
        const std::int64_t rows = std::clamp<std::int64_t>((std::int64_t{1} << 19) / n, 2, 37);
        Problem p = make_problem(op, dt, rows, n, rng_);
        p.eps = op == RowOp::layer_norm ? 1e-5 : 1e-6;
        const DeviceProblem d = to_device(p);
        call(p, d);
        check(p, d);
      }
    }
  }
}

// Short rows on fewer lanes of a warp (sub-warp rows: 1 to 16 lanes a row, 128 / lanes rows a block)
// and on a whole warp (200), each op and dtype, one row, a few, and a last block mostly past the last
// row (65537); nothing written past the output's or the residual's last row (a block's worth of
// rows after each, poisoned).
TEST_F(ReductionsGpu, SubWarpRows) {
  SCOPED_TRACE("seed " + std::to_string(seed_) + " (CUINLINE_TEST_SEED replays it)");
  const std::int64_t tail_rows = 128;
  for (DType dt : kDtypes) {
    for (RowOp op : kOps) {
      for (std::int64_t n : {8, 24, 64, 128, 200}) {
        for (std::int64_t rows : {1, 7, 65537}) {
          Problem p = make_problem(op, dt, rows, n, rng_);
          p.eps = op == RowOp::layer_norm ? 1e-5 : 1e-6;
          p.weight = rows != 7;  // the norms without a weight too
          const DeviceProblem d = to_device(p, false, tail_rows);
          call(p, d);
          check(p, d);
          check_tails(p, d, tail_rows);
        }
      }
    }
  }
}

// Strided rows (gaps poisoned and kept), rows misaligned to the vector (the scalar path), in
// place, and absent weight / bias, in each form.
TEST_F(ReductionsGpu, StridedMisalignedInPlaceAndOptionalParameters) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  for (DType dt : kDtypes) {
    for (RowOp op : kOps) {
      for (std::int64_t n : {48, 2048, 40000}) {
        Problem strided = make_problem(op, dt, 5, n, rng_, 24, 40, 0);
        {
          const DeviceProblem d = to_device(strided);
          call(strided, d);
          check(strided, d);
        }
        Problem misaligned = make_problem(op, dt, 3, n + 1, rng_, 3, 1, 1);
        misaligned.weight = n != 2048;  // rms / layer_norm without a weight too
        misaligned.bias = false;
        {
          const DeviceProblem d = to_device(misaligned);
          call(misaligned, d);
          check(misaligned, d);
        }
        Problem in_place = make_problem(op, dt, 4, n, rng_);
        in_place.weight = false;
        {
          const DeviceProblem d = to_device(in_place, true);
          call(in_place, d);
          check(in_place, d, true);
        }
      }
    }
  }
}

// Special values, one kind a row, in each form: NaN, +inf, a row all -inf, -inf among finite
// values, -0.0 with subnormals, all zeros, terms through float's subnormals, a half 100 below the
// rest; eps 0 for the norms. 40000: the chunked forms.
TEST_F(ReductionsGpu, SpecialValues) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  for (DType dt : kDtypes) {
    for (RowOp op : kOps) {
      for (std::int64_t n : {7, 24, 256, 3000, 20000, 40000}) {  // 7, 24: sub-warp rows
        const std::int64_t rows = 9;
        Problem p = make_problem(op, dt, rows, n, rng_);
        p.eps = 0;
        cuinline::test::add_special_rows(p, rng_);
        const DeviceProblem d = to_device(p);
        call(p, d);
        check(p, d);
      }
    }
  }
}

// layer_norm of rows that each hold one value: every form gives the bias bit for bit (x - mean is
// exactly 0 with the corrected two-pass mean, as with PyTorch's Welford mean), with and without a
// weight, on the GPU's contractions.
TEST_F(ReductionsGpu, LayerNormOfAConstantRowIsExactlyTheBias) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const double values[] = {0.15, -3.7, 1234.56, 1.0 / 3.0, -0.0123};
  for (DType dt : kDtypes) {
    for (std::int64_t n : {7, 1000, 3000, 20000, 70000, 300000}) {
      for (const bool weight : {true, false}) {
        Problem p = make_problem(RowOp::layer_norm, dt, 5, n, rng_);
        p.weight = weight;
        for (std::int64_t row = 0; row < p.rows; ++row) {
          for (std::int64_t i = 0; i < n; ++i)
            cuinline::test::set_bits(p.x, dt, row * p.sx + i, cuinline::test::bits_of(dt, values[row]));
        }
        const DeviceProblem d = to_device(p);
        call(p, d);
        std::vector<unsigned char> y(static_cast<std::size_t>(p.span(p.sy)) * cuinline::dtype_size(dt));
        d.y.copy_to_host(y.data(), y.size());
        for (std::int64_t row = 0; row < p.rows; ++row) {
          std::int64_t wrong = 0;
          for (std::int64_t i = 0; i < n; ++i) {
            wrong += cuinline::test::get_bits(y, dt, row * p.sy + i) != cuinline::test::get_bits(p.b, dt, i);
          }
          EXPECT_EQ(wrong, 0) << cuinline::test::what(p) << (weight ? "" : " without weight") << ": row of "
                              << values[row];
        }
      }
    }
  }
}

// Each op captured into a CUDA graph, replayed on new data; the second call of a variant is a
// map hit.
TEST_F(ReductionsGpu, GraphCaptureAndKernelMap) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  for (RowOp op : kOps) {
    for (std::int64_t n : {100, 5000, 70000}) {
      Problem p = make_problem(op, DType::bf16, 6, n, rng_);
      DeviceProblem d = to_device(p);
      cuinline::Stream s;
      const cuinline::ops::OpsStats before = cuinline::ops::reduction_stats();
      cuinline::Graph g = cuinline::Graph::capture(s, [&] { call(p, d, s); });
      // New input (and residual) in the same buffers, then the replay.
      p.x = random_values(p.dt, p.span(p.sx), -8, 8, rng_);
      d.x.copy_from_host(p.x.data(), p.x.size());
      if (op == RowOp::add_rms_norm) d.r.copy_from_host(p.r.data(), p.r.size());
      d.y.fill_u32(kPoison);
      g.launch(s);
      s.synchronize();
      check(p, d);
      call(p, d);  // eager again: the map holds the variant
      const cuinline::ops::OpsStats after = cuinline::ops::reduction_stats();
      EXPECT_EQ(after.launches - before.launches, 2u);
      EXPECT_GE(after.map_hits - before.map_hits, 1u);
    }
  }
}

// Fused chains in each form (warp with fewer lanes and with a whole warp, block, split) of each op
// and dtype, special values in the first rows: a scale before the reduction and a gate after it; a
// two-step prologue and a three-step epilogue over two tensors (their rows strided apart from x's);
// the fused kernel is a variant of its own, the unfused call's result unchanged next to it.
TEST_F(ReductionsGpu, FusedPrologueAndEpilogue) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  struct Chains {
    const char* prologue;
    const char* epilogue;
    int inputs;
  };
  // Prologues of scalar arithmetic alone (light on f16 / bf16 rows, not add_rms_norm's nor f16 rms_norm's:
  // the unchained layouts; 0.125 a 16-bit storage value, 0.1 not; the chained layouts elsewhere) on the rows
  // of the block form's 1024 threads (16-bit packs, f32's parked rows) and of the chunked forms.
  const Chains chains[] = {{"mul(0.125)", "mul(in1)", 1},
                           {"div(2)|clamp(-3,3)", "relu|mul(in1)|mul(in2)", 2},
                           {"mul(0.125)", "", 0},
                           {"mul(0.1)|add(1)", "", 0}};
  for (DType dt : kDtypes) {
    for (RowOp op : kOps) {
      for (std::int64_t n : {7, 64, 3000, 20000, 40000}) {  // 7 and (but for f64) 64: sub-warp rows
        for (const Chains& c : chains) {
          if (*c.epilogue == '\0' && n < 3000) continue;
          Problem p = make_problem(op, dt, 7, n, rng_, 8, 16, 0);
          p.eps = 0;
          cuinline::test::add_special_rows(p, rng_);
          cuinline::test::add_chains(p, c.prologue, c.epilogue, c.inputs, rng_);
          const DeviceProblem d = to_device(p);
          call(p, d);
          check(p, d);
        }
        // The plain op on the same data next to the fused one.
        Problem plain = make_problem(op, dt, 3, n, rng_);
        const DeviceProblem d = to_device(plain);
        call(plain, d);
        check(plain, d);
      }
    }
  }
}

// The output's rows (the input's where in place) read back.
std::vector<unsigned char> output_bytes(const Problem& p, const DeviceProblem& d) {
  std::vector<unsigned char> y(static_cast<std::size_t>(p.span(p.sy)) * cuinline::dtype_size(p.dt));
  d.y.copy_to_host(y.data(), y.size());
  return y;
}

// The generic kernels (the generic policy, the variant's specialized kernel not in the process) on
// every op and dtype, each form's row lengths, special values with eps 0, strided and misaligned
// rows, and fused chains: against the float64 reference, and bit for bit the specialized kernel's
// output and residual (sync, on a second copy of the same data), whose element order, reductions,
// chunks and formulas the generic kernel follows.
TEST_F(ReductionsGpu, GenericKernelsMatchTheReferenceAndTheSpecializedKernels) {
  if (!cuinline::generic_kernels_built()) GTEST_SKIP() << "built with CUINLINE_GENERIC_KERNELS=OFF";
  SCOPED_TRACE("seed " + std::to_string(seed_) + " (CUINLINE_TEST_SEED replays it)");
  struct Case {
    std::int64_t rows, n, pad_x, pad_y, offset;
    bool special;
    const char* prologue;
    const char* epilogue;
    int inputs;
  };
  const Case cases[] = {
      {37, 7, 0, 3, 0, false, "", "", 0},
      {300, 64, 0, 0, 0, false, "", "", 0},
      {37, 1000, 8, 0, 0, false, "", "", 0},
      {17, 4096, 0, 8, 0, false, "", "", 0},
      {9, 32768, 0, 0, 0, false, "", "", 0},
      {5, 2001, 2, 0, 1, false, "", "", 0},
      // Split rows of 257 chunks: the write kernel's lanes merge two chunks each.
      {3, 262144, 0, 0, 0, false, "", "", 0},
      {2, (1 << 21) + 8192 + 3, 0, 0, 0, false, "", "", 0},
      {2, (1 << 21) + 8192, 0, 0, 0, false, "", "", 0},
      {9, 1000, 0, 0, 0, true, "", "", 0},
      {9, 40000, 0, 0, 0, true, "", "", 0},
      // The cluster form (sm_90 and later; the generic kernel runs its split form): f32 blocks of two
      // chunks, 13 a cluster (the last one's second idle; 16-bit rows 13 blocks of one, f64 split),
      // and 16 blocks of one chunk with chains.
      {3, 200000, 0, 4, 0, false, "", "", 0},
      {9, 131072, 0, 0, 0, true, "mul(0.125)", "mul(in1)", 1},
      {7, 64, 8, 16, 0, true, "div(2)|clamp(-3,3)", "relu|mul(in1)|mul(in2)", 2},
      {7, 3000, 8, 16, 0, false, "mul(0.125)", "mul(in1)", 1},
  };
  for (DType dt : kDtypes) {
    for (RowOp op : kOps) {
      for (const Case& c : cases) {
        Problem p = make_problem(op, dt, c.rows, c.n, rng_, c.pad_x, c.pad_y, c.offset);
        p.eps = op == RowOp::layer_norm ? 1e-5 : 1e-6;
        // A weight but every fourth case from the third (and the misaligned one), a bias but every
        // fourth from the fourth: layer_norm's output rounds alike with either absent.
        const auto k = static_cast<std::size_t>(&c - cases);
        p.weight = c.offset == 0 && k % 4 != 2;
        p.bias = k % 4 != 3;
        if (c.special) {
          p.eps = 0;
          cuinline::test::add_special_rows(p, rng_);
        }
        if (*c.prologue != '\0') cuinline::test::add_chains(p, c.prologue, c.epilogue, c.inputs, rng_);
        const DeviceProblem g = to_device(p), s = to_device(p);
        cuinline::ops::clear_reduction_map();  // no specialized kernel of the variant in the process
        const cuinline::JitStats before = cuinline::jit_stats();
        {
          cuinline::ScopedJitPolicy generic(cuinline::JitPolicy::generic);
          call(p, g);
        }
        EXPECT_EQ(cuinline::jit_stats().generic_launches, before.generic_launches + 1) << cuinline::test::what(p);
        check(p, g);
        call(p, s);  // sync (the suite's policy): the specialized kernel
        // (f64: any NaN for any NaN, as on the host: reductions_reference.hpp's same_bits_or_nans.)
        const std::vector<unsigned char> yg = output_bytes(p, g), ys = output_bytes(p, s);
        if (dt == DType::f64 ? !cuinline::test::same_bits_or_nans(dt, yg, ys) : yg != ys) {
          const std::size_t es = cuinline::dtype_size(dt);
          std::size_t first = yg.size(), count = 0;
          for (std::size_t i = 0; i < yg.size() / es; ++i) {
            if (std::memcmp(yg.data() + i * es, ys.data() + i * es, es) != 0 && count++ == 0) first = i;
          }
          std::uint64_t bg = 0, bs = 0;
          std::memcpy(&bg, yg.data() + first * es, es);
          std::memcpy(&bs, ys.data() + first * es, es);
          ADD_FAILURE() << cuinline::test::what(p)
                        << ": the generic kernel's output differs from the specialized one's in " << count
                        << " elements, first at row " << static_cast<std::int64_t>(first) / p.sy << " column "
                        << static_cast<std::int64_t>(first) % p.sy << ": generic 0x" << std::hex << bg
                        << ", specialized 0x" << bs << std::dec;
        }
        if (op == RowOp::add_rms_norm) {
          std::vector<unsigned char> rg(p.r.size()), rs(p.r.size());
          g.r.copy_to_host(rg.data(), rg.size());
          s.r.copy_to_host(rs.data(), rs.size());
          EXPECT_TRUE(rg == rs) << cuinline::test::what(p) << ": the residuals differ";
        }
      }
    }
  }
}

// Under async a never-seen variant runs on the generic kernel at once and its specialized kernel is
// compiled in the background, then swapped in (the split form: both its kernels); a capture while
// a specialization is pending waits for it and records the specialized kernel, and its replays
// give the eager results.
TEST_F(ReductionsGpu, AsyncServesAtOnceThenSwapsTheSpecializedKernelIn) {
  if (!cuinline::generic_kernels_built()) GTEST_SKIP() << "built with CUINLINE_GENERIC_KERNELS=OFF";
  SCOPED_TRACE("seed " + std::to_string(seed_));
  cuinline::wait_for_specializations();
  // A prologue constant of this run: a variant no earlier test compiled.
  const std::string scale = "mul(" + std::to_string(1.0 + static_cast<double>(rng_() % 100000) / 1e6) + ")";
  for (const std::int64_t n : {std::int64_t{1000}, std::int64_t{200000}}) {  // the warp and the split form
    Problem p = make_problem(RowOp::rms_norm, DType::bf16, 9, n, rng_);
    cuinline::test::add_chains(p, scale.c_str(), "", 0, rng_);
    DeviceProblem d = to_device(p);
    cuinline::ScopedJitPolicy async(cuinline::JitPolicy::async);
    const cuinline::JitStats before = cuinline::jit_stats();
    call(p, d);
    const cuinline::JitStats first = cuinline::jit_stats();
    EXPECT_EQ(first.generic_launches, before.generic_launches + 1);
    EXPECT_EQ(first.submitted, before.submitted + 1);
    check(p, d);
    cuinline::wait_for_specializations();
    const cuinline::JitStats drained = cuinline::jit_stats();
    EXPECT_EQ(drained.pending, 0u);
    EXPECT_EQ(drained.swaps, before.swaps + 1);
    EXPECT_EQ(drained.background_failures, before.background_failures);
    d.y.fill_u32(kPoison);
    call(p, d);
    const cuinline::JitStats second = cuinline::jit_stats();
    EXPECT_EQ(second.generic_launches, drained.generic_launches) << "the specialized kernel runs now";
    EXPECT_EQ(second.submitted, drained.submitted);
    check(p, d);
  }
  // A capture of a never-seen variant under async: compiled there (as under sync), never generic.
  Problem p = make_problem(RowOp::layer_norm, DType::f16, 6, 3000, rng_);
  cuinline::test::add_chains(p, ("mul(" + std::to_string(2.0 + static_cast<double>(rng_() % 100000) / 1e6) + ")").c_str(),
                             "", 0, rng_);
  DeviceProblem d = to_device(p);
  cuinline::ScopedJitPolicy async(cuinline::JitPolicy::async);
  const cuinline::JitStats before = cuinline::jit_stats();
  cuinline::Stream stream;
  cuinline::Graph graph = cuinline::Graph::capture(stream, [&] { call(p, d, stream); });
  EXPECT_EQ(cuinline::jit_stats().generic_launches, before.generic_launches);
  EXPECT_EQ(cuinline::jit_stats().sync_waits, before.sync_waits + 1);
  graph.launch(stream);
  stream.synchronize();
  check(p, d);
}

}  // namespace
