#!/usr/bin/env bash
# Times `cuinline warm` of the 200-variant spec (examples/specs/bench200.json): with -j 16, 4 and 1,
# each into an empty cache, and a second run of the same spec over the filled cache (every entry
# already there). Prints a Markdown table (for docs/PERFORMANCE.md); with $OUT set, also writes it
# to $OUT/warm_bench.md (the only file it writes there). Stays under 2 minutes: each run has a time
# limit, and a run that hits it is reported as such.
#
#   bench/warm_bench.sh [path/to/cuinline]     (default: $CUINLINE_CLI, else build*/cuinline)
#   WARM_BENCH_ARCH=sm_90 (default) sets --arch; compiling needs no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."

cli=${1:-${CUINLINE_CLI:-}}
if [ -z "$cli" ]; then
  for candidate in build/cuinline build-release/cuinline build-*/cuinline build*/src/cli/cuinline; do
    if [ -x "$candidate" ]; then cli=$candidate; break; fi
  done
fi
if [ -z "$cli" ] || [ ! -x "$cli" ]; then
  echo "warm_bench: no cuinline executable; build the cuinline_cli target or pass its path" >&2
  exit 1
fi
# Cold compiles: where a driver is present NVRTC (CUDA 12.9+) answers a program it compiled before
# on this machine from the driver's compute cache (~/.nv/ComputeCache) in 15-40 ms.
export CUDA_CACHE_DISABLE=${CUDA_CACHE_DISABLE:-1}
spec=examples/specs/bench200.json
arch=${WARM_BENCH_ARCH:-sm_90}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
budget=110  # seconds for all runs together
status=0
rows=()

# run LABEL JOBS CACHE_DIR LIMIT_SECONDS
run() {
  local label=$1 jobs=$2 cache=$3 limit=$4 log=$tmp/$1.log
  local start end rc=0
  start=$(date +%s.%N)
  timeout "$limit" env CUINLINE_CACHE_DIR="$cache" CUINLINE_CACHE_MAX_BYTES=4294967296 \
    "$cli" warm --spec "$spec" --arch "$arch" -j "$jobs" >"$log" 2>&1 || rc=$?
  end=$(date +%s.%N)
  local wall summary compiled cached failed
  wall=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }')
  summary=$(grep -E '^warm: ' "$log" | tail -1 || true)
  compiled=$(sed -nE 's/^warm: ([0-9]+) compiled.*/\1/p' <<<"$summary")
  cached=$(sed -nE 's/.* ([0-9]+) already cached.*/\1/p' <<<"$summary")
  failed=$(sed -nE 's/.* ([0-9]+) failed.*/\1/p' <<<"$summary")
  if [ "$rc" -eq 124 ]; then
    wall="> $limit (time limit)"
    status=1
  elif [ "$rc" -ne 0 ]; then
    echo "warm_bench: run '$label' exited $rc; last lines:" >&2
    tail -5 "$log" >&2
    status=1
  fi
  if [ "$rc" -eq 0 ]; then echo "$summary" >"$tmp/$jobs.done"; fi
  rows+=("| $label | $jobs | ${compiled:--} | ${cached:--} | ${failed:--} | $wall |")
}

remaining() { echo $((budget - SECONDS > 5 ? budget - SECONDS : 5)); }

run "empty cache, -j 16" 16 "$tmp/cache16" 30
run "empty cache, -j 4" 4 "$tmp/cache4" 35
run "empty cache, -j 1" 1 "$tmp/cache1" "$(( $(remaining) - 10 > 5 ? $(remaining) - 10 : 5 ))"
# The second run of the same spec, over a cache one of the runs above filled completely.
full=""
for c in cache16 cache4 cache1; do
  if [ -z "$full" ] && grep -q ' 0 failed' "$tmp/${c#cache}.done" 2>/dev/null; then full=$c; fi
done
run "same spec again (all cached)" 16 "$tmp/${full:-cache16}" 10

table=$(
  echo "cuinline warm of $spec (200 variants: 195 elementwise + 5 conv2d) for $arch"
  echo "$("$cli" --version 2>/dev/null | head -1 || true); $(nproc) cores; $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "| run | workers | compiled | already cached | failed | wall s |"
  echo "|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
)
echo "$table"
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT"
  echo "$table" >"$OUT/warm_bench.md"
fi
exit "$status"
