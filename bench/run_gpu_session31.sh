#!/usr/bin/env bash
# Session 31 on the GPU, one call: build; CTEST (a ctest -R regex over the gpu-labelled tests,
# CTEST_EXCLUDE); HALF=1: bench_conv2d_half (SHAPE=all|seed|resnet|unet, DTYPE) under each set of
# variables in AB ("NAME=VALUE,NAME=VALUE ..."; none: the defaults); PEERS=unet,...:
# bench/conv2d_half_peers.py on those shapes with torch.compile (PEERS_COMPILE=0: without); CAPI=1:
# bench/torch_capi_check.py (the C API on PyTorch tensors).
#   OUT=/tmp/out bench/run_gpu_session31.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cuinline-s31}
mkdir -p "$OUT"
build=${CUINLINE_BUILD_DIR:-build-gpu}
# shellcheck source=bench/gpu_build.sh
. bench/gpu_build.sh
t0=$(date +%s)
gpu_session_start
if [ "${HALF:-0}" = 1 ]; then
  for set in ${AB:-none}; do
    for dt in ${DTYPE:-f16 bf16}; do
      echo "== bench_conv2d_half $dt, $set ($(($(date +%s) - t0)) s)"
      env $([ "$set" = none ] || echo "${set//,/ }") $([ "${SHAPE:-unet}" = all ] || echo "CONV_BENCH_SHAPE=${SHAPE:-unet}") CONV_BENCH_DTYPE=$dt \
        CUINLINE_CACHE_DIR=$(mktemp -d) timeout 120 "$build/bench/bench_conv2d_half" 2>&1 |
        grep -E '^\| [a-z]|rror|what' | grep -v '^| shape' | sed "s/^/$set /" | tee -a "$OUT/half.txt"
    done
  done
fi
if [ -n "${PEERS:-}" ]; then
  echo "== conv2d_half_peers $PEERS ($(($(date +%s) - t0)) s)"
  CUINLINE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 timeout "${PEERS_TIMEOUT:-300}" python3 bench/conv2d_half_peers.py \
    --lib "$build/bench/libcuinline_bench_capi.so" --out "$OUT/peers.md" --shapes "$PEERS" \
    $([ "${PEERS_COMPILE:-1}" = 1 ] || echo --no-compile) 2>&1 | grep -v "^$" | cut -c1-300 | tail -n 14
fi
if [ -n "${CAPI:-}" ]; then
  echo "== torch_capi_check ($(($(date +%s) - t0)) s)"
  CUINLINE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 timeout "${CAPI_TIMEOUT:-300}" python3 bench/torch_capi_check.py \
    "$build-shared/libcuinline.so" >"$OUT/capi.txt" 2>&1
  echo "-- exit $?"; grep -cE "^CHECK ok" "$OUT/capi.txt"; grep -E "FAIL|Traceback|Error" "$OUT/capi.txt" | cut -c1-220 | head -n 20
fi
if [ "${CTEST:-none}" != none ]; then
  echo "== ctest ($(($(date +%s) - t0)) s)"
  run_ctest "$CTEST" "${CTEST_TIMEOUT:-240}" ctest.txt "${CTEST_EXCLUDE:-}"
fi
echo "== done ($(($(date +%s) - t0)) s)"
