#!/usr/bin/env bash
# The f16 / bf16 conv2d GPU run (issue 19): build (Release, only the targets needed), the dtype GPU
# tests (random shapes and the issue's shapes on the tensor-core kernel against a float64
# reference), NVRTC's compile time of those variants (and tf32 / tf32x3 of the same shapes, cold:
# CUDA_CACHE_DISABLE=1), then cuinline beside PyTorch eager and torch.compile on the issue's shapes.
# Writes $OUT/conv2d_half.md, $OUT/conv2d_half_cpp.md, $OUT/conv2d_compile_time.txt and
# $OUT/conv2d_half_log.txt. About 5-7 minutes on an H100/H200:
#   OUT=/tmp/out bench/run_gpu_conv2d_half.sh            (NO_COMPILE=1: skip torch.compile)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cuinline-conv2d-half}
mkdir -p "$OUT"

main() {
  build=${CUINLINE_BUILD_DIR:-build-gpu-conv2d}
  t0=$(date +%s)
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUINLINE_BUILD_EXAMPLES=OFF \
    -DCUINLINE_WITH_REDIS=OFF >/dev/null || exit 1
  cmake --build "$build" -j"$(nproc)" --target cuinline_bench_capi bench_conv2d_half bench_conv2d_compile_time \
    test_conv2d_dtypes_gpu test_conv2d_hmma |
    tail -n 3 || exit 1
  echo "== build: $(($(date +%s) - t0)) s"
  export CUINLINE_CACHE_DIR
  CUINLINE_CACHE_DIR=$(mktemp -d)
  echo "== gpu tests"
  "$build/tests/test_conv2d_dtypes_gpu" --gtest_brief=1 2>&1 | tail -n 40
  echo "== host tests of the kernel (registers, spills)"
  "$build/tests/test_conv2d_hmma" --gtest_brief=1 2>&1 | tail -n 45
  echo "== NVRTC compile time (one process, 5 compiles a variant, the first compile not counted)"
  CUDA_CACHE_DISABLE=1 "$build/bench/bench_conv2d_compile_time" --set all --repeat 5 | tee "$OUT/conv2d_compile_time.txt"
  echo "== cuinline alone (bench_conv2d_half)"
  "$build/bench/bench_conv2d_half" | tee "$OUT/conv2d_half_cpp.md"
  echo "== cuinline beside PyTorch"
  compile_flag=""
  [ "${NO_COMPILE:-0}" = 1 ] && compile_flag="--no-compile"
  # shellcheck disable=SC2086
  python3 bench/conv2d_half_peers.py --lib "$build/bench/libcuinline_bench_capi.so" --out "$OUT/conv2d_half.md" \
    $compile_flag
  echo "== total: $(($(date +%s) - t0)) s"
}

main 2>&1 | tee "$OUT/conv2d_half_log.txt"
