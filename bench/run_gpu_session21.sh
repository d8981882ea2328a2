#!/usr/bin/env bash
# The TF32 wgmma conv2d (session 21) on the GPU, in two calls on one warm machine (the build kept):
#   PHASE=a  build (Release, static and shared); the conv2d gpu tests that reach the new kernel and the
#            changed staging module (every precision of test_conv2d_gpu's tf32 runs, the dtype, shape,
#            staged and workspace suites); the C API from PyTorch (bench/torch_capi_check.py: 8d is the
#            tf32 section); then KernelBench's f32 problems in tf32 with the wgmma kernel and with it off
#            (CUINLINE_CONV2D_TF32_WGMMA=0: the mma.sync kernel), ONLY_AB problems.
#   PHASE=b  KernelBench's f32 problems (fp32 and tf32 beside eager TF32 off / on; COMPILE=1 for
#            torch.compile), EXTRA commands, CTEST_REGEX gpu tests.
#   OUT=/tmp/out PHASE=a bench/run_gpu_session21.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cuinline-s21}
mkdir -p "$OUT"
build=${CUINLINE_BUILD_DIR:-build-gpu}
phase=${PHASE:-a}
lib="$build-shared/libcuinline.so"

# shellcheck source=bench/gpu_build.sh
. bench/gpu_build.sh  # build_all

kb() {  # kb <tag> <args...>: bench/kernelbench_conv.py into $OUT/kb_<tag>.md
  local tag=$1
  shift
  PYTHONUNBUFFERED=1 timeout "${KB_TIMEOUT:-300}" python3 bench/kernelbench_conv.py --lib "$lib" --out "$OUT/kb_$tag.md" \
    --samples "${SAMPLES:-10}" "$@" 2>&1 | grep -v "^$" | cut -c1-300 | tail -n 26
}

t0=$(date +%s)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
build_all
echo "== build: $(($(date +%s) - t0)) s"
export CUINLINE_LOG_LEVEL=warn
if [ "$phase" = a ]; then
  echo "== ctest (tf32 and staged conv2d gpu tests)"
  CUINLINE_CACHE_DIR=$(mktemp -d) timeout "${CTEST_TIMEOUT:-300}" ctest --test-dir "$build" -L gpu \
    -R "${CTEST_A:-^(Precisions/Conv2dGpu.*/tf32|Conv2dDtypesGpu|Conv2dShapesGpu|staged\.|Conv2dWorkspaceGpu)}" \
    -j2 --timeout 280 --output-on-failure >"$OUT/ctest_a.txt" 2>&1
  grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|\(SEGFAULT\)|Not Run" "$OUT/ctest_a.txt" | head -n 30
  echo "== C API from PyTorch ($(($(date +%s) - t0)) s)"
  CUINLINE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 timeout 200 python3 bench/torch_capi_check.py "$lib" \
    >"$OUT/torch_capi.txt" 2>&1
  grep -E "FAIL|tf32|all checks|checks FAILED|Traceback|Error" "$OUT/torch_capi.txt" | cut -c1-230 | head -n 30
  echo "== KernelBench tf32, wgmma ($(($(date +%s) - t0)) s)"
  export CUINLINE_CACHE_DIR
  CUINLINE_CACHE_DIR=$(mktemp -d)
  kb tf32_wgmma --precisions tf32 --only "${ONLY_AB:-55,56,62,63,80,87,L2-1,L2-4,L2-54}"
  echo "== KernelBench tf32, mma.sync ($(($(date +%s) - t0)) s)"
  CUINLINE_CONV2D_TF32_WGMMA=0 kb tf32_mma --precisions tf32 --only "${ONLY_B:-56,62,63}"
else
  if [ -n "${CTEST_REGEX:-}" ]; then
    echo "== ctest -L gpu -R '$CTEST_REGEX'"
    CUINLINE_CACHE_DIR=$(mktemp -d) timeout "${CTEST_TIMEOUT:-240}" ctest --test-dir "$build" -L gpu -R "$CTEST_REGEX" \
      -j2 --timeout 230 --output-on-failure >"$OUT/ctest_b.txt" 2>&1
    grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|\(SEGFAULT\)|Not Run" "$OUT/ctest_b.txt" | head -n 30
  fi
  export CUINLINE_CACHE_DIR
  CUINLINE_CACHE_DIR=$(mktemp -d)
  if [ -n "${EXTRA:-}" ]; then eval "$EXTRA"; fi
  echo "== KernelBench f32 ($(($(date +%s) - t0)) s)"
  KB_TIMEOUT=${KB_TIMEOUT:-420} kb f32 ${COMPILE:+--compile} ${ONLY:+--only "$ONLY"} --precisions "${PRECISIONS:-fp32,tf32}"
fi
echo "== done ($(($(date +%s) - t0)) s)"
