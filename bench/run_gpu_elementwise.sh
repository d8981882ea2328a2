#!/usr/bin/env bash
# The elementwise GPU run (issue #3), for the GPU machine, from the repository root, after
#   cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build-gpu -j16
# Runs the gpu-labelled elementwise tests and bench/elementwise_peers.py (cuinline vs PyTorch on the
# same buffers). Writes exactly three files into $OUT:
#   elementwise_gpu.log     everything printed (tests, CHECK lines, timings)
#   elementwise_peers.md    the tables (for docs/PERFORMANCE.md)
#   elementwise_sweep.png   bandwidth vs size, cuinline vs PyTorch vs copy
# Takes about 2 minutes on an H100 (every step has its own time limit; 4 minutes at most).
set -uo pipefail
out=${OUT:?OUT must name the output directory}
build=${BUILD_DIR:-build-gpu}
mkdir -p "$out"
log="$out/elementwise_gpu.log"
# A fresh cache: the first calls really compile (and the run never reads someone else's entries).
cache=$(mktemp -d /tmp/cuinline-ew-cache-XXXXXX)
export CUINLINE_CACHE_DIR="$cache"
export PYTHONDONTWRITEBYTECODE=1
status=0
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1)"
  echo "== git $(git rev-parse --short HEAD 2>/dev/null) $(git status --short 2>/dev/null | wc -l) changed files"
  echo "== gpu tests"
  # Test names are ElementwiseGpu.* (ctest -R is case-sensitive).
  timeout 90 ctest --test-dir "$build" -L gpu -R '[Ee]lementwise' --output-on-failure --timeout 80
  rc=$?; echo "== ctest rc=$rc"; [ $rc -eq 0 ] || status=1
  echo "== ctypes bindings"
  timeout 10 python3 bench/elementwise_peers.py --selftest --lib "$build/bench/libcuinline_bench_capi.so"
  rc=$?; [ $rc -eq 0 ] || status=1
  echo "== peers"
  timeout 100 python3 bench/elementwise_peers.py --lib "$build/bench/libcuinline_bench_capi.so" \
    --table "$out/elementwise_peers.md" --plot "$out/elementwise_sweep.png"
  rc=$?; echo "== peers rc=$rc (1: a CHECK failed, see above)"; [ $rc -eq 0 ] || status=1
  # The same bandwidth table with cache-streaming hints (__ldcs / __stcs) on the vector loads and
  # stores: a template copy in CUINLINE_TEMPLATE_DIR (new cache keys, so these really compile).
  # Informational (for docs/PERFORMANCE.md); its table stays out of $OUT.
  hint=$(mktemp -d /tmp/cuinline-ew-hint-XXXXXX)
  sed -e 's/^#define EW_LOAD(p) __ldg(p)$/#define EW_LOAD(p) __ldcs(p)/' \
      -e 's/^#define EW_STORE(p, v) (\*(p) = (v))$/#define EW_STORE(p, v) __stcs(p, v)/' \
      kernel_templates/elementwise.cuh > "$hint/elementwise.cuh"
  if grep -q '__ldcs' "$hint/elementwise.cuh" && grep -q '__stcs' "$hint/elementwise.cuh"; then
    echo "== peers, bandwidth only, with __ldcs/__stcs hints"
    CUINLINE_TEMPLATE_DIR="$hint" timeout 35 python3 bench/elementwise_peers.py \
      --lib "$build/bench/libcuinline_bench_capi.so" --sections bandwidth --reps 9 --table "$hint/hints.md"
    echo "== hints rc=$? (informational)"
  fi
  rm -rf "$hint"
  echo "== done $(date -u +%FT%TZ) status=$status"
} > "$log" 2>&1
rm -rf "$cache"
tail -n 40 "$log"
exit $status
