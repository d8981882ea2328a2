// Host tests of the row reductions (softmax, log_softmax, rms_norm, add_rms_norm, layer_norm): the
// planner's choice of form, vector width and grid on fake pointers, every misuse refused before
// anything is compiled or launched (C++ and C API), empty tensors as a no-op, the variants' names
// and checks, and every form of every op and dtype compiled to a cubin with NVRTC.
#include <cuinline/cuinline.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cuinline/compiler.hpp>
#include <cuinline/error.hpp>
#include <cuinline/reductions.hpp>
#include <functional>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include "ops/reductions/knobs.hpp"
#include "ops/reductions/plan.hpp"
#include "reductions_views.hpp"
#include "test_support.hpp"

namespace {

using cuinline::DType;
using cuinline::InvalidArgument;
using cuinline::TensorView;
using cuinline::ops::plan_rows;
using cuinline::ops::RowForm;
using cuinline::ops::RowOp;
using cuinline::ops::RowPlan;
using cuinline::ops::RowVariant;

using cuinline::test::fake;
using cuinline::test::kB;
using cuinline::test::kIn;
using cuinline::test::kOut;
using cuinline::test::kRes;
using cuinline::test::kW;
using cuinline::test::refusal;
using cuinline::test::rows_of;
using cuinline::test::vec;

TEST(ReductionPlan, FormByRowLength) {
  struct Want {
    DType dt;
    std::int64_t n;
    RowForm form;
    int v, per_thread, threads, cluster = 0;
  };
  const Want wants[] = {
      {DType::f32, 1, RowForm::warp, 1, 1, 1},
      {DType::f32, 7, RowForm::warp, 1, 1, 8},
      {DType::f32, 64, RowForm::warp, 4, 4, 16},
      {DType::f32, 128, RowForm::warp, 4, 4, 32},
      // The warp form while a lane holds at most 64 bytes of the row (warp_form_max): f32 rows of
      // 512, f64 of 256, 16-bit of 1024; longer rows one a block of at least 128 threads.
      {DType::f32, 512, RowForm::warp, 4, 16, 32},
      {DType::f32, 1000, RowForm::block, 4, 8, 128},
      {DType::f64, 256, RowForm::warp, 2, 8, 32},
      {DType::f64, 257, RowForm::block, 1, 4, 128},
      {DType::f16, 1024, RowForm::warp, 8, 32, 32},
      {DType::f32, 1025, RowForm::block, 1, 16, 128},
      {DType::f32, 4096, RowForm::block, 4, 16, 256},
      {DType::bf16, 4096, RowForm::block, 8, 16, 256},
      {DType::f32, 16384, RowForm::block, 4, 16, 1024},
      {DType::f64, 4096, RowForm::block, 2, 8, 512},
      {DType::f64, 8192, RowForm::block, 2, 8, 1024},
      {DType::f64, 16384, RowForm::split_stats, 2, 32, 256},
      {DType::f32, 32768, RowForm::block, 4, 32, 1024},
      {DType::bf16, 32768, RowForm::block, 8, 32, 1024},
      {DType::f32, 32769, RowForm::cluster, 1, 32, 256, 5},
      // The cluster form: one chunk a block up to 16 chunks (past 8 a non-portable cluster), then as
      // few a block as a cluster of 16 holds (2 at most), then as few blocks as hold them; longer rows
      // split. Softmax takes it but in f64 (cluster_pays).
      {DType::bf16, 65536, RowForm::cluster, 8, 64, 256, 4},
      {DType::f32, 65537, RowForm::cluster, 1, 32, 256, 9},
      {DType::f32, 131072, RowForm::cluster, 4, 32, 256, 16},
      {DType::f16, 122880, RowForm::cluster, 8, 64, 256, 8},
      {DType::f16, 40000, RowForm::cluster, 8, 64, 256, 3},
      {DType::f64, 65536, RowForm::split_stats, 2, 32, 256},
      {DType::bf16, 131073, RowForm::cluster, 1, 64, 256, 9},
      {DType::f32, 131073, RowForm::cluster, 1, 32, 512, 9},
      {DType::f32, 262144, RowForm::cluster, 4, 32, 512, 16},
      {DType::f32, 262145, RowForm::split_stats, 1, 32, 256},
      {DType::bf16, 262144, RowForm::cluster, 8, 64, 256, 16},
      {DType::bf16, 524288, RowForm::cluster, 8, 64, 512, 16},
      {DType::bf16, 524289, RowForm::split_stats, 1, 64, 256},
      {DType::f16, (1 << 20) + 3, RowForm::split_stats, 1, 64, 256},
  };
  for (const Want& w : wants) {
    const RowPlan p = plan_rows(RowOp::softmax, rows_of(kIn, w.dt, 10, w.n), rows_of(kOut, w.dt, 10, w.n));
    SCOPED_TRACE(p.variant.name());
    EXPECT_EQ(p.variant.form, w.form);
    EXPECT_EQ(p.variant.vector_width, w.v);
    EXPECT_EQ(p.variant.per_thread, w.per_thread);
    EXPECT_EQ(p.variant.threads, w.threads);
    EXPECT_EQ(p.variant.cluster, w.cluster);
    EXPECT_GE(p.variant.max_row(), w.n);
    EXPECT_NO_THROW(p.variant.validate());
    EXPECT_EQ(p.rows, 10);
    EXPECT_EQ(p.n, w.n);
    const std::int64_t chunk = 256 * (cuinline::dtype_size(w.dt) == 2 ? 64 : 32);  // 256 x 32, 16-bit 256 x 64
    const std::int64_t splits = (w.n + chunk - 1) / chunk;
    const unsigned warp_rows = w.form == RowForm::warp ? 128 / w.threads : 1;  // 128 / T rows a block
    const unsigned warp_grid = (10 + warp_rows - 1) / warp_rows;
    const bool split = w.form == RowForm::split_stats || w.form == RowForm::cluster;
    EXPECT_EQ(p.grid, w.form == RowForm::warp          ? warp_grid
                      : w.form == RowForm::split_stats ? 10u * splits
                      : w.form == RowForm::cluster     ? 10u * w.cluster
                                                       : 10u);
    EXPECT_EQ(p.block, w.form == RowForm::warp ? 128u : static_cast<unsigned>(w.threads));
    if (w.form == RowForm::cluster) {  // every block but the last holds a chunk a group
      const int groups = w.threads / 256;
      EXPECT_TRUE(w.cluster * groups >= splits && (w.cluster - 1) * groups < splits);
    }
    // (The cluster form's workspace is its split form's.)
    EXPECT_EQ(p.workspace_bytes, split ? 10u * splits * 2 * (w.dt == DType::f64 ? 8 : 4) : 0u);
    // Without a workspace a split or cluster call runs the looped form at the same width; without
    // clusters a cluster call runs the split form; the others run as planned.
    const RowVariant looped{RowOp::softmax, w.dt, RowForm::looped, w.v, w.v, 1024};
    EXPECT_EQ(p.fallback, split ? looped : p.variant);
    EXPECT_NO_THROW(p.fallback.validate());
    const RowVariant split_stats{RowOp::softmax, w.dt, RowForm::split_stats, w.v, w.per_thread, 256};
    EXPECT_EQ(p.split, split ? split_stats : p.variant);
    EXPECT_NO_THROW(p.split.validate());
  }
}

// Which ops take the cluster form (the measured table, cluster_pays) and its blocks: one chunk a
// block every op (add_rms_norm up to the portable 8 blocks), two all but layer_norm and
// add_rms_norm, f64 none; and the cluster form a split call can be made into whatever the table
// says (the emulated tests').
TEST(ReductionPlan, ClusterFormWhereItPays) {
  using cuinline::ops::detail::cluster_form;
  using cuinline::ops::detail::cluster_groups;
  using cuinline::ops::detail::cluster_pays;
  using cuinline::ops::detail::plan_row_call;
  // (Clusters of up to 16 blocks: one chunk a block up to 16 chunks, then two.)
  EXPECT_EQ(cluster_groups(DType::f32, 5), 1);
  EXPECT_EQ(cluster_groups(DType::bf16, 16), 1);
  EXPECT_EQ(cluster_groups(DType::bf16, 17), 2);
  EXPECT_EQ(cluster_groups(DType::f32, 32), 2);
  EXPECT_EQ(cluster_groups(DType::f32, 33), 0);
  EXPECT_EQ(cluster_groups(DType::f64, 16), 1);
  EXPECT_EQ(cluster_groups(DType::f64, 17), 0);
  const RowOp ops[] = {RowOp::softmax, RowOp::log_softmax, RowOp::rms_norm, RowOp::add_rms_norm, RowOp::layer_norm};
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
    for (RowOp op : ops) {
      EXPECT_EQ(cluster_pays(op, dt, 2), dt != DType::f64);
      EXPECT_EQ(cluster_pays(op, dt, 8), dt != DType::f64);
      EXPECT_EQ(cluster_pays(op, dt, 16), dt != DType::f64 && op != RowOp::add_rms_norm);
      EXPECT_EQ(cluster_pays(op, dt, 17),
                dt != DType::f64 && op != RowOp::layer_norm && op != RowOp::add_rms_norm);
      EXPECT_FALSE(cluster_pays(op, dt, 33));
      for (std::int64_t n : {40000, 100000}) {
        const TensorView x = rows_of(kIn, dt, 3, n), y = rows_of(kOut, dt, 3, n);
        const bool softmax = op == RowOp::softmax || op == RowOp::log_softmax;
        const TensorView w = softmax ? TensorView{} : vec(kW, dt, n);
        const TensorView b = op == RowOp::layer_norm ? vec(kB, dt, n) : TensorView{};
        const TensorView r = op == RowOp::add_rms_norm ? rows_of(kRes, dt, 3, n) : TensorView{};
        const auto call = plan_row_call(op, x, y, w, b, r, 1e-5);
        const std::int64_t chunk = 256 * cuinline::ops::detail::split_per_thread(dt, false);
        const std::int64_t chunks = (n + chunk - 1) / chunk;
        const std::int64_t groups = cluster_groups(dt, chunks);
        const bool pays = cluster_pays(op, dt, chunks);
        SCOPED_TRACE(call.plan.variant.name());
        EXPECT_EQ(call.plan.variant.form, pays ? RowForm::cluster : RowForm::split_stats);
        const auto made = cluster_form(call);
        EXPECT_EQ(made.plan.variant.form, groups != 0 ? RowForm::cluster : RowForm::split_stats);
        EXPECT_NO_THROW(made.plan.variant.validate());
        const auto split = cuinline::ops::detail::split_form(made);
        EXPECT_EQ(split.plan.variant.form, RowForm::split_stats);
        EXPECT_EQ(split.plan.variant.threads, 256);
        EXPECT_EQ(split.plan.grid, 3u * static_cast<unsigned>(chunks));
        EXPECT_EQ(split.plan.workspace_bytes, made.plan.workspace_bytes);
      }
    }
  }
}

// The warp form's lanes a row: the fewest, a power of two, whose accesses of the vector width cover
// the row (one access a lane; a whole warp with more where 32 are too few), whatever the op; a block
// of 128 threads holds 128 / T rows, so the grid covers the rows with the last block's groups past the
// last row (they store nothing).
TEST(ReductionPlan, SubWarpLanesByDtypeAndRowLength) {
  if (cuinline::ops::detail::row_knobs().warp_vectors != 1)
    GTEST_SKIP() << "CUINLINE_ROWS_WARP_VECTORS is set";
  struct Want {
    DType dt;
    std::int64_t n;
    int v, lanes, per_thread;
  };
  const Want wants[] = {
      {DType::bf16, 128, 8, 16, 8}, {DType::bf16, 64, 8, 8, 8},    {DType::f32, 128, 4, 32, 4},
      {DType::f16, 32, 8, 4, 8},    {DType::bf16, 8, 8, 1, 8},     {DType::f32, 8, 4, 2, 4},
      {DType::f64, 8, 2, 4, 2},     {DType::f16, 24, 8, 4, 8},     {DType::f32, 24, 4, 8, 4},
      {DType::f64, 24, 2, 16, 2},   {DType::f32, 20, 4, 8, 4},     {DType::f16, 6, 2, 4, 2},
      {DType::f32, 3, 1, 4, 1},     {DType::f64, 1, 1, 1, 1},      {DType::f32, 33, 1, 32, 2},
      {DType::bf16, 200, 8, 32, 8}, {DType::bf16, 264, 8, 32, 16}, {DType::f64, 64, 2, 32, 2},
      {DType::f64, 128, 2, 32, 4},  {DType::f16, 256, 8, 32, 8},   {DType::f32, 256, 4, 32, 8},
      {DType::f16, 512, 8, 32, 16},
  };
  const RowOp ops[] = {RowOp::softmax, RowOp::log_softmax, RowOp::rms_norm, RowOp::add_rms_norm,
                       RowOp::layer_norm};
  int k = 0;
  for (const Want& w : wants) {
    const std::int64_t per_block = 128 / w.lanes;
    // One row, fewer than a block holds, a whole number of blocks, one row more, and many.
    for (const std::int64_t rows :
         {std::int64_t{1}, std::int64_t{7}, 3 * per_block, 3 * per_block + 1, std::int64_t{65537}}) {
      const RowOp op = ops[k++ % 5];
      const bool add = op == RowOp::add_rms_norm;
      const RowPlan p = plan_rows(op, rows_of(kIn, w.dt, rows, w.n), rows_of(kOut, w.dt, rows, w.n), {}, {},
                                  add ? rows_of(kRes, w.dt, rows, w.n) : TensorView{}, 1e-6);
      SCOPED_TRACE(p.variant.name() + " rows " + std::to_string(rows));
      EXPECT_EQ(p.variant.form, RowForm::warp);
      EXPECT_EQ(p.variant.vector_width, w.v);
      EXPECT_EQ(p.variant.threads, w.lanes);
      EXPECT_EQ(p.variant.per_thread, w.per_thread);
      EXPECT_GE(p.variant.max_row(), w.n);
      EXPECT_LT(p.variant.max_row() / 2, w.n) << "more than twice the lanes or elements the row needs";
      EXPECT_NO_THROW(p.variant.validate());
      EXPECT_EQ(p.block, 128u);
      EXPECT_EQ(p.grid, static_cast<unsigned>((rows + per_block - 1) / per_block));
      EXPECT_EQ(p.variant.name().find(",t"), w.lanes < 32
                                                 ? p.variant.name().find(",t" + std::to_string(w.lanes) + ">")
                                                 : std::string::npos);
      EXPECT_EQ(p.fallback, p.variant);
    }
  }
}

// CUINLINE_ROWS_WARP_VECTORS=2 (the ctest warp2. run): the fewest lanes whose two accesses each
// cover the row, a whole warp past 64 accesses; unset, one access a lane (the test above).
TEST(ReductionPlan, WarpFormAccessesALaneFollowTheKnob) {
  struct Want {
    DType dt;
    std::int64_t n;
    int lanes1, per_thread1, lanes2, per_thread2;
  };
  const Want wants[] = {{DType::bf16, 128, 16, 8, 8, 16},  {DType::bf16, 64, 8, 8, 4, 16},
                        {DType::bf16, 200, 32, 8, 16, 16}, {DType::bf16, 8, 1, 8, 1, 8},
                        {DType::f32, 3, 4, 1, 2, 2},       {DType::f32, 128, 32, 4, 16, 8},
                        {DType::f16, 24, 4, 8, 2, 16},     {DType::f32, 512, 32, 16, 32, 16}};
  const int k = cuinline::ops::detail::row_knobs().warp_vectors;
  ASSERT_TRUE(k == 1 || k == 2) << "the cases hold for 1 and 2 accesses a lane";
  for (const Want& w : wants) {
    const RowPlan p =
        plan_rows(RowOp::layer_norm, rows_of(kIn, w.dt, 300, w.n), rows_of(kOut, w.dt, 300, w.n));
    SCOPED_TRACE(p.variant.name());
    EXPECT_EQ(p.variant.form, RowForm::warp);
    EXPECT_EQ(p.variant.threads, k == 1 ? w.lanes1 : w.lanes2);
    EXPECT_EQ(p.variant.per_thread, k == 1 ? w.per_thread1 : w.per_thread2);
    EXPECT_EQ(p.grid, static_cast<unsigned>((300 + 128 / p.variant.threads - 1) / (128 / p.variant.threads)));
    EXPECT_NO_THROW(p.variant.validate());
  }
}

// CUINLINE_ROWS_WARP_MAX=512 (the ctest warpmax512. run): rows of 513-1024 on the block form of 128
// threads in every dtype and op; unset, the warp form while a lane holds at most 64 bytes of what
// the row reads (16-bit rows of 1024, f32 512, f64 256; add_rms_norm, reading the residual too,
// half as long).
TEST(ReductionPlan, WarpFormsLongestRowFollowsTheKnob) {
  struct Want {
    RowOp op;
    DType dt;
    std::int64_t n;
    RowForm form_unset, form512;
    int threads_unset, per_thread_unset, threads512, per_thread512;
  };
  const Want wants[] = {
      {RowOp::rms_norm, DType::f32, 1024, RowForm::block, RowForm::block, 128, 8, 128, 8},
      {RowOp::rms_norm, DType::bf16, 1024, RowForm::warp, RowForm::block, 32, 32, 128, 8},
      {RowOp::rms_norm, DType::f32, 600, RowForm::block, RowForm::block, 128, 8, 128, 8},
      {RowOp::rms_norm, DType::f64, 1000, RowForm::block, RowForm::block, 128, 8, 128, 8},
      {RowOp::rms_norm, DType::f64, 512, RowForm::block, RowForm::warp, 128, 4, 32, 16},
      {RowOp::rms_norm, DType::f32, 512, RowForm::warp, RowForm::warp, 32, 16, 32, 16},
      {RowOp::rms_norm, DType::f32, 1025, RowForm::block, RowForm::block, 128, 16, 128, 16},
      {RowOp::add_rms_norm, DType::bf16, 1024, RowForm::block, RowForm::block, 128, 8, 128, 8},
      {RowOp::add_rms_norm, DType::bf16, 512, RowForm::warp, RowForm::warp, 32, 16, 32, 16},
      {RowOp::add_rms_norm, DType::f32, 512, RowForm::block, RowForm::warp, 128, 4, 32, 16},
      {RowOp::add_rms_norm, DType::f32, 256, RowForm::warp, RowForm::warp, 32, 8, 32, 8},
      {RowOp::layer_norm, DType::f16, 1024, RowForm::warp, RowForm::block, 32, 32, 128, 8},
  };
  const std::int64_t knob = cuinline::ops::detail::row_knobs().warp_max;
  ASSERT_TRUE(knob == 0 || knob == 512) << "the cases hold unset and for rows of 512";
  for (const Want& w : wants) {
    const bool add = w.op == RowOp::add_rms_norm;
    const RowPlan p = plan_rows(w.op, rows_of(kIn, w.dt, 70, w.n), rows_of(kOut, w.dt, 70, w.n), {}, {},
                                add ? rows_of(kRes, w.dt, 70, w.n) : TensorView{}, 1e-6);
    SCOPED_TRACE(p.variant.name());
    EXPECT_EQ(p.variant.form, knob == 0 ? w.form_unset : w.form512);
    EXPECT_EQ(p.variant.threads, knob == 0 ? w.threads_unset : w.threads512);
    EXPECT_EQ(p.variant.per_thread, knob == 0 ? w.per_thread_unset : w.per_thread512);
    EXPECT_GE(p.variant.max_row(), w.n);
    EXPECT_NO_THROW(p.variant.validate());
  }
}

// The CUINLINE_ROWS_* knobs as read_row_knobs parses them from a lookup (row_knobs() reads the
// environment the same way, once): each value each accepts; the refused ones keep the default, each
// with its message; an empty value is unset.
namespace {
const char* const* g_knob_env = nullptr;
const char* knob_lookup(const char* name) {
  for (const char* const* e = g_knob_env; e != nullptr && *e != nullptr; e += 2) {
    if (std::string(e[0]) == name) return e[1];
  }
  return nullptr;
}
}  // namespace
TEST(ReductionKnobs, ParseAsDocumented) {
  using cuinline::ops::detail::ClusterKnob;
  using cuinline::ops::detail::read_row_knobs;
  using cuinline::ops::detail::RowKnobs;
  const auto read = [](std::initializer_list<const char*> env) {
    std::vector<const char*> pairs(env);
    pairs.push_back(nullptr);
    g_knob_env = pairs.data();
    RowKnobs k = read_row_knobs(knob_lookup);
    g_knob_env = nullptr;
    return k;
  };
  const auto expect_defaults = [](const RowKnobs& k) {
    EXPECT_EQ(k.cluster, ClusterKnob::planned);
    EXPECT_TRUE(k.workspace);
    EXPECT_EQ(k.warp_vectors, 1);
    EXPECT_EQ(k.warp_rows, 1);
    EXPECT_EQ(k.warp_max, 0);  // the planner's rule (warp_form_max)
  };
  const RowKnobs none = read({});
  expect_defaults(none);
  EXPECT_TRUE(none.refused.empty());

  const RowKnobs set =
      read({"CUINLINE_ROWS_CLUSTER", "all", "CUINLINE_ROWS_WORKSPACE", "0", "CUINLINE_ROWS_WARP_VECTORS", "4",
            "CUINLINE_ROWS_WARP_ROWS", "8", "CUINLINE_ROWS_WARP_MAX", "512"});
  EXPECT_EQ(set.cluster, ClusterKnob::all);
  EXPECT_FALSE(set.workspace);
  EXPECT_EQ(set.warp_vectors, 4);
  EXPECT_EQ(set.warp_rows, 8);
  EXPECT_EQ(set.warp_max, 512);
  EXPECT_TRUE(set.refused.empty());
  EXPECT_EQ(read({"CUINLINE_ROWS_CLUSTER", "0"}).cluster, ClusterKnob::off);
  EXPECT_EQ(read({"CUINLINE_ROWS_CLUSTER", "1"}).cluster, ClusterKnob::planned);
  EXPECT_TRUE(read({"CUINLINE_ROWS_WORKSPACE", "1"}).workspace);
  EXPECT_EQ(read({"CUINLINE_ROWS_WARP_MAX", "1"}).warp_max, 1);
  EXPECT_EQ(read({"CUINLINE_ROWS_WARP_MAX", "1024"}).warp_max, 1024);
  EXPECT_EQ(read({"CUINLINE_ROWS_WARP_MAX", ""}).warp_max, 0);

  const RowKnobs bad =
      read({"CUINLINE_ROWS_CLUSTER", "yes", "CUINLINE_ROWS_WORKSPACE", "off", "CUINLINE_ROWS_WARP_VECTORS",
            "3", "CUINLINE_ROWS_WARP_ROWS", "16", "CUINLINE_ROWS_WARP_MAX", "2048"});
  expect_defaults(bad);
  ASSERT_EQ(bad.refused.size(), 5u);
  EXPECT_EQ(bad.refused[0], "CUINLINE_ROWS_CLUSTER=yes is not 0, 1 or all: ignored");
  EXPECT_EQ(bad.refused[3], "CUINLINE_ROWS_WARP_ROWS=16 is not 1, 2, 4 or 8: ignored");
  EXPECT_EQ(bad.refused[4], "CUINLINE_ROWS_WARP_MAX=2048 is not a row length of 1-1024: ignored");
  for (const char* v : {"0", "-5", "512x", "99999999999999999999"}) {
    const RowKnobs k = read({"CUINLINE_ROWS_WARP_MAX", v});
    EXPECT_EQ(k.warp_max, 0) << v;
    EXPECT_EQ(k.refused.size(), 1u) << v;
  }
}

// CUINLINE_ROWS_WARP_ROWS=4 (the ctest warprows4. run): the warp form's groups take four rows each
// where a lane's elements over them stay at 64 and the rows fill a block's groups four times, else
// two or one; the grid covers the rows once. Unset: one row a group.
TEST(ReductionPlan, WarpFormRowsAGroupFollowTheKnob) {
  struct Want {
    DType dt;
    std::int64_t n, rows;
    int lanes, rows4;  // rows a group under the knob
  };
  const Want wants[] = {
      {DType::bf16, 128, 65536, 16, 4}, {DType::f32, 128, 65537, 32, 4},  {DType::bf16, 1024, 5000, 32, 2},
      {DType::bf16, 512, 9000, 32, 4},  {DType::bf16, 128, 20, 16, 2},    {DType::bf16, 128, 9, 16, 1},
      {DType::f64, 8, 1000, 4, 4},      {DType::f32, 2000, 5000, 128, 1},
  };
  const int k = cuinline::ops::detail::row_knobs().warp_rows;
  ASSERT_TRUE(k == 1 || k == 4) << "the cases hold for 1 and 4 rows a group";
  for (const Want& w : wants) {
    const RowPlan p =
        plan_rows(RowOp::softmax, rows_of(kIn, w.dt, w.rows, w.n), rows_of(kOut, w.dt, w.rows, w.n));
    SCOPED_TRACE(p.variant.name());
    EXPECT_EQ(p.variant.threads, w.lanes);
    const int r = k == 1 ? 1 : w.rows4;
    EXPECT_EQ(p.variant.rows_per_group, r);
    if (p.variant.form == RowForm::warp) {
      const std::int64_t per_block = std::int64_t{128} / w.lanes * r;
      EXPECT_EQ(p.grid, static_cast<unsigned>((w.rows + per_block - 1) / per_block));
    }
    EXPECT_NO_THROW(p.variant.validate());
    EXPECT_EQ(p.variant.name().find(",r"),
              r == 1 ? std::string::npos : p.variant.name().find(",r" + std::to_string(r) + ">"));
  }
}

TEST(ReductionPlan, VectorWidthFollowsAlignment) {
  const auto width = [](const TensorView& in, const TensorView& out, const TensorView& w = {}) {
    return plan_rows(RowOp::rms_norm, in, out, w, {}, {}, 1e-6).variant.vector_width;
  };
  EXPECT_EQ(width(rows_of(kIn, DType::f32, 3, 256), rows_of(kOut, DType::f32, 3, 256), vec(kW, DType::f32, 256)), 4);
  // An input 8 bytes off 16: two f32 a access.
  EXPECT_EQ(width(rows_of(kIn + 8, DType::f32, 3, 256), rows_of(kOut, DType::f32, 3, 256)), 2);
  // A weight 4 bytes off: scalar.
  EXPECT_EQ(width(rows_of(kIn, DType::f32, 3, 256), rows_of(kOut, DType::f32, 3, 256), vec(kW + 4, DType::f32, 256)), 1);
  // A row stride of 258 elements: every other row is 8 bytes off.
  const TensorView strided = TensorView::strided(fake(kIn), DType::f32, {3, 256}, {258, 1});
  EXPECT_EQ(width(strided, rows_of(kOut, DType::f32, 3, 256)), 2);
  const RowPlan p = plan_rows(RowOp::softmax, strided, rows_of(kOut, DType::f32, 3, 256));
  EXPECT_EQ(p.in_stride, 258);
  EXPECT_EQ(p.out_stride, 256);
  // A row length that is not a multiple of the vector.
  EXPECT_EQ(width(rows_of(kIn, DType::bf16, 3, 260), rows_of(kOut, DType::bf16, 3, 260)), 4);
  // One row: its stride does not matter.
  EXPECT_EQ(width(TensorView::strided(fake(kIn), DType::f16, {1, 64}, {7, 1}), rows_of(kOut, DType::f16, 1, 64)), 8);
}

TEST(ReductionPlan, RowsOfManyDimensionsAndInPlace) {
  // [2, 3, 64] with rows 80 elements apart (a slice of a wider tensor): one stride over both dims.
  const TensorView in = TensorView::strided(fake(kIn), DType::f32, {2, 3, 64}, {240, 80, 1});
  const TensorView out = TensorView::contiguous(fake(kOut), DType::f32, {2, 3, 64});
  const RowPlan p = plan_rows(RowOp::layer_norm, in, out, vec(kW, DType::f32, 64), vec(kB, DType::f32, 64), {}, 1e-5);
  EXPECT_EQ(p.rows, 6);
  EXPECT_EQ(p.in_stride, 80);
  // In place (the output is the input) is allowed; so is a 0-dim tensor (one row of one element).
  EXPECT_NO_THROW(plan_rows(RowOp::softmax, out, out));
  const RowPlan scalar = plan_rows(RowOp::log_softmax, TensorView::contiguous(fake(kIn), DType::f64, {}),
                                   TensorView::contiguous(fake(kOut), DType::f64, {}));
  EXPECT_EQ(scalar.rows, 1);
  EXPECT_EQ(scalar.n, 1);
  // add_rms_norm writing its output over the input (vLLM's in-place form).
  const TensorView x = rows_of(kIn, DType::bf16, 4, 4096);
  EXPECT_NO_THROW(plan_rows(RowOp::add_rms_norm, x, x, vec(kW, DType::bf16, 4096), {}, rows_of(kRes, DType::bf16, 4, 4096), 1e-6));
}

TEST(ReductionPlan, EmptyTensorsAreANoOpWithoutADevice) {
  // No launch, so no driver is needed: these return on a machine without a GPU.
  for (const auto shape : {std::initializer_list<std::int64_t>{0, 64}, {64, 0}, {0}}) {
    const TensorView in = TensorView::contiguous(nullptr, DType::f16, shape);
    const TensorView out = TensorView::contiguous(nullptr, DType::f16, shape);
    EXPECT_EQ(plan_rows(RowOp::softmax, in, out).rows, 0);
    EXPECT_NO_THROW(cuinline::ops::softmax(in, out));
    EXPECT_NO_THROW(cuinline::ops::layer_norm(in, {}, {}, out, 1e-5));
    EXPECT_NO_THROW(cuinline::ops::add_rms_norm(in, in, {}, out, 1e-5));
  }
}

TEST(ReductionPlan, MisuseIsRefusedBeforeAnyLaunch) {
  const DType f = DType::f32;
  const TensorView in = rows_of(kIn, f, 8, 512), out = rows_of(kOut, f, 8, 512);
  const TensorView w = vec(kW, f, 512), b = vec(kB, f, 512), res = rows_of(kRes, f, 8, 512);
  struct Bad {
    const char* expect;
    std::function<void()> call;
  };
  const Bad bads[] = {
      {"weight f32[511] must be 1-D of the row length 512",
       [&] { cuinline::ops::rms_norm(in, vec(kW, f, 511), out, 1e-6); }},
      {"weight f32[1, 512] must be 1-D",
       [&] { cuinline::ops::rms_norm(in, TensorView::contiguous(fake(kW), f, {1, 512}), out, 1e-6); }},
      {"weight f32[512] strides (2) must be contiguous",
       [&] { cuinline::ops::rms_norm(in, TensorView::strided(fake(kW), f, {512}, {2}), out, 1e-6); }},
      {"bias is f16, the input f32 (mixed dtypes",
       [&] { cuinline::ops::layer_norm(in, w, vec(kB, DType::f16, 512), out, 1e-5); }},
      {"output is bf16, the input f32", [&] { cuinline::ops::softmax(in, rows_of(kOut, DType::bf16, 8, 512)); }},
      {"does not have the input's shape", [&] { cuinline::ops::softmax(in, rows_of(kOut, f, 8, 256)); }},
      {"the output overlaps the input without being the same view",
       [&] { cuinline::ops::softmax(in, rows_of(kIn + 4 * 512, f, 8, 512)); }},
      {"the output overlaps the weight", [&] { cuinline::ops::rms_norm(in, vec(kOut + 64, f, 512), out, 1e-6); }},
      {"the residual overlaps the output", [&] { cuinline::ops::add_rms_norm(in, out, w, out, 1e-6); }},
      {"the residual overlaps the input", [&] { cuinline::ops::add_rms_norm(in, in, w, in, 1e-6); }},
      {"is not contiguous in its last dimension",
       [&] { cuinline::ops::softmax(TensorView::strided(fake(kIn), f, {8, 512}, {1, 8}), out); }},
      {"rows are not evenly spaced",
       [&] {
         cuinline::ops::softmax(TensorView::strided(fake(kIn), f, {2, 4, 512}, {5000, 512, 1}),
                                TensorView::contiguous(fake(kOut), f, {2, 4, 512}));
       }},
      {"its rows overlap (row stride 256 < 512)",
       [&] { cuinline::ops::softmax(in, TensorView::strided(fake(kOut), f, {8, 512}, {256, 1})); }},
      {"eps must be finite and >= 0", [&] { cuinline::ops::rms_norm(in, w, out, -1e-6); }},
      {"eps must be finite and >= 0", [&] { cuinline::ops::layer_norm(in, w, b, out, std::nan("")); }},
      {"residual f32[8, 256] does not have the input's shape",
       [&] { cuinline::ops::add_rms_norm(in, rows_of(kRes, f, 8, 256), w, out, 1e-6); }},
      {"residual is a null pointer with elements",
       [&] { cuinline::ops::add_rms_norm(in, TensorView::contiguous(nullptr, f, {8, 512}), w, out, 1e-6); }},
      {"input is not aligned to its element size",
       [&] { cuinline::ops::softmax(rows_of(kIn + 2, f, 8, 512), out); }},
      {"input is a null pointer with elements", [&] { cuinline::ops::softmax(rows_of(0, f, 8, 512), out); }},
  };
  for (const Bad& bad : bads) {
    const std::string message = refusal(bad.call);
    EXPECT_NE(message.find(bad.expect), std::string::npos) << "expected '" << bad.expect << "', got '" << message << "'";
  }
  // The planner refuses what the ops do not take.
  EXPECT_NE(refusal([&] { plan_rows(RowOp::softmax, in, out, w); }).find("takes no weight"), std::string::npos);
  EXPECT_NE(refusal([&] { plan_rows(RowOp::rms_norm, in, out, w, b, {}, 1e-6); }).find("takes no bias"),
            std::string::npos);
  EXPECT_EQ(cuinline::ops::reduction_stats().launches, 0u);
}

TEST(ReductionPlan, CApiRefusesWithItsMessage) {
  const std::int64_t shape[2] = {8, 512}, wshape[1] = {500};
  const cuinline_tensor in{fake(kIn), CUINLINE_F32, 2, shape, nullptr};
  const cuinline_tensor out{fake(kOut), CUINLINE_F32, 2, shape, nullptr};
  const cuinline_tensor w{fake(kW), CUINLINE_F32, 1, wshape, nullptr};
  const cuinline_tensor half_out{fake(kOut), CUINLINE_F16, 2, shape, nullptr};
  EXPECT_EQ(cuinline_rms_norm(&in, &w, &out, 1e-6, nullptr), CUINLINE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(cuinline_last_error()).find("row length 512"), std::string::npos) << cuinline_last_error();
  EXPECT_EQ(cuinline_layer_norm(&in, nullptr, &w, &out, 1e-5, nullptr), CUINLINE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(cuinline_softmax(&in, &half_out, nullptr), CUINLINE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(cuinline_last_error()).find("mixed dtypes"), std::string::npos);
  EXPECT_EQ(cuinline_log_softmax(&in, nullptr, nullptr), CUINLINE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(cuinline_add_rms_norm(&in, &in, nullptr, &out, 1e-6, nullptr), CUINLINE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(cuinline_last_error()).find("residual overlaps the input"), std::string::npos);
  const std::int64_t empty[2] = {0, 512};
  const cuinline_tensor e_in{nullptr, CUINLINE_BF16, 2, empty, nullptr};
  EXPECT_EQ(cuinline_softmax(&e_in, &e_in, nullptr), CUINLINE_SUCCESS);
}

TEST(ReductionVariant, NamesAndChecks) {
  RowVariant v{RowOp::layer_norm, DType::bf16, RowForm::block, 8, 16, 1024};
  EXPECT_EQ(v.name(), "layer_norm<bf16,block,v8,e16,t1024>");
  EXPECT_EQ(cuinline::ops::kernel_name(v), "rd_regs<4, ew_bf16, 8, 16, 1024>");
  EXPECT_NO_THROW(v.validate());
  EXPECT_EQ((RowVariant{RowOp::rms_norm, DType::f64, RowForm::looped, 2, 2, 1024}).name(), "rms_norm<f64,looped,v2>");
  EXPECT_EQ(cuinline::ops::kernel_name(RowVariant{RowOp::softmax, DType::f32, RowForm::looped, 4, 4, 1024}),
            "rd_long<0, float, 4, 1024>");
  const RowVariant split{RowOp::add_rms_norm, DType::f16, RowForm::split_write, 8, 64, 256};
  EXPECT_EQ(split.name(), "add_rms_norm<f16,split_write,v8,e64,t256>");
  EXPECT_EQ(cuinline::ops::kernel_name(split), "rd_split_write<3, ew_half, 8, 64, 256>");
  EXPECT_THROW((RowVariant{RowOp::add_rms_norm, DType::f16, RowForm::split_write, 8, 32, 256}).validate(),
               InvalidArgument);  // 16-bit chunks are 64 a thread
  EXPECT_NO_THROW(split.validate());
  // The cluster form names its blocks a cluster; its kernel, the chunks a block (the groups of 256).
  const RowVariant cluster{RowOp::rms_norm, DType::bf16, RowForm::cluster, 8, 64, 512, 8};
  EXPECT_EQ(cluster.name(), "rms_norm<bf16,cluster,v8,e64,t512,c8>");
  EXPECT_EQ(cuinline::ops::kernel_name(cluster), "rd_cluster<2, ew_bf16, 8, 64, 256, 2, 8>");
  EXPECT_NO_THROW(cluster.validate());
  EXPECT_EQ(cluster.min_arch(), 90);  // thread block clusters
  EXPECT_EQ(split.min_arch(), 0);
  RowVariant other = cluster;
  other.cluster = 7;
  EXPECT_NE(other, cluster);
  EXPECT_NE(cuinline::ops::detail::hash_of(other), cuinline::ops::detail::hash_of(cluster));
  // The warp form names its lanes a row where fewer than 32.
  const RowVariant sub{RowOp::rms_norm, DType::bf16, RowForm::warp, 8, 8, 16};
  EXPECT_EQ(sub.name(), "rms_norm<bf16,warp,v8,e8,t16>");
  EXPECT_EQ(cuinline::ops::kernel_name(sub), "rd_regs<2, ew_bf16, 8, 8, 16>");
  EXPECT_EQ(sub.max_row(), 128);
  EXPECT_NO_THROW(sub.validate());
  const RowVariant whole{RowOp::rms_norm, DType::bf16, RowForm::warp, 8, 8, 32};
  EXPECT_EQ(whole.name(), "rms_norm<bf16,warp,v8,e8>");
  EXPECT_EQ(cuinline::ops::kernel_name(whole), "rd_regs<2, ew_bf16, 8, 8, 32>");
  // Rows a group past one: named, a kernel argument after the chains' (spelled out where none), hashed.
  RowVariant grouped = sub;
  grouped.rows_per_group = 4;
  EXPECT_EQ(grouped.name(), "rms_norm<bf16,warp,v8,e8,t16,r4>");
  EXPECT_EQ(cuinline::ops::kernel_name(grouped),
            "rd_regs<2, ew_bf16, 8, 8, 16, rd_no_prologue, rd_no_epilogue, 0, 4>");
  EXPECT_NE(grouped, sub);
  EXPECT_NE(cuinline::ops::detail::hash_of(grouped), cuinline::ops::detail::hash_of(sub));
  EXPECT_NO_THROW(grouped.validate());
  RowVariant gated = grouped;
  gated.epilogue = cuinline::ops::Op::chain({cuinline::ops::Step::mul(2.0)});
  EXPECT_EQ(cuinline::ops::kernel_name(gated),
            "rd_regs<2, ew_bf16, 8, 8, 16, rd_no_prologue, rd_epilogue, 0, 4>");
  for (const int r : {0, 3, 16}) {
    RowVariant bad = sub;
    bad.rows_per_group = r;
    EXPECT_THROW(bad.validate(), InvalidArgument) << r;
  }
  RowVariant too_many = whole;  // 8 rows of 16 elements a lane: past 64
  too_many.per_thread = 16;
  too_many.rows_per_group = 8;
  EXPECT_THROW(too_many.validate(), InvalidArgument);
  RowVariant block_rows{RowOp::rms_norm, DType::bf16, RowForm::block, 8, 16, 256};
  block_rows.rows_per_group = 2;
  EXPECT_THROW(block_rows.validate(), InvalidArgument);
  EXPECT_NO_THROW((RowVariant{RowOp::softmax, DType::f32, RowForm::warp, 1, 1, 1}).validate());
  const RowVariant bads[] = {
      {RowOp::softmax, DType::f32, RowForm::warp, 4, 4, 64},  // more lanes than a warp
      {RowOp::softmax, DType::f32, RowForm::warp, 4, 4, 12},  // not a power of two
      {RowOp::softmax, DType::f32, RowForm::warp, 4, 4, 0},
      {RowOp::softmax, DType::f32, RowForm::warp, 1, 16, 16},    // 16 accesses a lane with fewer than 32
      {RowOp::softmax, DType::f32, RowForm::warp, 8, 8, 32},     // 32 bytes an access
      {RowOp::softmax, DType::f32, RowForm::warp, 4, 2, 32},     // fewer elements than one access
      {RowOp::softmax, DType::f32, RowForm::warp, 1, 64, 32},    // beyond the warp form's registers
      {RowOp::softmax, DType::f32, RowForm::block, 4, 4, 64},    // too few threads for the block form
      {RowOp::softmax, DType::f64, RowForm::block, 2, 16, 256},  // f64 holds 8 a thread
      {RowOp::softmax, DType::f32, RowForm::block, 4, 12, 256},  // not a power of two
      {RowOp::softmax, DType::f32, RowForm::looped, 4, 8, 1024},
      {RowOp::softmax, DType::f32, RowForm::looped, 4, 4, 512},
      {RowOp::softmax, DType::f32, RowForm::split_stats, 4, 16, 256},
      {RowOp::softmax, DType::f32, RowForm::split_write, 4, 32, 1024},
      {RowOp::softmax, DType::f32, RowForm::cluster, 4, 32, 256, 1},   // one block: no cluster
      {RowOp::softmax, DType::f32, RowForm::cluster, 4, 32, 256, 17},  // past the 16 a cluster holds
      {RowOp::softmax, DType::f32, RowForm::cluster, 4, 32, 768, 8},   // 3 chunks a block
      {RowOp::softmax, DType::f64, RowForm::cluster, 2, 32, 512, 8},   // f64: 1 a block
      {RowOp::softmax, DType::f32, RowForm::cluster, 4, 32, 300, 8},   // not whole chunks
      {RowOp::softmax, DType::f32, RowForm::cluster, 4, 16, 256, 8},   // the split form's 32 a thread
      {RowOp::softmax, DType::f32, RowForm::split_stats, 4, 32, 256,
       8},  // blocks a cluster off the cluster form
  };
  for (const RowVariant& bad : bads) {
    EXPECT_THROW(bad.validate(), InvalidArgument) << bad.name();
    EXPECT_THROW(cuinline::ops::make_request(bad), InvalidArgument) << bad.name();
  }
  // Equal variants give equal requests (one cache entry); different ones differ.
  const auto r1 = cuinline::ops::make_request(v), r2 = cuinline::ops::make_request(v);
  EXPECT_EQ(r1.source, r2.source);
  EXPECT_EQ(r1.name_expressions, r2.name_expressions);
  v.threads = 512;
  EXPECT_NE(cuinline::ops::make_request(v).name_expressions, r1.name_expressions);
}

// Every form (warp, block, split's two kernels, looped, cluster; 16-byte and scalar accesses) of every dtype
// compiles for sm_90 at its largest register footprint (the most elements a thread), the five ops in
// turn, and the warp form with fewer lanes a row (1, 2, 8 and 16 across the dtypes; 4 in
// test_reductions_fusion.cpp); and each dtype for sm_75 (bf16 without cvt.rn.bf16), the forms in
// turn. (One kernel is 0.2-0.9 s of ptxas: the test keeps to 32.)
TEST(ReductionVariant, EveryFormCompiles) {
  const RowOp ops[] = {RowOp::softmax, RowOp::log_softmax, RowOp::rms_norm, RowOp::add_rms_norm, RowOp::layer_norm};
  const cuinline::Arch sm90 = cuinline::Arch::parse("sm_90"), sm75 = cuinline::Arch::parse("sm_75");
  const int sub_warp_lanes[] = {2, 8, 16, 1};
  using cuinline::ops::detail::split_per_thread;
  int k = 0, d = 0;
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
    const int v = static_cast<int>(16 / cuinline::dtype_size(dt));
    const int scalar_split = d % 2 ? 1 : v, scalar_looped = d % 2 ? v : 1;  // both widths of each across the dtypes
    const RowVariant forms[] = {
        {RowOp::softmax, dt, RowForm::warp, v, 32, 32},
        {RowOp::softmax, dt, RowForm::block, v, cuinline::ops::detail::block_max_per_thread(dt), 1024},
        {RowOp::softmax, dt, RowForm::split_stats, v, split_per_thread(dt, false), 256},
        {RowOp::softmax, dt, RowForm::split_write, scalar_split, split_per_thread(dt, false), 256},
        {RowOp::softmax, dt, RowForm::looped, scalar_looped, scalar_looped, 1024},
        {RowOp::softmax, dt, RowForm::warp, v, v, sub_warp_lanes[d]},
        // The cluster form at its largest block (2 chunks a block, f64 1) and cluster (16 blocks).
        {RowOp::softmax, dt, RowForm::cluster, scalar_looped, split_per_thread(dt, false),
         cuinline::ops::detail::cluster_max_groups(dt) * 256, cuinline::ops::detail::kClusterMaxBlocks},
    };
    for (const RowVariant& form : forms) {
      RowVariant var = form;
      // Each form a different op in each dtype; the cluster form layer_norm, softmax, log_softmax,
      // rms_norm (f32 to f64).
      var.op = form.form == RowForm::cluster ? ops[(d + 4) % 5] : ops[(k++ + d) % 5];
      SCOPED_TRACE(var.name());
      cuinline::CompileRequest request = cuinline::ops::make_request(var);
      request.options.push_back("--ptxas-options=-v");
      request.options.push_back("--no-cache");  // (no compute-cache hit: ptxas runs and reports)
      const cuinline::CompiledProgram program = cuinline::compile(request, sm90);
      EXPECT_EQ(program.kind, cuinline::BinaryKind::cubin);
      EXPECT_FALSE(program.binary.empty());
      EXPECT_TRUE(program.lowered_name(cuinline::ops::kernel_name(var)));
      // A row held in registers stays there: no form spills, the block form at its most elements a
      // thread (1024 threads, 64 registers each) included; where that block is bounded to two an SM
      // (32 registers: the 16-bit packs but layer_norm's, f32 softmax, log_softmax and rms_norm half
      // parked in shared memory) a spill stays under one 16-byte access a thread's row part (f16
      // add_rms_norm: 8 bytes, NVRTC 13.0).
      const bool bounded = var.form == RowForm::block && var.threads == 1024 && var.op != RowOp::layer_norm &&
                           (dt == DType::f16 || dt == DType::bf16 ||
                            (dt == DType::f32 && var.op != RowOp::add_rms_norm));
      const std::vector<long> spills = cuinline::test::spill_stores(program.log);
      EXPECT_FALSE(spills.empty()) << "no ptxas -v report in the log: " << program.log;
      for (long bytes : spills) EXPECT_LE(bytes, bounded ? 16 : 0) << program.log;
    }
    if (dt == DType::bf16) {
      // The cluster form's bf16 add_rms_norm with one chunk a block is bounded to five blocks an SM
      // (48 registers, rd_cluster_min_blocks): its spill stays under one 16-byte access (4 bytes,
      // NVRTC 13.0).
      const RowVariant var{RowOp::add_rms_norm, dt, RowForm::cluster, v, split_per_thread(dt, false), 256, 4};
      SCOPED_TRACE(var.name());
      cuinline::CompileRequest request = cuinline::ops::make_request(var);
      request.options.push_back("--ptxas-options=-v");
      request.options.push_back("--no-cache");
      const cuinline::CompiledProgram program = cuinline::compile(request, sm90);
      const std::vector<long> spills = cuinline::test::spill_stores(program.log);
      EXPECT_FALSE(spills.empty()) << "no ptxas -v report in the log: " << program.log;
      for (long bytes : spills) EXPECT_LE(bytes, 16) << program.log;
      EXPECT_NE(program.log.find("Used 48 registers"), std::string::npos) << program.log;
    }
    RowVariant var = forms[d % 5];
    var.op = ops[(d + 2) % 5];
    ++d;
    SCOPED_TRACE(var.name() + " sm_75");
    EXPECT_FALSE(cuinline::compile(cuinline::ops::make_request(var), sm75).binary.empty());
  }
}

}  // namespace
