#!/usr/bin/env bash
# f16 / bf16 wgmma tiling with up to 64 channels a block and a long reduction (session 22): two
# warpgroups of two m64 tiles (the plan) against two of one tile (CUINLINE_CONV2D_HMMA_TILE, the plan
# before) on KernelBench's f16 problems that take it and the issue's ResNet-like layer, one call.
# OUT=/tmp/out bench/tune_f16_two_tiles.sh
set -uo pipefail
cd "$(dirname "$0")/.."
build=${CUINLINE_BUILD_DIR:-build-gpu}
lib="$build-shared/libcuinline.so"
OUT=${OUT:-/tmp/cuinline-tune}
mkdir -p "$OUT"
. bench/gpu_build.sh
build_all
export CUINLINE_LOG_LEVEL=warn
kb() {  # kb <label> <env> <problems>
  env $2 CUINLINE_CACHE_DIR="$(mktemp -d)" timeout 150 python3 bench/kernelbench_conv.py --lib "$lib" --samples 10 \
    --only "$3" --dtype f16 2>&1 | grep "^| [0-9L]" | cut -d'|' -f2-7 | sed "s/^/$1 /"
}
half() {  # half <label> <env>: the ResNet-like layer, f16 and bf16, both layouts (no torch.compile)
  env $2 CUINLINE_CACHE_DIR="$(mktemp -d)" timeout 150 python3 bench/conv2d_half_peers.py \
    --lib "$build/bench/libcuinline_bench_capi.so" --shapes resnet --no-compile --samples 20 2>&1 |
    grep "^| resnet" | cut -d'|' -f2-7 | sed "s/^/$1 /"
}
for round in 1 2; do
  kb "plan-$round" "" 62,80,L2-54
  kb "one-tile-$round" "CUINLINE_CONV2D_HMMA_TILE=8,1,1,8,32,1" 62,80
  kb "one-tile-$round" "CUINLINE_CONV2D_HMMA_TILE=8,1,1,8,64,1" L2-54
  half "plan-$round" ""
  half "one-tile-$round" "CUINLINE_CONV2D_HMMA_TILE=8,1,1,8,64,1"
done
