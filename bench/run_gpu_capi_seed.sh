#!/usr/bin/env bash
# The C API from PyTorch (bench/torch_capi_check.py on a shared libcuinline.so), then the seed in f16 and
# bf16 beside PyTorch eager and torch.compile (bench/conv2d_half_peers.py, L2 flushed), in one call.
#   OUT=/tmp/out bench/run_gpu_capi_seed.sh     (about 3 minutes on an H100)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cuinline-capi-seed}
mkdir -p "$OUT"

main() {
  t0=$(date +%s)
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  (cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUINLINE_BUILD_EXAMPLES=OFF -DCUINLINE_WITH_REDIS=OFF \
    >/dev/null && cmake --build build-gpu -j8 --target cuinline_bench_capi >"$OUT/build_bench.txt" 2>&1) &
  local bench_pid=$!
  if ! { cmake -S . -B build-gpu-shared -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
           -DCUINLINE_BUILD_TESTS=OFF -DCUINLINE_BUILD_BENCH=OFF -DCUINLINE_BUILD_EXAMPLES=OFF \
           -DCUINLINE_BUILD_CLI=OFF -DCUINLINE_WITH_REDIS=OFF >/dev/null &&
         cmake --build build-gpu-shared -j8; } >"$OUT/build_shared.txt" 2>&1; then
    tail -n 30 "$OUT/build_shared.txt"
    exit 1
  fi
  echo "== shared build: $(($(date +%s) - t0)) s"
  CUINLINE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 timeout 240 python3 bench/torch_capi_check.py \
    build-gpu-shared/libcuinline.so 2>&1 | tee "$OUT/torch_capi_check.txt" | grep -vE "^CHECK ok" | tail -n 20
  echo "== checks: $(grep -c '^CHECK ok' "$OUT/torch_capi_check.txt") ok, $(grep -c '^CHECK FAIL' "$OUT/torch_capi_check.txt") failed"
  grep "Winograd" "$OUT/torch_capi_check.txt"
  wait "$bench_pid" || { tail -n 30 "$OUT/build_bench.txt"; exit 1; }
  echo "== the seed in f16 / bf16 beside PyTorch, L2 flushed"
  CUINLINE_CACHE_DIR=$(mktemp -d) python3 bench/conv2d_half_peers.py --lib build-gpu/bench/libcuinline_bench_capi.so \
    --dtypes f16,bf16 --shapes seed --out "$OUT/half_seed.md" 2>&1 | tail -n 6
  echo "== total: $(($(date +%s) - t0)) s"
}

main 2>&1 | tee "$OUT/capi_seed_log.txt"
