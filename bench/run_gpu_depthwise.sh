#!/usr/bin/env bash
# Depthwise conv2d with an NCHW input (the general kernel's row-fast form) on the GPU, in one call:
# build (Release, and the shared library), the dtype suite's random shapes (depthwise NCHW among them)
# and the per-channel-operand test, then KernelBench's depthwise problems (82-86) in f32 and f16 and
# bench/conv2d_grouped_peers.py (MobileNet / EfficientNet / ResNeXt), L2 flushed, beside PyTorch eager.
#   OUT=/tmp/out bench/run_gpu_depthwise.sh        (about 5 minutes on an H100)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cuinline-dw}
mkdir -p "$OUT"
build=${CUINLINE_BUILD_DIR:-build-gpu}

main() {
  t0=$(date +%s)
  nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUINLINE_BUILD_EXAMPLES=OFF \
    -DCUINLINE_WITH_REDIS=OFF >/dev/null || exit 1
  cmake --build "$build" -j"$(nproc)" --target test_conv2d_dtypes_gpu >"$OUT/build.txt" 2>&1 ||
    { tail -n 30 "$OUT/build.txt"; exit 1; }
  { cmake -S . -B "$build-shared" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DCUINLINE_BUILD_TESTS=OFF \
      -DCUINLINE_BUILD_BENCH=OFF -DCUINLINE_BUILD_EXAMPLES=OFF -DCUINLINE_BUILD_CLI=OFF -DCUINLINE_WITH_REDIS=OFF &&
    cmake --build "$build-shared" -j"$(nproc)"; } >>"$OUT/build.txt" 2>&1 || { tail -n 20 "$OUT/build.txt"; exit 1; }
  echo "== build: $(($(date +%s) - t0)) s"
  export CUINLINE_CACHE_DIR CUINLINE_LOG_LEVEL=warn
  CUINLINE_CACHE_DIR=$(mktemp -d)
  echo "== gpu tests"
  "$build/tests/test_conv2d_dtypes_gpu" --gtest_brief=1 --gtest_filter='*RandomShapes*:*ChannelOperand*:*CallsRun*:*ChannelPairs*' 2>&1 |
    grep -E "seed|PASSED|FAILED|Failure" | head -n 20
  for dt in f32 f16; do
    echo "== KernelBench depthwise, $dt"
    PYTHONUNBUFFERED=1 timeout 150 python3 bench/kernelbench_conv.py --lib "$build-shared/libcuinline.so" \
      --dtype $dt --only 82,83,84,85,86 --out "$OUT/kb_dw_$dt.md" 2>&1 | grep -E "^\| [0-9]|correct|FAIL|Error" |
      cut -c1-300
  done
  echo "== grouped / depthwise beside PyTorch"
  PYTHONUNBUFFERED=1 timeout 150 python3 bench/conv2d_grouped_peers.py --lib "$build-shared/libcuinline.so" \
    --out "$OUT/grouped.md" --no-compile 2>&1 | tail -n 22
  echo "== total: $(($(date +%s) - t0)) s"
}

main 2>&1 | tee "$OUT/dw_log.txt"
