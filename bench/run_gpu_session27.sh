#!/usr/bin/env bash
# Session 27 on the GPU (conv2d past its former size limits), one call on a warm machine:
#   build; RECHECK (a JSONL of fuzz cases, default bench/fuzz_recheck_s27.jsonl) rerun alone;
#   bench/conv2d_fuzz.py for FUZZ_SECONDS (default 150) with nothing beside it; CTEST (a ctest -R
#   regex, default the PastThe tests in every prefix); then bench/kernelbench_conv.py on the X
#   problems (real layers past the former limits) in each of KB_DTYPES (default "f32 f16"), eager
#   peers (COMPILE=1: torch.compile too).
#   OUT=/tmp/out bench/run_gpu_session27.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cuinline-s27}
mkdir -p "$OUT"
build=${CUINLINE_BUILD_DIR:-build-gpu}
lib="$build-shared/libcuinline.so"
# shellcheck source=bench/gpu_build.sh
. bench/gpu_build.sh
t0=$(date +%s)
gpu_session_start
recheck=${RECHECK:-bench/fuzz_recheck_s27.jsonl}
if [ -s "$recheck" ]; then
  echo "== recheck $recheck ($(($(date +%s) - t0)) s)"
  CUINLINE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 timeout 150 python3 bench/conv2d_fuzz.py --lib "$lib" \
    --cases-file "$recheck" >"$OUT/recheck.txt" 2>&1
  echo "-- exit $?"; grep -E "^(ok|FAIL) [a-z]|Traceback" "$OUT/recheck.txt" | cut -c1-260
fi
if [ "${FUZZ_SECONDS:-150}" != 0 ]; then
  echo "== conv2d fuzz ($(($(date +%s) - t0)) s)"
  CUINLINE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 timeout $((${FUZZ_SECONDS:-150} + 120)) python3 bench/conv2d_fuzz.py \
    --lib "$lib" --seconds "${FUZZ_SECONDS:-150}" --workers "${FUZZ_WORKERS:-8}" >"$OUT/fuzz.txt" 2>&1
  echo "-- exit $?"; grep -E "^FAIL|^seeds|conv2d fuzz:|Traceback" "$OUT/fuzz.txt" | cut -c1-400 | head -n 30
fi
if [ "${CTEST:-PastThe}" != none ]; then
  echo "== ctest ($(($(date +%s) - t0)) s)"
  run_ctest "${CTEST:-PastThe}" "${CTEST_TIMEOUT:-200}" ctest.txt
fi
for dt in ${KB_DTYPES:-f32 f16}; do
  echo "== KernelBench-style X problems, $dt ($(($(date +%s) - t0)) s)"
  CUINLINE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 timeout "${KB_TIMEOUT:-200}" python3 bench/kernelbench_conv.py \
    --lib "$lib" --out "$OUT/kb_$dt.md" --samples 10 --only "${KB_ONLY:-X1,X2,X3,X4,X5,X6}" --dtype "$dt" \
    ${COMPILE:+--compile} 2>&1 | grep -v "^$" | cut -c1-400 | tail -n 12
done
echo "== done ($(($(date +%s) - t0)) s)"
