#!/usr/bin/env bash
# Session 30 on the GPU, one call: build; CTEST (a ctest -R regex over the gpu-labelled tests,
# CTEST_EXCLUDE); CAPI=1: bench/torch_capi_check.py; F64=1: bench/conv2d_f64_peers.py (float64 conv
# beside PyTorch's); CLI=1: `cuinline run conv2d` in f64 NCHW and channels-last; FUZZ=SECONDS:
# bench/conv2d_fuzz.py over FUZZ_KINDS (default f64 and the usual kinds); HALF=1: bench_conv2d_half
# (SHAPE=all|seed, DTYPE).
#   OUT=/tmp/out bench/run_gpu_session30.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cuinline-s30}
mkdir -p "$OUT"
build=${CUINLINE_BUILD_DIR:-build-gpu}
lib="$build-shared/libcuinline.so"
# shellcheck source=bench/gpu_build.sh
. bench/gpu_build.sh
t0=$(date +%s)
gpu_session_start
if [ "${CTEST:-none}" != none ]; then
  echo "== ctest ($(($(date +%s) - t0)) s)"
  run_ctest "$CTEST" "${CTEST_TIMEOUT:-300}" ctest.txt "${CTEST_EXCLUDE:-}"
fi
if [ "${CLI:-0}" = 1 ]; then
  echo "== cuinline run conv2d f64 ($(($(date +%s) - t0)) s)"
  for layout in nchw nhwc; do
    CUINLINE_CACHE_DIR=$(mktemp -d) timeout 120 "$build/cuinline" run conv2d --dtype f64 --layout $layout \
      --shape 32x8x128x128 --repeat 20 2>&1 | tee -a "$OUT/cli.txt" | grep -E "ok|FAIL|rror|ms" | head -n 6
  done
fi
if [ -n "${CAPI:-}" ]; then
  echo "== torch_capi_check ($(($(date +%s) - t0)) s)"
  CUINLINE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 timeout "${CAPI_TIMEOUT:-300}" python3 bench/torch_capi_check.py "$lib" \
    >"$OUT/capi.txt" 2>&1
  echo "-- exit $?"; grep -cE "^CHECK ok" "$OUT/capi.txt"; grep -E "float64|FAIL|Traceback|Error" "$OUT/capi.txt" | cut -c1-220 | head -n 20
fi
if [ "${F64:-0}" = 1 ]; then
  echo "== conv2d_f64_peers ($(($(date +%s) - t0)) s)"
  CUINLINE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 timeout 240 python3 bench/conv2d_f64_peers.py --lib "$lib" \
    --out "$OUT/f64.md" 2>&1 | tail -n 12
fi
if [ "${FUZZ:-0}" != 0 ]; then
  echo "== conv2d_fuzz ${FUZZ} s ($(($(date +%s) - t0)) s)"
  CUINLINE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 timeout $((FUZZ + 120)) python3 bench/conv2d_fuzz.py --lib "$lib" \
    --seconds "$FUZZ" --workers "${FUZZ_WORKERS:-6}" \
    --kinds "${FUZZ_KINDS:-f64,f64,f64,f32/fp32,f32/tf32,f16,bf16}" >"$OUT/fuzz.txt" 2>&1
  echo "-- exit $?"; tail -n 6 "$OUT/fuzz.txt"; grep -E "^FAIL" "$OUT/fuzz.txt" | head -n 5 | cut -c1-400
fi
if [ "${HALF:-0}" = 1 ]; then
  echo "== bench_conv2d_half ($(($(date +%s) - t0)) s)"
  $([ "${SHAPE:-seed}" = all ] || echo "env CONV_BENCH_SHAPE=${SHAPE:-seed}") env CONV_BENCH_DTYPE=${DTYPE:-f16} timeout 120 \
    "$build/bench/bench_conv2d_half" 2>&1 | grep -E '^\| [a-z]|rror|what' | grep -v '^| shape' | tee -a "$OUT/half.txt"
fi
echo "== done ($(($(date +%s) - t0)) s)"
