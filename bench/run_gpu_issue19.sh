#!/usr/bin/env bash
# The issue-19 GPU check in one call: build (Release), the f16/bf16 conv gpu tests (default and with
# every stageable variant staged), the graph / misuse suites (f16 NCHW staged and bf16 channels-last
# conv among their ops), the C API from PyTorch (NCHW f16/bf16 on a side stream and in
# torch.cuda.graph), then cuinline's f16/bf16 conv with the staging copy and without it
# (CUINLINE_CONV2D_STAGE=0), beside PyTorch eager (and torch.compile unless NO_COMPILE=1), and the fp32
# sweep's non-square / dilated / strided shapes beside eager.
#   OUT=/tmp/out bench/run_gpu_issue19.sh        (about 6-9 minutes on an H100/H200)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cuinline-issue19}
mkdir -p "$OUT"
build=${CUINLINE_BUILD_DIR:-build-gpu}

main() {
  t0=$(date +%s)
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUINLINE_BUILD_EXAMPLES=OFF \
    -DCUINLINE_WITH_REDIS=OFF >/dev/null || exit 1
  cmake --build "$build" -j"$(nproc)" --target cuinline_bench_capi bench_conv2d_half test_conv2d_dtypes_gpu \
    test_graphs_gpu test_misuse_gpu test_conv2d_hmma test_conv2d_gpu test_conv2d_shapes_gpu bench_conv2d_compile_time 2>&1 | tail -n 2
  # The C API as a shared library (what an engine or ctypes loads).
  { cmake -S . -B "$build-shared" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DCUINLINE_BUILD_TESTS=OFF \
      -DCUINLINE_BUILD_BENCH=OFF -DCUINLINE_BUILD_EXAMPLES=OFF -DCUINLINE_BUILD_CLI=OFF -DCUINLINE_WITH_REDIS=OFF &&
    cmake --build "$build-shared" -j"$(nproc)"; } >"$OUT/build_shared.log" 2>&1 || tail -n 20 "$OUT/build_shared.log"
  echo "== build: $(($(date +%s) - t0)) s"
  export CUINLINE_CACHE_DIR
  CUINLINE_CACHE_DIR=$(mktemp -d)
  echo "== gpu tests"
  for t in test_conv2d_dtypes_gpu test_graphs_gpu test_misuse_gpu test_conv2d_gpu test_conv2d_shapes_gpu; do
    "$build/tests/$t" --gtest_brief=1 2>&1 | tail -n 12
  done
  echo "== test_conv2d_dtypes_gpu with CUINLINE_CONV2D_STAGE=1"
  CUINLINE_CONV2D_STAGE=1 "$build/tests/test_conv2d_dtypes_gpu" --gtest_brief=1 2>&1 | tail -n 12
  if [ "${SANITIZE:-0}" = 1 ]; then
    echo "== compute-sanitizer memcheck: the issue shapes (wgmma, staged and direct)"
    timeout 240 compute-sanitizer --tool memcheck --report-api-errors no \
      "$build/tests/test_conv2d_dtypes_gpu" --gtest_filter='*IssueShapes*' --gtest_brief=1 2>&1 | tail -n 6
  fi
  echo "== C API from PyTorch"
  PYTHONUNBUFFERED=1 timeout 180 python3 bench/torch_capi_check.py "$build-shared/libcuinline.so" 2>&1 | tail -n 40
  echo "== cuinline alone: staged (default) / direct (CUINLINE_CONV2D_STAGE=0)"
  "$build/bench/bench_conv2d_half" | tee "$OUT/conv2d_half_cpp.md"
  CUINLINE_CONV2D_STAGE=0 "$build/bench/bench_conv2d_half" | tee "$OUT/conv2d_half_cpp_direct.md"
  echo "== cuinline alone: the mma.sync tilings (CUINLINE_CONV2D_WGMMA=0)"
  CUINLINE_CONV2D_WGMMA=0 "$build/bench/bench_conv2d_half" | tee "$OUT/conv2d_half_cpp_mma.md"
  echo "== cuinline alone: without the halo form (CUINLINE_CONV2D_HALO=0)"
  CUINLINE_CONV2D_HALO=0 "$build/bench/bench_conv2d_half" | tee "$OUT/conv2d_half_cpp_nohalo.md"
  echo "== cuinline alone: without the window form (CUINLINE_CONV2D_WINDOW=0)"
  CUINLINE_CONV2D_WINDOW=0 "$build/bench/bench_conv2d_half" | tee "$OUT/conv2d_half_cpp_nowindow.md"
  echo "== cuinline alone: the seed in mixed layouts (input, weight, output)"
  for m in nchw,nchw,nhwc nhwc,nhwc,nchw nchw,nhwc,nhwc nhwc,nchw,nhwc; do
    CONV_BENCH_SHAPE=seed CONV_BENCH_DTYPE=f16 CONV_BENCH_LAYOUTS=$m "$build/bench/bench_conv2d_half" | grep seed
  done | tee "$OUT/conv2d_half_cpp_mixed.md"
  echo "== cuinline beside PyTorch"
  compile_flag=""
  [ "${NO_COMPILE:-0}" = 1 ] && compile_flag="--no-compile"
  # shellcheck disable=SC2086
  python3 bench/conv2d_half_peers.py --lib "$build/bench/libcuinline_bench_capi.so" --out "$OUT/conv2d_half.md" \
    $compile_flag 2>&1 | tail -n 40
  echo "== fp32 sweep: the non-square / dilated / strided shapes"
  python3 bench/conv2d_peers.py --lib "$build/bench/libcuinline_bench_capi.so" --out "$OUT/conv2d_sweep_new.md" \
    --no-compile --shapes "${SWEEP_SHAPES:-16,17,18,19,20,21,22,23}" 2>&1 | tail -n 14
  echo "== NVRTC compile times of the issue's variants on this host (cold, median of 5)"
  CUDA_CACHE_DISABLE=1 "$build/bench/bench_conv2d_compile_time" --set all --repeat 5 | tee "$OUT/conv2d_compile_time.txt"
  echo "== total: $(($(date +%s) - t0)) s"
}

main 2>&1 | tee "$OUT/issue19_log.txt"
