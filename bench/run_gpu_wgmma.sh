#!/usr/bin/env bash
# The wgmma (sm_90a) conv2d main loop on the GPU: build, the f16/bf16 conv gpu tests (default and
# every stageable variant staged), graphs and misuse, compute-sanitizer on the issue shapes, then
# cuinline's f16/bf16 conv with wgmma (default) and without (CUINLINE_CONV2D_WGMMA=0, the mma.sync
# tilings), and a tiling sweep: TILES="shape:wm,wn,mt,nt,bk,minb:depth ..." (CUINLINE_CONV2D_HMMA_TILE
# and CUINLINE_CONV2D_HMMA_PIPE; "shape:default" = the planner's).
#   OUT=/tmp/out bench/run_gpu_wgmma.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cuinline-wgmma}
mkdir -p "$OUT"
build=${CUINLINE_BUILD_DIR:-build-gpu}

main() {
  t0=$(date +%s)
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUINLINE_BUILD_EXAMPLES=OFF \
    -DCUINLINE_WITH_REDIS=OFF >/dev/null || exit 1
  cmake --build "$build" -j"$(nproc)" --target bench_conv2d_half test_conv2d_dtypes_gpu test_graphs_gpu \
    test_misuse_gpu test_conv2d_gpu 2>&1 | tail -n 2
  echo "== build: $(($(date +%s) - t0)) s"
  export CUINLINE_CACHE_DIR
  CUINLINE_CACHE_DIR=$(mktemp -d)
  if [ "${NO_TESTS:-0}" != 1 ]; then
    echo "== gpu tests"
    for t in test_conv2d_dtypes_gpu test_graphs_gpu test_misuse_gpu; do
      timeout 300 "$build/tests/$t" --gtest_brief=1 2>&1 | tail -n 30
    done
    echo "== test_conv2d_dtypes_gpu with CUINLINE_CONV2D_STAGE=1"
    CUINLINE_CONV2D_STAGE=1 timeout 300 "$build/tests/test_conv2d_dtypes_gpu" --gtest_brief=1 2>&1 | tail -n 30
  fi
  if [ "${SANITIZE:-0}" = 1 ]; then
    echo "== compute-sanitizer memcheck / racecheck: the issue shapes"
    for tool in memcheck racecheck; do
      timeout 240 compute-sanitizer --tool $tool --report-api-errors no \
        "$build/tests/test_conv2d_dtypes_gpu" --gtest_filter='*IssueShapes*' --gtest_brief=1 2>&1 | tail -n 8
    done
  fi
  echo "== cuinline: wgmma (default) / the mma.sync tilings (CUINLINE_CONV2D_WGMMA=0)"
  timeout 200 "$build/bench/bench_conv2d_half" | tee "$OUT/conv2d_half_wgmma.md"
  CUINLINE_CONV2D_WGMMA=0 timeout 200 "$build/bench/bench_conv2d_half" | tee "$OUT/conv2d_half_mma.md"
  echo "== sweep"
  for item in ${TILES:-}; do
    shape=${item%%:*}
    rest=${item#*:}
    tile=${rest%%:*}
    depth=${rest#*:}
    [ "$depth" = "$rest" ] && depth=0
    if [ "$tile" = default ]; then unset CUINLINE_CONV2D_HMMA_TILE; else export CUINLINE_CONV2D_HMMA_TILE=$tile; fi
    export CUINLINE_CONV2D_HMMA_PIPE="$depth,0"
    CONV_BENCH_SHAPE=$shape CONV_BENCH_DTYPE=f16 timeout 60 "$build/bench/bench_conv2d_half" 2>&1 |
      grep -E '^\| [a-z]|rror|what' | grep -v '^| shape' | sed "s/^/$tile d$depth /" | tee -a "$OUT/sweep.txt"
    unset CUINLINE_CONV2D_HMMA_TILE CUINLINE_CONV2D_HMMA_PIPE
  done
  echo "== total: $(($(date +%s) - t0)) s"
}

main 2>&1 | tee "$OUT/wgmma_log.txt"
