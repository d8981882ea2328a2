// Where an elementwise compile's time goes (no GPU needed): the first compile in this process, then
// later cold compiles (a new constant each, so neither cuinline's cache nor NVRTC's answers), each
// a miss of a memory-only KernelCache (what a cache miss costs) and split by NVRTC's --time report into front
// end, NVVM and ptxas ("PTX Translation"); with a GPU, the module load too. Per dtype: a unary chain
// mul(k)|gelu, a unary chain mul(k)|leaky_relu, and the 2-input add(in1)|mul(k)|gelu.
//
//   bench_compile_phases [--arch sm_90] [--repeat N]
// Run it as a fresh process (the first line is NVRTC's start-up in this process). Conv2d variants:
// bench_conv2d_compile_time --option --time=FILE.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuinline/cuinline.hpp>
#include <cuinline/ops.hpp>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

using cuinline::DType;

struct Phases {
  double wall = 0, front = 0, nvvm = 0, ptxas = 0, load = -1;
};

// NVRTC's --time CSV: "File name, phase name, metric, unit" rows.
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

// A cache of the memory tier only: every compile_once is a miss (a new constant), and the module it
// returns is loaded through the public API.
cuinline::KernelCache& memory_cache() {
  static cuinline::KernelCache cache([] {
    cuinline::CacheConfig c = cuinline::CacheConfig::from_environment();
    c.disk_enabled = false;
    c.remote = {};
    return c;
  }());
  return cache;
}

Phases compile_once(const cuinline::CompileRequest& base, const cuinline::Arch& arch, bool load) {
  char path[] = "/tmp/cuinline-phases-XXXXXX";
  const int fd = mkstemp(path);
  if (fd >= 0) close(fd);
  cuinline::CompileRequest request = base;
  request.options.push_back(std::string("--time=") + path);
  Phases p;
  const auto t0 = std::chrono::steady_clock::now();
  cuinline::Module module = memory_cache().get(request, arch);
  p.wall = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  read_phases(path, p);
  std::remove(path);
  if (load) {
    const auto t1 = std::chrono::steady_clock::now();
    module.load();
    p.load = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
  }
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  std::string arch_name = "sm_90";
  int repeat = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--arch") == 0) arch_name = argv[i + 1];
    if (std::strcmp(argv[i], "--repeat") == 0) repeat = std::atoi(argv[i + 1]);
  }
  const bool gpu = cuinline::device_count() > 0;
  const cuinline::Arch arch =
      gpu && arch_name == "device" ? cuinline::device_arch(0) : cuinline::Arch::parse(arch_name);
  std::printf("NVRTC %d.%d, %s, %s; ms: wall (front end / NVVM / ptxas%s)\n", cuinline::nvrtc_version().major,
              cuinline::nvrtc_version().minor, arch.name().c_str(), gpu ? "with a GPU" : "no GPU",
              gpu ? " / load" : "");
  double k = 1.0;
  auto chain = [&](const char* tail) {
    k += 1e-6;
    char buf[64];
    std::snprintf(buf, sizeof buf, "mul(%.7f)|", k);
    return cuinline::ops::parse_op(std::string(buf) + tail);
  };
  bool first = true;
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
    for (const char* tail : {"gelu", "leaky_relu(0.02)", "nary"}) {
      std::vector<Phases> runs;
      Phases first_run;
      for (int r = 0; r < repeat + (first ? 1 : 0); ++r) {
        cuinline::CompileRequest request;
        if (std::strcmp(tail, "nary") == 0) {
          cuinline::ops::Op op = cuinline::ops::parse_op("add(in1)|" + chain("gelu").describe());
          cuinline::TensorView a, b, o;
          a.dtype = b.dtype = o.dtype = dt;
          a.ndim = o.ndim = 2;
          a.shape = o.shape = {64, 4096};
          a.strides = o.strides = {4096, 1};
          b.ndim = 1;
          b.shape = {4096};
          b.strides = {1};
          // Host-only planning: disjoint 256-byte-aligned addresses (never dereferenced).
          a.data = reinterpret_cast<void*>(std::uintptr_t{1} << 30);
          b.data = reinterpret_cast<void*>(std::uintptr_t{2} << 30);
          o.data = reinterpret_cast<void*>(std::uintptr_t{3} << 30);
          request = cuinline::ops::make_request(op, {a, b}, {o});
        } else {
          request = cuinline::ops::make_request(
              cuinline::ops::Variant{chain(tail), dt, static_cast<int>(16 / cuinline::dtype_size(dt)),
                                     cuinline::ops::IndexWidth::i32, cuinline::ops::Layout::contiguous});
        }
        const Phases p = compile_once(request, arch, gpu);
        if (first) {
          first_run = p;
          first = false;
          std::printf("first compile in this process (%s %s): %.1f (%.1f / %.1f / %.1f)\n",
                      cuinline::to_string(dt), tail, p.wall, p.front, p.nvvm, p.ptxas);
          continue;
        }
        runs.push_back(p);
      }
      auto median = [&](double Phases::*m) {
        std::vector<double> v;
        for (const auto& r : runs) v.push_back(r.*m);
        std::sort(v.begin(), v.end());
        return v.empty() ? 0.0 : v[v.size() / 2];
      };
      std::printf(
          "%-5s %-22s %7.1f (%5.1f / %6.1f / %6.1f", cuinline::to_string(dt),
          std::strcmp(tail, "nary") == 0 ? "add(in1)|mul(k)|gelu" : (std::string("mul(k)|") + tail).c_str(),
          median(&Phases::wall), median(&Phases::front), median(&Phases::nvvm), median(&Phases::ptxas));
      if (gpu) std::printf(" / %5.2f", median(&Phases::load));
      std::printf(")\n");
    }
  }
  return 0;
}
