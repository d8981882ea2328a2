#!/usr/bin/env bash
# The issue-19 figures on an H200 (or whichever card comes) with the current defaults, in one call:
# build (Release), the fp32 seed beside PyTorch eager (TF32 off) and torch.compile, the fp32 Winograd
# tuning overrides A/B (F32_CONFIGS), the f16/bf16 seed and ResNet-/UNet-like shapes beside eager and
# torch.compile, the f16 halo-rows override A/B (HALF_CONFIGS), all with the L2 flushed before each timed
# call; then, where the machine has two GPUs and time is left, bench/run_gpu_two_gpus.sh's tests
# (SUITES=0 there: the second GPU, misuse, workspace, the C API from PyTorch).
#   OUT=/tmp/out bench/run_gpu_h200.sh        (about 8-9 minutes on an H200)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cuinline-h200}
mkdir -p "$OUT"
build=${CUINLINE_BUILD_DIR:-build-gpu}
f32_configs=${F32_CONFIGS:-"CUINLINE_CONV2D_WINOGRAD_WARPS=4,CUINLINE_CONV2D_WINOGRAD_ROWS=8 CUINLINE_CONV2D_WINOGRAD_ROWS=8 CUINLINE_CONV2D_WINOGRAD_ROWS=2 -"}
half_configs=${HALF_CONFIGS:-"CUINLINE_CONV2D_HALO_ROWS=4 CUINLINE_CONV2D_HALO_ROWS=8 -"}

peers() {  # peers ENVS ARGS... (ENVS: a comma-separated list of assignments, or -)
  local c=$1 envs=()
  shift
  [ "$c" != - ] && IFS=, read -r -a envs <<<"$c"
  env "${envs[@]}" python3 bench/conv2d_half_peers.py --lib "$build/bench/libcuinline_bench_capi.so" "$@"
}

main() {
  t0=$(date +%s)
  nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv,noheader
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUINLINE_BUILD_EXAMPLES=OFF \
    -DCUINLINE_WITH_REDIS=OFF >/dev/null || exit 1
  cmake --build "$build" -j"$(nproc)" --target cuinline_bench_capi >"$OUT/build.txt" 2>&1 ||
    { tail -n 30 "$OUT/build.txt"; exit 1; }
  echo "== build: $(($(date +%s) - t0)) s"
  export CUINLINE_CACHE_DIR
  CUINLINE_CACHE_DIR=$(mktemp -d)
  echo "== fp32 seed (defaults) beside PyTorch (TF32 off) and torch.compile"
  peers - --dtypes f32 --shapes seed --out "$OUT/f32_seed.md" 2>&1 | tail -n 4
  for c in $f32_configs; do
    echo "== fp32 seed: $c"
    peers "$c" --dtypes f32 --shapes seed --no-compile --out "$OUT/f32_$(echo "$c" | tr -c 'A-Za-z0-9_\n' _).md" \
      2>&1 | tail -n 2
  done
  echo "== f16/bf16: seed, ResNet-like, UNet-like (defaults) beside PyTorch eager and torch.compile"
  peers - --out "$OUT/half.md" 2>&1 | tail -n 16
  for c in $half_configs; do
    echo "== f16 seed: $c"
    peers "$c" --dtypes f16 --shapes seed --no-compile --out "$OUT/f16_$(echo "$c" | tr -c 'A-Za-z0-9_\n' _).md" \
      2>&1 | tail -n 3
  done
  echo "== figures: $(($(date +%s) - t0)) s"
  if [ "$(nvidia-smi -L | wc -l)" -ge 2 ] && [ $(($(date +%s) - t0)) -lt "${SUITE_DEADLINE:-330}" ]; then
    SUITES=0 OUT="$OUT/two" bench/run_gpu_two_gpus.sh
  fi
  echo "== total: $(($(date +%s) - t0)) s"
}

main 2>&1 | tee "$OUT/h200_log.txt"
