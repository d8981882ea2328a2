#!/usr/bin/env bash
# One device call of a session (sessions 31 on): build; CTEST (a ctest -R regex over the gpu-labelled
# tests, CTEST_EXCLUDE); HALF=1: bench_conv2d_half (SHAPE=all|seed|resnet|unet, DTYPE) under each set
# of variables in AB ("NAME=VALUE+NAME=VALUE ..."; none: the defaults); PEERS=unet,...:
# bench/conv2d_half_peers.py on those shapes (PEERS_DTYPES, default f16,bf16) with torch.compile
# (PEERS_COMPILE=0: without); CAPI=1: bench/torch_capi_check.py (the C API on PyTorch tensors);
# FUZZ=SECONDS: bench/conv2d_fuzz.py (FUZZ_WORKERS at a time) on the regression cases, then random
# calls; EWFUZZ=SECONDS: bench/elementwise_fuzz.py likewise; COMPILE=1: bench_conv2d_compile_time
# --set all on this host (cold: CUDA_CACHE_DISABLE=1; COMPILE_REPEAT, default 5); KB=50,Y1,...:
# bench/kernelbench_conv.py --only KB ${KB_ARGS} in each dtype of KB_DTYPES (default f16) under each
# set of AB.
#   OUT=/tmp/out bench/run_gpu_session.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cuinline-session}
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
      env $([ "$set" = none ] || echo "${set//+/ }") $([ "${SHAPE:-unet}" = all ] || echo "CONV_BENCH_SHAPE=${SHAPE:-unet}") CONV_BENCH_DTYPE=$dt \
        CUINLINE_CACHE_DIR=$(mktemp -d) timeout 120 "$build/bench/bench_conv2d_half" 2>&1 |
        grep -E '^\| [a-z]|rror|what' | grep -v '^| shape' | sed "s/^/$set /" | tee -a "$OUT/half.txt"
    done
  done
fi
if [ -n "${PEERS:-}" ]; then
  echo "== conv2d_half_peers $PEERS ($(($(date +%s) - t0)) s)"
  CUINLINE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 timeout "${PEERS_TIMEOUT:-300}" python3 bench/conv2d_half_peers.py \
    --lib "$build/bench/libcuinline_bench_capi.so" --out "$OUT/peers.md" --shapes "$PEERS" --dtypes "${PEERS_DTYPES:-f16,bf16}" \
    $([ "${PEERS_COMPILE:-1}" = 1 ] || echo --no-compile) 2>&1 | grep -v "^$" | cut -c1-300 | tail -n 14
fi
if [ -n "${CAPI:-}" ]; then
  echo "== torch_capi_check ($(($(date +%s) - t0)) s)"
  CUINLINE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 timeout "${CAPI_TIMEOUT:-300}" python3 bench/torch_capi_check.py \
    "$build-shared/libcuinline.so" >"$OUT/capi.txt" 2>&1
  echo "-- exit $?"; grep -cE "^CHECK ok" "$OUT/capi.txt"; grep -E "FAIL|Traceback|Error" "$OUT/capi.txt" | cut -c1-220 | head -n 20
fi
for fuzz in conv2d:${FUZZ:-} elementwise:${EWFUZZ:-}; do
  name=${fuzz%%:*} seconds=${fuzz#*:}
  [ -n "$seconds" ] || continue
  echo "== ${name}_fuzz, regressions then ${seconds} s a worker ($(($(date +%s) - t0)) s)"
  for what in "--cases-file bench/${name}_fuzz_regressions.jsonl" "--seconds $seconds --workers ${FUZZ_WORKERS:-8}"; do
    # shellcheck disable=SC2086
    CUINLINE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 timeout $((seconds + 120)) python3 "bench/${name}_fuzz.py" \
      --lib "$build-shared/libcuinline.so" $what >>"$OUT/${name}_fuzz.txt" 2>&1
    echo "-- exit $?"
  done
  grep -E "^FAIL|seed|cases|passed|failed" "$OUT/${name}_fuzz.txt" | cut -c1-300 | tail -n 12
done
if [ -n "${KB:-}" ]; then
  for set in ${AB:-none}; do
    for dt in ${KB_DTYPES:-f16}; do
      echo "== kernelbench_conv $KB $dt, $set ($(($(date +%s) - t0)) s)"
      env $([ "$set" = none ] || echo "${set//+/ }") CUINLINE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 timeout 240 \
        python3 bench/kernelbench_conv.py --lib "$build-shared/libcuinline.so" --only "$KB" --dtype "$dt" ${KB_ARGS:-} \
        --samples "${KB_SAMPLES:-30}" 2>&1 | grep -E '^\| [A-Z0-9]|rror|correct|FAIL' | sed "s/^/$set /" | tee -a "$OUT/kb.txt"
    done
  done
fi
if [ "${COMPILE:-0}" = 1 ]; then
  echo "== bench_conv2d_compile_time --set all ($(($(date +%s) - t0)) s; $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2))"
  CUDA_CACHE_DISABLE=1 timeout 300 "$build/bench/bench_conv2d_compile_time" --set all --repeat "${COMPILE_REPEAT:-5}" 2>&1 |
    grep -v "^ptxas\|^$" | tee "$OUT/compile.txt" | cut -c1-60,100-200
fi
if [ "${CTEST:-none}" != none ]; then
  echo "== ctest ($(($(date +%s) - t0)) s)"
  run_ctest "$CTEST" "${CTEST_TIMEOUT:-240}" ctest.txt "${CTEST_EXCLUDE:-}"
fi
echo "== done ($(($(date +%s) - t0)) s)"
