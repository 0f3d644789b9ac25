#!/usr/bin/env bash
# Lead's device run, stop 33 (issue 9 / 11 figures on main, and where a 4B decode step goes).
#   PART=all: df_cuda_tests while qwen3 4B Q4_0 / Q8_0 files are made (df_make_model --preset
#     qwen3_4b, niced); benches: the default model plain and MTP (heldout prompt), 4B Q4_0 and
#     Q8_0 (-p 512 -n 128); then bench --profile of 4B Q4_0 at positions 16..80 (-p 16 -n 64).
#   PART=b27: qwen35 27B Q4_0 (64 layers, with MTP): plain and MTP at --draft-accept 0.8.
#   PART=ab: the attention change (pre-wait tile loads, one used slice written directly) side by
#     side with main's binary (diskformer_old, 997faee): df_cuda_tests, then alternating benches
#     of 4B Q4_0 / Q8_0 at short and 512-token context, the default model plain and MTP, the
#     profile of 4B Q4_0 at positions 16..80, and (time left) the 27B Q4_0 with MTP; each also with
#     --cuda-mv-stage-x (x staged by cp.async in the int8-x launches without a norm prologue).
#   bench/cuda/pack.sh .devcarry/lf33 build/tests/df_cuda_tests build/diskformer /tmp/diskformer_old build/df_make_model
#   PART=ab CARRY=.devcarry/lf33 bash bench/cuda/lead/stop33_run.sh
#   PART=ab2: the attention grid with the heads along x and unused slices exiting before the wait,
#     side by side with 278a01a's binary (diskformer_old): df_cuda_tests, then alternating benches
#     (4B Q4_0 short / 512 context, Q8_0, the default model, the 27B Q4_0 if time is left).
#   cp build/diskformer /tmp/diskformer_278 (before the change); bench/cuda/pack.sh .devcarry/lf34
#     build/tests/df_cuda_tests build/diskformer /tmp/diskformer_278 build/df_make_model
#   PART=ab2 CARRY=.devcarry/lf34 bash bench/cuda/lead/stop33_run.sh
#   (short of device time: T27=0 QUICK=1 MODELS=q4_0 TEST_ARGS=--gtest_filter=... as in the docs)
#   PART=trace: stop32_run.sh's trace part (its own carry, .devcarry/lf32b).
#   bench/cuda/pack.sh .devcarry/lf32 build/tests/df_cuda_tests build/diskformer build/df_make_model
#   PART=all CARRY=.devcarry/lf32 bash bench/cuda/lead/stop33_run.sh
set -uo pipefail
source bench/cuda/lead/lib.sh
lead_unpack ${CARRY:-.devcarry/lf32}
lead_tests_only 330
if [ "${PART:-all}" = all ]; then
  ( for m in q4_0 q8_0; do mk /tmp/q3_4b_$m.gguf --preset qwen3_4b --type $m & done; wait ) &
  MK=$!
  TESTS_TIMEOUT=${TESTS_TIMEOUT:-330} lead_tests ${TEST_ARGS:-}
  bench default models/default.gguf -p 512 -n 128 -r 2
  bench default_mtp models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 --spec-prompt models/heldout.txt
  wait $MK; grep make $OUT/make.txt
  bench q4_0 /tmp/q3_4b_q4_0.gguf -p 512 -n 128 -r 2
  bench q8_0 /tmp/q3_4b_q8_0.gguf -p 512 -n 128 -r 2
  BUDGET=9999 prof q4_0_p16 /tmp/q3_4b_q4_0.gguf -p 16 -n 64 -r 1
elif [ "${PART}" = ab ]; then
  chmod +x $D/diskformer_old
  OLD=$D/diskformer_old
  ( for m in q4_0 q8_0; do mk /tmp/q3_4b_$m.gguf --preset qwen3_4b --type $m & done; wait ) &
  MK=$!
  ( sleep 60; mk /tmp/q35_27b_q4_0.gguf --arch qwen35 --preset qwen35_27b --type q4_0 --mtp-layers 1 --fast-random ) &
  MK27=$!
  TESTS_TIMEOUT=${TESTS_TIMEOUT:-300} lead_tests ${TEST_ARGS:-}
  wait $MK; grep make $OUT/make.txt
  BUDGET=9999
  for rep in 1 2; do
    DFBIN=$OLD bench q4_0_p16_old$rep /tmp/q3_4b_q4_0.gguf -p 16 -n 128 -r 2
    bench q4_0_p16_new$rep /tmp/q3_4b_q4_0.gguf -p 16 -n 128 -r 2
    bench q4_0_p16_sx$rep /tmp/q3_4b_q4_0.gguf -p 16 -n 128 -r 2 --cuda-mv-stage-x
  done
  DFBIN=$OLD bench q4_0_p512_old /tmp/q3_4b_q4_0.gguf -p 512 -n 128 -r 2
  bench q4_0_p512_new /tmp/q3_4b_q4_0.gguf -p 512 -n 128 -r 2
  bench q4_0_p512_sx /tmp/q3_4b_q4_0.gguf -p 512 -n 128 -r 2 --cuda-mv-stage-x
  DFBIN=$OLD bench q8_0_old /tmp/q3_4b_q8_0.gguf -p 512 -n 128 -r 2
  bench q8_0_new /tmp/q3_4b_q8_0.gguf -p 512 -n 128 -r 2
  bench q8_0_sx /tmp/q3_4b_q8_0.gguf -p 512 -n 128 -r 2 --cuda-mv-stage-x
  DFBIN=$OLD bench default_old models/default.gguf -p 512 -n 128 -r 2
  bench default_new models/default.gguf -p 512 -n 128 -r 2
  bench default_sx models/default.gguf -p 512 -n 128 -r 2 --cuda-mv-stage-x
  DFBIN=$OLD bench default_mtp_old models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 --spec-prompt models/heldout.txt
  bench default_mtp_new models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 --spec-prompt models/heldout.txt
  prof q4_0_p16 /tmp/q3_4b_q4_0.gguf -p 16 -n 64 -r 1
  prof q4_0_p16_sx /tmp/q3_4b_q4_0.gguf -p 16 -n 64 -r 1 --cuda-mv-stage-x
  wait $MK27; grep make $OUT/make.txt | tail -1
  if [ $((SECONDS - T0)) -lt 470 ]; then
    DFBIN=$OLD bench q27_old /tmp/q35_27b_q4_0.gguf -p 512 -n 64 -r 1
    bench q27_new /tmp/q35_27b_q4_0.gguf -p 512 -n 64 -r 1
    bench q27_sx /tmp/q35_27b_q4_0.gguf -p 512 -n 64 -r 1 --cuda-mv-stage-x
    bench q27_mtp_new /tmp/q35_27b_q4_0.gguf -p 32 -n 64 -r 1 --spec mtp --draft-max 3 --draft-accept 0.8
  fi
elif [ "${PART}" = ab2 ]; then
  chmod +x $D/diskformer_278
  OLD=$D/diskformer_278
  ( for m in ${MODELS:-q4_0 q8_0}; do mk /tmp/q3_4b_$m.gguf --preset qwen3_4b --type $m & done; wait ) &
  MK=$!
  MK27=
  if [ "${T27:-300}" -gt 0 ]; then
    ( sleep 30; mk /tmp/q35_27b_q4_0.gguf --arch qwen35 --preset qwen35_27b --type q4_0 --mtp-layers 1 --fast-random ) &
    MK27=$!
  fi
  TESTS_TIMEOUT=${TESTS_TIMEOUT:-200} lead_tests ${TEST_ARGS:-}
  wait $MK; grep make $OUT/make.txt
  BUDGET=9999
  for rep in 1 2; do
    DFBIN=$OLD bench q4_0_p16_old$rep /tmp/q3_4b_q4_0.gguf -p 16 -n 128 -r 2
    bench q4_0_p16_new$rep /tmp/q3_4b_q4_0.gguf -p 16 -n 128 -r 2
  done
  DFBIN=$OLD bench default_old models/default.gguf -p 512 -n 128 -r 2
  bench default_new models/default.gguf -p 512 -n 128 -r 2
  if [ -z "${QUICK:-}" ]; then  # QUICK=1: 4B Q4_0 at short context and the default model only
    DFBIN=$OLD bench q4_0_p512_old /tmp/q3_4b_q4_0.gguf -p 512 -n 128 -r 2
    bench q4_0_p512_new /tmp/q3_4b_q4_0.gguf -p 512 -n 128 -r 2
    DFBIN=$OLD bench q8_0_old /tmp/q3_4b_q8_0.gguf -p 512 -n 128 -r 2
    bench q8_0_new /tmp/q3_4b_q8_0.gguf -p 512 -n 128 -r 2
    bench default_mtp_new models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 --spec-prompt models/heldout.txt
  fi
  if [ -n "$MK27" ] && wait $MK27 && [ $((SECONDS - T0)) -lt ${T27:-300} ]; then
    DFBIN=$OLD bench q27_old /tmp/q35_27b_q4_0.gguf -p 512 -n 64 -r 1
    bench q27_new /tmp/q35_27b_q4_0.gguf -p 512 -n 64 -r 1
  fi
elif [ "${PART}" = b27 ]; then
  mk /tmp/q35_27b_q4_0.gguf --arch qwen35 --preset qwen35_27b --type q4_0 --mtp-layers 1 --fast-random
  grep make $OUT/make.txt
  bench q27 /tmp/q35_27b_q4_0.gguf -p 512 -n 64 -r 1
  bench q27_mtp /tmp/q35_27b_q4_0.gguf -p 32 -n 64 -r 1 --spec mtp --draft-max 3 --draft-accept 0.8
fi
lead_collect
