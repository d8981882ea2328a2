#!/usr/bin/env bash
# What limits the seed's tensor-core Winograd kernel, in one call: harness variants (VARIANTS, indices of
# bench/conv2d_wino_tune.cu), the same with plain instead of streaming stores
# (-DCUINLINE_CONV2D_PLAIN_STORES), ncu on one variant (PROFILE), then the library's two Winograd sweep
# shapes beside PyTorch (bench/conv2d_peers.py --shapes 0,15).
#   OUT=/tmp/out bench/run_gpu_wino_profile.sh     (about 3 minutes on an H100)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cuinline-wino-profile}
mkdir -p "$OUT"
build=${CUINLINE_BUILD_DIR:-build-gpu}
variants=${VARIANTS:-14 22 23 24}
profile=${PROFILE:-14}

main() {
  t0=$(date +%s)
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  (cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUINLINE_BUILD_EXAMPLES=OFF \
    -DCUINLINE_WITH_REDIS=OFF >/dev/null && cmake --build "$build" -j12 --target cuinline_bench_capi >"$OUT/build.txt" 2>&1) &
  local build_pid=$!
  local flags=(-O3 -std=c++17 -arch=sm_90 --fmad=false -Xptxas=-O1)
  nvcc "${flags[@]}" bench/conv2d_wino_tune.cu -o /tmp/wt_bin || exit 1
  nvcc "${flags[@]}" -DCUINLINE_CONV2D_PLAIN_STORES bench/conv2d_wino_tune.cu -o /tmp/wt_plain || exit 1
  echo "== harness (streaming stores, then plain stores)"
  for v in $variants; do /tmp/wt_bin "$v" | tail -n 1; done
  for v in $variants; do /tmp/wt_plain "$v" | tail -n 1; done
  echo "== ncu, variant $profile"
  timeout 240 ncu --clock-control none -k regex:winograd -c 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats /tmp/wt_bin "$profile" \
    >"$OUT/ncu.txt" 2>&1
  grep -vE "^\s*$|----" "$OUT/ncu.txt" | grep -E "Throughput|Busy|Bandwidth|Hit Rate|Stall|Warp Cycles|Eligible|Issued|Active Warps|Achieved|Registers|Duration|No Eligible|L1|L2|DRAM|Shared" | head -60
  wait "$build_pid" || { tail -n 30 "$OUT/build.txt"; exit 1; }
  echo "== the Winograd sweep shapes beside PyTorch"
  CUINLINE_CACHE_DIR=$(mktemp -d) python3 bench/conv2d_peers.py --lib "$build/bench/libcuinline_bench_capi.so" \
    --out "$OUT/conv2d_wino_shapes.md" --shapes 0,15 --no-compile 2>&1 | tail -n 5
  echo "== total: $(($(date +%s) - t0)) s"
}

main 2>&1 | tee "$OUT/wino_profile_log.txt"
