#!/usr/bin/env bash
# Session 23 on the GPU: the activation / math steps (sigmoid ... neg) of the elementwise ops and
# conv2d epilogues, in calls on one warm machine (the build kept):
#   PHASE=a  build (Release, static and shared); the gpu suites the change reaches (CTEST_A: the new
#            FunctionsGpu, the elementwise / N-ary / CLI / graph / runtime / misuse suites, the conv2d
#            dtype and random-shape suites, whose epilogues include ew_ops.cuh); the C API from
#            PyTorch (bench/torch_capi_check.py, section 10: bit for bit against PyTorch's kernels).
#   PHASE=b  KernelBench's level-2 convs whose tails are now named steps (KB_ONLY, KB_DTYPES), then the
#            other gpu suites (CTEST_B) in what is left of the call.
#   OUT=/tmp/out PHASE=a bench/run_gpu_session23.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cuinline-s23}
mkdir -p "$OUT"
build=${CUINLINE_BUILD_DIR:-build-gpu}
phase=${PHASE:-a}
lib="$build-shared/libcuinline.so"

# shellcheck source=bench/gpu_build.sh
. bench/gpu_build.sh  # build_all, gpu_session_start, run_ctest

t0=$(date +%s)
gpu_session_start
if [ "$phase" = a ]; then
  echo "== ctest ($(($(date +%s) - t0)) s)"
  run_ctest "${CTEST_A:-^(FunctionsGpu|ElementwiseGpu|NaryGpu|CliNaryGpu|GraphsGpu|RuntimeGpu|MisuseGpu|Conv2dDtypesGpu|Conv2dShapesGpu)}" \
    "${CTEST_TIMEOUT:-300}" ctest_a.txt
  echo "== C API from PyTorch ($(($(date +%s) - t0)) s)"
  CUINLINE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 timeout "${CAPI_TIMEOUT:-240}" python3 bench/torch_capi_check.py "$lib" \
    >"$OUT/torch_capi.txt" 2>&1
  grep -E "FAIL|all checks|checks FAILED|Traceback|Error" "$OUT/torch_capi.txt" | cut -c1-300 | head -n 40
  grep -cE "^CHECK ok" "$OUT/torch_capi.txt"
else
  export CUINLINE_CACHE_DIR
  CUINLINE_CACHE_DIR=$(mktemp -d)
  if [ -n "${EXTRA:-}" ]; then eval "$EXTRA"; fi
  for dt in ${KB_DTYPES:-f16 f32}; do
    echo "== KernelBench $dt ${KB_ONLY:-L2-4,L2-54,L2-69,L2-87} ($(($(date +%s) - t0)) s)"
    PYTHONUNBUFFERED=1 timeout "${KB_TIMEOUT:-200}" python3 bench/kernelbench_conv.py --lib "$lib" --out "$OUT/kb_$dt.md" \
      --samples 10 --only "${KB_ONLY:-L2-4,L2-54,L2-69,L2-87}" --dtype "$dt" ${COMPILE:+--compile} 2>&1 | grep -v "^$" |
      cut -c1-300 | tail -n 8
  done
  if [ -n "${CTEST_B:-}" ]; then
    echo "== ctest ($(($(date +%s) - t0)) s)"
    run_ctest "$CTEST_B" "${CTEST_TIMEOUT:-300}" ctest_b.txt
  fi
fi
echo "== done ($(($(date +%s) - t0)) s)"
