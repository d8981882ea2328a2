#!/usr/bin/env bash
# The wgmma (sm_90a) conv2d main loop on the GPU: build, the f16/bf16 conv gpu tests (default and
# every stageable variant staged), graphs and misuse, compute-sanitizer on the issue shapes, then
# cuinline's f16/bf16 conv with wgmma (default) and without (CUINLINE_CONV2D_WGMMA=0, the mma.sync
# tilings), and a tiling sweep: TILES="shape:wm,wn,mt,nt,bk,minb:depth ..." (CUINLINE_CONV2D_HMMA_TILE
# and CUINLINE_CONV2D_HMMA_PIPE; "shape:default" = the planner's); NCU="seed:nhwc unet:nchw ..." also
# profiles those shapes' f16 kernels (ncu, one launch after warm-up: the conv and the staging copy);
# COMPILE=1 also times NVRTC on this host (bench_conv2d_compile_time --set all); AB="NAME=VALUE ..."
# also times cuinline with each of those environment settings (e.g. CUINLINE_CONV2D_HALO=0).
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
    test_misuse_gpu test_conv2d_gpu bench_conv2d_compile_time 2>&1 | tail -n 2
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
        "$build/tests/test_conv2d_dtypes_gpu" --gtest_filter='*IssueShapes*:*Halo*' --gtest_brief=1 2>&1 | tail -n 8
    done
  fi
  echo "== cuinline: wgmma (default) / the mma.sync tilings (CUINLINE_CONV2D_WGMMA=0)"
  timeout 200 "$build/bench/bench_conv2d_half" | tee "$OUT/conv2d_half_wgmma.md"
  CUINLINE_CONV2D_WGMMA=0 timeout 200 "$build/bench/bench_conv2d_half" | tee "$OUT/conv2d_half_mma.md"
  for setting in ${AB:-}; do
    echo "== cuinline with $setting"
    env "$setting" timeout 200 "$build/bench/bench_conv2d_half" | tee "$OUT/conv2d_half_${setting%%=*}.md"
  done
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
  for item in ${NCU:-}; do
    echo "== ncu $item (f16)"
    CONV_BENCH_SHAPE=${item%%:*} CONV_BENCH_LAYOUT=${item#*:} CONV_BENCH_DTYPE=f16 timeout 240 ncu --clock-control none \
      --kernel-name regex:cuinline_conv2d --launch-skip 10 --launch-count 2 --section SpeedOfLight --section Occupancy \
      --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats --section LaunchStats \
      --section ComputeWorkloadAnalysis "$build/bench/bench_conv2d_half" >"$OUT/ncu_${item/:/_}.txt" 2>&1
    grep -E "cuinline_conv2d|Duration|Throughput|Achieved Occupancy|Theoretical Occupancy|Eligible|Issued Warp|Registers|Block Limit|Stall|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth" \
      "$OUT/ncu_${item/:/_}.txt" | head -n 60
  done
  if [ "${COMPILE:-0}" = 1 ]; then
    echo "== NVRTC compile times on this host (cold, median of 5)"
    CUDA_CACHE_DISABLE=1 "$build/bench/bench_conv2d_compile_time" --set all --repeat 5 | tee "$OUT/conv2d_compile_time.txt"
  fi
  echo "== total: $(($(date +%s) - t0)) s"
}

main 2>&1 | tee "$OUT/wgmma_log.txt"
