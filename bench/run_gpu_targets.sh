#!/usr/bin/env bash
# conv2d planned for other GPUs' targets (ops::Conv2dTarget), checked on this one, in one call: build
# (Release), the conv2d gpu suites planned for sm_75 and sm_86 (ctest's sm75. and sm86. runs:
# CUINLINE_CONV2D_TARGET), the default suites (dtypes, fp32 conv, shapes, graphs, misuse), the CLI
# on the seed planned for sm_75, then the f16 seed beside PyTorch eager (L2 flushed) with the
# launch's defaults for this card.
#   OUT=/tmp/out bench/run_gpu_targets.sh        (about 8-9 minutes on an H100)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cuinline-targets}
mkdir -p "$OUT"
build=${CUINLINE_BUILD_DIR:-build-gpu}

main() {
  t0=$(date +%s)
  nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUINLINE_BUILD_EXAMPLES=OFF \
    -DCUINLINE_WITH_REDIS=OFF >/dev/null || exit 1
  cmake --build "$build" -j"$(nproc)" --target cuinline_bench_capi cuinline_cli test_conv2d_gpu \
    test_conv2d_dtypes_gpu test_conv2d_shapes_gpu test_graphs_gpu test_misuse_gpu >"$OUT/build.txt" 2>&1 ||
    { tail -n 30 "$OUT/build.txt"; exit 1; }
  echo "== build: $(($(date +%s) - t0)) s"
  "$build/cuinline" info | grep -A2 "^GPUs"
  echo "== ctest: the conv2d gpu suites planned for sm_75 and sm_86"
  (cd "$build" && ctest -L gpu -R '^sm(75|86)\.' -j6 --timeout 500 >"$OUT/ctest_targets.txt" 2>&1)
  grep -E "tests passed|Failed|\*\*\*|Not Run" "$OUT/ctest_targets.txt" | head -n 20
  echo "== targets: $(($(date +%s) - t0)) s"
  export CUINLINE_CACHE_DIR CUINLINE_LOG_LEVEL=warn
  CUINLINE_CACHE_DIR=$(mktemp -d)
  echo "== default suites"
  "$build/tests/test_conv2d_dtypes_gpu" --gtest_brief=1 2>&1 | grep -E "plans for|PASSED|FAILED|Failure" | head -n 12
  for t in test_conv2d_gpu test_conv2d_shapes_gpu test_graphs_gpu test_misuse_gpu; do
    "$build/tests/$t" --gtest_brief=1 2>&1 | grep -E "PASSED|FAILED|Failure" | head -n 6
  done
  echo "== suites: $(($(date +%s) - t0)) s"
  echo "== cuinline run conv2d planned for sm_75 (f32, f16 NCHW, bf16 channels-last)"
  CUINLINE_CONV2D_TARGET=sm_75 "$build/cuinline" run conv2d --dtype f32 2>&1 | tail -n 3
  CUINLINE_CONV2D_TARGET=sm_75 "$build/cuinline" run conv2d --dtype f16 2>&1 | tail -n 3
  CUINLINE_CONV2D_TARGET=sm_75 "$build/cuinline" run conv2d --dtype bf16 --layout nhwc 2>&1 | tail -n 3
  echo "== the f16 seed (defaults) and sm_86's plan beside PyTorch eager, L2 flushed"
  python3 bench/conv2d_half_peers.py --lib "$build/bench/libcuinline_bench_capi.so" --dtypes f16 --shapes seed \
    --no-compile --out "$OUT/f16_seed.md" 2>&1 | tail -n 3
  CUINLINE_CONV2D_TARGET=sm_86 python3 bench/conv2d_half_peers.py --lib "$build/bench/libcuinline_bench_capi.so" \
    --dtypes f16,f32 --shapes seed --no-compile --out "$OUT/seed_sm86.md" 2>&1 | tail -n 5
  echo "== total: $(($(date +%s) - t0)) s"
}

main 2>&1 | tee "$OUT/targets_log.txt"
