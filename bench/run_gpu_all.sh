#!/usr/bin/env bash
# The whole GPU job, in two phases that each fit one 10-minute device call (run b right after a,
# on the same machine, so the build is reused). Writes under $OUT (at most 8 files a phase).
#   bench/run_gpu_all.sh a   build (Release, everything); every gpu-labelled test; runtime bench;
#                            elementwise peers (3 files)            → gpu_tests.log, summary.md, ...
#   bench/run_gpu_all.sh b   warm bench (200 variants, -j 1/4/16); `cuinline run` of the seed ops;
#                            conv2d peers (3 files)                 → summary.md, warm_bench.md, ...
#   bench/run_gpu_all.sh c   embedding and fusion: op host cost and graphs (bench_graphs), N-ary ops
#                            beside PyTorch eager / torch.compile, the fused ResNet block beside
#                            them, and the C API from PyTorch (libcuinline.so via ctypes: torch
#                            tensors, torch.cuda.graph, wrong-device tensors) → summary.md
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?OUT must name the output directory}"
phase=${1:?usage: run_gpu_all.sh a|b}
build=build-gpu
status=0
summary="$OUT/summary.md"
echo "# GPU run, phase $phase: $(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" >"$summary"

if [ "$phase" = a ]; then
  log="$OUT/gpu_tests.log"
  if ! { cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build "$build" -j16; } >"$log" 2>&1; then
    tail -40 "$log"
    exit 1
  fi
  # Elementwise gpu tests run inside run_gpu_elementwise.sh below.
  CUINLINE_CACHE_DIR=$(mktemp -d) timeout 400 ctest --test-dir "$build" -L gpu -E '[Ee]lementwise' \
    --output-on-failure --timeout 300 >>"$log" 2>&1 || status=1
  grep -E "tests passed|tests failed|Failed|\*\*\*" "$log" | tail -15
  { echo; echo "## bench_runtime"; CUINLINE_CACHE_DIR=$(mktemp -d) timeout 120 "$build/bench/bench_runtime"; } >>"$summary" 2>&1 || status=1
  OUT=$OUT BUILD_DIR=$build timeout 280 bash bench/run_gpu_elementwise.sh >/dev/null 2>&1 || status=1
  grep -E "^CHECK|^bandwidth f32|host cost" "$OUT/elementwise_gpu.log" | tail -30
elif [ "$phase" = c ]; then
  if ! { cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build "$build" -j16 &&
         cmake -S . -B build-gpu-shared -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
           -DCUINLINE_BUILD_TESTS=OFF -DCUINLINE_BUILD_BENCH=OFF -DCUINLINE_BUILD_EXAMPLES=OFF -DCUINLINE_BUILD_CLI=OFF &&
         cmake --build build-gpu-shared -j16; } >"$OUT/build.log" 2>&1; then
    tail -40 "$OUT/build.log"
    exit 1
  fi
  export CUINLINE_CACHE_DIR
  CUINLINE_CACHE_DIR=$(mktemp -d)
  {
    echo; echo "## C API from PyTorch (bench/torch_capi_check.py)"
    PYTHONUNBUFFERED=1 timeout 120 python3 bench/torch_capi_check.py build-gpu-shared/libcuinline.so || status=1
    echo; echo "## bench_graphs"; timeout 60 "$build/bench/bench_graphs" || status=1
    echo; echo "## bench_nary_bench"; timeout 120 "$build/bench/bench_nary_bench" || status=1
    echo; echo "## nary_peers.py"; PYTHONUNBUFFERED=1 timeout 240 python3 bench/nary_peers.py || status=1
    echo; echo "## bench_resnet_block"; timeout 60 "$build/bench/bench_resnet_block" || status=1
    echo; echo "## resnet_block_peers.py"; PYTHONUNBUFFERED=1 timeout 200 python3 bench/resnet_block_peers.py || status=1
  } >>"$summary" 2>&1
else
  OUT=$OUT timeout 150 bash bench/warm_bench.sh "$build/cuinline" >/dev/null 2>&1 || status=1
  cat "$OUT/warm_bench.md" 2>/dev/null
  {
    echo; echo "## cuinline run (random input, checked against a CPU reference)"
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
  OUT=$OUT CUINLINE_BUILD_DIR=build-gpu-conv2d timeout 300 bash bench/run_gpu_conv2d.sh >/dev/null 2>&1 || status=1
  tail -30 "$OUT/conv2d.md" 2>/dev/null
fi
echo "== phase $phase done $(date -u +%FT%TZ) status=$status"
tail -45 "$summary"
exit $status
