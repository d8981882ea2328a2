#!/usr/bin/env bash
# The gpu suite on the final code, in two calls on one warm machine (the build is kept):
#   PHASE=a  build everything (Release) and the shared library; ctest -L gpu without the sm75. /
#            sm86. / transposed. reruns                                        (about 8-9 minutes)
#   PHASE=b  those reruns; the C API from PyTorch (bench/torch_capi_check.py); `cuinline run conv2d`
#            on general layers (depthwise channels-last f16, strided / dilated / padded 5x7, grouped
#            bf16); grouped / depthwise layers beside eager                   (about 6-7 minutes)
#   OUT=/tmp/out PHASE=a bench/run_gpu_session20.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cuinline-s20}
mkdir -p "$OUT"
build=${CUINLINE_BUILD_DIR:-build-gpu}
phase=${PHASE:-a}
reruns=${RERUNS:-'^(sm75|sm86|transposed)\.'}  # (phase b: RERUNS picks others; EXTRAS=0 / PEERS=0 skip parts)

# shellcheck source=bench/gpu_build.sh
. bench/gpu_build.sh  # build_all

main() {
  t0=$(date +%s)
  nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
  build_all "build_$phase.txt"
  echo "== build: $(($(date +%s) - t0)) s"
  export CUINLINE_LOG_LEVEL=warn
  if [ "$phase" = a ]; then
    CUINLINE_CACHE_DIR=$(mktemp -d) timeout 450 ctest --test-dir "$build" -L gpu -E "$reruns" --timeout 300 \
      --output-on-failure >"$OUT/ctest_a.txt" 2>&1
    grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|\(SEGFAULT\)|Not Run" "$OUT/ctest_a.txt" | head -n 30
    tail -n 3 "$OUT/ctest_a.txt"
  else
    CUINLINE_CACHE_DIR=$(mktemp -d) timeout 300 ctest --test-dir "$build" -L gpu -R "$reruns" --timeout 250 \
      --output-on-failure >"$OUT/ctest_b.txt" 2>&1
    grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|\(SEGFAULT\)|Not Run" "$OUT/ctest_b.txt" | head -n 30
    if [ "${EXTRAS:-1}" = 1 ]; then
    echo "== C API from PyTorch"
    CUINLINE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 timeout 200 python3 bench/torch_capi_check.py \
      "$build-shared/libcuinline.so" >"$OUT/torch_capi.txt" 2>&1
    grep -cE "^CHECK ok" "$OUT/torch_capi.txt"
    grep -E "FAIL|all checks|checks FAILED|Traceback|Error" "$OUT/torch_capi.txt" | cut -c1-220 | head -n 20
    echo "== cuinline run conv2d, general layers"
    export CUINLINE_CACHE_DIR
    CUINLINE_CACHE_DIR=$(mktemp -d)
    for args in "--shape 32x144x56x56 --filters 144x3x3 --padding 1 --groups 144 --dtype f16 --layout nhwc" \
                "--shape 4x16x40x40 --filters 64x5x7 --stride 2x1 --padding 2x3 --dilation 1x2" \
                "--shape 8x64x28x28 --filters 128x3x3 --padding 1 --groups 8 --dtype bf16" \
                "--shape 16x8x64x64 --precision tf32"; do
      echo "-- $args"
      timeout 60 "$build/cuinline" run conv2d $args --repeat 10 2>&1 | grep -E "^op|^check|^time|error" | cut -c1-200
    done
    fi
    if [ "${PEERS:-1}" = 1 ]; then
    echo "== grouped / depthwise beside PyTorch"
    PYTHONUNBUFFERED=1 timeout 120 python3 bench/conv2d_grouped_peers.py --lib "$build-shared/libcuinline.so" \
      --out "$OUT/grouped.md" --no-compile 2>&1 | tail -n 22 | cut -d'|' -f2-8
    fi
  fi
  echo "== total: $(($(date +%s) - t0)) s"
}

main 2>&1 | tee "$OUT/log_$phase.txt"
