#!/usr/bin/env bash
# f32 conv2d in both layouts on the GPU, in one call: build (Release); the gpu tests of the f32
# channels-last path (the NCHW kernels between transposing copies: default and with
# CUINLINE_CONV2D_TRANSPOSE=1 for every f32 channels-last shape; graphs, misuse; memcheck on the
# bit-for-bit test; the C API from PyTorch, bench/torch_capi_check.py); then the issue's three shapes
# in f32, NCHW and channels-last, beside PyTorch
# eager (TF32 off) and torch.compile with the L2 flushed before every timed call, and the same calls
# on the general kernel (CUINLINE_CONV2D_TRANSPOSE=0) for the before/after.
#   OUT=/tmp/out bench/run_gpu_f32_layouts.sh        (about 5-8 minutes on an H100/H200)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cuinline-f32-layouts}
mkdir -p "$OUT"
build=${CUINLINE_BUILD_DIR:-build-gpu}

main() {
  t0=$(date +%s)
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUINLINE_BUILD_EXAMPLES=OFF \
    -DCUINLINE_WITH_REDIS=OFF >/dev/null || exit 1
  cmake --build "$build" -j"$(nproc)" --target cuinline_bench_capi cuinline_cli test_conv2d_dtypes_gpu \
    test_graphs_gpu test_misuse_gpu test_conv2d_gpu bench_conv2d_half 2>&1 | tail -n 2
  # The C API as a shared library (what an engine or ctypes loads).
  { cmake -S . -B "$build-shared" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DCUINLINE_BUILD_TESTS=OFF \
      -DCUINLINE_BUILD_BENCH=OFF -DCUINLINE_BUILD_EXAMPLES=OFF -DCUINLINE_BUILD_CLI=OFF -DCUINLINE_WITH_REDIS=OFF &&
    cmake --build "$build-shared" -j"$(nproc)"; } >"$OUT/build_shared.log" 2>&1 || tail -n 20 "$OUT/build_shared.log"
  echo "== build: $(($(date +%s) - t0)) s"
  export CUINLINE_CACHE_DIR
  CUINLINE_CACHE_DIR=$(mktemp -d)
  echo "== gpu tests: test_conv2d_dtypes_gpu"
  "$build/tests/test_conv2d_dtypes_gpu" --gtest_brief=1 2>&1 | tail -n 40
  echo "== test_conv2d_dtypes_gpu with CUINLINE_CONV2D_TRANSPOSE=1"
  CUINLINE_CONV2D_TRANSPOSE=1 "$build/tests/test_conv2d_dtypes_gpu" --gtest_brief=1 \
    --gtest_filter='*RandomShapes*:*F32ChannelsLast*' 2>&1 | tail -n 12
  echo "== cuinline alone (bench_conv2d_half, f32): the copies' tile (CUINLINE_CONV2D_TRANSPOSE_TILE), layout mixes"
  for lt in 10 11 12; do
    echo "-- tiles of 2^$lt elements"
    CUINLINE_CONV2D_TRANSPOSE_TILE=$lt CONV_BENCH_DTYPE=f32 "$build/bench/bench_conv2d_half" | grep -v "^|---\|^| shape"
  done | tee "$OUT/f32_tiles.md"
  for m in nhwc,nhwc,nchw nchw,nchw,nhwc; do
    CONV_BENCH_DTYPE=f32 CONV_BENCH_LAYOUTS=$m "$build/bench/bench_conv2d_half" | grep -v "^|---\|^| shape"
  done | tee "$OUT/f32_mixed.md"
  echo "== f32 beside PyTorch (TF32 off), the seed with torch.compile"
  python3 bench/conv2d_half_peers.py --lib "$build/bench/libcuinline_bench_capi.so" --dtypes f32 --shapes seed \
    --out "$OUT/f32_seed.md" 2>&1 | tail -n 6
  echo "== gpu tests: graphs, misuse, fp32 conv"
  for t in test_graphs_gpu test_misuse_gpu ${FP32_SUITE-test_conv2d_gpu}; do
    "$build/tests/$t" --gtest_brief=1 2>&1 | tail -n 8
  done
  echo "== C API from PyTorch"
  PYTHONUNBUFFERED=1 timeout 180 python3 bench/torch_capi_check.py "$build-shared/libcuinline.so" 2>&1 | tail -n 40
  echo "== f32 beside PyTorch eager (TF32 off): ResNet-like, UNet-like"
  python3 bench/conv2d_half_peers.py --lib "$build/bench/libcuinline_bench_capi.so" --dtypes f32 \
    --shapes resnet,unet --no-compile --out "$OUT/f32_resnet_unet.md" 2>&1 | tail -n 8
  echo "== cuinline run conv2d f32 (seed, CLI)"
  for layout in nchw nhwc; do
    "$build/cuinline" run conv2d --dtype f32 --layout "$layout" 2>&1 | tail -n 3
  done
  if [ "${SANITIZE:-1}" = 1 ]; then
    echo "== compute-sanitizer memcheck: the transposing path"
    timeout 150 compute-sanitizer --tool memcheck --report-api-errors no \
      "$build/tests/test_conv2d_dtypes_gpu" --gtest_filter='*F32ChannelsLast*' --gtest_brief=1 2>&1 | tail -n 6
  fi
  echo "== the general kernel (CUINLINE_CONV2D_TRANSPOSE=0), eager only"
  CUINLINE_CONV2D_TRANSPOSE=0 python3 bench/conv2d_half_peers.py --lib "$build/bench/libcuinline_bench_capi.so" \
    --dtypes f32 --no-compile --samples 10 --out "$OUT/f32_general.md" 2>&1 | tail -n 10
  echo "== total: $(($(date +%s) - t0)) s"
}

main 2>&1 | tee "$OUT/f32_layouts_log.txt"
