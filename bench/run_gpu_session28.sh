#!/usr/bin/env bash
# Session 28 on the GPU, one call on a warm machine: build; CTEST (a ctest -R regex over the
# gpu-labelled tests; "none" skips); PROBE=1: bench/nchw_store_probe.cu (what the seed's NCHW output
# pattern costs without the convolution); NCU="seed:nchw seed:nhwc" (ncu's DRAM / L2 byte counts of
# the f16 seed's conv kernel); HALF=1: bench_conv2d_half (SHAPE / DTYPE filters) with the
# HALO_ROWS listed (default: the launch's rule); KB_ONLY (bench/kernelbench_conv.py problems, f16 and
# f32); COMPILE=1: NVRTC compile times (cold, median of 3).
# AB (with HALF=1): sets of variables to A/B (see below); CAPI=1: bench/torch_capi_check.py; PEERS=seed:
# bench/conv2d_half_peers.py on those shapes (PEERS_COMPILE=1: with torch.compile).
#   OUT=/tmp/out bench/run_gpu_session28.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cuinline-s28}
mkdir -p "$OUT"
build=${CUINLINE_BUILD_DIR:-build-gpu}
lib="$build-shared/libcuinline.so"
# shellcheck source=bench/gpu_build.sh
. bench/gpu_build.sh
t0=$(date +%s)
gpu_session_start
if [ "${PROBE:-0}" = 1 ]; then
  echo "== NCHW store probe ($(($(date +%s) - t0)) s)"
  nvcc -O3 -arch=sm_90 -o "$build/nchw_store_probe" bench/nchw_store_probe.cu && "$build/nchw_store_probe" | tee "$OUT/probe.txt"
fi
if [ "${HALF:-0}" = 1 ]; then
  # AB="NAME=VALUE,NAME=VALUE ..." : the bench once with each comma-separated set of variables (A/B of
  # the tuning overrides), before the HALO_ROWS runs.
  for set in ${AB:-}; do
    echo "== bench_conv2d_half, $set ($(($(date +%s) - t0)) s)"
    env ${set//,/ } CONV_BENCH_SHAPE=${SHAPE:-seed} CONV_BENCH_DTYPE=${DTYPE:-f16} timeout 120 \
      "$build/bench/bench_conv2d_half" 2>&1 | grep -E '^\| [a-z]|rror|what' | grep -v '^| shape' | sed "s/^/$set /" |
      tee -a "$OUT/half.txt"
  done
  for rows in ${HALO_ROWS:-default}; do
    echo "== bench_conv2d_half, halo rows $rows ($(($(date +%s) - t0)) s)"
    if [ "$rows" = default ]; then unset CUINLINE_CONV2D_HALO_ROWS; else export CUINLINE_CONV2D_HALO_ROWS=$rows; fi
    CONV_BENCH_SHAPE=${SHAPE:-seed} CONV_BENCH_DTYPE=${DTYPE:-f16} timeout 120 "$build/bench/bench_conv2d_half" 2>&1 |
      grep -E '^\| [a-z]|rror|what' | grep -v '^| shape' | sed "s/^/rows=$rows /" | tee -a "$OUT/half.txt"
    unset CUINLINE_CONV2D_HALO_ROWS
  done
fi
for item in ${NCU:-}; do
  echo "== ncu $item (f16) ($(($(date +%s) - t0)) s)"
  CONV_BENCH_SHAPE=${item%%:*} CONV_BENCH_LAYOUT=${item#*:} CONV_BENCH_DTYPE=f16 timeout 240 ncu --clock-control none \
    --kernel-name regex:cuinline_conv2d --launch-skip 10 --launch-count 1 \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_write.sum,lts__t_requests_op_write.sum,lts__t_sectors_op_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_srcunit_tex_op_write_lookup_miss.sum,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum,smsp__cycles_active.avg \
    "$build/bench/bench_conv2d_half" >"$OUT/ncu_${item/:/_}.txt" 2>&1
  grep -E "cuinline_conv2d|gpu__time|dram__|lts__|l1tex__|smsp__" "$OUT/ncu_${item/:/_}.txt" | cut -c1-160 | head -n 30
done
if [ -n "${CAPI:-}" ]; then
  echo "== torch_capi_check ($(($(date +%s) - t0)) s)"
  CUINLINE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 timeout "${CAPI_TIMEOUT:-240}" python3 bench/torch_capi_check.py "$lib" \
    >"$OUT/capi.txt" 2>&1
  echo "-- exit $?"; grep -cE "^CHECK ok" "$OUT/capi.txt"; grep -E "FAIL|Traceback|Error" "$OUT/capi.txt" | head -n 20
fi
if [ -n "${PEERS:-}" ]; then
  # PEERS=seed (shapes): cuinline beside PyTorch eager (PEERS_COMPILE=1: and torch.compile), f16 and bf16.
  echo "== conv2d_half_peers $PEERS ($(($(date +%s) - t0)) s)"
  CUINLINE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 timeout "${PEERS_TIMEOUT:-300}" python3 bench/conv2d_half_peers.py \
    --lib "$build/bench/libcuinline_bench_capi.so" --out "$OUT/peers.md" --shapes "$PEERS" \
    $([ "${PEERS_COMPILE:-0}" = 1 ] || echo --no-compile) 2>&1 | grep -v "^$" | cut -c1-300 | tail -n 14
fi
if [ "${CTEST:-none}" != none ]; then
  echo "== ctest ($(($(date +%s) - t0)) s)"
  run_ctest "$CTEST" "${CTEST_TIMEOUT:-240}" ctest.txt
fi
for dt in ${KB_DTYPES:-f16 f32}; do
  [ -n "${KB_ONLY:-}" ] || break
  echo "== KernelBench-style $KB_ONLY, $dt ($(($(date +%s) - t0)) s)"
  CUINLINE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 timeout "${KB_TIMEOUT:-200}" python3 bench/kernelbench_conv.py \
    --lib "$lib" --out "$OUT/kb_$dt.md" --samples 10 --only "$KB_ONLY" --dtype "$dt" \
    ${KB_COMPILE:+--compile} 2>&1 | grep -v "^$" | cut -c1-400 | tail -n 12
done
if [ "${COMPILE:-0}" = 1 ]; then
  echo "== NVRTC compile times on this host (cold, median of 3) ($(($(date +%s) - t0)) s)"
  CUDA_CACHE_DISABLE=1 "$build/bench/bench_conv2d_compile_time" --set all --repeat 3 | tee "$OUT/conv2d_compile_time.txt"
fi
echo "== done ($(($(date +%s) - t0)) s)"
