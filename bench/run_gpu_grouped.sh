#!/usr/bin/env bash
# Grouped and depthwise conv2d (F.conv2d's groups) on the GPU, in one call: build (Release; and the
# shared library for ctypes), the dtype suite's random shapes (grouped ones among them) and the plan check (default, and planned
# for sm_75), the C API from PyTorch (bench/torch_capi_check.py: grouped in every dtype and layout, in
# torch.cuda.graph), then bench/conv2d_grouped_peers.py (MobileNet / EfficientNet depthwise, ResNeXt
# grouped beside PyTorch eager and torch.compile, L2 flushed).
#   OUT=/tmp/out bench/run_gpu_grouped.sh        (about 5-7 minutes on an H100)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cuinline-grouped}
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
  echo "== grouped gpu tests (default; planned for sm_75)"
  "$build/tests/test_conv2d_dtypes_gpu" --gtest_brief=1 --gtest_filter='*RandomShapes*:*CallsRun*' 2>&1 |
    grep -E "seed|plans for|PASSED|FAILED|Failure" | head -n 20
  CUINLINE_CONV2D_TARGET=sm_75 "$build/tests/test_conv2d_dtypes_gpu" --gtest_brief=1 --gtest_filter='*RandomShapes*' 2>&1 |
    grep -E "PASSED|FAILED|Failure" | head -n 6
  echo "== C API from PyTorch"
  PYTHONUNBUFFERED=1 timeout 240 python3 bench/torch_capi_check.py "$build-shared/libcuinline.so" 2>&1 |
    grep -E "groups|depthwise|FAIL|all checks|checks FAILED" | head -n 30
  echo "== grouped / depthwise beside PyTorch"
  PYTHONUNBUFFERED=1 python3 bench/conv2d_grouped_peers.py --lib "$build-shared/libcuinline.so" \
    --out "$OUT/grouped.md" ${NO_COMPILE:+--no-compile} 2>&1 | tail -n 24
  echo "== total: $(($(date +%s) - t0)) s"
}

main 2>&1 | tee "$OUT/grouped_log.txt"
