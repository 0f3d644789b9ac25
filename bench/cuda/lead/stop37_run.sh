#!/usr/bin/env bash
# Lead's device run, stop 37 (issues 9 and 11).
#   pack: bench/cuda/pack.sh .devcarry/lf37 build/diskformer build/df_make_model build/tests/df_cuda_tests
#   PART=final: df_cuda_tests (all), then decode and MTP with the defaults (default model, 4B Q4_0 /
#     Q8_0, 27B Q4_0 with an MTP layer at --draft-accept 0.8), time to first token at 1..512 tokens:
#     PART=final CARRY=.devcarry/lf37 bash bench/cuda/lead/stop37_run.sh
#   (also --cuda-mv-blocks-per-sm 1 on the 4B Q4_0 and the 27B MTP: one persistent block per SM)
#   PART=pre (pack .devcarry/lf37p of the pre-round commit): df_cuda_tests, then --cuda-mv-preround 0 / 16384 / 4096
#     on the 27B MTP at --draft-accept 0.8 (twice, alternating), the 4B Q4_0 plain and the default model's MTP;
#     the 27B's 4-row prefill (a verify's kernels) profiled with the pre-round off and on:
#     PART=pre CARRY=.devcarry/lf37p bash bench/cuda/lead/stop37_run.sh
#   PART=final2 (pack .devcarry/lf37f): df_cuda_tests; the 27B MTP at fixed depth 3 (--draft-accept 0.8,
#     -n 128) with --cuda-mv-preround 0 / 12288 / 16384 / 12288 / 0; then the defaults: 27B plain and
#     adaptive MTP, 4B Q4_0 (and with the pre-round off) / Q8_0, the default model plain and MTP, time to first
#     token, the 27B's 4-row prefill profile:
#     PART=final2 CARRY=.devcarry/lf37f bash bench/cuda/lead/stop37_run.sh
#   PART=check: df_cuda_tests --gtest_filter=$FILTER only.
#   env: TEST_ARGS=--gtest_filter=..., T27=seconds after which the 27B is skipped (default 470)
set -uo pipefail
source bench/cuda/lead/lib.sh
lead_unpack ${CARRY:-.devcarry/lf37}
cat $OUT/gpu.txt
if [ "${PART:-final}" = pre ]; then  # x rounded once per matvec launch: tests, then --cuda-mv-preround 0 / 16384 / 4096
  ( mk /tmp/q35_27b_q4_0.gguf --arch qwen35 --preset qwen35_27b --type q4_0 --mtp-layers 1 --fast-random ) &
  MK27=$!
  mk /tmp/q3_4b_q4_0.gguf --preset qwen3_4b --type q4_0
  BUDGET=9999
  TESTS_TIMEOUT=${TESTS_TIMEOUT:-240} lead_tests ${TEST_ARGS:-}
  MTP="--spec mtp --draft-max 3 --draft-accept 0.8"
  wait $MK27; grep make $OUT/make.txt
  for rep in 1 2; do
    for pr in 0 16384 4096; do
      bench q27_mtp_pr${pr}_$rep /tmp/q35_27b_q4_0.gguf -p 32 -n 64 -r 1 $MTP --cuda-mv-preround $pr
    done
  done
  for pr in 0 16384 4096; do
    bench q4_0_pr$pr /tmp/q3_4b_q4_0.gguf -p 512 -n 128 -r 2 --cuda-mv-preround $pr
    bench default_mtp_pr$pr models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 --spec-prompt models/heldout.txt --cuda-mv-preround $pr
  done
  CUDA_MODULE_LOADING=EAGER prof q27_p4_pr0 /tmp/q35_27b_q4_0.gguf -p 4 -n 8 -r 1 --cuda-mv-preround 0
  CUDA_MODULE_LOADING=EAGER prof q27_p4_pr16k /tmp/q35_27b_q4_0.gguf -p 4 -n 8 -r 1 --cuda-mv-preround 16384
  lead_collect
  exit 0
fi
if [ "${PART:-final}" = final2 ]; then  # the stop's last code (pre-round default 12288): tests, A/B at fixed depth, figures
  ( for m in q4_0 q8_0; do mk /tmp/q3_4b_$m.gguf --preset qwen3_4b --type $m & done; wait ) &
  MK=$!
  ( mk /tmp/q35_27b_q4_0.gguf --arch qwen35 --preset qwen35_27b --type q4_0 --mtp-layers 1 --fast-random ) &
  MK27=$!
  BUDGET=9999
  TESTS_TIMEOUT=${TESTS_TIMEOUT:-240} lead_tests ${TEST_ARGS:-}
  wait $MK27; wait $MK; grep make $OUT/make.txt
  F3="--spec mtp --draft-max 3 --draft-fixed --draft-accept 0.8"
  i=0
  for pr in 0 12288 16384 12288 0; do
    i=$((i + 1))
    bench q27_mtp3_${i}_pr$pr /tmp/q35_27b_q4_0.gguf -p 32 -n 128 -r 1 $F3 --cuda-mv-preround $pr
  done
  bench q27_mtp /tmp/q35_27b_q4_0.gguf -p 32 -n 128 -r 1 --spec mtp --draft-max 3 --draft-accept 0.8
  bench q27 /tmp/q35_27b_q4_0.gguf -p 512 -n 64 -r 1
  bench q4_0_pr0 /tmp/q3_4b_q4_0.gguf -p 512 -n 128 -r 2 --cuda-mv-preround 0
  bench q4_0 /tmp/q3_4b_q4_0.gguf -p 512 -n 128 -r 2
  bench q8_0 /tmp/q3_4b_q8_0.gguf -p 512 -n 128 -r 2
  bench default models/default.gguf -p 512 -n 128 -r 2
  bench default_mtp models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 --spec-prompt models/heldout.txt
  bench default_mtp3 models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 --draft-fixed --spec-prompt models/heldout.txt
  bench q4_0_ttft /tmp/q3_4b_q4_0.gguf -p 1,9,16,32,128,512 -n 4 -r 2
  CUDA_MODULE_LOADING=EAGER prof q27_p4 /tmp/q35_27b_q4_0.gguf -p 4 -n 8 -r 1
  lead_collect
  exit 0
fi
if [ "${PART:-final}" = check ]; then
  TESTS_TIMEOUT=${TESTS_TIMEOUT:-150} lead_tests --gtest_filter=${FILTER:-CudaOps.*}
  lead_collect
  exit 0
fi
( for m in q4_0 q8_0; do mk /tmp/q3_4b_$m.gguf --preset qwen3_4b --type $m & done; wait ) &
MK=$!
( mk /tmp/q35_27b_q4_0.gguf --arch qwen35 --preset qwen35_27b --type q4_0 --mtp-layers 1 --fast-random ) &
MK27=$!
BUDGET=9999
TESTS_TIMEOUT=${TESTS_TIMEOUT:-300} lead_tests ${TEST_ARGS:-}
bench default models/default.gguf -p 512 -n 128 -r 2
bench default_mtp models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 --spec-prompt models/heldout.txt
bench default_mtp3 models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 --draft-fixed --spec-prompt models/heldout.txt
wait $MK; grep make $OUT/make.txt
bench q4_0_p512 /tmp/q3_4b_q4_0.gguf -p 512 -n 128 -r 2
bench q8_0 /tmp/q3_4b_q8_0.gguf -p 512 -n 128 -r 2
bench q4_0_ttft /tmp/q3_4b_q4_0.gguf -p 1,8,9,16,17,32,64,128,512 -n 4 -r 2
bench q4_0_bps1 /tmp/q3_4b_q4_0.gguf -p 512 -n 128 -r 2 --cuda-mv-blocks-per-sm 1
if wait $MK27 && [ $((SECONDS - T0)) -lt ${T27:-470} ]; then
  bench q27 /tmp/q35_27b_q4_0.gguf -p 512 -n 64 -r 1
  bench q27_mtp /tmp/q35_27b_q4_0.gguf -p 32 -n 64 -r 1 --spec mtp --draft-max 3 --draft-accept 0.8
  bench q27_ttft /tmp/q35_27b_q4_0.gguf -p 1,9,16,17,32,64,128,512 -n 4 -r 1
  bench q27_mtp_bps1 /tmp/q35_27b_q4_0.gguf -p 32 -n 64 -r 1 --spec mtp --draft-max 3 --draft-accept 0.8 --cuda-mv-blocks-per-sm 1
fi
lead_collect
