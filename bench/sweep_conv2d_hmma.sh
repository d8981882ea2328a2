#!/usr/bin/env bash
# Tuning sweep of the f16/bf16 tensor-core conv2d's block tiling (issue 19): builds bench_conv2d_half,
# then times each shape with each candidate tiling (CUINLINE_CONV2D_HMMA_TILE="wm,wn,mt,nt,bk,min_blocks",
# one process each; "default" = the planner's). OUT=/tmp/x bench/sweep_conv2d_hmma.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cuinline-hmma-sweep}
mkdir -p "$OUT"
build=${CUINLINE_BUILD_DIR:-build-gpu-conv2d}
DT=${CONV_BENCH_DTYPE:-f16}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUINLINE_BUILD_EXAMPLES=OFF \
  -DCUINLINE_WITH_REDIS=OFF >/dev/null || exit 1
cmake --build "$build" -j"$(nproc)" --target bench_conv2d_half | tail -n 1 || exit 1
export CUINLINE_CACHE_DIR
CUINLINE_CACHE_DIR=$(mktemp -d)
sweep() {
  local shape=$1
  shift
  for t in "$@"; do
    if [ "$t" = default ]; then unset CUINLINE_CONV2D_HMMA_TILE; else export CUINLINE_CONV2D_HMMA_TILE=$t; fi
    CONV_BENCH_SHAPE=$shape CONV_BENCH_DTYPE=$DT timeout 60 "$build/bench/bench_conv2d_half" 2>&1 |
      grep -E '^\| [a-z]|rror|what' | grep -v '^| shape' | sed "s/^/$t /" | tee -a "$OUT/sweep.txt"
  done
  unset CUINLINE_CONV2D_HMMA_TILE
}
sweep "${SHAPE1:-unet}" ${UNET_TILES:-default 4,2,2,4,64,2 4,2,2,4,32,2 2,4,2,4,32,2 4,2,2,8,32,1 4,4,2,4,32,1 2,4,4,4,16,1 2,4,4,4,64,1 4,2,4,4,32,1}
sweep resnet ${RESNET_TILES:-default 4,2,2,4,32,2 4,2,2,4,32,3 2,2,4,4,64,2 2,2,2,4,32,4 2,2,2,4,64,3 4,2,4,4,32,1 2,4,2,2,64,2}
sweep seed ${SEED_TILES:-default 4,2,2,4,16,3 4,2,4,4,16,1 2,2,4,4,16,2 8,1,2,8,16,1 4,1,2,8,16,3 2,2,2,4,16,4 4,2,2,4,16,4}
