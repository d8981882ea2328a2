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

  targets="cuinline_bench_capi test_conv2d_gpu test_conv2d test_conv2d_mma"
  if ! cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUINLINE_BUILD_EXAMPLES=OFF \
    -DCUINLINE_BUILD_CLI=OFF >/dev/null; then
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
  echo "== total: $(($(date +%s) - t0)) s (tests rc=$tests_rc, peers rc=$peers_rc)"
  [ "$tests_rc" -eq 0 ] && [ "$peers_rc" -eq 0 ]
}

main 2>&1 | tee "$OUT/conv2d_log.txt"
exit "${PIPESTATUS[0]}"
