// NVRTC compile time of conv2d variants (no GPU needed): each variant's CompileRequest (the library's
// make_request) compiled N times for an arch, to CUBIN through cuinline::compile (what a cold cache
// miss costs) and to PTX only (NVRTC's front end and NVVM; the difference is ptxas), with ptxas's
// register / spill report and the CUBIN's size. Prints one line a variant: medians and ranges; then
// the staging copy's module where a variant is staged (shape-generic: compiled once, not a variant).
//
//   bench_conv2d_compile_time [--set hmma|tf32|all|cover|seed] [--repeat N] [--arch sm_90] [--filter TEXT]
//                             [--cubin-dir DIR] [--no-ptx]
//   --set hmma   the issue-19 f16/bf16 variants: seed 128x8x128x128 -> 64 3x3, ResNet-like 64x56^2 ->
//                64 3x3 pad 1, UNet-like 128x128^2 -> 128 3x3 pad 1; f16 and bf16; NCHW and NHWC
//                (input, weight and output alike); bias; epilogue div(2)|leaky_relu(0.01)
//   --set tf32   the same three shapes in fp32 NCHW, precision tf32 and tf32x3 (--set all: both sets)
//   --set cover  every kernel form the planner picks: seed, ResNet-50, UNet, deep 3 x 3 (split-K),
//                depthwise, grouped, halo, window, pointwise, batch-tile, odd and unaligned shapes in
//                f32 (fp32, tf32, tf32x3), f16, bf16 and f64, both layouts, bias / residual epilogues,
//                each planned for --arch (conv2d_variant_for_arch). With --cubin-dir, --repeat 1 and
//                --no-ptx: the CUBINs to compare before and after a change that must leave them alone
//                (the knob-dependent forms: run again under CUINLINE_CONV2D_STORE_BATCH,
//                CUINLINE_CONV2D_HALO_WBATCH=0, CUINLINE_CONV2D_TF32X3_SUMS=chained).
//   --set seed   the f32 seed conv variants of examples/specs/seeds.json (what `cuinline warm` of that
//                spec compiles): 128x8x128x128 -> 64 3x3, NCHW, with and without bias, epilogues
//                div(2)|leaky_relu(0.01) and div(2)
//   --filter     only variants whose name (with precision) contains TEXT
//   --cubin-dir  writes each variant's CUBIN there (for cuobjdump -sass)
//   --option X   appends NVRTC option X to every request (repeatable; e.g. --option --time=phases.csv)
// Set CUDA_CACHE_DISABLE=1 on a machine with a driver: NVRTC otherwise answers repeated programs from
// the driver's compute cache (docs/PERFORMANCE.md, "Method").
#include <nvrtc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuinline/compiler.hpp>
#include <cuinline/conv2d.hpp>
#include <fstream>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <vector>

namespace {

using cuinline::DType;
using namespace cuinline::ops;

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// NVRTC to PTX for the arch's virtual architecture with the options cuinline::compile uses.
double ptx_ms(const cuinline::CompileRequest& request, const cuinline::Arch& arch) {
  std::vector<std::string> options = cuinline::canonical_options(request.options);
  for (const auto& option : cuinline::default_options()) options.push_back(option);
  options.push_back("-arch=" + cuinline::compile_target(request, arch).virtual_name());
  std::vector<const char*> headers, names;
  for (const auto& h : request.headers) {
    headers.push_back(h.content.c_str());
    names.push_back(h.name.c_str());
  }
  const auto t0 = std::chrono::steady_clock::now();
  nvrtcProgram p = nullptr;
  if (nvrtcCreateProgram(&p, request.source.c_str(), request.name.c_str(), static_cast<int>(headers.size()),
                         headers.data(), names.data()) != NVRTC_SUCCESS) {
    std::fprintf(stderr, "nvrtcCreateProgram failed\n");
    std::exit(1);
  }
  for (const auto& e : request.name_expressions) nvrtcAddNameExpression(p, e.c_str());
  std::vector<const char*> argv;
  for (const auto& o : options) argv.push_back(o.c_str());
  const nvrtcResult r = nvrtcCompileProgram(p, static_cast<int>(argv.size()), argv.data());
  std::size_t size = 0;
  if (r == NVRTC_SUCCESS) nvrtcGetPTXSize(p, &size);
  if (const char* dir = std::getenv("CUINLINE_BENCH_PTX_DIR"); dir != nullptr && r == NVRTC_SUCCESS) {
    std::string ptx(size, '\0');
    nvrtcGetPTX(p, ptx.data());
    std::ofstream(std::string(dir) + "/" + request.name + ".ptx") << ptx.c_str();
    std::ofstream src(std::string(dir) + "/" + request.name);
    src << request.source;
    for (const auto& h : request.headers) std::ofstream(std::string(dir) + "/" + h.name) << h.content;
  }
  const double ms = ms_since(t0);
  if (r != NVRTC_SUCCESS) {
    std::size_t n = 0;
    nvrtcGetProgramLogSize(p, &n);
    std::string log(n, '\0');
    nvrtcGetProgramLog(p, log.data());
    std::fprintf(stderr, "PTX compile failed: %s\n", log.c_str());
    std::exit(1);
  }
  nvrtcDestroyProgram(&p);
  return ms;
}

struct Shape {
  const char* what;
  int n, cin, hw, cout, k, pad;
};
const Shape kShapes[] = {{"seed", 128, 8, 128, 64, 3, 0}, {"resnet", 32, 64, 56, 64, 3, 1}, {"unet", 8, 128, 128, 128, 3, 1}};

Conv2dVariant variant(const Shape& s, DType dt, Conv2dLayout l, Conv2dPrecision prec) {
  Conv2dVariant v = make_conv2d_variant(s.cin, s.hw, s.hw, s.cout, s.k, s.k, Conv2dParams::square(1, s.pad), true,
                                        div_leaky_relu_epilogue(2.0, 0.01));
  v.dtype = dt;
  v.input_layout = v.weight_layout = v.output_layout = l;
  v.precision = prec;
  return v;
}

// The --set cover variants (see the header), planned for `arch`.
std::vector<Conv2dVariant> cover_variants(const cuinline::Arch& arch) {
  struct C {
    int cin, h, w, cout, kh, kw;
    Conv2dParams p;
    bool residual;
  };
  const auto sq = [](int s, int pad, int dil = 1) { return Conv2dParams::square(s, pad, dil); };
  Conv2dParams grouped = sq(1, 1), depthwise3 = sq(1, 1), depthwise9 = sq(1, 4), odd = {2, 1, 1, 2, 1, 2, 1};
  grouped.groups = 4;
  depthwise3.groups = 96;
  depthwise9.groups = 32;
  const C shapes[] = {
      {8, 128, 128, 64, 3, 3, sq(1, 0), false},       // the seed
      {64, 56, 56, 64, 3, 3, sq(1, 1), true},         // ResNet 3 x 3 + residual
      {128, 64, 64, 128, 3, 3, sq(1, 1), false},      // UNet-like
      {3, 224, 224, 64, 7, 7, sq(2, 3), false},       // ResNet-50 stem
      {64, 56, 56, 256, 1, 1, sq(1, 0), true},        // 1 x 1 + residual
      {1024, 14, 14, 2048, 1, 1, sq(2, 0), false},    // strided 1 x 1
      {2048, 7, 7, 512, 1, 1, sq(1, 0), false},       // deep 1 x 1
      {512, 7, 7, 512, 3, 3, sq(1, 1), false},        // deep 3 x 3 (split-K)
      {256, 14, 14, 256, 3, 3, sq(1, 1), true},       // mid plane
      {96, 56, 56, 96, 3, 3, depthwise3, false},      // depthwise
      {32, 28, 28, 32, 9, 9, depthwise9, false},      // depthwise, many taps
      {64, 28, 28, 64, 3, 3, grouped, false},         // grouped
      {5, 9, 11, 24, 3, 5, odd, true},                // odd strides and padding
      {8, 6, 40, 64, 3, 3, sq(1, 0), false},          // halo
      {128, 6, 64, 128, 3, 3, sq(1, 1), false},       // window
      {64, 7, 7, 48, 3, 3, sq(1, 1), false},          // a small plane (batch tiles)
      {24, 14, 14, 40, 3, 3, sq(1, 2, 2), false},     // dilated
  };
  std::vector<Conv2dVariant> out;
  for (const C& c : shapes) {
    for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
      for (Conv2dLayout l : {Conv2dLayout::nchw, Conv2dLayout::nhwc}) {
        std::vector<Conv2dPrecision> precisions = {Conv2dPrecision::fp32};
        if (dt == DType::f32) precisions = {Conv2dPrecision::fp32, Conv2dPrecision::tf32, Conv2dPrecision::tf32x3};
        if (dt == DType::f64 && l == Conv2dLayout::nhwc) continue;
        for (Conv2dPrecision prec : precisions) {
          Conv2dVariant v = make_conv2d_variant(c.cin, c.h, c.w, c.cout, c.kh, c.kw, c.p, true,
                                                Op::chain({Step::relu()}));
          v.has_residual = c.residual;
          v.dtype = dt;
          v.input_layout = v.weight_layout = v.output_layout = l;
          v.precision = prec;
          out.push_back(conv2d_variant_for_arch(v, arch));
        }
      }
    }
  }
  // Mixed layouts and unaligned tensors.
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    Conv2dVariant v = make_conv2d_variant(64, 20, 20, 64, 3, 3, sq(1, 1), true, div_leaky_relu_epilogue(2.0, 0.01));
    v.dtype = dt;
    v.input_layout = Conv2dLayout::nhwc;
    out.push_back(conv2d_variant_for_arch(v, arch));
    v.input_layout = Conv2dLayout::nchw;
    v.output_layout = Conv2dLayout::nhwc;
    out.push_back(conv2d_variant_for_arch(v, arch));
    for (Conv2dLayout l : {Conv2dLayout::nchw, Conv2dLayout::nhwc}) {
      v.input_layout = v.weight_layout = v.output_layout = l;
      v.output_aligned = false;
      out.push_back(conv2d_variant_for_arch(v, arch));
      v.inputs_aligned = false;
      out.push_back(conv2d_variant_for_arch(v, arch));
      v.output_aligned = v.inputs_aligned = true;
    }
  }
  return out;
}

double median(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  const std::size_t n = x.size();
  return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string set = "hmma", filter, cubin_dir, arch_name = "sm_90";
  std::vector<std::string> extra_options;
  int repeat = 3;
  bool ptx = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--set") set = next();
    else if (a == "--repeat") repeat = std::max(1, std::atoi(next().c_str()));
    else if (a == "--arch") arch_name = next();
    else if (a == "--filter") filter = next();
    else if (a == "--cubin-dir") cubin_dir = next();
    else if (a == "--no-ptx") ptx = false;
    else if (a == "--option") extra_options.push_back(next());
    else {
      std::fprintf(stderr, "usage: see the header of bench/conv2d_compile_time.cpp\n");
      return 2;
    }
  }
  const cuinline::Arch arch = cuinline::Arch::parse(arch_name);
  std::vector<Conv2dVariant> variants;
  if (set == "cover") variants = cover_variants(arch);
  if (set == "seed") {
    for (bool bias : {true, false}) {
      for (const char* epilogue : {"div(2)|leaky_relu(0.01)", "div(2)"}) {
        variants.push_back(
            make_conv2d_variant(8, 128, 128, 64, 3, 3, Conv2dParams{}, bias, parse_op(epilogue)));
      }
    }
  }
  for (const Shape& s : kShapes) {
    if (set == "hmma" || set == "all") {
      for (DType dt : {DType::f16, DType::bf16}) {
        for (Conv2dLayout l : {Conv2dLayout::nchw, Conv2dLayout::nhwc}) {
          variants.push_back(variant(s, dt, l, Conv2dPrecision::fp32));
        }
      }
    }
    if (set == "tf32" || set == "all") {
      for (Conv2dPrecision p : {Conv2dPrecision::tf32, Conv2dPrecision::tf32x3}) {
        variants.push_back(variant(s, DType::f32, Conv2dLayout::nchw, p));
      }
    }
  }
  // One untimed compile first: the process's first NVRTC call loads the library.
  (void)cuinline::compile(make_request(variants.front()), arch);
  std::printf("%-96s %9s %9s %9s %6s %6s %8s\n", "variant", "cubin ms", "ptx ms", "ptxas ms", "regs", "spill",
              "cubin B");
  // The staging copy (staged f16 / bf16 variants): one shape-generic module, listed once after them.
  std::optional<cuinline::CompileRequest> stage;
  for (const Conv2dVariant& v : variants) {
    if (!stage) stage = make_stage_request(v);
  }
  struct Job {
    std::string label;
    cuinline::CompileRequest request;
  };
  std::vector<Job> jobs;
  for (const Conv2dVariant& v : variants) {
    jobs.push_back({v.name() + " " + to_string(v.precision), make_request(v)});
    // (A variant with a split-K form compiles it too: a second module, make_split_request.)
    if (std::optional<cuinline::CompileRequest> split = make_split_request(v)) {
      jobs.push_back({v.name() + " " + to_string(v.precision) + " split-K", *split});
    }
  }
  if (stage) jobs.push_back({"conv2d staging copy (every staged f16/bf16 variant, compiled once)", *stage});
  for (Job& job : jobs) {
    for (const auto& o : extra_options) job.request.options.push_back(o);
  }
  int index = 0;
  for (const Job& job : jobs) {
    const std::string& label = job.label;
    if (!filter.empty() && label.find(filter) == std::string::npos) continue;
    const cuinline::CompileRequest& request = job.request;
    cuinline::CompileRequest verbose = request;
    verbose.options.push_back("--ptxas-options=-v");
    std::vector<double> cubin, ptxv;
    cuinline::CompiledProgram program;
    for (int r = 0; r < repeat; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      program = cuinline::compile(request, arch);
      cubin.push_back(ms_since(t0));
      if (ptx) ptxv.push_back(ptx_ms(request, arch));
    }
    const cuinline::CompiledProgram report = set == "cover" ? program : cuinline::compile(verbose, arch);
    std::smatch m;
    std::string regs = "?", spill = "?";
    if (std::regex_search(report.log, m, std::regex(R"(Used (\d+) registers)"))) regs = m[1];
    if (std::regex_search(report.log, m, std::regex(R"((\d+) bytes spill stores)"))) spill = m[1];
    const double c = median(cubin), p = ptx ? median(ptxv) : 0;
    const auto [lo, hi] = std::minmax_element(cubin.begin(), cubin.end());
    std::printf("%-96s %9.0f %9.0f %9.0f %6s %6s %8zu  (cubin %.0f-%.0f, n=%d)\n", label.c_str(), c, p, ptx ? c - p : 0.0,
                regs.c_str(), spill.c_str(), program.binary.size(), *lo, *hi, repeat);
    std::fflush(stdout);
    if (!cubin_dir.empty()) {
      const std::string path = cubin_dir + "/" + std::to_string(index) + ".cubin";
      std::ofstream(path, std::ios::binary).write(program.binary.data(), static_cast<std::streamsize>(program.binary.size()));
      std::printf("  -> %s\n", path.c_str());
    }
    ++index;
  }
  return 0;
}
