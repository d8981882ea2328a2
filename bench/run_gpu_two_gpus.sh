#!/usr/bin/env bash
# The conv2d calls that take a stream-ordered workspace, on a machine with two GPUs, in one call:
# build (Release; and the shared library for ctypes); test_conv2d_workspace_gpu (every workspace
# refused: the device's memory held; the direct kernels instead), the multi-GPU and misuse tests
# (the second GPU), the f32 / f16 / bf16 dtype suite, the fp32 conv suite (F(2x2) Winograd and, with
# CUINLINE_CONV2D_WINOGRAD=4, F(4x4)), graphs; the C API from PyTorch (bench/torch_capi_check.py:
# with two GPUs also f32 channels-last and f16 NCHW conv2d on cuda:1, eager and in torch.cuda.graph);
# then the fp32 seed beside PyTorch eager (TF32 off) and torch.compile, L2 flushed (SUITES=0: not
# the suites and the seed).
#   OUT=/tmp/out bench/run_gpu_two_gpus.sh        (about 4 minutes on two H200s)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cuinline-two-gpus}
mkdir -p "$OUT"
build=${CUINLINE_BUILD_DIR:-build-gpu}

main() {
  t0=$(date +%s)
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUINLINE_BUILD_EXAMPLES=OFF \
    -DCUINLINE_WITH_REDIS=OFF >/dev/null || exit 1
  cmake --build "$build" -j"$(nproc)" --target cuinline_bench_capi test_conv2d_workspace_gpu test_multi_gpu_gpu \
    test_misuse_gpu test_conv2d_dtypes_gpu test_conv2d_gpu test_graphs_gpu 2>&1 | tail -n 2
  { cmake -S . -B "$build-shared" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DCUINLINE_BUILD_TESTS=OFF \
      -DCUINLINE_BUILD_BENCH=OFF -DCUINLINE_BUILD_EXAMPLES=OFF -DCUINLINE_BUILD_CLI=OFF -DCUINLINE_WITH_REDIS=OFF &&
    cmake --build "$build-shared" -j"$(nproc)"; } >"$OUT/build_shared.log" 2>&1 || tail -n 20 "$OUT/build_shared.log"
  echo "== build: $(($(date +%s) - t0)) s"
  export CUINLINE_CACHE_DIR CUINLINE_LOG_LEVEL=warn
  CUINLINE_CACHE_DIR=$(mktemp -d)
  echo "== no workspace (the device's memory held)"
  "$build/tests/test_conv2d_workspace_gpu" 2>&1 | tail -n 24
  echo "== the second GPU: multi-GPU and misuse tests"
  for t in test_multi_gpu_gpu test_misuse_gpu; do
    "$build/tests/$t" --gtest_brief=1 2>&1 | tail -n 6
  done
  echo "== C API from PyTorch (two GPUs)"
  PYTHONUNBUFFERED=1 timeout 240 python3 bench/torch_capi_check.py "$build-shared/libcuinline.so" 2>&1 | tail -n 45
  if [ "${SUITES:-1}" = 0 ]; then echo "== total: $(($(date +%s) - t0)) s"; return; fi
  echo "== gpu suites: dtypes, fp32 conv (F(2x2)), fp32 conv with F(4x4), graphs"
  "$build/tests/test_conv2d_dtypes_gpu" --gtest_brief=1 2>&1 | tail -n 6
  "$build/tests/test_conv2d_gpu" --gtest_brief=1 2>&1 | tail -n 6
  CUINLINE_CONV2D_WINOGRAD=4 "$build/tests/test_conv2d_gpu" --gtest_brief=1 2>&1 | tail -n 6
  "$build/tests/test_graphs_gpu" --gtest_brief=1 2>&1 | tail -n 6
  echo "== the fp32 seed beside PyTorch (TF32 off), L2 flushed"
  python3 bench/conv2d_half_peers.py --lib "$build/bench/libcuinline_bench_capi.so" --dtypes f32 --shapes seed \
    --out "$OUT/f32_seed.md" 2>&1 | tail -n 6
  echo "== total: $(($(date +%s) - t0)) s"
}

main 2>&1 | tee "$OUT/two_gpus_log.txt"
