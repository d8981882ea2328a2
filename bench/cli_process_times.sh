#!/usr/bin/env bash
# Whole-process times of the cuinline command on this host: `compile` of a 4-line kernel for an
# explicit arch (no driver touched; NVRTC's start-up included) beside a program of NVRTC's calls
# alone compiling the same file (bench_nvrtc_process), `info`, and `warm` of the seed spec
# into an empty cache with 16 and 4 workers (CUDA_CACHE_DISABLE=1: no driver compute cache).
# Usage: bench/cli_process_times.sh [BUILD_DIR]   (default build-gpu; prints seconds a run)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
build=${1:-build-gpu}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '__global__ void saxpy(float a, const float* x, float* y, int n) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = a * x[i] + y[i];\n}\n' >"$work/saxpy.cu"
TIMEFORMAT=%R
echo "cuinline compile saxpy.cu --arch sm_90, a fresh process each (s):"
for _ in 1 2 3 4 5; do
  { time CUDA_CACHE_DISABLE=1 "$build/cuinline" compile "$work/saxpy.cu" --arch sm_90 -o "$work/saxpy.cubin" >/dev/null; } 2>&1
done | tr '\n' ' '
echo
# The floor: a program of NVRTC's calls alone compiling the same file (bench/nvrtc_process.cpp).
echo "bench_nvrtc_process saxpy.cu sm_90, a fresh process each (s):"
for _ in 1 2 3 4 5; do
  { time "$build/bench/bench_nvrtc_process" "$work/saxpy.cu" sm_90 >/dev/null; } 2>&1
done | tr '\n' ' '
echo
echo "cuinline info (s):"
for _ in 1 2 3; do { time "$build/cuinline" info >/dev/null; } 2>&1; done | tr '\n' ' '
echo
for j in 16 4; do
  echo "cuinline warm examples/specs/seeds.json -j$j, an empty cache each (s):"
  for i in 1 2 3; do
    { time CUDA_CACHE_DISABLE=1 "$build/cuinline" warm --spec examples/specs/seeds.json --arch sm_90 -j"$j" --no-progress \
        --cache-dir "$work/cache-$j-$i" >"$work/warm.txt" 2>&1; } 2>&1
  done | tr '\n' ' '
  echo
  tail -n 2 "$work/warm.txt"
done
