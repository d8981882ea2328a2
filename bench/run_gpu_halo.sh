#!/usr/bin/env bash
# The f16/bf16 halo form after a launch change, in one call: its gpu tests (dtypes: issue shapes, special
# values, random halo shapes, random shapes; graphs), then the seed in f16 and bf16 beside PyTorch eager and
# torch.compile (bench/conv2d_half_peers.py, L2 flushed).
#   OUT=/tmp/out bench/run_gpu_halo.sh     (about 4 minutes on an H100)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cuinline-halo}
mkdir -p "$OUT"
build=${CUINLINE_BUILD_DIR:-build-gpu}

main() {
  t0=$(date +%s)
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUINLINE_BUILD_EXAMPLES=OFF -DCUINLINE_WITH_REDIS=OFF \
    >/dev/null && cmake --build "$build" -j16 --target cuinline_bench_capi test_conv2d_dtypes_gpu test_graphs_gpu \
    >"$OUT/build.txt" 2>&1 || { tail -n 30 "$OUT/build.txt"; exit 1; }
  echo "== build: $(($(date +%s) - t0)) s"
  export CUINLINE_CACHE_DIR
  CUINLINE_CACHE_DIR=$(mktemp -d)
  python3 bench/conv2d_half_peers.py --lib "$build/bench/libcuinline_bench_capi.so" --dtypes f16,bf16 --shapes seed \
    --out "$OUT/half_seed.md" 2>&1 | tail -n 6
  "$build/tests/test_conv2d_dtypes_gpu" --gtest_brief=1 \
    --gtest_filter='*IssueShapes*:*SpecialValues*:*RandomHaloShapes*:*RandomShapes*' 2>&1 | tail -n 4
  "$build/tests/test_graphs_gpu" --gtest_brief=1 2>&1 | tail -n 3
  echo "== total: $(($(date +%s) - t0)) s"
}

main 2>&1 | tee "$OUT/halo_log.txt"
