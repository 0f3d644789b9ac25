#!/usr/bin/env bash
# Builds diskformer and runs its tests:
#   1. Release build in build/ with the llama.cpp reference from scripts/setup.sh (when
#      present), then every test (`ctest`: unit + reference labels), then scripts/run.sh;
#   2. a second build in build-asan/ with AddressSanitizer + UndefinedBehaviorSanitizer that
#      builds only df_unit_tests and runs the `unit` label under it;
#   3. the libFuzzer targets (fuzz/) built with clang + ASan + UBSan in build-fuzz/, each run for
#      --fuzz-seconds (default 60) from its corpus fuzz/corpus/<target>/ (seeds and regressions).
# In CI (CI=true, or --require-ref) the llama.cpp reference must be there: a missing reference
# fails here, and a test that would skip for want of it fails (tests/reference_required.h).
# Without it (a developer's run) the reference tests are not built and the script says so.
# Usage: scripts/test.sh [--no-sanitize] [--no-fuzz] [--fuzz-seconds N] [--require-ref] [--jobs N] [--ref-dir DIR]
set -euo pipefail
cd "$(dirname "$0")/.."

REF_DIR=build/ref
JOBS=2
SANITIZE=1
FUZZ=1
FUZZ_SECONDS=60
REQUIRE_REF=0  # CI: the reference (and clang for the fuzz targets) must be there
if [[ ${CI:-} == true ]]; then REQUIRE_REF=1; fi
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-sanitize) SANITIZE=0; shift ;;
    --no-fuzz) FUZZ=0; shift ;;
    --fuzz-seconds) FUZZ_SECONDS="$2"; shift 2 ;;
    --require-ref) REQUIRE_REF=1; shift ;;
    --jobs|-j) JOBS="$2"; shift 2 ;;
    --ref-dir) REF_DIR="$2"; shift 2 ;;
    *) echo "test.sh: unknown argument '$1' (--no-sanitize | --no-fuzz | --fuzz-seconds N | --require-ref | --jobs N | --ref-dir DIR)" >&2; exit 2 ;;
  esac
done

NOT_RUN=()
fuzz_failed_logs=()
[[ $REF_DIR == /* ]] || REF_DIR="$PWD/$REF_DIR"
SRC_DIR="$REF_DIR/llama.cpp"
LIB_DIR="$REF_DIR/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
REF_ARGS=()
ASAN_REF_ARGS=(-DDF_LLAMA_SRC= -DDF_LLAMA_LIB=)
if [[ -f "$SRC_DIR/include/llama.h" && -d "$LIB_DIR" ]]; then
  REF_ARGS=(-DDF_LLAMA_SRC="$SRC_DIR" -DDF_LLAMA_LIB="$LIB_DIR")
  # The sanitizer build gets the source tree only (unit tests read its vocab files); without
  # the libraries no llama.cpp code is loaded under ASan.
  ASAN_REF_ARGS=(-DDF_LLAMA_SRC="$SRC_DIR" -DDF_LLAMA_LIB=)
else
  why="no llama.cpp reference in $REF_DIR:"
  [[ -f "$SRC_DIR/include/llama.h" ]] || why+=" $SRC_DIR/include/llama.h is missing;"
  [[ -d "$LIB_DIR" ]] || why+=" $LIB_DIR is missing;"
  if [[ $REQUIRE_REF == 1 ]]; then
    echo "test.sh: FAILED: $why CI (CI=true or --require-ref) needs the reference: run scripts/setup.sh" >&2
    exit 1
  fi
  echo "test.sh: $why run scripts/setup.sh. df_ref_tests is not built and the unit tests that need the" \
       "reference skip (ctest lists them as not run)" >&2
  NOT_RUN+=("df_ref_tests and the reference unit tests ($why)")
fi
# Tests read this to fail rather than skip when the reference is missing.
if [[ $REQUIRE_REF == 1 ]]; then export DF_REQUIRE_REFERENCE=1; fi

section() { echo; echo "==== $* ===="; }
start=$SECONDS

section "Release build (build/)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDF_BENCH=OFF "${REF_ARGS[@]}"
ninja -C build -j"$JOBS"

# A failing test stage does not stop the next one; the script fails at the end.
failed=()
section "tests (ctest, build/)"
# -j: every test writes its files under its own folder (tests/test_util.h test_dir), so tests
# run side by side (701 tests: 591 s one at a time, 384 s at -j2 on 2 cores, 2026-12-05).
ctest --test-dir build -j"$JOBS" --output-on-failure || failed+=("ctest build/")
section "scripts/run.sh (the README's run command), from another folder"
# Its stdout must be the prompt and the default model's greedy completion of it.
want=$(build/diskformer run -p $'def fibonacci(n):\n' -n 96 --temp 0 2>/dev/null) || want=
if ! got=$(root=$PWD && cd / && "$root/scripts/run.sh"); then
  failed+=("scripts/run.sh (non-zero exit)")
elif [[ -z $want || $got != "$want" || $got != $'def fibonacci(n):\n'?* ]]; then
  failed+=("scripts/run.sh (printed '$got', expected the greedy completion '$want')")
else
  echo "scripts/run.sh: ${#got} bytes, the greedy completion"
fi
echo "release build + tests: $((SECONDS - start)) s"

if [[ $SANITIZE == 1 ]]; then
  section "ASan + UBSan build (build-asan/, unit tests only)"
  # No reference tests and no benchmarks here: only df_unit_tests is built and run.
  # CPU only (-DDF_CUDA=OFF): the CUDA code is compiled by the release build above.
  # -O1 -g1 (line tables: ASan's reports keep file:line): the build is ~35 % shorter than at
  # -O2 -g and the tests ~12 % longer (measured on 2 cores, 2026-12-02).
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDF_SANITIZE=ON \
        -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
        -DDF_BENCH=OFF -DDF_CUDA=OFF "${ASAN_REF_ARGS[@]}"
  ninja -C build-asan -j"$JOBS" df_unit_tests
  section "unit tests under ASan + UBSan"
  ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1} \
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    ctest --test-dir build-asan -L unit -j"$JOBS" --output-on-failure || failed+=("ctest build-asan/ (ASan+UBSan)")
fi

if [[ $FUZZ == 1 ]]; then
  section "fuzz targets (build-fuzz/, clang + libFuzzer + ASan + UBSan, ${FUZZ_SECONDS} s each)"
  if command -v clang++ >/dev/null 2>&1; then
    fuzz_start=$SECONDS
    CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDF_FUZZ=ON \
          -DDF_TESTS=OFF -DDF_BENCH=OFF -DDF_CUDA=OFF "${ASAN_REF_ARGS[@]}"
    FUZZ_TARGETS=(fuzz_gguf fuzz_tokenizer fuzz_model fuzz_server_request)
    if ninja -C build-fuzz -j"$JOBS" "${FUZZ_TARGETS[@]}"; then
      echo "fuzz build: $((SECONDS - fuzz_start)) s"
      for t in "${FUZZ_TARGETS[@]}"; do
        # New inputs go to build-fuzz/corpus/<t> (first directory); fuzz/corpus/<t> is read only.
        mkdir -p "build-fuzz/corpus/$t" "build-fuzz/artifacts/$t"
        dict=(); [[ -f "fuzz/$t.dict" ]] && dict=(-dict="fuzz/$t.dict")
        echo "+ $t: ${FUZZ_SECONDS} s"
        mkdir -p build-fuzz/logs
        rc=0
        ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1} \
        UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
          "build-fuzz/fuzz/$t" -max_total_time="$FUZZ_SECONDS" -timeout=30 -rss_limit_mb=2048 \
            -print_final_stats=1 -artifact_prefix="build-fuzz/artifacts/$t/" "${dict[@]}" \
            "build-fuzz/corpus/$t" "fuzz/corpus/$t" 2>&1 | tee "build-fuzz/logs/$t.log" || rc=$?
        if [[ $rc != 0 ]]; then
          failed+=("$t (crash input in build-fuzz/artifacts/$t/)")
          fuzz_failed_logs+=("build-fuzz/logs/$t.log")
        fi
      done
    else
      failed+=("fuzz build (build-fuzz/)")
    fi
    echo "fuzz build + runs: $((SECONDS - fuzz_start)) s"
  elif [[ $REQUIRE_REF == 1 ]]; then
    failed+=("fuzz targets: no clang++ (scripts/setup.sh installs clang libclang-rt-dev llvm)")
  else
    echo "test.sh: no clang++: fuzz targets not built (scripts/setup.sh installs them)" >&2
    NOT_RUN+=("fuzz targets (no clang++)")
  fi
fi

# A fuzzer's finding, again at the end of the output (where a CI log's tail shows it): the
# sanitizer's or libFuzzer's report from its first line on, and the input in base64.
for log in "${fuzz_failed_logs[@]}"; do
  echo "---- $log: the fuzzer's report ----" >&2
  first=$(grep -n -m1 -E '==[0-9]+==ERROR|runtime error:|deadly signal|ERROR: libFuzzer|ERROR: LeakSanitizer' "$log" | cut -d: -f1 || true)
  if [[ -n $first ]]; then sed -n "${first},$((first + 80))p" "$log" >&2; else tail -n 40 "$log" >&2; fi
  grep -E '^Base64: |Test unit written to' "$log" >&2 || true
done
if [[ ${#NOT_RUN[@]} -gt 0 ]]; then
  echo "test.sh: NOT RUN: ${NOT_RUN[*]}" >&2
fi
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "test.sh: FAILED: ${failed[*]} ($((SECONDS - start)) s)" >&2
  exit 1
fi
echo "test.sh: all passed in $((SECONDS - start)) s"
