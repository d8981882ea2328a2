#!/usr/bin/env bash
# N-ary elementwise ops on a GPU (issue 17), one device call: build (Release), the elementwise and
# N-ary gpu tests, `cuinline run` / `bench` of N-ary ops (random inputs, CPU reference, poisoned
# outputs), bench/gelu_tune.cu (kernel shapes for compute-heavier expressions), and bench_nary_bench
# beside bench/nary_peers.py (PyTorch eager and torch.compile on the same expressions, same run).
# Writes under $OUT: build.log, gpu_tests.log, cli.txt, gelu_tune.txt, nary.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?OUT must name the output directory}"
build=${BUILD_DIR:-build-gpu}
export PATH=/usr/local/cuda/bin:$PATH
status=0
echo "# $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) $(git rev-parse --short HEAD 2>/dev/null)"
if ! { cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build "$build" -j16; } >"$OUT/build.log" 2>&1; then
  tail -40 "$OUT/build.log"
  exit 1
fi
export CUINLINE_CACHE_DIR
CUINLINE_CACHE_DIR=$(mktemp -d)
timeout 300 ctest --test-dir "$build" -L gpu -R "${GPU_TESTS:-Nary|CliNary|Elementwise}" --output-on-failure --timeout 240 \
  >"$OUT/gpu_tests.log" 2>&1 || status=1
grep -E "tests passed|tests failed|\*\*\*Failed|Failed  " "$OUT/gpu_tests.log" | tail -12
cli() {  # cli run|bench OP ARGS...: one command, echoed, its last lines kept
  echo "\$ cuinline $1 '$2' ${*:3}"
  timeout 60 "$build/cuinline" "$@" 2>&1 | tail -6 || status=1
}
{
  cli run 'add(in1)|relu' --inputs 8192x28672,28672 --dtype f32
  cli run 'add(in1)|relu' --inputs 8192x28672,28672 --dtype bf16
  cli run 'mul(in1)|where(in2,in3)|add(0.5)|where(in2,0.1)|relu' --inputs 4096x4096,4096x4096,4096,4096x1 --dtype f16
  cli run 'div(in1)|sub(in2)|clamp(-1,1)' --inputs 33x129,33x1,scalar --dtype f64
  cli run 'expr([a, b] a / (1.0f + expf(-a)) * b)' --inputs 8192x28672,8192x28672 --dtype bf16
  cli bench 'add(in1)|relu' --inputs 8192x28672,28672 --dtype f32
  cli bench 'expr([a, b] a / (1.0f + expf(-a)) * b)' --inputs 8192x28672,8192x28672 --dtype bf16
} >"$OUT/cli.txt" 2>&1
cat "$OUT/cli.txt"
{ nvcc -O3 -arch=sm_90 -o /tmp/gelu_tune bench/gelu_tune.cu && timeout 120 /tmp/gelu_tune; } >"$OUT/gelu_tune.txt" 2>&1 || status=1
cat "$OUT/gelu_tune.txt"
{
  echo "## bench_nary_bench"; timeout 150 "$build/bench/bench_nary_bench" || status=1
  echo; echo "## nary_peers.py"; PYTHONUNBUFFERED=1 timeout 240 python3 bench/nary_peers.py || status=1
} >"$OUT/nary.txt" 2>&1
cat "$OUT/nary.txt"
echo "== done $(date -u +%FT%TZ) status=$status"
exit $status
