#!/usr/bin/env bash
# Session 29 on the GPU, one call: build; AB (with HALF=1): bench_conv2d_half once with each set of
# variables ("NAME=VALUE,NAME=VALUE ..."; SHAPE / DTYPE filters); NCU_AB: ncu profiles of the f16
# seed's NCHW conv kernel under each set (speed of light, memory tables, warp states, scheduler,
# source counters), the details page and the SASS source page (CSV: per-instruction stall samples)
# under $OUT; CTEST (a ctest -R regex over the gpu-labelled tests); CAPI=1: bench/torch_capi_check.py;
# PEERS=seed: bench/conv2d_half_peers.py (PEERS_COMPILE=1: with torch.compile).
#   OUT=/tmp/out bench/run_gpu_session29.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cuinline-s29}
mkdir -p "$OUT"
build=${CUINLINE_BUILD_DIR:-build-gpu}
lib="$build-shared/libcuinline.so"
# shellcheck source=bench/gpu_build.sh
. bench/gpu_build.sh
t0=$(date +%s)
gpu_session_start
if [ "${HALF:-0}" = 1 ]; then
  for set in ${AB:-none}; do
    echo "== bench_conv2d_half, $set ($(($(date +%s) - t0)) s)"
    # (SHAPE=all: every shape of the bench.)
    env ${set//,/ } $([ "${SHAPE:-seed}" = all ] || echo "CONV_BENCH_SHAPE=${SHAPE:-seed}") CONV_BENCH_DTYPE=${DTYPE:-f16} timeout 120 \
      "$build/bench/bench_conv2d_half" 2>&1 | grep -E '^\| [a-z]|rror|what' | grep -v '^| shape' | sed "s/^/$set /" |
      tee -a "$OUT/half.txt"
  done
fi
i=0
for set in ${NCU_AB:-}; do
  i=$((i + 1))
  echo "== ncu $set ($(($(date +%s) - t0)) s)"
  env ${set//,/ } CONV_BENCH_SHAPE=seed CONV_BENCH_LAYOUT=nchw CONV_BENCH_DTYPE=f16 timeout 240 ncu --clock-control none \
    --kernel-name regex:cuinline_conv2d --launch-skip 10 --launch-count 1 --import-source no \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
    --section WarpStateStats --section SchedulerStats --section SourceCounters --section Occupancy \
    --section LaunchStats -f -o "$OUT/ncu$i" "$build/bench/bench_conv2d_half" >"$OUT/ncu${i}_run.txt" 2>&1
  echo "$set" >"$OUT/ncu${i}_set.txt"
  ncu -i "$OUT/ncu$i.ncu-rep" --page details >"$OUT/ncu${i}_details.txt" 2>&1
  ncu -i "$OUT/ncu$i.ncu-rep" --page source --csv --print-source sass >"$OUT/ncu${i}_sass.csv" 2>&1
  grep -E "Duration|Memory Throughput|DRAM Throughput|Warp Cycles Per Issued|Issued Warp|No Eligible|Achieved Occupancy|Registers Per|Block Limit" \
    "$OUT/ncu${i}_details.txt" | head -n 20
  rm -f "$OUT/ncu$i.ncu-rep"
done
if [ -n "${NCU_AB:-}" ]; then
  (cd "$OUT" && tar czf ncu.tgz ncu[0-9]* && rm -f ncu[0-9]*)
fi
if [ -n "${CAPI:-}" ]; then
  echo "== torch_capi_check ($(($(date +%s) - t0)) s)"
  CUINLINE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 timeout "${CAPI_TIMEOUT:-240}" python3 bench/torch_capi_check.py "$lib" \
    >"$OUT/capi.txt" 2>&1
  echo "-- exit $?"; grep -cE "^CHECK ok" "$OUT/capi.txt"; grep -E "FAIL|Traceback|Error" "$OUT/capi.txt" | head -n 20
fi
if [ -n "${PEERS:-}" ]; then
  echo "== conv2d_half_peers $PEERS ($(($(date +%s) - t0)) s)"
  CUINLINE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 timeout "${PEERS_TIMEOUT:-300}" python3 bench/conv2d_half_peers.py \
    --lib "$build/bench/libcuinline_bench_capi.so" --out "$OUT/peers.md" --shapes "$PEERS" \
    $([ "${PEERS_COMPILE:-0}" = 1 ] || echo --no-compile) 2>&1 | grep -v "^$" | cut -c1-300 | tail -n 14
fi
if [ "${CTEST:-none}" != none ]; then
  echo "== ctest ($(($(date +%s) - t0)) s)"
  run_ctest "$CTEST" "${CTEST_TIMEOUT:-240}" ctest.txt "${CTEST_EXCLUDE:-}"
fi
echo "== done ($(($(date +%s) - t0)) s)"
