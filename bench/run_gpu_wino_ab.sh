#!/usr/bin/env bash
# The seed's F(2x2) Winograd forms A/B on this GPU, in one call: the tuning harness (every variant of
# bench/conv2d_wino_tune.cu, or only those in HARNESS="0 3 ..."; TUNE_FLUSH=1 flushes the L2 before each
# timed launch), the fp32 conv gpu tests with the library's defaults, then the library on the seed
# through bench/conv2d_half_peers.py (L2 flushed), PyTorch eager in the same run, for each setting in
# CONFIGS (space-separated; each a comma-separated list of environment assignments, "-" for none),
# alternating over ROUNDS rounds.
# TESTS=0 skips the tests.
#   OUT=/tmp/out CONFIGS="- CUINLINE_CONV2D_WINOGRAD_TC=0" bench/run_gpu_wino_ab.sh   (4-6 minutes)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cuinline-wino-ab}
mkdir -p "$OUT"
build=${CUINLINE_BUILD_DIR:-build-gpu}
rounds=${ROUNDS:-2}
configs=${CONFIGS:--}

main() {
  t0=$(date +%s)
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  (cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUINLINE_BUILD_EXAMPLES=OFF \
    -DCUINLINE_WITH_REDIS=OFF >/dev/null && cmake --build "$build" -j12 --target cuinline_bench_capi \
    test_conv2d_gpu test_conv2d_dtypes_gpu test_graphs_gpu >"$OUT/build.txt" 2>&1) &
  local build_pid=$!
  nvcc -O3 -std=c++17 -arch=sm_90 --fmad=false -Xptxas=-O1 bench/conv2d_wino_tune.cu -o /tmp/wt_bin || exit 1
  if [ -n "${HARNESS:-}" ]; then
    for v in $HARNESS; do /tmp/wt_bin "$v" | tail -n 1; done | tee "$OUT/wino_tune.txt"
  else
    /tmp/wt_bin | tee "$OUT/wino_tune.txt"
  fi
  wait "$build_pid" || { tail -n 30 "$OUT/build.txt"; exit 1; }
  echo "== build done: $(($(date +%s) - t0)) s"
  export CUINLINE_CACHE_DIR
  CUINLINE_CACHE_DIR=$(mktemp -d)
  if [ "${TESTS:-1}" = 1 ]; then
    echo "== gpu tests (library defaults)"
    "$build/tests/test_conv2d_dtypes_gpu" --gtest_brief=1 --gtest_filter='*F32*:*RandomShapes*' 2>&1 | tail -n 6
    for t in test_conv2d_gpu test_graphs_gpu; do "$build/tests/$t" --gtest_brief=1 2>&1 | tail -n 8; done
    echo "== tests: $(($(date +%s) - t0)) s"
  fi
  for r in $(seq "$rounds"); do
    for c in $configs; do
      echo "== library, round $r: $c"
      local envs=()
      [ "$c" != - ] && IFS=, read -r -a envs <<<"$c"
      env "${envs[@]}" python3 bench/conv2d_half_peers.py \
        --lib "$build/bench/libcuinline_bench_capi.so" --dtypes f32 --shapes seed --no-compile \
        --out "$OUT/seed_r${r}_$(echo "$c" | tr -c 'A-Za-z0-9_\n' _).md" 2>&1 | tail -n 2
    done
  done
  echo "== total: $(($(date +%s) - t0)) s"
}

main 2>&1 | tee "$OUT/wino_ab_log.txt"
