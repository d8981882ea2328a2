# Sourced by the run_gpu_*.sh scripts: build_all builds the tree in $build (Release: library, tests,
# benchmarks, CLI) and the shared library in $build-shared (for the Python peers' ctypes), the log in
# $OUT/${1:-build.txt}; exits with its tail on a failure.
build_all() {
  local log="$OUT/${1:-build.txt}"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUINLINE_BUILD_EXAMPLES=OFF \
    -DCUINLINE_WITH_REDIS=OFF >/dev/null || exit 1
  cmake --build "$build" -j"$(nproc)" >"$log" 2>&1 || { tail -n 30 "$log"; exit 1; }
  { cmake -S . -B "$build-shared" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DCUINLINE_BUILD_TESTS=OFF \
      -DCUINLINE_BUILD_BENCH=OFF -DCUINLINE_BUILD_EXAMPLES=OFF -DCUINLINE_BUILD_CLI=OFF -DCUINLINE_WITH_REDIS=OFF &&
    cmake --build "$build-shared" -j"$(nproc)"; } >>"$log" 2>&1 || { tail -n 20 "$log"; exit 1; }
}

# The start of a run_gpu_session*.sh call (t0 set by the caller): the GPUs, build_all, the build's
# time; the library's log level for what follows.
gpu_session_start() {
  nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
  build_all
  echo "== build: $(($(date +%s) - t0)) s"
  export CUINLINE_LOG_LEVEL=warn
}

# run_ctest REGEX TIMEOUT LOG [EXCLUDE]: the gpu-labelled tests matching REGEX (and not EXCLUDE) in
# $build (CTEST_J at a time, CTEST_TEST_TIMEOUT seconds each; a fresh cache), the whole run under
# TIMEOUT seconds, the log in $OUT/LOG; prints the summary and the failures' lines.
run_ctest() {
  CUINLINE_CACHE_DIR=$(mktemp -d) timeout "$2" ctest --test-dir "$build" -L gpu -R "$1" ${4:+-E "$4"} -j"${CTEST_J:-2}" \
    --timeout "${CTEST_TEST_TIMEOUT:-300}" --output-on-failure >"$OUT/$3" 2>&1
  grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|\(SEGFAULT\)|Not Run" "$OUT/$3" | head -n 30
  grep -E "Failure|FAILED|Which is|got .* want" "$OUT/$3" | cut -c1-240 | head -n 30
}
