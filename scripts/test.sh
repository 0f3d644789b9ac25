#!/usr/bin/env bash
# Builds diskformer and runs its tests:
#   1. Release build in build/ with the llama.cpp reference from scripts/setup.sh (when
#      present), then every test (`ctest`: unit + reference labels);
#   2. a second build in build-asan/ with AddressSanitizer + UndefinedBehaviorSanitizer that
#      builds only df_unit_tests and runs the `unit` label under it.
# Usage: scripts/test.sh [--no-sanitize] [--jobs N] [--ref-dir DIR]
set -euo pipefail
cd "$(dirname "$0")/.."

REF_DIR=build/ref
JOBS=2
SANITIZE=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-sanitize) SANITIZE=0; shift ;;
    --jobs|-j) JOBS="$2"; shift 2 ;;
    --ref-dir) REF_DIR="$2"; shift 2 ;;
    *) echo "test.sh: unknown argument '$1' (--no-sanitize | --jobs N | --ref-dir DIR)" >&2; exit 2 ;;
  esac
done

SRC_DIR="$REF_DIR/llama.cpp"
LIB_DIR="$REF_DIR/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
REF_ARGS=()
ASAN_REF_ARGS=(-DDF_LLAMA_SRC= -DDF_LLAMA_LIB=)
if [[ -f "$SRC_DIR/include/llama.h" && -d "$LIB_DIR" ]]; then
  REF_ARGS=(-DDF_LLAMA_SRC="$PWD/$SRC_DIR" -DDF_LLAMA_LIB="$PWD/$LIB_DIR")
  # The sanitizer build gets the source tree only (unit tests read its vocab files); without
  # the libraries no llama.cpp code is loaded under ASan.
  ASAN_REF_ARGS=(-DDF_LLAMA_SRC="$PWD/$SRC_DIR" -DDF_LLAMA_LIB=)
else
  echo "test.sh: no llama.cpp reference in $REF_DIR (run scripts/setup.sh): reference tests are skipped" >&2
fi

section() { echo; echo "==== $* ===="; }
start=$SECONDS

section "Release build (build/)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDF_BENCH=OFF "${REF_ARGS[@]}"
ninja -C build -j"$JOBS"

# A failing test stage does not stop the next one; the script fails at the end.
failed=()
section "tests (ctest, build/)"
ctest --test-dir build --output-on-failure || failed+=("ctest build/")
echo "release build + tests: $((SECONDS - start)) s"

if [[ $SANITIZE == 1 ]]; then
  section "ASan + UBSan build (build-asan/, unit tests only)"
  # No reference tests and no benchmarks here: only df_unit_tests is built and run.
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDF_SANITIZE=ON \
        -DDF_BENCH=OFF "${ASAN_REF_ARGS[@]}"
  ninja -C build-asan -j"$JOBS" df_unit_tests
  section "unit tests under ASan + UBSan"
  ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1} \
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    ctest --test-dir build-asan -L unit --output-on-failure || failed+=("ctest build-asan/ (ASan+UBSan)")
fi
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "test.sh: FAILED: ${failed[*]} ($((SECONDS - start)) s)" >&2
  exit 1
fi
echo "test.sh: all passed in $((SECONDS - start)) s"
