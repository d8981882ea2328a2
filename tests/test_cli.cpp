// The `cuinline` command, run as a subprocess with a temporary CUINLINE_CACHE_DIR. Host-only: every
// compile targets an explicit --arch, so no GPU is needed.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <cuinline/cache.hpp>
#include <cuinline/conv2d.hpp>
#include <cuinline/driver.hpp>
#include <cuinline/kernel_cache.hpp>
#include <cuinline/module.hpp>
#include <cuinline/reductions.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cli_test_support.hpp"
#include "reference/host_reference.hpp"

namespace {

using namespace cuinline::test;

const std::string kReluAllDtypes =
    R"({"entries": [{"kind": "op", "op": "relu", "dtype": ["f32", "f16", "bf16", "f64"]}]})";

TEST_F(CliTest, WarmSeedsThenANewProcessGetsDiskHits) {
  Result warm = cli({"warm", "--spec", kSeeds, "--arch", "sm_90", "-j", "2"});
  ASSERT_EQ(warm.code, 0) << warm.out << warm.err;
  EXPECT_CONTAINS(warm.out, "0 already cached, 0 failed");
  EXPECT_CONTAINS(warm.out, "compiled relu<f32,v4,i32> sm_90");  // not a terminal: one line per variant

  // The variants the seed models run, asked for by the library in fresh processes.
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"op", "relu", "f32", "4", "i32", "sm_90"},
           {"op", "leaky_relu(0.01)", "f32", "4", "i32", "sm_90"},
           {"op", "leaky_relu(0.01)", "bf16", "8", "i32", "sm_90"},
           {"op", "div_leaky_relu(2,0.01)", "f16", "8", "i32", "sm_90"},
           {"conv2d", "8", "128", "128", "64", "3", "3", "1", "div(2)|leaky_relu(0.01)", "sm_90"}}) {
    Result hit = probe(args);
    ASSERT_EQ(hit.code, 0) << hit.err;
    EXPECT_CONTAINS(hit.out, "tier=disk compiles=0 disk_hits=1");
  }
  // A variant the spec does not list is compiled: the probe really looks things up.
  Result miss = probe({"op", "relu", "f32", "4", "i32", "sm_80"});
  EXPECT_CONTAINS(miss.out, "tier=compiled compiles=1");

  std::size_t entries = entry_files().size();
  Result again = cli({"warm", "--spec", kSeeds, "--arch", "sm_90"});
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_CONTAINS(again.out, "warm: 0 compiled");
  EXPECT_CONTAINS(again.out, "0 failed");
  EXPECT_EQ(entry_files().size(), entries);
}

// Other GPUs: the seed conv planned for each arch's target (sm_75: no cp.async or bf16/TF32 tensor
// cores, 64 KiB a block; sm_86 and sm_120: 99 KiB; sm_80: 163 KiB) compiles for it, and the library on
// such a GPU looks up exactly what warm wrote (a key of its own per target). The whole seed spec for
// sm_75; for the others the seed conv variant probed below alone (the elementwise templates differ
// only below sm_80, and sm_90's compile in the other tests).
TEST_F(CliTest, WarmForOtherArchsPlansForTheirTargets) {
  Result warm = cli({"warm", "--spec", kSeeds, "--arch", "sm_75", "-j", "2"});
  ASSERT_EQ(warm.code, 0) << warm.out << warm.err;
  EXPECT_CONTAINS(warm.out, "0 failed");
  const fs::path conv = write_spec("conv.json", R"json({"entries": [{"kind": "conv2d", "input": [128, 8, 128, 128],
      "filters": [64, 3, 3], "bias": true, "epilogue": "div(2)|leaky_relu(0.01)"}]})json");
  Result others = cli({"warm", "--spec", conv.string(), "--arch", "sm_80,sm_86,sm_120", "-j", "2"});
  ASSERT_EQ(others.code, 0) << others.out << others.err;
  EXPECT_CONTAINS(others.out, "0 failed");
  for (const char* arch : {"sm_75", "sm_80", "sm_86", "sm_120"}) {
    SCOPED_TRACE(arch);
    Result hit = probe({"conv2d", "8", "128", "128", "64", "3", "3", "1", "div(2)|leaky_relu(0.01)", arch});
    ASSERT_EQ(hit.code, 0) << hit.err;
    EXPECT_CONTAINS(hit.out, "tier=disk compiles=0 disk_hits=1");
  }
  // The sm_90 plan was not warmed: an sm_90 lookup compiles (the targets' keys differ).
  Result miss = probe({"conv2d", "8", "128", "128", "64", "3", "3", "1", "div(2)|leaky_relu(0.01)", "sm_90"});
  EXPECT_CONTAINS(miss.out, "tier=compiled compiles=1");
}

TEST_F(CliTest, WarmUserFileMatchesLoadInline) {
  write_file(dir_ / "k.cu",
             "template <class T, int N>\n__global__ void scale(T* x, T a) { x[threadIdx.x] *= a * N; }\n");
  auto spec = write_spec("s.json", R"({"entries": [{"kind": "cuda", "file": "k.cu", "name": "mykernels",
                                        "name_expressions": ["scale<float, 4>"]}]})");
  Result warm = cli({"warm", "--spec", spec.string(), "--arch", "sm_90"});
  ASSERT_EQ(warm.code, 0) << warm.out << warm.err;
  EXPECT_CONTAINS(warm.out, "1 compiled");
  Result hit = probe({"inline", (dir_ / "k.cu").string(), "mykernels", "sm_90", "scale<float, 4>"});
  ASSERT_EQ(hit.code, 0) << hit.err;
  EXPECT_CONTAINS(hit.out, "tier=disk compiles=0 disk_hits=1");
}

TEST_F(CliTest, MalformedSpecsAreRejectedWithTheirPathBeforeAnyCompile) {
  const std::string relu = R"({"kind": "op", "op": "relu", "dtype": "f32"})";
  struct Case {
    std::string json, message;
  };
  const std::vector<Case> cases = {
      {R"({"entries": [)" + relu + "," + relu + "," + relu +
           R"(, {"kind": "op", "op": "relu", "dtype": "f8"}]})",
       R"(entries[3].dtype: expected one of f32,f16,bf16,f64, got "f8")"},
      {R"({"entries": [)" + relu + R"(, {"kind": "op", "op": "swiglu", "dtype": "f32"}]})", "entries[1].op: "},
      {R"({"entries": [{"kind": "op", "op": "relu"}]})", "entries[0].dtype: missing required field"},
      {R"({"entries": [{"kind": "op", "op": "relu", "dtype": 3}]})", "entries[0].dtype: expected one of"},
      {R"({"entries": [{"kind": "op", "op": "relu", "dtype": "f32", "dtpye": "f16"}]})",
       "entries[0].dtpye: unknown field"},
      {R"({"entries": [{"kind": "op", "op": "relu", "dtype": "f32", "dtype": "f16"}]})",
       R"(spec: key "dtype" appears twice in one object)"},
      {R"({"entries": [{"kind": "op", "op": "relu", "dtype": "f32", "vector_width": 8}]})",
       "entries[0].vector_width: expected one of 1,2,4 for f32, got number 8"},
      {R"({"entries": [{"kind": "op", "op": "relu", "dtype": "f32", "shape": [4096, "x"]}]})",
       R"(entries[0].shape[1]: expected an integer, got "x")"},
      {R"({"entries": [{"kind": "conv2d", "input": [128, 8, 128, 128], "filters": [64, 3]}]})",
       "entries[0].filters: expected an array of 3 to 4 elements, got 2"},
      {R"({"entries": [{"kind": "conv2d", "input": [8, 32, 32], "filters": [16, 3, 3],
                        "precision": ["tf32", "fp16"]}]})",
       R"(entries[0].precision[1]: expected one of fp32,tf32,tf32x3, got "fp16")"},
      {R"({"entries": [{"kind": "conv2d", "input": [8, 32, 32], "filters": [16, 3, 3], "precision": "TF32"}]})",
       R"(entries[0].precision: expected one of fp32,tf32,tf32x3, got "TF32")"},
      {R"({"entries": [{"kind": "conv2d", "input": [8, 32, 32], "filters": [16, 3, 3], "precision": 32}]})",
       "entries[0].precision: expected one of fp32,tf32,tf32x3, got number 32"},
      {R"({"entries": [{"kind": "conv2d", "input": [8, 32, 32], "filters": [16, 3, 3], "epilogue": 3}]})",
       "entries[0].epilogue: expected a string, got number 3"},
      {R"({"entries": [{"kind": "conv2d", "input": [8, 32, 32], "filters": [16, 3, 3], "groups": 3}]})",
       "entries[0].groups: must divide the input's 8 channels, got 3"},
      {R"({"entries": [{"kind": "conv2d", "input": [8, 32, 32], "filters": [16, 8, 3, 3], "groups": 2}]})",
       "entries[0].filters[1]: expected the input's channel count 8 / groups 2 = 4, got number 8"},
      {R"({"entries": [{"kind": "conv2d", "input": [8, 32, 32], "filters": [12, 3, 3], "groups": 8}]})",
       "entries[0]: conv2d variant: groups 8 must divide the input channels (8) and the output channels (12)"},
      {R"({"entries": [{"kind": "cuda", "file": "missing.cu", "functions": "k"}]})",
       "entries[0].file: cannot read"},
      {R"({"entries": [{"kind": "tensorrt"}]})",
       R"(entries[0].kind: expected one of op,conv2d,reductions,cuda, got "tensorrt")"},
      {R"({"entries": {}})", "entries: expected an array, got an object"},
      {R"({"entries": [)", "spec: not valid JSON"},
  };
  for (const auto& c : cases) {
    auto spec = write_spec("bad.json", c.json);
    Result r = cli({"warm", "--spec", spec.string(), "--arch", "sm_90"});
    EXPECT_EQ(r.code, 2) << c.json << "\n" << r.err;
    EXPECT_CONTAINS(r.err, "cuinline: error: " + c.message);  // the path named once
    EXPECT_TRUE(entry_files().empty()) << "compiled something for " << c.json;
  }
}

// F.conv2d's groups in a spec: a depthwise and a grouped conv warm (named ",g<groups>") in f16
// channels-last, and the library's lookup of the same call hits them.
TEST_F(CliTest, WarmGroupedConv2d) {
  auto spec = write_spec("g.json", R"json({"entries": [
      {"kind": "conv2d", "input": [32, 28, 28], "filters": [32, 1, 3, 3], "padding": 1, "groups": 32,
       "bias": true, "epilogue": "relu", "dtype": "f16", "layout": "nhwc"},
      {"kind": "conv2d", "input": [64, 14, 14], "filters": [128, 3, 3], "padding": 1, "groups": 8}]})json");
  Result warm = cli({"warm", "--spec", spec.string(), "--arch", "sm_90", "-j", "2"});
  ASSERT_EQ(warm.code, 0) << warm.out << warm.err;
  EXPECT_CONTAINS(warm.out, "warm: 2 compiled, 0 already cached, 0 failed");
  EXPECT_CONTAINS(warm.out, "conv2d<f16,32x28x28,32x3x3,s1x1,p1x1,d1x1,g32,bias,x:nhwc,y:nhwc>[relu] sm_90");
  EXPECT_CONTAINS(warm.out, "conv2d<f32,64x14x14,128x3x3,s1x1,p1x1,d1x1,g8>[identity] sm_90");
  // The library's variant of such a call (tensors with those strides) has that key: a disk hit.
  using namespace cuinline::ops;
  Conv2dParams p = Conv2dParams::square(1, 1);
  p.groups = 32;
  const auto fake = [](std::uintptr_t a) { return reinterpret_cast<void*>(a); };
  const cuinline::TensorView x = cuinline::TensorView::strided(fake(0x100000), cuinline::DType::f16, {2, 32, 28, 28},
                                                               {28 * 28 * 32, 1, 28 * 32, 32});
  const cuinline::TensorView w = cuinline::TensorView::contiguous(fake(0x200000), cuinline::DType::f16, {32, 1, 3, 3});
  const cuinline::TensorView b = cuinline::TensorView::contiguous(fake(0x300000), cuinline::DType::f16, {32});
  const cuinline::TensorView y = cuinline::TensorView::strided(fake(0x400000), cuinline::DType::f16, {2, 32, 28, 28},
                                                               {28 * 28 * 32, 1, 28 * 32, 32});
  const Conv2dVariant v = conv2d_variant_for(x, w, b, y, p, Op::relu());
  EXPECT_EQ(tier_of(make_request(conv2d_variant_for_arch(v, cuinline::Arch::parse("sm_90")))), cuinline::CacheTier::disk);
}

// Epilogues over per-channel operands (KernelBench's conv -> relu -> + bias (C, 1, 1)): a warm spec
// names them like any op; the key does not depend on the operands' values, so a call with its
// tensors finds the warmed entry on disk. An epilogue with two outputs is refused, naming the entry.
TEST_F(CliTest, WarmConv2dWithChannelOperands) {
  auto spec = write_spec("c.json", R"json({"entries": [
      {"kind": "conv2d", "input": [64, 30, 30], "filters": [128, 3, 3], "bias": true,
       "epilogue": ["relu|add(in1)", "expr([x, m] x * m > 0.0f ? x * m : 0.0f)"], "dtype": "f16"}]})json");
  Result warm = cli({"warm", "--spec", spec.string(), "--arch", "sm_90", "-j", "2"});
  ASSERT_EQ(warm.code, 0) << warm.out << warm.err;
  // (and the f16 NCHW staging copy the plan launches before them, and each one's split form: a
  // 28 x 28 output plane of 9 k steps, whose split form has m64 tiles of its own)
  EXPECT_CONTAINS(warm.out, "warm: 5 compiled, 0 already cached, 0 failed");
  EXPECT_CONTAINS(warm.out, "conv2d<f16,64x30x30,128x3x3,s1x1,p0x0,d1x1,bias>[relu|add(in1)] sm_90");
  using namespace cuinline::ops;
  const auto fake = [](std::uintptr_t a) { return reinterpret_cast<void*>(a); };
  const auto f16 = cuinline::DType::f16;
  const cuinline::TensorView x = cuinline::TensorView::contiguous(fake(0x100000), f16, {4, 64, 30, 30});
  const cuinline::TensorView w = cuinline::TensorView::contiguous(fake(0x200000), f16, {128, 64, 3, 3});
  const cuinline::TensorView b = cuinline::TensorView::contiguous(fake(0x300000), f16, {128});
  const cuinline::TensorView y = cuinline::TensorView::contiguous(fake(0x400000), f16, {4, 128, 28, 28});
  const cuinline::TensorView b2 = cuinline::TensorView::contiguous(fake(0x500000), f16, {128, 1, 1});
  const Conv2dVariant v = conv2d_variant_for(x, w, b, y, {}, parse_op("relu|add(in1)"), Conv2dPrecision::fp32, {}, {b2});
  EXPECT_EQ(tier_of(make_request(conv2d_variant_for_arch(v, cuinline::Arch::parse("sm_90")))), cuinline::CacheTier::disk);

  auto bad = write_spec("bad.json", R"json({"entries": [{"kind": "conv2d", "input": [8, 16, 16], "filters": [4, 3, 3],
                                            "epilogue": "expr([x, m] x * m | x + m)"}]})json");
  Result refused = cli({"warm", "--spec", bad.string(), "--arch", "sm_90"});
  EXPECT_EQ(refused.code, 2) << refused.out << refused.err;
  EXPECT_CONTAINS(refused.err, "entries[0]");
  EXPECT_CONTAINS(refused.err, "has 2 outputs; a conv2d epilogue has one");
}

TEST_F(CliTest, WarmCompilesOneConv2dVariantPerPrecision) {
  auto spec = write_spec("s.json", R"json({"entries": [{"kind": "conv2d", "input": [8, 32, 32],
                                            "filters": [16, 3, 3], "epilogue": "div(2)|leaky_relu(0.01)",
                                            "precision": ["fp32", "tf32", "tf32x3"]}]})json");
  Result warm = cli({"warm", "--spec", spec.string(), "--arch", "sm_90", "-j", "2"});
  ASSERT_EQ(warm.code, 0) << warm.out << warm.err;
  EXPECT_CONTAINS(warm.out, "warm: 3 compiled, 0 already cached, 0 failed");
  const std::string shape = "conv2d<f32,8x32x32,16x3x3,s1x1,p0x0,d1x1";
  const std::string epilogue = ">[div(2)|leaky_relu(0.01)] sm_90";
  EXPECT_CONTAINS(warm.out, "compiled " + shape + epilogue);  // fp32: the name the library has always used
  EXPECT_CONTAINS(warm.out, "compiled " + shape + ",tf32" + epilogue);
  EXPECT_CONTAINS(warm.out, "compiled " + shape + ",tf32x3" + epilogue);
  ASSERT_EQ(entry_files().size(), 3u);

  // The cache holds one entry per mode: each listed variant is cached, under a key `cache list` shows.
  Result dry = cli({"warm", "--spec", spec.string(), "--arch", "sm_90", "--dry-run"});
  ASSERT_EQ(dry.code, 0) << dry.err;
  EXPECT_CONTAINS(dry.out, "dry run: 3 variants, 3 already cached");
  Result list = cli({"cache", "list"});
  ASSERT_EQ(list.code, 0) << list.err;
  EXPECT_CONTAINS(list.out, "3 entries");
  for (const std::string precision : {"", ",tf32", ",tf32x3"}) {
    const std::string label = shape + precision + epilogue;
    const std::size_t at = dry.out.find("  " + label);
    ASSERT_NE(at, std::string::npos) << dry.out;
    const std::size_t line = dry.out.rfind('\n', at) + 1;  // "cached     <16 hex digits>  <label>"
    EXPECT_EQ(dry.out.substr(line, 6), "cached") << dry.out;
    EXPECT_CONTAINS(list.out, dry.out.substr(line + 11, 16));
  }

  // What the library asks for at run time, in each mode, is a disk hit.
  using cuinline::ops::Conv2dPrecision;
  for (Conv2dPrecision precision : {Conv2dPrecision::fp32, Conv2dPrecision::tf32, Conv2dPrecision::tf32x3}) {
    auto variant = cuinline::ops::make_conv2d_variant(8, 32, 32, 16, 3, 3, {}, false,
                                                      cuinline::ops::div_leaky_relu_epilogue(2, 0.01));
    variant.precision = precision;
    EXPECT_EQ(tier_of(cuinline::ops::make_request(variant)), cuinline::CacheTier::disk) << variant.name();
  }
  EXPECT_EQ(warmed_cache().stats().compiles, 0u);
  EXPECT_EQ(warmed_cache().stats().disk_hits, 3u);
}

// N-ary ops in a spec ("inputs" with shapes): warm writes exactly what ops::apply looks up for
// aligned tensors of those shapes (a disk hit, no compile); a bad combination names the entry.
TEST_F(CliTest, WarmNaryOpsThatApplyThenFinds) {
  auto spec = write_spec("s.json", R"json({"entries": [{"kind": "op", "op": ["expr([a, b] a / (1.0f + expf(-a)) * b)",
      "add(in1)|relu"], "dtype": ["f32", "bf16"], "inputs": [[64, 256], [256]], "strided": true}]})json");
  Result warm = cli({"warm", "--spec", spec.string(), "--arch", "sm_90", "-j", "2"});
  ASSERT_EQ(warm.code, 0) << warm.out << warm.err;
  EXPECT_CONTAINS(warm.out, "warm: 8 compiled, 0 already cached, 0 failed");
  cuinline::CacheConfig config;
  config.directory = cache_;
  cuinline::KernelCache cache(config);
  using cuinline::TensorView;
  for (cuinline::DType dt : {cuinline::DType::f32, cuinline::DType::bf16}) {
    // Different (aligned) pointers than warm's: the variant depends on alignment and shapes only.
    const TensorView a = TensorView::contiguous(reinterpret_cast<void*>(0x7000000), dt, {64, 256});
    const TensorView b = TensorView::contiguous(reinterpret_cast<void*>(0x8000000), dt, {256});
    const TensorView y = TensorView::contiguous(reinterpret_cast<void*>(0x9000000), dt, {64, 256});
    for (const char* text : {"expr([a, b] a / (1.0f + expf(-a)) * b)", "add(in1)|relu"}) {
      cuinline::CacheTier tier = cuinline::CacheTier::compiled;
      cache.get(cuinline::ops::make_request(cuinline::ops::parse_op(text), {a, b}, {y}), cuinline::Arch::parse("sm_90"),
                &tier);
      EXPECT_EQ(tier, cuinline::CacheTier::disk) << text;
    }
  }
  EXPECT_EQ(cache.stats().compiles, 0u);
  auto bad = write_spec("bad.json", R"json({"entries": [{"kind": "op", "op": "add(in1)", "dtype": "f32",
      "inputs": [[3, 4], [5]]}]})json");
  Result r = cli({"warm", "--spec", bad.string(), "--arch", "sm_90"});
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_CONTAINS(r.err, "entries[0]");
  EXPECT_TRUE(entry_files().size() == 8u);
}

// Row reductions in a spec: warm writes exactly what the ops look up at run time for rows of those
// lengths (disk hits in this process, no compile) — the warp form with a whole warp and with fewer
// lanes a row, the block and cluster forms (the cluster form's kernel, its split form's two a GPU
// without clusters runs, and the looped form a call runs where no workspace can be had), other row
// lengths of the same classes, rows aligned to one element — and a bad entry names its field and
// compiles nothing.
TEST_F(CliTest, WarmReductionsThatTheOpsThenFind) {
  auto spec = write_spec("r.json", R"json({"entries": [
      {"kind": "reductions", "op": ["softmax", "add_rms_norm"], "dtype": "bf16", "row_length": [64, 100, 4096, 40000]},
      {"kind": "reductions", "op": "layer_norm", "dtype": "f32", "row_length": 1000, "vector_width": [1, 4]}]})json");
  Result warm = cli({"warm", "--spec", spec.string(), "--arch", "sm_90", "-j", "2"});
  ASSERT_EQ(warm.code, 0) << warm.out << warm.err;
  EXPECT_CONTAINS(warm.out, "warm: 16 compiled, 0 already cached, 0 failed");
  EXPECT_CONTAINS(warm.out, "compiled softmax<bf16,warp,v8,e8,t8> sm_90");  // 8 lanes a row
  EXPECT_CONTAINS(warm.out, "compiled softmax<bf16,cluster,v8,e64,t256,c3> sm_90");
  EXPECT_CONTAINS(warm.out, "compiled softmax<bf16,split_stats,v8,e64,t256> sm_90");
  EXPECT_CONTAINS(warm.out, "compiled softmax<bf16,split_write,v8,e64,t256> sm_90");
  EXPECT_CONTAINS(warm.out, "compiled add_rms_norm<bf16,looped,v8> sm_90");

  cuinline::CacheConfig config;
  config.directory = cache_;
  cuinline::KernelCache cache(config);
  using cuinline::DType;
  using cuinline::TensorView;
  using namespace cuinline::ops;
  const cuinline::Arch sm90 = cuinline::Arch::parse("sm_90");
  // Other (4 KiB-aligned) pointers and row counts than warm's: the variant depends on the row length
  // class, the dtype and the alignment only.
  const auto fake = [](std::uintptr_t a) { return reinterpret_cast<void*>(a); };
  // A hit: on disk, or in memory where this process read the entry already (48 after 64, 4000 after 4096).
  const auto expect_hit = [&](const RowPlan& plan) {
    std::vector<RowVariant> run = {plan.variant};
    if (plan.variant.form == RowForm::cluster) {  // its split form (a GPU without clusters)
      EXPECT_EQ(plan.split.form, RowForm::split_stats);
      run.push_back(plan.split);
    }
    if (plan.split.form == RowForm::split_stats) {  // the split form's second kernel, and its fallback
      RowVariant write = plan.split;
      write.form = RowForm::split_write;
      run.push_back(write);
      EXPECT_EQ(plan.fallback.form, RowForm::looped);
      run.push_back(plan.fallback);
    }
    for (const RowVariant& v : run) {
      cuinline::CacheTier tier = cuinline::CacheTier::compiled;
      cache.get(make_request(v), sm90, &tier);
      EXPECT_NE(tier, cuinline::CacheTier::compiled) << v.name();
    }
  };
  // 48: 8 lanes a row, as 64; 4000: the block form's class of 4096.
  for (std::int64_t n : {64, 48, 100, 4096, 4000, 40000}) {
    const TensorView x = TensorView::contiguous(fake(0x10000000), DType::bf16, {3, n});
    const TensorView y = TensorView::contiguous(fake(0x20000000), DType::bf16, {3, n});
    const TensorView r = TensorView::contiguous(fake(0x30000000), DType::bf16, {3, n});
    const TensorView w = TensorView::contiguous(fake(0x40000000), DType::bf16, {n});
    expect_hit(plan_rows(RowOp::softmax, x, y));
    expect_hit(plan_rows(RowOp::add_rms_norm, x, y, w, {}, r, 1e-6));
  }
  for (std::uintptr_t misaligned : {0, 4}) {  // rows aligned to 16 bytes (v4), and to one element (v1)
    const TensorView x = TensorView::contiguous(fake(0x10000000 + misaligned), DType::f32, {5, 1000});
    const TensorView y = TensorView::contiguous(fake(0x20000000 + misaligned), DType::f32, {5, 1000});
    const RowPlan plan = plan_rows(RowOp::layer_norm, x, y, {}, {}, {}, 1e-5);
    EXPECT_EQ(plan.variant.vector_width, misaligned ? 1 : 4);
    expect_hit(plan);
  }
  EXPECT_EQ(cache.stats().disk_hits, 16u);  // every entry warm wrote, each read once
  EXPECT_EQ(cache.stats().compiles, 0u);

  // For sm_80 the cluster form's kernel is not compiled (no thread block clusters there: its calls
  // run the split form, whose three parts are).
  auto older = write_spec("r80.json", R"json({"entries": [
      {"kind": "reductions", "op": "softmax", "dtype": "bf16", "row_length": 40000}]})json");
  Result warm80 = cli({"warm", "--spec", older.string(), "--arch", "sm_80"});
  ASSERT_EQ(warm80.code, 0) << warm80.out << warm80.err;
  EXPECT_CONTAINS(warm80.out, "warm: 3 compiled, 0 already cached, 0 failed");
  EXPECT_CONTAINS(warm80.out, "compiled softmax<bf16,split_stats,v8,e64,t256> sm_80");
  EXPECT_EQ(warm80.out.find("cluster"), std::string::npos) << warm80.out;

  const std::size_t entries = entry_files().size();
  const std::string rd = R"("kind": "reductions", )";
  for (const auto& [json, says] : std::vector<std::pair<std::string, std::string>>{
           {rd + R"("op": "rmsnorm", "dtype": "f32", "row_length": 8)",
            R"(entries[0].op: expected one of softmax,log_softmax,rms_norm,add_rms_norm,layer_norm, got "rmsnorm")"},
           {rd + R"("op": "softmax", "dtype": "f32", "row_length": [8, 0])",
            "entries[0].row_length[1]: expected an integer in [1, 1099511627776], got number 0"},
           {rd + R"("op": "softmax", "dtype": ["f16", "f32"], "row_length": 8, "vector_width": 8)",
            "entries[0].vector_width: expected one of 1,2,4 for f32, got number 8"},
           {rd + R"("op": "softmax", "dtype": "f32")", "entries[0].row_length: missing required field"},
           {rd + R"("op": "rms_norm", "dtype": "f32", "row_length": 8, "eps": 1e-6)",
            "entries[0].eps: unknown field (known fields: kind, op, dtype, row_length, vector_width, prologue, epilogue)"}}) {
    auto bad = write_spec("bad.json", R"({"entries": [{)" + json + "}]}");
    Result r = cli({"warm", "--spec", bad.string(), "--arch", "sm_90"});
    EXPECT_EQ(r.code, 2) << json << "\n" << r.out << r.err;
    EXPECT_CONTAINS(r.err, "cuinline: error: " + says);
  }
  EXPECT_EQ(entry_files().size(), entries);
}

TEST_F(CliTest, ZeroDivisorIsAcceptedAsTheLibraryAcceptsIt) {
  // ops::Op::validate allows x / 0 (±inf, NaN for 0 / 0, as in PyTorch); so does the spec.
  EXPECT_NO_THROW(cuinline::ops::Op::div_leaky_relu(0, 0.01).validate());
  EXPECT_NO_THROW(cuinline::ops::parse_op("div(0)|relu").validate());
  auto spec = write_spec("s.json", R"json({"entries": [
      {"kind": "op", "op": "div_leaky_relu", "divisor": [0, 2], "dtype": "f32", "vector_width": 4},
      {"kind": "op", "op": "div(0)", "dtype": "f32", "vector_width": 4},
      {"kind": "conv2d", "input": [8, 32, 32], "filters": [16, 3, 3], "epilogue": "div(0)|leaky_relu(0.01)"}]})json");
  Result r = cli({"warm", "--spec", spec.string(), "--arch", "sm_90", "--dry-run"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "div_leaky_relu(0,0.01)");
  EXPECT_CONTAINS(r.out, "div_leaky_relu(2,0.01)");
  EXPECT_CONTAINS(r.out, "[div(0)|leaky_relu(0.01)] sm_90");
}

// `cuinline run conv2d`'s layer: --filters, --stride, --padding, --dilation, --groups, checked against the
// input before the GPU is looked for (a usage error, exit 2, with or without one); another op refuses them.
TEST_F(CliTest, RunConv2dLayerArgumentsAreCheckedFirst) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--filters", "128x3"}, "--filters: expected KxKHxKW"},
      {{"--filters", "0x3x3"}, "--filters: expected KxKHxKW"},
      {{"--stride", "0"}, "--stride: expected S or SHxSW (1 or more), got '0'"},
      {{"--padding", "1x2x3"}, "--padding: expected P or PHxPW"},
      {{"--padding", "-1"}, "--padding: expected P or PHxPW"},
      {{"--dilation", "2y1"}, "--dilation: expected S or SHxSW"},
      {{"--groups", "3"}, "groups 3 must divide the input channels (8) and the output channels (64)"},
      {{"--filters", "16x3x3", "--groups", "0"}, "groups must be positive"},
      {{"--dilation", "2", "--shape", "1x8x4x4"}, "the output is empty"},
  };
  for (const auto& [args, message] : cases) {
    std::vector<std::string> argv = {"run", "conv2d"};
    argv.insert(argv.end(), args.begin(), args.end());
    Result r = cli(argv);
    EXPECT_EQ(r.code, 2) << args[0] << " " << r.err;
    EXPECT_CONTAINS(r.err, message);
  }
  Result relu = cli({"run", "relu", "--groups", "2"});
  EXPECT_EQ(relu.code, 2);
  EXPECT_CONTAINS(relu.err, "only conv2d takes them, not 'relu'");
}

TEST_F(CliTest, RunPrecisionIsForConv2dOnly) {
  // Checked before the GPU is looked for: a usage error (exit 2) with or without one.
  Result relu = cli({"run", "relu", "--precision", "tf32"});
  EXPECT_EQ(relu.code, 2) << relu.err;
  EXPECT_CONTAINS(relu.err, "--precision: only the conv2d op takes a precision, not 'relu'");
  Result fp32 = cli({"run", "leaky_relu", "--precision", "fp32"});
  EXPECT_EQ(fp32.code, 2) << fp32.err;
  EXPECT_CONTAINS(fp32.err, "--precision");
  Result unknown = cli({"run", "conv2d", "--precision", "fp16"});
  EXPECT_EQ(unknown.code, 2) << unknown.err;
  EXPECT_CONTAINS(unknown.err, "--precision: unknown conv2d precision 'fp16' (fp32, tf32, tf32x3)");
  EXPECT_EQ(cli({"run", "conv2d", "--precision"}).code, 2);  // CLI11: the value is missing
  Result empty = cli({"run", "conv2d", "--precision", ""});      // given but empty: not the default
  EXPECT_EQ(empty.code, 2) << empty.err;
  EXPECT_CONTAINS(empty.err, "--precision: unknown conv2d precision '' (fp32, tf32, tf32x3)");
  EXPECT_TRUE(entry_files().empty());
}

TEST_F(CliTest, RunConv2dDtypeAndLayoutAreChecked) {
  // Usage errors (exit 2) before the GPU is looked for; f16/bf16 and nhwc themselves need a GPU.
  Result f128 = cli({"run", "conv2d", "--dtype", "f128"});
  EXPECT_EQ(f128.code, 2) << f128.err;
  EXPECT_CONTAINS(f128.err, "--dtype: expected one of f32,f16,bf16,f64, got 'f128'");
  Result relu = cli({"run", "relu", "--layout", "nhwc"});
  EXPECT_EQ(relu.code, 2) << relu.err;
  EXPECT_CONTAINS(relu.err, "--layout: only the conv2d op takes a layout, not 'relu'");
  Result bad = cli({"run", "conv2d", "--layout", "NHWC"});
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_CONTAINS(bad.err, "--layout: expected nchw or nhwc (channels-last), got 'NHWC'");
  EXPECT_TRUE(entry_files().empty());
  // f64 is a conv2d dtype: no usage error (without a GPU the missing GPU stops it; with one it runs,
  // and compiles an entry).
  Result f64 = cli({"run", "conv2d", "--dtype", "f64"});
  EXPECT_NE(f64.code, 2) << f64.err;
  EXPECT_EQ(f64.err.find("--dtype"), std::string::npos) << f64.err;
}

TEST_F(CliTest, SpecParserSurvivesGarbage) {
  // Fresh random mutations of the seeds spec every run, plus hand-picked nasty inputs. --dry-run:
  // whatever parses is listed, nothing is compiled.
  std::string seeds = read_file(kSeeds);
  std::vector<std::string> inputs = {
      "",
      "null",
      "\xff\xfe\x00",
      std::string(5000, '['),
      "{\"entries\": [1e999]}",
      "{\"entries\": [{\"kind\": \"op\", \"op\": \"relu\", \"dtype\": \"f32\", "
      "\"shape\": [99999999999, 99999999999, 99999999999]}]}"};
  std::mt19937_64 rng(std::random_device{}());
  for (int i = 0; i < 12; ++i) {
    std::string mutated = seeds;
    for (int k = 0; k < 3; ++k) mutated[rng() % mutated.size()] = static_cast<char>(rng() % 256);
    inputs.push_back(mutated);
  }
  for (const auto& input : inputs) {
    auto spec = write_spec("fuzz.json", input);
    Result r = cli({"warm", "--spec", spec.string(), "--arch", "sm_90", "--dry-run"});
    EXPECT_EQ(r.signal, 0) << input;
    EXPECT_TRUE(r.code == 0 || r.code == 2) << r.code << " for " << input << "\n" << r.err;
  }
  EXPECT_TRUE(entry_files().empty());
}

TEST_F(CliTest, FailedVariantFailsTheRunButTheOthersAreCompiled) {
  write_file(dir_ / "good.cu", "extern \"C\" __global__ void good(float* x) { x[0] = 1; }\n");
  write_file(dir_ / "bad.cu", "extern \"C\" __global__ void bad(float* x) {\n  x[0] = not_declared;\n}\n");
  auto spec = write_spec("s.json", R"({"entries": [{"kind": "cuda", "file": "bad.cu", "functions": "bad"},
                                                   {"kind": "cuda", "file": "good.cu", "functions": "good"}]})");
  Result r = cli({"warm", "--spec", spec.string(), "--arch", "sm_90", "-j", "1"});
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.out, "1 compiled, 0 already cached, 1 failed");
  EXPECT_CONTAINS(r.err, "not_declared");
  EXPECT_EQ(entry_files().size(), 1u);
}

TEST_F(CliTest, WarmWithoutArchNeedsAGpu) {
  if (cuinline::device_count() > 0) GTEST_SKIP() << "a GPU is present";
  auto spec = write_spec("s.json", kReluAllDtypes);
  Result r = cli({"warm", "--spec", spec.string()});
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.err, "pass --arch");
}

TEST_F(CliTest, DryRunCompilesNothing) {
  auto spec = write_spec("s.json", kReluAllDtypes);
  Result r = cli({"warm", "--spec", spec.string(), "--arch", "sm_80,sm_90", "--dry-run"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "0 already cached");
  EXPECT_CONTAINS(r.out, "relu<f64,v2,i32> sm_80");
  EXPECT_TRUE(entry_files().empty());
}

TEST_F(CliTest, VerifyFindsACorruptAndAForeignEntryAndFixRemovesThem) {
  auto spec = write_spec("s.json", kReluAllDtypes);
  ASSERT_EQ(cli({"warm", "--spec", spec.string(), "--arch", "sm_90"}).code, 0);
  auto files = entry_files();
  ASSERT_GE(files.size(), 2u);
  std::string bytes = read_file(files[0]);
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x5A);
  write_file(files[0], bytes);
  fs::path foreign = cache_ / std::string(64, 'a');
  write_file(foreign, "not a cache entry");

  Result found = cli({"cache", "verify"});
  EXPECT_EQ(found.code, 1);
  EXPECT_CONTAINS(found.out, files[0].filename().string());
  EXPECT_CONTAINS(found.out, foreign.filename().string());
  EXPECT_CONTAINS(found.out, "2 bad");

  Result fixed = cli({"cache", "verify", "--fix"});
  EXPECT_EQ(fixed.code, 0) << fixed.out << fixed.err;
  EXPECT_CONTAINS(fixed.out, "2 removed");
  EXPECT_FALSE(fs::exists(files[0]));
  EXPECT_FALSE(fs::exists(foreign));
  EXPECT_EQ(entry_files().size(), files.size() - 1);
  Result clean = cli({"cache", "verify"});
  EXPECT_EQ(clean.code, 0);
  EXPECT_CONTAINS(clean.out, "0 bad");
}

TEST_F(CliTest, PruneKeepsTheDirectoryUnderTheAskedSize) {
  auto spec = write_spec("s.json", kReluAllDtypes);
  ASSERT_EQ(cli({"warm", "--spec", spec.string(), "--arch", "sm_90"}).code, 0);
  std::size_t before_entries = entry_files().size();
  std::uint64_t before = directory_bytes();
  std::uint64_t limit = before / 2;
  Result r = cli({"cache", "prune", "--max-bytes", std::to_string(limit)});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_LE(directory_bytes(), limit);
  EXPECT_LT(entry_files().size(), before_entries);
  EXPECT_GT(entry_files().size(), 0u);

  EXPECT_EQ(cli({"cache", "prune", "--max-bytes", "12Q"}).code, 2);
  EXPECT_EQ(cli({"cache", "prune", "--max-bytes", "0"}).code, 0);
  EXPECT_TRUE(entry_files().empty());
}

TEST_F(CliTest, ListStatsAndClear) {
  auto spec = write_spec("s.json", kReluAllDtypes);
  ASSERT_EQ(cli({"warm", "--spec", spec.string(), "--arch", "sm_90"}).code, 0);
  std::size_t entries = entry_files().size();
  Result list = cli({"cache", "list"});
  EXPECT_EQ(list.code, 0);
  EXPECT_CONTAINS(list.out, entry_files()[0].filename().string().substr(0, 16));
  EXPECT_CONTAINS(list.out, "sm_90");
  Result stats = cli({"cache", "stats"});
  EXPECT_EQ(stats.code, 0);
  EXPECT_CONTAINS(stats.out, "entries      " + std::to_string(entries));

  Result refused = cli({"cache", "clear"}, "n\n");
  EXPECT_EQ(refused.code, 1);
  EXPECT_EQ(entry_files().size(), entries);
  Result no_stdin = cli({"cache", "clear"});
  EXPECT_EQ(no_stdin.code, 1);
  EXPECT_EQ(entry_files().size(), entries);
  Result cleared = cli({"cache", "clear", "--yes"});
  EXPECT_EQ(cleared.code, 0) << cleared.err;
  EXPECT_TRUE(entry_files().empty());
}

// The CLI's words: each mistake named, exit 2, nothing done.
TEST_F(CliTest, MistakesAreNamed) {
  Result bogus = cli({"bogus"});
  EXPECT_EQ(bogus.code, 2);
  EXPECT_CONTAINS(bogus.err, "unknown command 'bogus'");
  Result commas = cli({"warm", "--spec", kSeeds, "--arch", ",,,", "--dry-run"});
  EXPECT_EQ(commas.code, 2);
  EXPECT_CONTAINS(commas.err, "--arch ',,,'");
  Result empty_dir = cli({"cache", "list", "--cache-dir", ""});
  EXPECT_EQ(empty_dir.code, 2);
  EXPECT_CONTAINS(empty_dir.err, "--cache-dir");
  // Every unknown word is named, even where a required option or subcommand is missing too (CLI11
  // checks those first: "A subcommand is required", "--spec is required").
  const std::vector<std::pair<std::vector<std::string>, std::string>> unknown = {
      {{"cache", "bogus"}, "`cuinline cache`: unknown command 'bogus'"},
      {{"warm", "--bogus"}, "`cuinline warm`: unknown option '--bogus'"},
      {{"warm", "--spec", kSeeds, "extra"}, "`cuinline warm`: unexpected argument 'extra'"},
      {{"compile", "a.cu", "b.cu"}, "`cuinline compile`: unexpected argument 'b.cu'"},
      {{"cache", "list", "--bogus"}, "`cuinline cache list`: unknown option '--bogus'"},
      {{"cache", "prune", "--bogus"}, "`cuinline cache prune`: unknown option '--bogus'"},
      {{"run", "--bogus"}, "`cuinline run`: unknown option '--bogus'"}};
  for (const auto& [args, message] : unknown) {
    Result r = cli(args);
    EXPECT_EQ(r.code, 2) << message;
    EXPECT_CONTAINS(r.err, message);
    EXPECT_EQ(r.err.find("is required"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(cache_)) << "a usage error touched the cache";
  // A fraction of a byte is not a size (0.5 used to be read as 0 and prune everything).
  Result warm = cli({"warm", "--spec", small_spec(), "--arch", "sm_90", "-j", "2"});
  ASSERT_EQ(warm.code, 0) << warm.err;
  const std::size_t entries = entry_files().size();
  Result half = cli({"cache", "prune", "--max-bytes", "0.5"});
  EXPECT_EQ(half.code, 2);
  EXPECT_CONTAINS(half.err, "'0.5'");
  EXPECT_EQ(entry_files().size(), entries);
}

// A small spec naming millions of variants × archs is refused before anything is rendered, with the
// count; below the bound the variants are built one at a time; a list that repeats values is merged
// before rendering.
TEST_F(CliTest, SpecExpansionIsBoundedAndMerged) {
  std::string slopes, divisors;
  for (int i = 0; i < 600; ++i) {
    slopes += (i ? "," : "") + std::to_string(0.001 * (i + 1));
    divisors += (i ? "," : "") + std::to_string(i + 2);
  }
  auto huge = write_spec("huge.json", R"({"entries": [{"kind": "op", "op": "div_leaky_relu", "slope": [)" + slopes +
                                          R"(], "divisor": [)" + divisors + R"(], "dtype": ["f32", "f16", "bf16", "f64"]}]})");
  Result r = cli({"warm", "--spec", huge.string(), "--arch", "sm_90", "--dry-run"});
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  // 600 divisors × 600 slopes × (3 + 4 + 4 + 2 vector widths), computed from the lists.
  EXPECT_CONTAINS(r.err, "spec: 4680000 variants × 1 arch = 4680000, more than the limit of 100000");
  EXPECT_TRUE(entry_files().empty());
  Result low = cli({"warm", "--spec", kSeeds, "--arch", "sm_90", "--dry-run", "--max-variants", "3"});
  EXPECT_EQ(low.code, 2) << low.err;
  // The bound counts compiles, variants × archs: 600 variants fit under 1000 for one arch, not for two.
  auto wide = write_spec("wide.json", R"({"entries": [{"kind": "op", "op": "div_leaky_relu", "slope": [)" +
                                          slopes.substr(0, slopes.find(",0.011")) + R"(], "divisor": [2, 3],
      "dtype": ["f32", "f16", "bf16", "f64"], "index": ["i32", "i64"], "strided": true}]})");
  Result one_arch = cli({"warm", "--spec", wide.string(), "--arch", "sm_90", "--dry-run", "--max-variants", "1000"});
  EXPECT_EQ(one_arch.code, 0) << one_arch.err;
  EXPECT_CONTAINS(one_arch.out, "dry run: 600 variants");
  Result two = cli({"warm", "--spec", wide.string(), "--arch", "sm_90,sm_80", "--dry-run", "--max-variants", "1000"});
  EXPECT_EQ(two.code, 2) << two.out << two.err;
  EXPECT_CONTAINS(two.err, "spec: 600 variants × 2 archs = 1200, more than the limit of 1000");
  EXPECT_EQ(two.out, "") << "variants were built before the bound was checked";
  // Variants are built one at a time: a dry run of 3000 takes no more resident memory than one of 1
  // (holding each rendered request took about 70 KB a variant).
  auto one = write_spec("one.json", R"({"entries": [{"kind": "op", "op": "relu", "dtype": "f32", "vector_width": 4}]})");
  auto many = write_spec("many.json", R"({"entries": [{"kind": "op", "op": "div_leaky_relu", "slope": [)" +
                                          slopes.substr(0, slopes.find(",0.011")) + R"(], "divisor": [)" +
                                          divisors.substr(0, divisors.find(",12")) +
                                          R"(], "dtype": ["f32", "f16", "bf16", "f64"], "index": ["i32", "i64"], "strided": true}]})");
  Result small = cli({"warm", "--spec", one.string(), "--arch", "sm_90", "--dry-run"});
  Result large = cli({"warm", "--spec", many.string(), "--arch", "sm_90", "--dry-run"});
  ASSERT_EQ(large.code, 0) << large.err;
  EXPECT_CONTAINS(large.out, "dry run: 3000 variants");
  // (Under a sanitizer the CLI keeps freed memory in quarantine: its resident memory says nothing.)
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define CUINLINE_TEST_SANITIZED 1
#endif
#endif
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) && !defined(CUINLINE_TEST_SANITIZED)
  EXPECT_LT(large.max_rss_kb, small.max_rss_kb + 64 * 1024) << "a dry run of 3000 variants held them all";
#endif
  auto repeated = write_spec("rep.json", R"({"entries": [{"kind": "op", "op": ["relu", "relu"], "dtype": ["f32", "f32"],
      "vector_width": 4}]})");
  Result merged = cli({"warm", "--spec", repeated.string(), "--arch", "sm_90", "--dry-run"});
  ASSERT_EQ(merged.code, 0) << merged.err;
  EXPECT_CONTAINS(merged.out, "dry run: 1 variants");
}

// `cache list` prints an entry's names with control characters escaped.
TEST_F(CliTest, ListEscapesControlCharacters) {
  cuinline::CacheConfig config;
  config.directory = cache_;
  cuinline::DiskCache disk(config);
  cuinline::CompiledProgram p;
  p.arch = cuinline::Arch::parse("sm_90");
  p.program_name = "evil";
  p.binary.assign(64, 'x');
  p.lowered_names = {{"k\x1b[2J\r<bell>\a", "k"}};
  cuinline::CacheKey key;
  key.digest[0] = 0x42;
  ASSERT_TRUE(disk.store(key, p));
  Result list = cli({"cache", "list"});
  ASSERT_EQ(list.code, 0) << list.err;
  EXPECT_EQ(list.out.find('\x1b'), std::string::npos) << list.out;
  EXPECT_EQ(list.out.find('\a'), std::string::npos);
  EXPECT_CONTAINS(list.out, "k\\x1b[2J\\x0d<bell>\\x07");
}

TEST_F(CliTest, CompileErrorPrintsTheLogAndExits1) {
  write_file(dir_ / "bad.cu", "__global__ void f(float* x) {\n  x[0] = undefined_thing;\n}\n");
  Result r =
      cli({"compile", (dir_ / "bad.cu").string(), "--arch", "sm_90", "-o", (dir_ / "bad.cubin").string()});
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.err, "bad.cu(2): error");
  EXPECT_CONTAINS(r.err, "undefined_thing");
  EXPECT_FALSE(fs::exists(dir_ / "bad.cubin"));
}

TEST_F(CliTest, CompileWritesCubinAndPtx) {
  write_file(dir_ / "inc.cuh", "#define SCALE 3\n");
  write_file(
      dir_ / "k.cu",
      "#include \"inc.cuh\"\ntemplate <int N> __global__ void k(float* x) { x[0] = N * SCALE * FACTOR; }\n");
  Result r = cli({"compile", (dir_ / "k.cu").string(), "--arch", "sm_90", "-k", "k<4>", "-DFACTOR=2", "-o",
                  (dir_ / "k.cubin").string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(read_file(dir_ / "k.cubin").substr(0, 4),
            "\x7f"
            "ELF");
  EXPECT_CONTAINS(r.out, "k<4> -> _Z1kILi4EEvPf");
  Result ptx = cli({"compile", (dir_ / "k.cu").string(), "--arch", "sm_90", "--kernel", "k<4>", "-DFACTOR=2",
                    "--ptx", "-o", (dir_ / "k.ptx").string()});
  ASSERT_EQ(ptx.code, 0) << ptx.err;
  EXPECT_CONTAINS(read_file(dir_ / "k.ptx"), ".target sm_90");
}

TEST_F(CliTest, UsageErrorsExit2) {
  EXPECT_EQ(cli({}).code, 2);
  EXPECT_EQ(cli({"frobnicate"}).code, 2);
  EXPECT_EQ(cli({"warm"}).code, 2);
  EXPECT_EQ(cli({"warm", "--spec", kSeeds, "--arch", "sm9"}).code, 2);
  EXPECT_EQ(cli({"warm", "--spec", kSeeds, "--arch", "sm_90", "-j", "0"}).code, 2);
  EXPECT_EQ(cli({"cache", "prune"}).code, 2);
  EXPECT_EQ(cli({"--help"}).code, 0);
}

TEST_F(CliTest, InfoWorksWithoutAGpu) {
  Result r = cli({"info"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "NVRTC");
  EXPECT_CONTAINS(r.out, cache_.string());
}

// `cuinline run` checks the GPU against these host conversions and references; they cannot be
// checked on the GPU here, so check them against the compiler's own _Float16 and exact arithmetic.
TEST(CliHostReference, HalfAndBfloat16ConversionsRoundToNearestEven) {
  using namespace cuinline::cli;
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    float f = half_to_float(static_cast<std::uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_half(f), h) << h;
    ASSERT_EQ(float_to_bf16(bf16_to_float(static_cast<std::uint16_t>(h))), h) << h;
  }
  std::mt19937_64 rng(std::random_device{}());
  for (int i = 0; i < 200000; ++i) {
    float f = bits_float(static_cast<std::uint32_t>(rng()));
    if (std::isnan(f)) continue;
#if defined(__FLT16_MAX__)
    ASSERT_EQ(float_to_half(f), [&] {
      _Float16 h = static_cast<_Float16>(f);
      std::uint16_t bits;
      std::memcpy(&bits, &h, 2);
      return bits;
    }()) << f;
#endif
    // bf16: the nearest of the two neighbours, ties to the even one. When the upper neighbour is
    // infinity, rounding measures the distance to 2^128 (where the next value would be).
    std::uint32_t u = float_bits(f), lo = u & 0xFFFF0000u, hi = lo + 0x10000u;
    const double vhi =
        std::isinf(bits_float(hi)) ? std::copysign(std::ldexp(1.0, 128), f) : double(bits_float(hi));
    double dlo = std::fabs(double(bits_float(lo)) - f), dhi = std::fabs(vhi - f);
    std::uint32_t expected = (dlo < dhi || (dlo == dhi && ((lo >> 16) & 1) == 0)) ? lo : hi;
    ASSERT_EQ(float_to_bf16(f), expected >> 16) << f;
  }
}

TEST(CliHostReference, Conv2dCheckToleratesEachPrecisionAndZeroDivisors) {
  using namespace cuinline::cli;
  using cuinline::ops::Conv2dPrecision;
  EXPECT_EQ(conv2d_relative_tolerance(Conv2dPrecision::fp32), 1e-5);
  EXPECT_EQ(conv2d_relative_tolerance(Conv2dPrecision::tf32x3), 1e-5);
  EXPECT_EQ(conv2d_relative_tolerance(Conv2dPrecision::tf32), 1e-3);
  // conv = 0.5 of magnitude 4, / 2, LeakyReLU(0.01): 0.25, within 1e-3 * 4 / 2 (+ 1e-6) for tf32.
  const double tf32 = 1e-3 * 4, fp32 = 1e-5 * 4;
  EXPECT_TRUE(conv2d_output_ok(0.5, tf32, 2, 0.01, 0.2515f));
  EXPECT_FALSE(conv2d_output_ok(0.5, tf32, 2, 0.01, 0.2525f));
  EXPECT_FALSE(conv2d_output_ok(0.5, fp32, 2, 0.01, 0.2515f));
  EXPECT_TRUE(conv2d_output_ok(-0.5, fp32, 2, 0.01, -0.0025f));
  EXPECT_FALSE(conv2d_output_ok(0.5, fp32, 2, 0.01, NAN));
  // Divisor 0: ±inf by the conv's sign, NaN for 0 / 0; either infinity where the sign is unsure.
  EXPECT_TRUE(conv2d_output_ok(0.5, fp32, 0, 0.01, INFINITY));
  EXPECT_TRUE(conv2d_output_ok(-0.5, fp32, 0, 0.01, -INFINITY));
  EXPECT_TRUE(conv2d_output_ok(-0.5, fp32, 0, -0.01, INFINITY));
  EXPECT_TRUE(conv2d_output_ok(-0.5, fp32, 0, 0, NAN));  // -inf * 0
  EXPECT_TRUE(conv2d_output_ok(0, fp32, 0, 0.01, NAN));
  EXPECT_FALSE(conv2d_output_ok(0.5, fp32, 0, 0.01, -INFINITY));
  EXPECT_FALSE(conv2d_output_ok(0.5, fp32, 0, 0.01, 1e30f));
  EXPECT_TRUE(conv2d_output_ok(1e-5, fp32, 0, 0.01, -INFINITY));
  EXPECT_FALSE(conv2d_output_ok(1e-5, fp32, 0, 0.01, 0.0f));
}

TEST(CliHostReference, ChainsRoundBetweenStepsLikeEagerOps) {
  using namespace cuinline::cli;
  auto to_half = [](float v) { return half_to_float(float_to_half(v)); };
  // leaky_relu(x / 2, 0.01) in f16: x * (1/2) rounded to half, then * 0.01f rounded again.
  float x = half_to_float(float_to_half(-3.0009765625f));
  float t = to_half(x * 0.5f);
  float expected = to_half(t * 0.01f);
  auto op = cuinline::ops::Op::div_leaky_relu(2, 0.01);
  EXPECT_EQ(reference_chain(op.steps, x, to_half), expected);
  EXPECT_EQ(reference_chain(cuinline::ops::Op::relu().steps, -1.5f, to_half), 0.0f);
  EXPECT_TRUE(std::isnan(reference_chain(cuinline::ops::Op::relu().steps, NAN, to_half)));
  auto clamp = cuinline::ops::Op::chain({cuinline::ops::Step::clamp(0, 6)});
  EXPECT_EQ(reference_chain(clamp.steps, 7.0f, to_half), 6.0f);
}

}  // namespace
