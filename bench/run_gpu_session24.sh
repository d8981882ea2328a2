#!/usr/bin/env bash
# Session 24 on the GPU, in calls on one warm machine (the build kept):
#   PHASE=a  build (Release, static and shared), then the gpu suites in CTEST (a ctest -R regex; by
#            default what session 23 left unrun: the CLI activation test whose tolerance changed, the
#            sm_75 / sm_86 plans, the F(4x4) and FMA-product Winograd forms, the transposing-copy suite)
#            with CTEST_J tests at a time.
#   PHASE=b  the C API from PyTorch (bench/torch_capi_check.py, bit for bit against PyTorch's kernels),
#            bench/activation_peers.py (ACT_STEPS) and the gpu suites in CTEST.
#   EPI (any phase): bench/epilogue_cost.py with those epilogues and the old log1pf / expm1f forms;
#   KB_DTYPES (KB_ONLY): bench/kernelbench_conv.py; HALF (shapes): bench/conv2d_half_peers.py.
#   OUT=/tmp/out PHASE=a bench/run_gpu_session24.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cuinline-s24}
mkdir -p "$OUT"
build=${CUINLINE_BUILD_DIR:-build-gpu}
phase=${PHASE:-a}
lib="$build-shared/libcuinline.so"

# shellcheck source=bench/gpu_build.sh
. bench/gpu_build.sh  # build_all, gpu_session_start, run_ctest

CTEST_J=${CTEST_J:-6} CTEST_TEST_TIMEOUT=${CTEST_TEST_TIMEOUT:-400}
t0=$(date +%s)
gpu_session_start
if [ "$phase" = b ]; then
  echo "== C API from PyTorch ($(($(date +%s) - t0)) s)"
  CUINLINE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 timeout "${CAPI_TIMEOUT:-240}" python3 bench/torch_capi_check.py "$lib" \
    >"$OUT/torch_capi.txt" 2>&1
  grep -E "FAIL|all checks|checks FAILED|Traceback|Error" "$OUT/torch_capi.txt" | cut -c1-300 | head -n 40
  grep -cE "^CHECK ok" "$OUT/torch_capi.txt"
  if [ -n "${ACT_STEPS:-}" ]; then
    echo "== activation peers ($(($(date +%s) - t0)) s)"
    CUINLINE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 timeout "${ACT_TIMEOUT:-200}" python3 bench/activation_peers.py \
      --lib "$lib" --ops "$ACT_STEPS" ${ACT_COMPILE:+--compile} >"$OUT/activation_peers.md" 2>&1; tail -n 40 "$OUT/activation_peers.md"
  fi
fi
if [ -n "${EPI:-}" ]; then
  echo "== epilogue cost ($(($(date +%s) - t0)) s)"
  CUINLINE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 timeout "${EPI_TIMEOUT:-240}" python3 bench/epilogue_cost.py --lib "$lib" \
    --epilogues "$EPI" --dtypes "${EPI_DTYPES:-f16,f32}" ${EPI_SHAPE:+--shape "$EPI_SHAPE"} --old-forms ${EPI_EXPR:+--expr "$EPI_EXPR"} \
    ${EPI_EXPR2:+--expr "$EPI_EXPR2"} >"$OUT/epilogue_cost.md" 2>&1
  tail -n 40 "$OUT/epilogue_cost.md"
fi
for dt in ${KB_DTYPES:-}; do
  echo "== KernelBench $dt ${KB_ONLY:-all} ($(($(date +%s) - t0)) s)"
  CUINLINE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 timeout "${KB_TIMEOUT:-200}" python3 bench/kernelbench_conv.py \
    --lib "$lib" --out "$OUT/kb_$dt.md" --samples 10 ${KB_ONLY:+--only "$KB_ONLY"} --dtype "$dt" ${COMPILE:+--compile} 2>&1 |
    grep -v "^$" | cut -c1-300 | tail -n 24
done
if [ -n "${HALF:-}" ]; then
  echo "== conv2d_half_peers $HALF ($(($(date +%s) - t0)) s)"
  CUINLINE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 timeout "${HALF_TIMEOUT:-200}" python3 bench/conv2d_half_peers.py \
    --lib "$build/bench/libcuinline_bench_capi.so" --out "$OUT/half.md" --shapes "$HALF" --dtypes "${HALF_DTYPES:-f16,bf16}" 2>&1 | grep -v "^$" | tail -n 16
fi
if [ -n "${CTEST:-}" ] || [ "$phase" = a ]; then
  echo "== ctest ($(($(date +%s) - t0)) s)"
  run_ctest "${CTEST:-^(CliNaryGpu|sm75\.|sm86\.|wino4\.|winofma\.|transposed\.)}" "${CTEST_TIMEOUT:-420}" "ctest_$phase.txt"
fi
echo "== done ($(($(date +%s) - t0)) s)"
