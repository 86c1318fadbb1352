#!/usr/bin/env bash
# The whole test suite, as CI runs it on a clean clone: installs dependencies, builds the
# Release tree and runs every test, then builds with AddressSanitizer + UndefinedBehavior-
# Sanitizer and runs the fast labels (unit, ir, io: io includes the fuzz targets replaying
# mutated seed files, fuzz/replay/; and train) again under them. Why not the others, with their
# sanitized times: docs/SECURITY.md, "Sanitized runs of the other labels".
# Usage: scripts/test-all.sh            (RLX_SKIP_SANITIZERS=1 skips the second build)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

scripts/install-deps.sh
# peers some tests compare against (ONNX Runtime, an independent GGUF reader); without
# network they are missing and those tests skip, saying why
scripts/install-npm.sh build/npm || echo "test-all: npm peers not installed; the tests that need them will skip"
# Dawn and SwiftShader for the webgpu device (its tests fail in CI when they are missing)
scripts/install-webgpu.sh build/webgpu || echo "test-all: webgpu not installed; its tests will fail in CI and skip elsewhere"

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs" --timeout 900

if [ "${RLX_SKIP_SANITIZERS:-0}" != "1" ]; then
  # -O1: at -O2, GCC 12 takes minutes per file on instrumented intrinsics and big switches
  # (a SIMD kernel: over 9 minutes at -O2, 23 s at -O1). -g1: line tables are all the
  # sanitizers' reports use, and full debug information made some files 4x slower to build
  # (src/splat/project.cpp: 70 s with -g, 16 s with -g1).
  cmake -S . -B build-san -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-O1 -g1" \
        -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" -DRLX_SANITIZE=address,undefined -DRLX_BUILD_BENCH=OFF
  # only the programs of the labels run below: the sanitized build is the slow half of CI
  cmake --build build-san -j "$jobs" --target rlx_tests_unit rlx_tests_ir rlx_tests_io rlx_tests_train rlx_fuzz_replay
  # intercept_tls_get_addr=0: LeakSanitizer's record of dynamic TLS blocks (those of dlopen'd
  # libraries: Dawn's for the webgpu tests) could hold a bogus block, [0x1748, 0x24000284a)
  # for one test here, and its tracer then crashed reading it at exit ("Tracer caught signal
  # 11", "LeakSanitizer has encountered a fatal error") after the test had passed, every time
  # under ctest. rlx's own thread_local data is in the static TLS, which LSan still scans.
  ASAN_OPTIONS=detect_leaks=1:intercept_tls_get_addr=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-san --output-on-failure -j "$jobs" -L '^(unit|ir|io|train)$' --timeout 900
fi
echo "test-all: every test passed"
