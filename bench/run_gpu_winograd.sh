#!/usr/bin/env bash
# The fp32 Winograd kernel on the GPU, in one call: the tuning harness (bench/conv2d_wino_tune.cu:
# tilings of the seed, each compared bit for bit with the first; with bench/wino_prev.cuh, a renamed
# earlier copy of the template, that one first; HARNESS=0 skips it), then the library (Release): the
# fp32 conv gpu tests and the f32 dtype tests (channels-last Winograd, bit for bit against NCHW) with
# F(2x2, 3x3) (the default, products on tensor cores), its FMA products (CUINLINE_CONV2D_WINOGRAD_TC=0)
# and F(4x4, 3x3) (CUINLINE_CONV2D_WINOGRAD=4), the seed in f32 with each beside PyTorch eager (TF32
# off) and torch.compile with the L2 flushed before every timed call, graphs, misuse, no workspace,
# and the CLI.
#   OUT=/tmp/out bench/run_gpu_winograd.sh        (about 6-8 minutes on an H100/H200)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cuinline-winograd}
mkdir -p "$OUT"
build=${CUINLINE_BUILD_DIR:-build-gpu}

main() {
  t0=$(date +%s)
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  local prev=""
  [ -f bench/wino_prev.cuh ] && prev=-DWINO_PREV
  if [ "${HARNESS:-1}" = 1 ]; then  # (HARNESS=0 skips it)
    echo "== harness ($prev)"
    nvcc -O3 -std=c++17 -arch=sm_90 --fmad=false -Xptxas=-O1 $prev bench/conv2d_wino_tune.cu -o /tmp/wt_bin &&
      /tmp/wt_bin | tee "$OUT/wino_tune.txt"
  fi
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUINLINE_BUILD_EXAMPLES=OFF \
    -DCUINLINE_WITH_REDIS=OFF >/dev/null || exit 1
  cmake --build "$build" -j"$(nproc)" --target cuinline_bench_capi cuinline_cli test_conv2d_dtypes_gpu \
    test_conv2d_gpu test_graphs_gpu test_misuse_gpu test_conv2d_workspace_gpu 2>&1 | tail -n 2
  echo "== build: $(($(date +%s) - t0)) s"
  export CUINLINE_CACHE_DIR
  CUINLINE_CACHE_DIR=$(mktemp -d)
  echo "== the seed in f32 beside PyTorch (TF32 off), L2 flushed: F(2x2) (the default)"
  python3 bench/conv2d_half_peers.py --lib "$build/bench/libcuinline_bench_capi.so" --dtypes f32 --shapes seed \
    --out "$OUT/f32_seed.md" 2>&1 | tail -n 6
  echo "== the same with the F(2x2) products in fp32 FMA (CUINLINE_CONV2D_WINOGRAD_TC=0)"
  CUINLINE_CONV2D_WINOGRAD_TC=0 python3 bench/conv2d_half_peers.py --lib "$build/bench/libcuinline_bench_capi.so" \
    --dtypes f32 --shapes seed --no-compile --out "$OUT/f32_seed_fma.md" 2>&1 | tail -n 4
  echo "== the same with F(4x4) (CUINLINE_CONV2D_WINOGRAD=4)"
  CUINLINE_CONV2D_WINOGRAD=4 python3 bench/conv2d_half_peers.py --lib "$build/bench/libcuinline_bench_capi.so" \
    --dtypes f32 --shapes seed --no-compile --out "$OUT/f32_seed_f4.md" 2>&1 | tail -n 4
  echo "== gpu tests: f32 dtypes (channels-last Winograd), fp32 conv, graphs, misuse"
  "$build/tests/test_conv2d_dtypes_gpu" --gtest_brief=1 --gtest_filter='*F32*:*RandomShapes*' 2>&1 | tail -n 4
  for t in test_conv2d_gpu test_graphs_gpu test_misuse_gpu test_conv2d_workspace_gpu; do
    "$build/tests/$t" --gtest_brief=1 2>&1 | tail -n 6
  done
  echo "== cuinline run conv2d f32 (seed, CLI)"
  for layout in nchw nhwc; do
    "$build/cuinline" run conv2d --dtype f32 --layout "$layout" 2>&1 | tail -n 3
  done
  echo "== FMA products (CUINLINE_CONV2D_WINOGRAD_TC=0): f32 dtypes"
  CUINLINE_CONV2D_WINOGRAD_TC=0 "$build/tests/test_conv2d_dtypes_gpu" --gtest_brief=1 --gtest_filter='*F32*' 2>&1 | tail -n 4
  echo "== F(4x4) (CUINLINE_CONV2D_WINOGRAD=4): f32 dtypes (and, with WINO4_SUITE=1, the fp32 conv suite)"
  CUINLINE_CONV2D_WINOGRAD=4 "$build/tests/test_conv2d_dtypes_gpu" --gtest_brief=1 --gtest_filter='*F32*' 2>&1 | tail -n 4
  if [ "${WINO4_SUITE:-0}" = 1 ]; then  # (~2 minutes)
    CUINLINE_CONV2D_WINOGRAD=4 "$build/tests/test_conv2d_gpu" --gtest_brief=1 2>&1 | tail -n 12
  fi
  echo "== total: $(($(date +%s) - t0)) s"
}

main 2>&1 | tee "$OUT/winograd_log.txt"
