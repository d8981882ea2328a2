#!/usr/bin/env bash
# Tuning sweep of the pointwise form's launch on KernelBench's 1 x 1 problem (87) and two of
# bench/pointwise_peers.py's shapes: CONFIGS is a list of "label:ENV=VALUE ENV=VALUE" entries (the
# tuning overrides CUINLINE_CONV2D_HMMA_TILE / _PIPE), each run in its own process (they are read
# once). OUT=/tmp/out bench/tune_pointwise.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cuinline-tune}
mkdir -p "$OUT"
build=${CUINLINE_BUILD_DIR:-build-gpu}
lib="$build-shared/libcuinline.so"
. bench/gpu_build.sh
build_all
export CUINLINE_LOG_LEVEL=warn
IFS=';' read -ra configs <<<"${CONFIGS:-default:}"
for c in "${configs[@]}"; do
  label=${c%%:*}
  envs=${c#*:}
  for dt in ${DTYPES:-f16 f32}; do
    row=$(env $envs CUINLINE_CACHE_DIR="$(mktemp -d)" timeout 120 python3 bench/kernelbench_conv.py --lib "$lib" \
      --samples 10 --only 87 --dtype "$dt" ${PRECISION_ARGS:---precisions tf32} 2>&1 | grep "^| 87" | cut -d'|' -f3-7)
    echo "$label $dt |$row"
  done
  if [ -n "${PW_SHAPES:-}" ]; then
    (cd bench && env $envs CUINLINE_CACHE_DIR="$(mktemp -d)" timeout 120 python3 pointwise_peers.py --lib "../$lib" \
      --only "$PW_SHAPES" --dtypes f16 --samples 10 2>&1 | grep "^| [RUM]" | cut -d'|' -f2,5 | sed "s/^/$label /")
  fi
done
