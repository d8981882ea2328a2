#!/usr/bin/env bash
# Per-channel epilogue operands and KernelBench's conv problems on the GPU, in two calls on one warm
# machine (the build is kept between them):
#   PHASE=tests  build everything (Release) and the shared library; every gpu-labelled test (ctest -L
#                gpu), then the C API from PyTorch (bench/torch_capi_check.py).   (about 8-9 minutes)
#   PHASE=bench  bench/kernelbench_conv.py (level 1 and the elementwise-tail level 2 problems beside
#                PyTorch eager, TF32 off and on, and torch.compile for level 2 with COMPILE=1), then
#                DTYPE=f16 (and DTYPE2 for a second set, COMPILE2, ONLY2) the half-precision runs;
#                the f32 / f16 seed beside eager (a regression check of the epilogue change); first,
#                with CTEST_REGEX set, the gpu tests of that pattern (those a tests call had no time for).
#   OUT=/tmp/out PHASE=tests bench/run_gpu_kernelbench.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cuinline-kb}
mkdir -p "$OUT"
build=${CUINLINE_BUILD_DIR:-build-gpu}
phase=${PHASE:-tests}

# shellcheck source=bench/gpu_build.sh
. bench/gpu_build.sh  # build_all

main() {
  t0=$(date +%s)
  nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
  build_all
  echo "== build: $(($(date +%s) - t0)) s"
  export CUINLINE_LOG_LEVEL=warn
  if [ "$phase" = tests ]; then
    echo "== ctest -L gpu"
    CUINLINE_CACHE_DIR=$(mktemp -d) timeout 420 ctest --test-dir "$build" -L gpu --timeout 300 --output-on-failure \
      >"$OUT/ctest_gpu.txt" 2>&1
    grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|\(SEGFAULT\)|Not Run" "$OUT/ctest_gpu.txt" | head -n 30
    "$build/tests/test_conv2d_dtypes_gpu" --gtest_filter='*ChannelOperand*' 2>&1 | grep -E "seed|rel L2|OK|FAILED|Failure" |
      cut -c1-150 | head -n 40
    echo "== C API from PyTorch"
    CUINLINE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 timeout 300 python3 bench/torch_capi_check.py \
      "$build-shared/libcuinline.so" >"$OUT/torch_capi.txt" 2>&1
    grep -E "FAIL|operands|all checks|checks FAILED|Traceback|Error" "$OUT/torch_capi.txt" | cut -c1-220 | head -n 40
  else
    if [ -n "${CTEST_REGEX:-}" ]; then  # (gpu tests a tests call left for this one)
      echo "== ctest -L gpu -R '$CTEST_REGEX'"
      CUINLINE_CACHE_DIR=$(mktemp -d) timeout "${CTEST_TIMEOUT:-300}" ctest --test-dir "$build" -L gpu -R "$CTEST_REGEX" \
        --timeout 250 --output-on-failure >"$OUT/ctest_gpu_rest.txt" 2>&1
      grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|\(SEGFAULT\)|Not Run" "$OUT/ctest_gpu_rest.txt" | head -n 30
      tail -n 2 "$OUT/ctest_gpu_rest.txt"
    fi
    export CUINLINE_CACHE_DIR
    CUINLINE_CACHE_DIR=$(mktemp -d)
    echo "== KernelBench conv problems"
    PYTHONUNBUFFERED=1 timeout "${KB_TIMEOUT:-420}" python3 bench/kernelbench_conv.py --lib "$build-shared/libcuinline.so" \
      --out "$OUT/kernelbench_${DTYPE:-f32}.md" ${COMPILE:+--compile} ${ONLY:+--only "$ONLY"} --samples "${SAMPLES:-10}" \
      --dtype "${DTYPE:-f32}" 2>&1 | grep -v "^$" | cut -c1-400 | tail -n 30
    if [ -n "${DTYPE2:-}" ]; then  # (a second dtype in the same call)
      PYTHONUNBUFFERED=1 timeout "${KB2_TIMEOUT:-300}" python3 bench/kernelbench_conv.py --lib "$build-shared/libcuinline.so" \
        --out "$OUT/kernelbench_$DTYPE2.md" ${COMPILE2:+--compile} ${ONLY2:+--only "$ONLY2"} --samples "${SAMPLES:-10}" \
        --dtype "$DTYPE2" 2>&1 | grep -v "^$" | cut -c1-400 | tail -n 30
    fi
    if [ "${SEEDS:-1}" = 1 ]; then
      echo "== f32 / f16 seed beside eager (regression check)"
      timeout 120 python3 bench/conv2d_half_peers.py --lib "$build/bench/libcuinline_bench_capi.so" --dtypes f32,f16 \
        --shapes seed --no-compile --out "$OUT/seed.md" 2>&1 | tail -n 6
    fi
  fi
  echo "== total: $(($(date +%s) - t0)) s"
}

main 2>&1 | tee "$OUT/log_$phase.txt"
