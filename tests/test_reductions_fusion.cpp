// Host tests of the reductions' fused chains (RowFusion: a prologue on every input element as it is
// loaded, an epilogue with extra tensors on every output element before it is stored): an unfused
// call's request and cache key are those of a variant without chains; a fused variant is its own
// kernel; every misuse of a chain or an epilogue tensor is refused before anything is compiled or
// launched; and each form (warp, block, split's two kernels, looped) compiles with chains for sm_90.
#include <gtest/gtest.h>

#include <cstdint>
#include <cuinline/cache.hpp>
#include <cuinline/compiler.hpp>
#include <cuinline/cuinline.h>
#include <cuinline/error.hpp>
#include <cuinline/reductions.hpp>
#include <functional>
#include <string>

#include "ops/reductions/plan.hpp"
#include "reductions_views.hpp"
#include "test_support.hpp"

namespace {

using cuinline::DType;
using cuinline::InvalidArgument;
using cuinline::TensorView;
using cuinline::ops::parse_op;
using cuinline::ops::plan_rows;
using cuinline::ops::RowForm;
using cuinline::ops::RowFusion;
using cuinline::ops::RowOp;
using cuinline::ops::RowVariant;

using cuinline::test::fake;
using cuinline::test::kGate;
using cuinline::test::kIn;
using cuinline::test::kOut;
using cuinline::test::kRes;
using cuinline::test::kW;
using cuinline::test::refusal;
using cuinline::test::rows_of;

RowFusion fusion(const char* prologue, const char* epilogue, std::vector<TensorView> inputs = {}) {
  RowFusion f;
  if (*prologue) f.prologue = parse_op(prologue);
  if (*epilogue) f.epilogue = parse_op(epilogue);
  f.epilogue_inputs = std::move(inputs);
  return f;
}

TEST(ReductionFusion, UnfusedRequestAndKeyAreUnchanged) {
  const cuinline::Arch sm90 = cuinline::Arch::parse("sm_90");
  const TensorView in = rows_of(kIn, DType::f32, 8, 512), out = rows_of(kOut, DType::f32, 8, 512);
  const RowVariant plain = plan_rows(RowOp::softmax, in, out).variant;
  EXPECT_EQ(plan_rows(RowOp::softmax, in, out, {}, {}, {}, 0, RowFusion{}).variant, plain);
  // The program of a variant without chains: its name, one include, the kernel without chain arguments.
  const cuinline::CompileRequest request = cuinline::ops::make_request(plain);
  EXPECT_EQ(request.source, "// cuinline row reduction: softmax<f32,warp,v4,e16>\n#include \"reductions.cuh\"\n");
  ASSERT_EQ(request.headers.size(), 2u);
  EXPECT_EQ(request.headers[0].name, "ew_common.cuh");
  EXPECT_EQ(request.headers[1].name, "reductions.cuh");
  EXPECT_EQ(request.name_expressions, std::vector<std::string>{"rd_regs<0, float, 4, 16, 32>"});
  EXPECT_EQ(request.options, (std::vector<std::string>{"--fmad=true", "-minimal"}));

  // A fused variant is another program and key; equal chains give equal ones.
  const RowVariant fused =
      plan_rows(RowOp::softmax, in, out, {}, {}, {}, 0, fusion("mul(0.125)", "")).variant;
  EXPECT_EQ(fused.name(), "softmax<f32,warp,v4,e16,pro=mul(0.125)>");
  EXPECT_EQ(cuinline::ops::kernel_name(fused), "rd_regs<0, float, 4, 16, 32, rd_prologue, rd_no_epilogue, 0>");
  const cuinline::CompileRequest fr = cuinline::ops::make_request(fused);
  EXPECT_NE(fr.source.find("struct rd_prologue"), std::string::npos) << fr.source;
  EXPECT_NE(fr.source.find("ew_mul(x, 0x1p-3f)"), std::string::npos) << fr.source;
  EXPECT_NE(cuinline::make_cache_key(fr, sm90), cuinline::make_cache_key(request, sm90));
  EXPECT_EQ(cuinline::make_cache_key(cuinline::ops::make_request(fused), sm90), cuinline::make_cache_key(fr, sm90));
  RowVariant other = fused;
  other.prologue = parse_op("mul(0.25)");
  EXPECT_NE(other, fused);
  EXPECT_NE(cuinline::make_cache_key(cuinline::ops::make_request(other), sm90), cuinline::make_cache_key(fr, sm90));

  // An epilogue with a gate: its tensor in the kernel's arguments, the kernel specialized on it.
  const TensorView w = TensorView::contiguous(fake(kW), DType::f32, {512});
  const TensorView gate = rows_of(kGate, DType::f32, 8, 512);
  const RowVariant gated =
      plan_rows(RowOp::rms_norm, in, out, w, {}, {}, 1e-6, fusion("", "mul(in1)", {gate})).variant;
  EXPECT_EQ(gated.name(), "rms_norm<f32,warp,v4,e16,epi=mul(in1)>");
  EXPECT_EQ(cuinline::ops::kernel_name(gated), "rd_regs<2, float, 4, 16, 32, rd_no_prologue, rd_epilogue, 1>");

  // A row of 32768 is one block of 1024 threads holding 32 each, fused or not; but a layer_norm with
  // a chain, or an epilogue of more than two tensors, holds at most 16 a thread: the row is split
  // (the cluster form: 4 blocks of one chunk each).
  const TensorView long_in = rows_of(kIn, DType::f32, 8, 32768), long_out = rows_of(kOut, DType::f32, 8, 32768);
  const TensorView long_w = TensorView::contiguous(fake(kW), DType::f32, {32768});
  const TensorView g1 = rows_of(kGate, DType::f32, 8, 32768), g2 = rows_of(kGate + (1u << 24), DType::f32, 8, 32768),
                   g3 = rows_of(kGate + (2u << 24), DType::f32, 8, 32768);
  EXPECT_EQ(plan_rows(RowOp::softmax, long_in, long_out).variant.name(), "softmax<f32,block,v4,e32,t1024>");
  EXPECT_EQ(plan_rows(RowOp::softmax, long_in, long_out, {}, {}, {}, 0, fusion("mul(0.125)", "")).variant.name(),
            "softmax<f32,block,v4,e32,t1024,pro=mul(0.125)>");
  EXPECT_EQ(plan_rows(RowOp::rms_norm, long_in, long_out, long_w, {}, {}, 1e-6,
                      fusion("", "mul(in1)|add(in2)", {g1, g2}))
                .variant.per_thread,
            32);
  EXPECT_EQ(plan_rows(RowOp::rms_norm, long_in, long_out, long_w, {}, {}, 1e-6,
                      fusion("", "mul(in1)|add(in2)|mul(in3)", {g1, g2, g3}))
                .variant.name(),
            "rms_norm<f32,cluster,v4,e32,t256,c4,epi=mul(in1)|add(in2)|mul(in3)>");
  EXPECT_EQ(plan_rows(RowOp::layer_norm, long_in, long_out, long_w, {}, {}, 1e-5, fusion("", "silu")).variant.form,
            RowForm::cluster);
  EXPECT_EQ(plan_rows(RowOp::layer_norm, long_in, long_out, long_w, {}, {}, 1e-5).variant.per_thread, 32);
  // 16-bit chunks of the split and cluster forms: 64 a thread (kept packed), also under a light
  // prologue (scalar arithmetic); 32 with other chains.
  const TensorView b_in = rows_of(kIn, DType::bf16, 8, 40000), b_out = rows_of(kOut, DType::bf16, 8, 40000);
  EXPECT_EQ(plan_rows(RowOp::softmax, b_in, b_out).variant.name(), "softmax<bf16,cluster,v8,e64,t256,c3>");
  EXPECT_EQ(plan_rows(RowOp::softmax, b_in, b_out, {}, {}, {}, 0, fusion("mul(0.125)", "")).variant.name(),
            "softmax<bf16,cluster,v8,e64,t256,c3,pro=mul(0.125)>");
  EXPECT_EQ(plan_rows(RowOp::softmax, b_in, b_out, {}, {}, {}, 0, fusion("mul(0.1)|relu", "")).variant.name(),
            "softmax<bf16,cluster,v8,e32,t256,c5,pro=mul(0.1)|relu>");
}

// A prologue of scalar arithmetic alone (add, sub, mul, div by scalars) on f16 / bf16 rows is light
// but for add_rms_norm and f16 rms_norm: the variant keeps the unchained layouts (the split form's
// chunks of 64 elements a thread, the packs), and its program says so (rd_light). Any other step, an
// epilogue beside it, those two and the f32 / f64 rows take the chained ones.
TEST(ReductionFusion, LightPrologueKeepsTheUnchainedLayouts) {
  using cuinline::ops::detail::light;
  const auto plan = [](DType dt, std::int64_t n, const RowFusion& f) {
    return plan_rows(RowOp::softmax, rows_of(kIn, dt, 4, n), rows_of(kOut, dt, 4, n), {}, {}, {}, 0, f).variant;
  };
  const std::string marker = "struct rd_light<rd_prologue>";
  for (DType dt : {DType::bf16, DType::f16}) {
    for (const RowFusion& f : {fusion("mul(0.125)|div(2)|add(-1)", ""), fusion("mul(0.1)", "")}) {
      const RowVariant scaled = plan(dt, 70000, f);
      EXPECT_TRUE(light(scaled)) << scaled.name();
      EXPECT_EQ(scaled.per_thread, 64) << scaled.name();  // the unchained chunk
      EXPECT_NE(cuinline::ops::make_request(scaled).source.find(marker), std::string::npos);
    }
    for (const RowFusion& f : {fusion("gelu", ""), fusion("mul(0.125)|relu", ""), fusion("mul(0.125)", "relu")}) {
      const RowVariant chained = plan(dt, 70000, f);
      EXPECT_FALSE(light(chained)) << chained.name();
      EXPECT_EQ(chained.per_thread, 32) << chained.name();
      EXPECT_EQ(cuinline::ops::make_request(chained).source.find(marker), std::string::npos);
    }
  }
  EXPECT_FALSE(light(plan(DType::f32, 70000, fusion("mul(0.125)", ""))));
  EXPECT_TRUE(light(plan(DType::f32, 70000, RowFusion{})));
  const TensorView r = rows_of(kRes, DType::bf16, 4, 70000);
  const RowVariant add = plan_rows(RowOp::add_rms_norm, rows_of(kIn, DType::bf16, 4, 70000),
                                   rows_of(kOut, DType::bf16, 4, 70000), {}, {}, r, 1e-6, fusion("mul(0.125)", ""))
                             .variant;
  EXPECT_FALSE(light(add)) << add.name();
}

TEST(ReductionFusion, MisuseIsRefusedBeforeAnyLaunch) {
  const DType f = DType::f32;
  const TensorView in = rows_of(kIn, f, 8, 512), out = rows_of(kOut, f, 8, 512);
  const TensorView w = TensorView::contiguous(fake(kW), f, {512}), res = rows_of(kRes, f, 8, 512);
  const TensorView gate = rows_of(kGate, f, 8, 512);
  struct Bad {
    const char* expect;
    std::function<void()> call;
  };
  const Bad bads[] = {
      {"softmax: the prologue expr(x * 2) is an expression",
       [&] { cuinline::ops::softmax(in, out, fusion("expr(x * 2)", "")); }},
      {"the prologue add(in1) uses tensor operands",
       [&] { cuinline::ops::softmax(in, out, fusion("add(in1)", "", {gate})); }},
      {"the epilogue mul(in1) takes 1 extra tensor(s) (in1..in1), got 0",
       [&] { cuinline::ops::rms_norm(in, w, out, 1e-6, fusion("", "mul(in1)")); }},
      {"the epilogue relu takes no extra tensor, got 1",
       [&] { cuinline::ops::rms_norm(in, w, out, 1e-6, fusion("", "relu", {gate})); }},
      {"epilogue input in1 f32[8, 256] does not have the input's shape",
       [&] { cuinline::ops::rms_norm(in, w, out, 1e-6, fusion("", "mul(in1)", {rows_of(kGate, f, 8, 256)})); }},
      {"epilogue input in2 is f16, the input f32",
       [&] {
         cuinline::ops::layer_norm(in, w, {}, out, 1e-5,
                                   fusion("", "add(in1)|mul(in2)", {gate, rows_of(kGate + 65536, DType::f16, 8, 512)}));
       }},
      {"epilogue input in1 f32[8, 512] strides (1, 8) is not contiguous in its last dimension",
       [&] {
         cuinline::ops::softmax(in, out, fusion("", "mul(in1)", {TensorView::strided(fake(kGate), f, {8, 512}, {1, 8})}));
       }},
      {"the output overlaps the epilogue input in1",
       [&] { cuinline::ops::softmax(in, out, fusion("", "mul(in1)", {rows_of(kOut + 256, f, 8, 512)})); }},
      {"the residual overlaps the epilogue input in1",
       [&] { cuinline::ops::add_rms_norm(in, res, w, out, 1e-6, fusion("", "mul(in1)", {res})); }},
      {"epilogue input in1 is a null pointer with elements",
       [&] { cuinline::ops::softmax(in, out, fusion("", "mul(in1)", {rows_of(0, f, 8, 512)})); }},
      {"epilogue input in1 is not aligned to its element size",
       [&] { cuinline::ops::softmax(in, out, fusion("", "mul(in1)", {rows_of(kGate + 2, f, 8, 512)})); }},
      {"the epilogue takes at most 7 extra tensors, got 8",
       [&] { cuinline::ops::softmax(in, out, fusion("", "mul(in1)", std::vector<TensorView>(8, gate))); }},
  };
  for (const Bad& bad : bads) {
    const std::string message = refusal(bad.call);
    EXPECT_NE(message.find(bad.expect), std::string::npos) << "expected '" << bad.expect << "', got '" << message << "'";
  }
  EXPECT_EQ(cuinline::ops::reduction_stats().launches, 0u);
  // The epilogue may read the input (not written); an epilogue tensor's alignment narrows the access.
  EXPECT_EQ(plan_rows(RowOp::softmax, in, out, {}, {}, {}, 0, fusion("", "add(in1)", {in})).variant.vector_width, 4);
  EXPECT_NE(refusal([&] { plan_rows(RowOp::softmax, in, in, {}, {}, {}, 0, fusion("", "add(in1)", {in})); })
                .find("the output overlaps the epilogue input in1"),
            std::string::npos);
  EXPECT_EQ(plan_rows(RowOp::softmax, in, out, {}, {}, {}, 0, fusion("", "add(in1)", {rows_of(kGate + 4, f, 8, 512)}))
                .variant.vector_width,
            1);
  // A gate with its own row stride (a view of every other row).
  const RowVariant strided =
      plan_rows(RowOp::softmax, in, out, {}, {}, {}, 0,
                fusion("", "mul(in1)", {TensorView::strided(fake(kGate), f, {8, 512}, {1024, 1})}))
          .variant;
  EXPECT_EQ(strided.epilogue_inputs, 1);
}

TEST(ReductionFusion, CApiRowsRun) {
  const std::int64_t shape[2] = {8, 512}, other[2] = {8, 256}, empty[2] = {0, 512};
  const cuinline_tensor in{fake(kIn), CUINLINE_F32, 2, shape, nullptr};
  const cuinline_tensor out{fake(kOut), CUINLINE_F32, 2, shape, nullptr};
  const cuinline_tensor bad_gate{fake(kGate), CUINLINE_F32, 2, other, nullptr};
  const auto refused = [](const cuinline_rows_params& p, const char* expect) {
    EXPECT_EQ(cuinline_rows_run(&p), CUINLINE_ERROR_INVALID_ARGUMENT) << expect;
    EXPECT_NE(std::string(cuinline_last_error()).find(expect), std::string::npos)
        << "expected '" << expect << "', got '" << cuinline_last_error() << "'";
  };
  cuinline_rows_params p = CUINLINE_ROWS_PARAMS_INIT;
  p.op = "softmax", p.input = &in, p.output = &out, p.prologue = "mul(0.125)";
  p.size = 8;
  refused(p, "params.size is 8, less than the first version's");
  p.size = sizeof p;
  p.op = "softmin";
  refused(p, "op 'softmin' is none of softmax");
  p.op = "rms_norm", p.epilogue = "mul(in1)";
  refused(p, "the epilogue mul(in1) takes 1 extra tensor(s) (in1..in1), got 0");
  p.num_epilogue_inputs = 1;
  refused(p, "epilogue_inputs is NULL but num_epilogue_inputs is 1");
  p.epilogue_inputs = &bad_gate;
  refused(p, "epilogue input in1 f32[8, 256] does not have the input's shape");
  p.epilogue = "mul(in1";
  refused(p, "mul(in1");
  p.op = "softmax", p.epilogue = nullptr, p.num_epilogue_inputs = 0, p.bias = &in;
  refused(p, "softmax: takes no weight, bias or residual");
  EXPECT_EQ(cuinline::ops::reduction_stats().launches, 0u);
  // Empty tensors with chains: nothing to do, success.
  const cuinline_tensor e{nullptr, CUINLINE_BF16, 2, empty, nullptr};
  cuinline_rows_params q = CUINLINE_ROWS_PARAMS_INIT;
  q.op = "layer_norm", q.input = &e, q.output = &e, q.prologue = "mul(2)", q.epilogue = "relu", q.eps = 1e-5;
  EXPECT_EQ(cuinline_rows_run(&q), CUINLINE_SUCCESS) << cuinline_last_error();
}

// Each form with chains compiles for sm_90: a prologue, an epilogue with one and more tensors, both,
// across the dtypes, the warp form with a whole warp and with 4 and 16 lanes a row, and light
// prologues in the unchained layouts.
TEST(ReductionFusion, EveryFormCompilesWithChains) {
  const cuinline::Arch sm90 = cuinline::Arch::parse("sm_90");
  struct Case {
    RowVariant v;
    const char* prologue;
    const char* epilogue;
    int inputs;
  };
  const Case cases[] = {
      {{RowOp::softmax, DType::f32, RowForm::warp, 4, 32, 32}, "mul(0.125)", "", 0},
      {{RowOp::add_rms_norm, DType::bf16, RowForm::warp, 8, 8, 16}, "mul(0.5)", "mul(in1)|add(in2)", 2},
      {{RowOp::layer_norm, DType::f16, RowForm::warp, 8, 8, 4}, "div(2)", "silu|mul(in1)|add(in2)|mul(in3)|add(in4)", 4},
      {{RowOp::rms_norm, DType::bf16, RowForm::block, 8, 32, 1024}, "mul(0.5)", "gelu|mul(in1)|add(in2)", 2},
      {{RowOp::softmax, DType::f32, RowForm::block, 4, 32, 1024}, "mul(0.5)", "silu|mul(in1)|add(in2)", 2},
      {{RowOp::layer_norm, DType::f32, RowForm::block, 4, 16, 1024}, "mul(0.5)", "silu|mul(in1)|add(in2)", 2},
      {{RowOp::add_rms_norm, DType::bf16, RowForm::block, 8, 16, 1024}, "mul(0.5)", "silu|mul(in1)|add(in2)|mul(in3)|add(in4)", 4},
      {{RowOp::layer_norm, DType::f16, RowForm::split_stats, 8, 32, 256}, "div(2)", "silu|mul(in1)", 1},
      {{RowOp::add_rms_norm, DType::f16, RowForm::split_write, 1, 32, 256}, "mul(0.5)", "mul(in1)|add(in2)", 2},
      {{RowOp::log_softmax, DType::f64, RowForm::looped, 2, 2, 1024}, "clamp(-30,30)", "add(in1)", 1},
      {{RowOp::layer_norm, DType::bf16, RowForm::cluster, 8, 32, 512, 8}, "mul(0.5)", "silu|mul(in1)|add(in2)", 2},
      {{RowOp::add_rms_norm, DType::f32, RowForm::cluster, 4, 32, 512, 5}, "mul(0.5)", "mul(in1)|add(in2)|mul(in3)|add(in4)", 4},
      // Light prologues in the unchained layouts: 16-bit packs at 32 registers, chunks of 64
      // elements a thread.
      {{RowOp::softmax, DType::bf16, RowForm::block, 8, 32, 1024}, "mul(0.1)|add(1)", "", 0},
      {{RowOp::rms_norm, DType::bf16, RowForm::block, 8, 32, 1024}, "mul(0.125)", "", 0},
      {{RowOp::log_softmax, DType::f16, RowForm::block, 8, 32, 1024}, "mul(0.125)", "", 0},
      {{RowOp::layer_norm, DType::bf16, RowForm::cluster, 8, 64, 512, 8}, "mul(0.1)", "", 0},
      {{RowOp::log_softmax, DType::f16, RowForm::split_write, 8, 64, 256}, "sub(3)|mul(0.1)", "", 0},
  };
  for (const Case& c : cases) {
    RowVariant v = c.v;
    if (*c.prologue) v.prologue = parse_op(c.prologue);
    if (*c.epilogue) v.epilogue = parse_op(c.epilogue);
    v.epilogue_inputs = c.inputs;
    SCOPED_TRACE(v.name());
    cuinline::CompileRequest request = cuinline::ops::make_request(v);
    request.options.push_back("--ptxas-options=-v");
    request.options.push_back("--no-cache");  // (no compute-cache hit: ptxas runs and reports)
    const cuinline::CompiledProgram program = cuinline::compile(request, sm90);
    EXPECT_FALSE(program.binary.empty());
    EXPECT_TRUE(program.lowered_name(cuinline::ops::kernel_name(v)));
    // The chains' operands fit beside a row held in registers: no spills.
    const std::vector<long> spills = cuinline::test::spill_stores(program.log);
    EXPECT_FALSE(spills.empty()) << "no ptxas -v report in the log: " << program.log;
    for (long bytes : spills) EXPECT_EQ(bytes, 0) << program.log;
  }
}

}  // namespace
