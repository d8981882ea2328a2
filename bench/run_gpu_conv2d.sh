#!/usr/bin/env bash
# The conv2d GPU run: build (Release, only the targets needed), the GPU tests, then the peer
# benchmark. Writes $OUT/conv2d.md (tables), $OUT/conv2d_sweep.png (plot), $OUT/conv2d_log.txt.
# About 2-3 minutes on an H100/H200:  OUT=/tmp/out bench/run_gpu_conv2d.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cuinline-conv2d}
mkdir -p "$OUT"

main() {
  build=${CUINLINE_BUILD_DIR:-build-gpu-conv2d}
  t0=$(date +%s)
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader

  targets="cuinline_bench_capi cuinline_cli test_conv2d_gpu test_conv2d test_conv2d_mma"
  if ! cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUINLINE_BUILD_EXAMPLES=OFF >/dev/null; then
    echo "== configure with tests failed (GoogleTest missing?): building the benchmark library only"
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUINLINE_BUILD_EXAMPLES=OFF -DCUINLINE_BUILD_CLI=OFF \
      -DCUINLINE_BUILD_TESTS=OFF >/dev/null || exit 1
    targets="cuinline_bench_capi"
  fi
  # shellcheck disable=SC2086
  cmake --build "$build" -j"$(nproc)" --target $targets | tail -n 3 || exit 1
  echo "== build: $(($(date +%s) - t0)) s"

  export CUINLINE_CACHE_DIR
  CUINLINE_CACHE_DIR=$(mktemp -d)
  # Where a driver is present NVRTC (CUDA 12.9+) looks compiled programs up in the driver's compute
  # cache (~/.nv/ComputeCache): a program compiled before on this machine then "compiles" in 15-40 ms.
  # Every NVRTC time below is a cold compile.
  export CUDA_CACHE_DISABLE=1
  if [ -x "$build/cuinline" ]; then
    # Cold NVRTC time of every sweep variant in all three precisions (one process, one worker; the
    # first compile also loads NVRTC).
    echo "== NVRTC compile times (cuinline warm, sm_90, no caches)"
    "$build/cuinline" warm --spec bench/conv2d_compile_spec.json --arch sm_90 -j1 --no-progress \
      --cache-dir "$(mktemp -d)" >"$OUT/conv2d_compile.txt" 2>&1
    python3 - "$OUT/conv2d_compile.txt" <<'PY'
import re, statistics, sys
times = {"fp32": [], "tf32": [], "tf32x3": []}
lines = open(sys.argv[1]).read().splitlines()
for i, line in enumerate(lines):
    m = re.search(r"compiled (conv2d<[^>]*>)\S* sm_\d+ \((\d+) ms\)", line)
    if m and i > 1:  # the first compile of the process also loads NVRTC
        mode = "tf32x3" if ",tf32x3>" in m.group(1) else "tf32" if ",tf32>" in m.group(1) else "fp32"
        times[mode].append(int(m.group(2)))
for mode, t in times.items():
    if t:
        print(f"  {mode}: {len(t)} variants, median {statistics.median(t):.0f} ms, max {max(t)} ms, min {min(t)} ms")
print("  " + lines[-2] if len(lines) > 1 else "")
PY
  fi
  tests_rc=0
  if [ -x "$build/tests/test_conv2d_gpu" ]; then
    # First, on an otherwise idle machine: the NVRTC times of 7 variants (first one loads NVRTC).
    echo "== host test: offline compiles for sm_90 (NVRTC times)"
    "$build/tests/test_conv2d" --gtest_filter='Conv2dCompile.*' --gtest_brief=1 | grep -E "NVRTC|PASSED|FAILED"
    "$build/tests/test_conv2d_mma" --gtest_filter='Conv2dMma.ShapesCompile*' --gtest_brief=1 | grep -E "NVRTC|PASSED|FAILED"
    echo "== GPU tests (CPU reference, double accumulation)"
    "$build/tests/test_conv2d_gpu" --gtest_brief=1
    tests_rc=$?
  fi
  echo "== peers: $(($(date +%s) - t0)) s"
  python3 bench/conv2d_peers.py --lib "$build/bench/libcuinline_bench_capi.so" --out "$OUT/conv2d.md" \
    --plot "$OUT/conv2d_sweep.png"
  peers_rc=$?
  # The 3 x 3 stride-1 sweep shapes again with the direct FMA kernel (Winograd off): the fp32
  # algorithm comparison, same machine, same run.
  echo "== direct FMA kernel on the Winograd shapes (CUINLINE_CONV2D_WINOGRAD=0)"
  CUINLINE_CONV2D_WINOGRAD=0 python3 bench/conv2d_peers.py --lib "$build/bench/libcuinline_bench_capi.so" \
    --out "$OUT/conv2d_direct.md" --shapes 0,15 --no-compile || peers_rc=1
  echo "== total: $(($(date +%s) - t0)) s (tests rc=$tests_rc, peers rc=$peers_rc)"
  [ "$tests_rc" -eq 0 ] && [ "$peers_rc" -eq 0 ]
}

main 2>&1 | tee "$OUT/conv2d_log.txt"
exit "${PIPESTATUS[0]}"
