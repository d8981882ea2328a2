// cuinline bench --compile: where a compile's time goes, per op family and dtype. Each row's variant
// is compiled `repeat` times, a new constant each time (so neither cuinline's cache nor NVRTC's
// answers), through a KernelCache of the memory tier only (what a cache miss costs), each compile
// split by NVRTC's --time report into front end, NVVM and ptxas ("PTX Translation"); with a GPU, the
// module load too. The process's first compile (NVRTC's start-up included) is its own line. Needs
// no GPU: --arch names the target.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cuinline/conv2d.hpp>
#include <cuinline/driver.hpp>
#include <cuinline/error.hpp>
#include <cuinline/kernel_cache.hpp>
#include <cuinline/ops.hpp>
#include <cuinline/reductions.hpp>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.hpp"

namespace cuinline::cli {
namespace {

struct Phases {
  double wall = 0, front = 0, nvvm = 0, ptxas = 0, load = -1;
};

// NVRTC's --time CSV: "file name, phase name, metric, unit" rows.
void read_phases(const std::string& path, Phases& p) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> cols;
    std::stringstream ss(line);
    std::string c;
    while (std::getline(ss, c, ',')) cols.push_back(c);
    if (cols.size() < 3) continue;
    const double v = std::atof(cols[2].c_str());
    if (cols[1].find("Frontend") != std::string::npos) p.front += v;
    if (cols[1].find("NVVM") != std::string::npos) p.nvvm += v;
    if (cols[1].find("PTX") != std::string::npos) p.ptxas += v;
  }
}

// A miss of a memory-only KernelCache (a new constant each call), timed, with NVRTC's phases; the
// module loaded where a GPU is.
Phases compile_once(KernelCache& cache, CompileRequest request, const Arch& arch, bool load) {
  char path[] = "/tmp/cuinline-phases-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) throw Error("bench --compile: cannot create a temporary file for NVRTC's --time report");
  close(fd);
  request.options.push_back(std::string("--time=") + path);
  Phases p;
  try {
    const auto t0 = std::chrono::steady_clock::now();
    Module module = cache.get(request, arch);
    p.wall = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    read_phases(path, p);
    if (load) {
      const auto t1 = std::chrono::steady_clock::now();
      module.load();
      p.load = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
    }
  } catch (...) {
    std::remove(path);
    throw;
  }
  std::remove(path);
  return p;
}

// One row: a family, a label, a dtype and the request for constant k.
struct Row {
  const char* family;
  std::string label;
  DType dtype;
  std::function<CompileRequest(double)> request;
};

void* fake(std::uintptr_t at) {
  return reinterpret_cast<void*>(at);
}

// [n, c, h, w] channels-last (fake, 256-byte-aligned addresses: planned, never dereferenced).
TensorView nhwc(std::uintptr_t at, DType dt, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) {
  return TensorView::strided(fake(at), dt, {n, c, h, w}, {h * w * c, 1, w * c, c});
}

std::string mul(double k) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "mul(%.9g)", k);
  return buf;
}

std::vector<Row> rows_of(const std::vector<std::string>& families, const Arch& arch) {
  std::vector<Row> rows;
  const auto wanted = [&](const char* f) { return std::find(families.begin(), families.end(), f) != families.end(); };
  if (wanted("elementwise")) {
    for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
      for (const char* tail : {"gelu", "leaky_relu(0.02)"}) {
        rows.push_back({"elementwise", std::string("mul(k)|") + tail, dt, [dt, tail](double k) {
                          return ops::make_request(ops::Variant{ops::parse_op(mul(k) + "|" + tail), dt,
                                                                static_cast<int>(16 / dtype_size(dt)),
                                                                ops::IndexWidth::i32, ops::Layout::contiguous});
                        }});
      }
    }
  }
  if (wanted("nary")) {
    for (DType dt : {DType::f32, DType::bf16}) {
      rows.push_back({"nary", "add(in1)|mul(k)|gelu, in1 a row", dt, [dt](double k) {
                        const TensorView a = TensorView::contiguous(fake(1ull << 30), dt, {64, 4096});
                        const TensorView b = TensorView::contiguous(fake(2ull << 30), dt, {4096});
                        const TensorView o = TensorView::contiguous(fake(3ull << 30), dt, {64, 4096});
                        return ops::make_request(ops::parse_op("add(in1)|" + mul(k) + "|gelu"), {a, b}, {o});
                      }});
    }
    // The same chain on 2^25 bf16 elements: the table form's module (docs/ops-families.md).
    rows.push_back(
        {"nary", "add(in1)|mul(k)|gelu, in1 a row, 8192 x 4096: the table form", DType::bf16, [](double k) {
           const TensorView a = TensorView::contiguous(fake(1ull << 40), DType::bf16, {8192, 4096});
           const TensorView b = TensorView::contiguous(fake(2ull << 40), DType::bf16, {4096});
           const TensorView o = TensorView::contiguous(fake(3ull << 40), DType::bf16, {8192, 4096});
           return ops::make_request(ops::parse_op("add(in1)|" + mul(k) + "|gelu"), {a, b}, {o});
         }});
  }
  if (wanted("conv2d")) {
    rows.push_back({"conv2d", "2x12x50^2 -> 20, 3x3, + mul(k)|leaky_relu", DType::f32, [arch](double k) {
                      const TensorView x = TensorView::contiguous(fake(1ull << 30), DType::f32, {2, 12, 50, 50});
                      const TensorView w = TensorView::contiguous(fake(2ull << 30), DType::f32, {20, 12, 3, 3});
                      const TensorView y = TensorView::contiguous(fake(3ull << 30), DType::f32, {2, 20, 48, 48});
                      const ops::Conv2dVariant v =
                          ops::conv2d_variant_for(x, w, TensorView{}, y, ops::Conv2dParams{},
                                                  ops::parse_op(mul(k) + "|leaky_relu(0.01)"));
                      return ops::make_request(ops::conv2d_variant_for_arch(v, arch));
                    }});
    // The seed's conv (examples/specs/seeds.json): Winograd F(2x2, 3x3), the long pole of `warm` on the
    // seeds.
    rows.push_back(
        {"conv2d", "seed 128x8x128^2 -> 64, 3x3, + mul(k)|leaky_relu", DType::f32, [arch](double k) {
           const TensorView x = TensorView::contiguous(fake(1ull << 30), DType::f32, {128, 8, 128, 128});
           const TensorView w = TensorView::contiguous(fake(2ull << 30), DType::f32, {64, 8, 3, 3});
           const TensorView y = TensorView::contiguous(fake(3ull << 30), DType::f32, {128, 64, 126, 126});
           const ops::Conv2dVariant v = ops::conv2d_variant_for(x, w, TensorView{}, y, ops::Conv2dParams{},
                                                                ops::parse_op(mul(k) + "|leaky_relu(0.01)"));
           return ops::make_request(ops::conv2d_variant_for_arch(v, arch));
         }});
    for (DType dt : {DType::f16, DType::bf16}) {
      rows.push_back({"conv2d", "8x64x40^2 -> 96, 3x3, channels-last, + mul(k)|relu", dt, [arch, dt](double k) {
                        const ops::Conv2dVariant v = ops::conv2d_variant_for(
                            nhwc(1ull << 30, dt, 8, 64, 40, 40), nhwc(2ull << 30, dt, 96, 64, 3, 3), TensorView{},
                            nhwc(3ull << 30, dt, 8, 96, 38, 38), ops::Conv2dParams{}, ops::parse_op(mul(k) + "|relu"));
                        return ops::make_request(ops::conv2d_variant_for_arch(v, arch));
                      }});
    }
  }
  if (wanted("reductions")) {
    // rms_norm over 64 rows of n with the prologue mul(k): the planned variant, or its split form's.
    const auto rms_norm = [](DType dt, std::int64_t n, double k) {
      const TensorView x = TensorView::contiguous(fake(1ull << 30), dt, {64, n});
      const TensorView y = TensorView::contiguous(fake(2ull << 30), dt, {64, n});
      const TensorView w = TensorView::contiguous(fake(3ull << 30), dt, {n});
      ops::RowFusion fusion;
      fusion.prologue = ops::parse_op(mul(k));
      return ops::plan_rows(ops::RowOp::rms_norm, x, y, w, TensorView{}, TensorView{}, 1e-6, fusion);
    };
    for (DType dt : {DType::f32, DType::bf16}) {
      rows.push_back({"reductions", "rms_norm, rows of 4096, prologue mul(k)", dt,
                      [=](double k) { return ops::make_request(rms_norm(dt, 4096, k).variant); }});
      // The cluster form (one kernel; where it does not apply, split_stats and split_write).
      rows.push_back({"reductions", "rms_norm, rows of 65536 (cluster), prologue mul(k)", dt,
                      [=](double k) { return ops::make_request(rms_norm(dt, 65536, k).variant); }});
      rows.push_back({"reductions", "rms_norm, rows of 65536 (split_stats), prologue mul(k)", dt,
                      [=](double k) { return ops::make_request(rms_norm(dt, 65536, k).split); }});
    }
  }
  return rows;
}

void print(const char* what, const Phases& p) {
  std::printf("%-64s %8.1f  (%5.1f / %6.1f / %6.1f", what, p.wall, p.front, p.nvvm, p.ptxas);
  if (p.load >= 0) std::printf(" / %5.2f", p.load);
  std::printf(")\n");
}

}  // namespace

int run_bench_compile(const BenchOptions& options) {
  std::vector<std::string> families;
  std::stringstream list(options.families);
  for (std::string f; std::getline(list, f, ',');) {
    if (f != "elementwise" && f != "nary" && f != "conv2d" && f != "reductions") {
      throw InvalidArgument("--family '" + f + "': the families are elementwise, nary, conv2d and reductions");
    }
    families.push_back(f);
  }
  if (families.empty()) throw InvalidArgument("--family: name at least one of elementwise, nary, conv2d, reductions");
  const bool gpu = device_count() > 0;
  Arch arch;
  if (!options.arch.empty()) {
    try {
      arch = Arch::parse(options.arch);
    } catch (const std::exception& e) {
      throw InvalidArgument(std::string("--arch: ") + e.what());
    }
  } else if (gpu) {
    arch = device_arch(options.device);
  } else {
    throw InvalidArgument("no GPU to take the architecture from; pass --arch, e.g. --arch sm_90");
  }
  const bool load = gpu && arch == device_arch(options.device);
  if (load) set_device(options.device);
  std::vector<Row> rows = rows_of(families, arch);

  CacheConfig config = CacheConfig::from_environment();
  config.disk_enabled = false;
  config.read_only_directories.clear();
  config.remote = {};
  KernelCache cache(config);
  std::printf("NVRTC %d.%d, %s, %s; a new constant each compile; ms: wall (front end / NVVM / ptxas%s), median "
              "of %d\n",
              nvrtc_version().major, nvrtc_version().minor, arch.name().c_str(), gpu ? "a GPU" : "no GPU",
              load ? " / load" : "", options.repeat);
  double k = 1.0;
  bool first = true;
  for (const Row& row : rows) {
    std::vector<Phases> runs;
    const int compiles = options.repeat + (first ? 1 : 0);
    for (int r = 0; r < compiles; ++r) {
      k += 1e-6;
      const Phases p = compile_once(cache, row.request(k), arch, load);
      if (first) {
        first = false;
        print(("first compile in this process (" + std::string(row.family) + " " + to_string(row.dtype) + ")").c_str(),
              p);
        continue;
      }
      runs.push_back(p);
    }
    const auto median = [&](double Phases::*m) {
      std::vector<double> v;
      for (const Phases& p : runs) v.push_back(p.*m);
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    Phases m;
    m.wall = median(&Phases::wall);
    m.front = median(&Phases::front);
    m.nvvm = median(&Phases::nvvm);
    m.ptxas = median(&Phases::ptxas);
    m.load = load ? median(&Phases::load) : -1;
    print((std::string(row.family) + " " + to_string(row.dtype) + " " + row.label).c_str(), m);
  }
  return 0;
}

}  // namespace cuinline::cli
