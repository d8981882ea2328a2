// The floor under `cuinline compile`: a program that does nothing but NVRTC's calls (create the
// program, compile it for one arch, read the CUBIN), for bench/cli_process_times.sh to time as a
// whole process beside `cuinline compile` of the same file. Needs no GPU.
// Usage: bench_nvrtc_process FILE.cu ARCH   (e.g. sm_90; prints the CUBIN's size)
#include <nvrtc.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s FILE.cu ARCH\n", argv[0]);
    return 2;
  }
  std::ifstream file(argv[1]);
  if (!file) {
    std::fprintf(stderr, "cannot read %s\n", argv[1]);
    return 2;
  }
  std::stringstream text;
  text << file.rdbuf();
  const std::string source = text.str();
  const std::string arch = std::string("--gpu-architecture=") + argv[2];
  const char* options[] = {arch.c_str()};
  nvrtcProgram program;
  if (nvrtcCreateProgram(&program, source.c_str(), argv[1], 0, nullptr, nullptr) != NVRTC_SUCCESS) return 1;
  const nvrtcResult result = nvrtcCompileProgram(program, 1, options);
  std::size_t size = 0;
  if (result == NVRTC_SUCCESS) nvrtcGetCUBINSize(program, &size);
  std::vector<char> cubin(size);
  if (size > 0) nvrtcGetCUBIN(program, cubin.data());
  nvrtcDestroyProgram(&program);
  if (result != NVRTC_SUCCESS) {
    std::fprintf(stderr, "%s\n", nvrtcGetErrorString(result));
    return 1;
  }
  std::printf("%zu bytes of CUBIN\n", size);
  return 0;
}
