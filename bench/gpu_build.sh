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
