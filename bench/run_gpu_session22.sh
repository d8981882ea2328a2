#!/usr/bin/env bash
# The pointwise form of conv2d (session 22: 1 x 1, stride 1, NCHW input, every dtype) on the GPU, in
# two calls on one warm machine (the build kept):
#   PHASE=a  build (Release, static and shared); the conv2d gpu suites that reach the new form (the
#            dtype suite with its PointwiseShapesAgainstFloat64, the random shapes, the workspace
#            suite; CTEST_A overrides); the C API from PyTorch (bench/torch_capi_check.py: 8e is the
#            1 x 1 section).
#   PHASE=b  bench/pointwise_peers.py with the form and without it (CUINLINE_CONV2D_POINTWISE=0: the
#            kernels it replaced), KernelBench's 1 x 1 problems (87, 86) in f32 and f16 (COMPILE=1:
#            with torch.compile); EXTRA commands first.
#   OUT=/tmp/out PHASE=a bench/run_gpu_session22.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cuinline-s22}
mkdir -p "$OUT"
build=${CUINLINE_BUILD_DIR:-build-gpu}
phase=${PHASE:-a}
lib="$build-shared/libcuinline.so"

# shellcheck source=bench/gpu_build.sh
. bench/gpu_build.sh  # build_all, gpu_session_start, run_ctest

t0=$(date +%s)
gpu_session_start
if [ "$phase" = a ]; then
  echo "== ctest"
  CUINLINE_CACHE_DIR=$(mktemp -d) timeout "${CTEST_TIMEOUT:-330}" ctest --test-dir "$build" -L gpu \
    -R "${CTEST_A:-^(Conv2dDtypesGpu|Conv2dShapesGpu|Conv2dWorkspaceGpu)}" \
    -j2 --timeout 300 --output-on-failure >"$OUT/ctest_a.txt" 2>&1
  grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|\(SEGFAULT\)|Not Run" "$OUT/ctest_a.txt" | head -n 30
  grep -E "on the pointwise form|1x1" "$OUT/ctest_a.txt" | cut -c1-200 | head -n 20
  echo "== C API from PyTorch ($(($(date +%s) - t0)) s)"
  CUINLINE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 timeout 200 python3 bench/torch_capi_check.py "$lib" \
    >"$OUT/torch_capi.txt" 2>&1
  grep -E "FAIL|1x1|all checks|checks FAILED|Traceback|Error" "$OUT/torch_capi.txt" | cut -c1-230 | head -n 30
else
  export CUINLINE_CACHE_DIR
  CUINLINE_CACHE_DIR=$(mktemp -d)
  if [ -n "${EXTRA:-}" ]; then eval "$EXTRA"; fi
  echo "== 1x1 peers, pointwise form ($(($(date +%s) - t0)) s)"
  (cd bench && PYTHONUNBUFFERED=1 timeout "${PW_TIMEOUT:-200}" python3 pointwise_peers.py --lib "../$lib" \
    --out "$OUT/pw_after.md" --tag "pointwise form" ${PW_ARGS:-}) 2>&1 | grep -v "^$" | cut -c1-260
  echo "== 1x1 peers, without it ($(($(date +%s) - t0)) s)"
  (cd bench && CUINLINE_CONV2D_POINTWISE=0 PYTHONUNBUFFERED=1 timeout "${PW_TIMEOUT:-200}" python3 pointwise_peers.py \
    --lib "../$lib" --out "$OUT/pw_before.md" --tag "CUINLINE_CONV2D_POINTWISE=0" ${PW_ARGS:-}) 2>&1 | grep -v "^$" | cut -c1-260
  if [ -z "${NO_KB:-}" ]; then
    for dt in f32 f16; do
      echo "== KernelBench $dt 87,86 ($(($(date +%s) - t0)) s)"
      PYTHONUNBUFFERED=1 timeout 200 python3 bench/kernelbench_conv.py --lib "$lib" --out "$OUT/kb_$dt.md" \
        --samples 10 --only 87,86 --dtype $dt ${COMPILE:+--compile} 2>&1 | grep -v "^$" | cut -c1-300 | tail -n 6
    done
  fi
fi
echo "== done ($(($(date +%s) - t0)) s)"
