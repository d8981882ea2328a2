#!/usr/bin/env bash
# The GPU runner: the gpu-labelled tests and every benchmark of docs/PERFORMANCE.md beside its peers,
# in phases that each fit one 10-minute device call. Run the phases on one machine in turn: the build
# ($CUINLINE_BUILD_DIR, default build-gpu, and build-gpu-shared for the Python scripts' ctypes) is
# reused. Everything is written under $OUT (default /tmp/cuinline-gpu).
#   bench/run_gpu_all.sh a   build; every gpu-labelled test; bench_runtime; the elementwise ops beside
#                            PyTorch (bench/elementwise_peers.py: exactness, bandwidth, size sweep,
#                            host cost)                  → gpu_tests.log, summary.md, elementwise_*.md/png
#   bench/run_gpu_all.sh b   cuinline warm of 200 variants (-j 1/4/16); whole-process compile / info /
#                            warm times (bench/cli_process_times.sh); `cuinline run` of the seed ops;
#                            the fp32 conv2d sweep beside PyTorch (bench/conv2d_peers.py) and NVRTC
#                            times of its variants          → summary.md, warm_bench.md, conv2d*.md/png
#   bench/run_gpu_all.sh c   embedding: op host cost and graphs (bench_graphs), N-ary ops beside PyTorch
#                            eager / torch.compile, the fused ResNet block beside them, the C API from
#                            PyTorch (bench/torch_capi_check.py)                        → summary.md
#   bench/run_gpu_all.sh jit  the JIT policies (docs/jit.md): the generic kernels' gpu tests (elementwise,
#                            conv2d and row reductions) and the elementwise / graph suites under the
#                            default async policy; first calls of never-seen variants (elementwise and
#                            conv2d), the generic conv2d kernel's time, and generic vs specialized
#                            bandwidth beside PyTorch (bench/jit_first_call.py, fresh cache); the same for
#                            the row reductions (bench/reductions_peers.py --jit); where an elementwise
#                            compile's time goes (cuinline bench --compile); the C API from PyTorch
#                                  → jit_tests.log, jit_first_call.log, reductions_jit.log, summary.md
#   bench/run_gpu_all.sh rd  the row reductions (docs/reductions.md): their gpu tests; the C API on PyTorch
#                            tensors against torch.softmax / F.rms_norm / F.layer_norm, then their bandwidth
#                            beside PyTorch eager, torch.compile and a copy (bench/reductions_peers.py;
#                            RD_COMPILE=0: no torch.compile; RD_ARGS: more of its arguments, e.g.
#                            "--liger --quack" with bench/peers-requirements.txt installed)
#                                                          → reductions_tests.log, reductions_peers.md
#   bench/run_gpu_all.sh custom   what the variables below ask for, in this order:
#     HALF=1        bench_conv2d_half (SHAPE=all|seed|resnet|unet, default unet; DTYPE, default "f16 bf16")
#                   under each set of variables in AB ("NAME=VALUE+NAME=VALUE ..."; none: the defaults)
#     PEERS=seed,resnet,unet   bench/conv2d_half_peers.py on those shapes (PEERS_DTYPES, default f16,bf16;
#                   f32 too), with torch.compile unless PEERS_COMPILE=0
#     CAPI=1        bench/torch_capi_check.py (the C API on PyTorch tensors)
#     FUZZ=SECONDS, EWFUZZ=SECONDS, RDFUZZ=SECONDS   bench/conv2d_fuzz.py / bench/elementwise_fuzz.py /
#                   bench/reductions_fuzz.py (FUZZ_WORKERS at a
#                   time, default 8) on their regression cases, then random calls
#     KB=50,Y1,...  bench/kernelbench_conv.py --only KB ${KB_ARGS} in each dtype of KB_DTYPES (default f16),
#                   under each set of AB
#     PY="bench/SCRIPT.py ARGS"   a peer script that loads libcuinline.so (conv2d_grouped_peers.py,
#                   pointwise_peers.py, conv2d_f64_peers.py, activation_peers.py, epilogue_cost.py,
#                   kernelbench_conv.py) with --lib $build-shared/libcuinline.so, under each set of AB
#     COMPILE=1     bench_conv2d_compile_time --set all on this host (cold: CUDA_CACHE_DISABLE=1;
#                   COMPILE_REPEAT, default 5)
#     CTEST=REGEX   the gpu-labelled tests matching REGEX (CTEST_EXCLUDE, CTEST_TIMEOUT)
#   e.g.  OUT=/tmp/out PEERS=seed,resnet,unet PEERS_DTYPES=f16,bf16,f32 bench/run_gpu_all.sh custom
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
phase=${1:?usage: bench/run_gpu_all.sh a|b|c|jit|rd|custom}
OUT=${OUT:-/tmp/cuinline-gpu}
mkdir -p "$OUT"
build=${CUINLINE_BUILD_DIR:-build-gpu}
t0=$(date +%s)
status=0
summary="$OUT/summary.md"
since() { echo "$(($(date +%s) - t0)) s"; }
# The benchmarks time the specialized kernels: under the default async policy a never-seen conv2d
# variant's first calls run the generic conv2d kernel until its compile lands (docs/jit.md). The
# test suites run under the default policy (run_ctest; the conv2d suites set sync themselves).
[ "$phase" = jit ] || export CUINLINE_JIT_POLICY=sync

# build_all: the tree in $build (Release: library, tests, benchmarks, CLI) and the shared library in
# $build-shared (for the Python scripts' ctypes); the log in $OUT/build.txt, its tail on a failure.
build_all() {
  local log="$OUT/build.txt"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUINLINE_BUILD_EXAMPLES=OFF \
    -DCUINLINE_WITH_REDIS=OFF >/dev/null || exit 1
  cmake --build "$build" -j"$(nproc)" >"$log" 2>&1 || { tail -n 30 "$log"; exit 1; }
  { cmake -S . -B "$build-shared" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DCUINLINE_BUILD_TESTS=OFF \
      -DCUINLINE_GENERIC_FATBIN="$PWD/$build/generated/ew_generic.fatbin" \
      -DCUINLINE_GENERIC_CONV_FATBIN="$PWD/$build/generated/conv2d_generic_rt.fatbin" \
      -DCUINLINE_GENERIC_ROWS_FATBIN="$PWD/$build/generated/rd_generic.fatbin" \
      -DCUINLINE_BUILD_BENCH=OFF -DCUINLINE_BUILD_EXAMPLES=OFF -DCUINLINE_BUILD_CLI=OFF -DCUINLINE_WITH_REDIS=OFF &&
    cmake --build "$build-shared" -j"$(nproc)"; } >>"$log" 2>&1 || { tail -n 20 "$log"; exit 1; }
}

# run_ctest REGEX TIMEOUT LOG [EXCLUDE]: the gpu-labelled tests matching REGEX (and not EXCLUDE) in
# $build (CTEST_J at a time, CTEST_TEST_TIMEOUT seconds each; a fresh cache), the whole run under
# TIMEOUT seconds, the log in $OUT/LOG; prints the summary and the failures' lines; fails unless
# every test passed.
run_ctest() {
  CUINLINE_JIT_POLICY=async CUINLINE_CACHE_DIR=$(mktemp -d) timeout "$2" ctest --test-dir "$build" -L gpu -R "$1" ${4:+-E "$4"} -j"${CTEST_J:-2}" \
    --timeout "${CTEST_TEST_TIMEOUT:-300}" --output-on-failure >"$OUT/$3" 2>&1
  grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|\(SEGFAULT\)|Not Run" "$OUT/$3" | head -n 30
  grep -E "Failure|FAILED|Which is|got .* want" "$OUT/$3" | cut -c1-240 | head -n 30
  grep -q "100% tests passed" "$OUT/$3"
}

phase_a() {
  echo "# GPU run, phase a: $(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" >"$summary"
  run_ctest . 420 gpu_tests.log || status=1
  { echo; echo "## bench_runtime"; CUINLINE_CACHE_DIR=$(mktemp -d) timeout 120 "$build/bench/bench_runtime"; } >>"$summary" 2>&1 || status=1
  echo "== elementwise peers ($(since))"
  local lib="$build/bench/libcuinline_bench_capi.so"
  {
    timeout 10 python3 bench/elementwise_peers.py --selftest --lib "$lib" &&
      CUINLINE_CACHE_DIR=$(mktemp -d) timeout 150 python3 bench/elementwise_peers.py --lib "$lib" \
        --table "$OUT/elementwise_peers.md" --plot "$OUT/elementwise_sweep.png"
  } >"$OUT/elementwise_peers.log" 2>&1 || status=1
  grep -E "^CHECK|^device" "$OUT/elementwise_peers.log" | tail -n 30
}

phase_b() {
  echo "# GPU run, phase b: $(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" >"$summary"
  OUT=$OUT timeout 150 bash bench/warm_bench.sh "$build/cuinline" >/dev/null 2>&1 || status=1
  cat "$OUT/warm_bench.md" 2>/dev/null
  { echo; echo "## cuinline as a whole process (bench/cli_process_times.sh)"; timeout 90 bash bench/cli_process_times.sh "$build"; } \
    >>"$summary" 2>&1 || status=1
  {
    echo; echo "## cuinline run (random input, checked against a CPU reference)"
    local cache
    cache=$(mktemp -d)
    for args in "relu --dtype f32 --shape 4096,393216" "leaky_relu --dtype f32 --shape 4096,393216 --slope 0.01" \
                "div_leaky_relu --dtype f32 --shape 4096,393216 --divisor 2 --slope 0.01" \
                "leaky_relu --dtype f16 --shape 4096,393216 --slope 0.01" "leaky_relu --dtype bf16 --shape 4096,393216 --slope 0.01" \
                "conv2d_div_leaky_relu --shape 128,8,128,128 --divisor 2 --slope 0.01"; do
      echo "\$ cuinline run $args"
      # shellcheck disable=SC2086
      CUINLINE_CACHE_DIR=$cache timeout 60 "$build/cuinline" run $args 2>&1 | tail -4 || status=1
    done
    echo; echo "## cuinline bench"; CUINLINE_CACHE_DIR=$cache timeout 90 "$build/cuinline" bench 2>&1 | tail -25
  } >>"$summary" 2>&1
  # Cold NVRTC time of every sweep variant in all three precisions (one process, one worker; the first
  # compile also loads NVRTC). Where a driver is present NVRTC looks programs up in the driver's
  # compute cache (~/.nv/ComputeCache): CUDA_CACHE_DISABLE=1 makes every compile a cold one.
  echo "== conv2d sweep compile times ($(since))"
  CUDA_CACHE_DISABLE=1 timeout 200 "$build/cuinline" warm --spec bench/conv2d_compile_spec.json --arch sm_90 -j1 \
    --no-progress --cache-dir "$(mktemp -d)" >"$OUT/conv2d_compile.txt" 2>&1 || status=1
  tail -n 2 "$OUT/conv2d_compile.txt"
  echo "== conv2d peers ($(since))"
  local lib="$build/bench/libcuinline_bench_capi.so"
  CUINLINE_CACHE_DIR=$(mktemp -d) timeout 240 python3 bench/conv2d_peers.py --lib "$lib" --out "$OUT/conv2d.md" \
    --plot "$OUT/conv2d_sweep.png" >"$OUT/conv2d_log.txt" 2>&1 || status=1
  # The Winograd shapes again on the direct FMA kernel: the fp32 algorithms side by side.
  CUINLINE_CONV2D_WINOGRAD=0 CUINLINE_CACHE_DIR=$(mktemp -d) timeout 60 python3 bench/conv2d_peers.py --lib "$lib" \
    --out "$OUT/conv2d_direct.md" --shapes 0,15 --no-compile >>"$OUT/conv2d_log.txt" 2>&1 || status=1
  tail -n 30 "$OUT/conv2d.md" 2>/dev/null
}

phase_c() {
  echo "# GPU run, phase c: $(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" >"$summary"
  export CUINLINE_CACHE_DIR
  CUINLINE_CACHE_DIR=$(mktemp -d)
  {
    echo; echo "## C API from PyTorch (bench/torch_capi_check.py)"
    PYTHONUNBUFFERED=1 timeout 150 python3 bench/torch_capi_check.py "$build-shared/libcuinline.so" || status=1
    echo; echo "## bench_graphs"; timeout 60 "$build/bench/bench_graphs" || status=1
    echo; echo "## bench_nary_bench"; timeout 120 "$build/bench/bench_nary_bench" || status=1
    echo; echo "## nary_peers.py"; PYTHONUNBUFFERED=1 timeout 240 python3 bench/nary_peers.py || status=1
    echo; echo "## bench_resnet_block"; timeout 60 "$build/bench/bench_resnet_block" || status=1
    echo; echo "## resnet_block_peers.py"; PYTHONUNBUFFERED=1 timeout 200 python3 bench/resnet_block_peers.py || status=1
  } >>"$summary" 2>&1
}

phase_jit() {
  echo "# GPU run, phase jit: $(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" >"$summary"
  run_ctest "JitGpu|JitConv2dGpu|ElementwiseGpu|FunctionsGpu|NaryGpu|GraphsGpu|MisuseGpu|ReductionsGpu" 300 jit_tests.log || status=1
  echo "== first calls and generic bandwidth ($(since))"
  { CUINLINE_CACHE_DIR=$(mktemp -d) timeout 240 python3 bench/jit_first_call.py "$build-shared/libcuinline.so" \
      ${JIT_ARGS:-}; } >"$OUT/jit_first_call.log" 2>&1 || status=1
  cat "$OUT/jit_first_call.log" >>"$summary"
  echo "== row reductions: first calls, generic kernels ($(since))"
  { CUINLINE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 timeout 240 python3 bench/reductions_peers.py \
      --lib "$build-shared/libcuinline.so" --jit; } >"$OUT/reductions_jit.log" 2>&1 || status=1
  cat "$OUT/reductions_jit.log" >>"$summary"
  echo "== compile phases ($(since))"
  { echo; echo "## cuinline bench --compile (this host)"; CUDA_CACHE_DISABLE=1 timeout 150 "$build/cuinline" bench --compile --arch sm_90 --repeat 5; } \
    >>"$summary" 2>&1 || status=1
  echo "== C API from PyTorch ($(since))"
  { CUINLINE_CACHE_DIR=$(mktemp -d) timeout 200 python3 bench/torch_capi_check.py "$build-shared/libcuinline.so"; } \
    >"$OUT/capi.log" 2>&1 || status=1
  grep -E "FAIL|passed|failed" "$OUT/capi.log" | tail -n 8 | tee -a "$summary"
}

phase_rd() {
  echo "# GPU run, phase rd: $(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" >"$summary"
  run_ctest "Reductions" 240 reductions_tests.log || status=1
  echo "== reductions peers ($(since))"
  { CUINLINE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 timeout 420 python3 bench/reductions_peers.py \
      --lib "$build-shared/libcuinline.so" --table "$OUT/reductions_peers.md" \
      $([ "${RD_COMPILE:-1}" = 1 ] || echo --no-compile) ${RD_ARGS:-}; } >"$OUT/reductions_peers.log" 2>&1 || status=1
  grep -E "^CHECK FAIL|^checks|^device|Traceback|Error" "$OUT/reductions_peers.log" | cut -c1-240 | head -n 20 | tee -a "$summary"
  { echo; echo "## reductions_peers.py"; cat "$OUT/reductions_peers.md" 2>/dev/null; } >>"$summary"
}

phase_custom() {
  if [ "${HALF:-0}" = 1 ]; then
    for set in ${AB:-none}; do
      for dt in ${DTYPE:-f16 bf16}; do
        echo "== bench_conv2d_half $dt, $set ($(since))"
        env $([ "$set" = none ] || echo "${set//+/ }") $([ "${SHAPE:-unet}" = all ] || echo "CONV_BENCH_SHAPE=${SHAPE:-unet}") CONV_BENCH_DTYPE=$dt \
          CUINLINE_CACHE_DIR=$(mktemp -d) timeout 120 "$build/bench/bench_conv2d_half" 2>&1 |
          grep -E '^\| [a-z]|rror|what' | grep -v '^| shape' | sed "s/^/$set /" | tee -a "$OUT/half.txt"
      done
    done
  fi
  if [ -n "${PEERS:-}" ]; then
    echo "== conv2d_half_peers $PEERS ($(since))"
    CUINLINE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 timeout "${PEERS_TIMEOUT:-300}" python3 bench/conv2d_half_peers.py \
      --lib "$build/bench/libcuinline_bench_capi.so" --out "$OUT/peers.md" --shapes "$PEERS" --dtypes "${PEERS_DTYPES:-f16,bf16}" \
      $([ "${PEERS_COMPILE:-1}" = 1 ] || echo --no-compile) 2>&1 | grep -v "^$" | cut -c1-300 | tail -n 14
  fi
  if [ -n "${CAPI:-}" ]; then
    echo "== torch_capi_check ($(since))"
    CUINLINE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 timeout "${CAPI_TIMEOUT:-300}" python3 bench/torch_capi_check.py \
      "$build-shared/libcuinline.so" >"$OUT/capi.txt" 2>&1
    echo "-- exit $?"; grep -cE "^CHECK ok" "$OUT/capi.txt"; grep -E "FAIL|Traceback|Error" "$OUT/capi.txt" | cut -c1-220 | head -n 20
  fi
  for fuzz in conv2d:${FUZZ:-} elementwise:${EWFUZZ:-} reductions:${RDFUZZ:-}; do
    local name=${fuzz%%:*} seconds=${fuzz#*:}
    [ -n "$seconds" ] || continue
    echo "== ${name}_fuzz, regressions then ${seconds} s a worker ($(since))"
    for what in "--cases-file bench/${name}_fuzz_regressions.jsonl" "--seconds $seconds --workers ${FUZZ_WORKERS:-8}"; do
      [ "${what%% *}" != --cases-file ] || [ -f "${what#* }" ] || continue
      # shellcheck disable=SC2086
      CUINLINE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 timeout $((seconds + 120)) python3 "bench/${name}_fuzz.py" \
        --lib "$build-shared/libcuinline.so" $what >>"$OUT/${name}_fuzz.txt" 2>&1
      echo "-- exit $?"
    done
    grep -E "^FAIL|seed|cases|passed|failed" "$OUT/${name}_fuzz.txt" | cut -c1-300 | tail -n 12
  done
  if [ -n "${KB:-}" ]; then
    for set in ${AB:-none}; do
      for dt in ${KB_DTYPES:-f16}; do
        echo "== kernelbench_conv $KB $dt, $set ($(since))"
        # shellcheck disable=SC2086
        env $([ "$set" = none ] || echo "${set//+/ }") CUINLINE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 timeout 240 \
          python3 bench/kernelbench_conv.py --lib "$build-shared/libcuinline.so" --only "$KB" --dtype "$dt" ${KB_ARGS:-} \
          --samples "${KB_SAMPLES:-30}" 2>&1 | grep -E '^\| [A-Z0-9]|rror|correct|FAIL' | sed "s/^/$set /" | tee -a "$OUT/kb.txt"
      done
    done
  fi
  if [ -n "${PY:-}" ]; then
    for set in ${AB:-none}; do
      echo "== $PY, $set ($(since))"
      # shellcheck disable=SC2086
      env $([ "$set" = none ] || echo "${set//+/ }") CUINLINE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 \
        timeout "${PY_TIMEOUT:-300}" python3 $PY --lib "$build-shared/libcuinline.so" 2>&1 | sed "s/^/$set /" | tee -a "$OUT/py.txt"
    done
  fi
  if [ "${COMPILE:-0}" = 1 ]; then
    echo "== bench_conv2d_compile_time --set all ($(since); $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2))"
    CUDA_CACHE_DISABLE=1 timeout 300 "$build/bench/bench_conv2d_compile_time" --set all --repeat "${COMPILE_REPEAT:-5}" 2>&1 |
      grep -v "^ptxas\|^$" | tee "$OUT/compile.txt" | cut -c1-60,100-200
  fi
  if [ "${CTEST:-none}" != none ]; then
    echo "== ctest ($(since))"
    run_ctest "$CTEST" "${CTEST_TIMEOUT:-240}" ctest.txt "${CTEST_EXCLUDE:-}" || status=1
  fi
}

nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
build_all
echo "== build: $(since)"
export CUINLINE_LOG_LEVEL=warn
case "$phase" in
  a) phase_a ;;
  b) phase_b ;;
  c) phase_c ;;
  jit) phase_jit ;;
  rd) phase_rd ;;
  custom) phase_custom ;;
  *) echo "usage: bench/run_gpu_all.sh a|b|c|jit|rd|custom" >&2; exit 2 ;;
esac
echo "== phase $phase done ($(since)) status=$status"
[ -f "$summary" ] && tail -n 45 "$summary"
exit $status
