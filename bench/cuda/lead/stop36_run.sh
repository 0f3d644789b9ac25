#!/usr/bin/env bash
# Lead's device run, stop 36 (issues 9, 10 and 11).
#   pack: bench/cuda/pack.sh .devcarry/lf36 build/diskformer build/df_make_model build/tests/df_cuda_tests
#   PART=ab (call 1, on h-balance's binary, 340b182): the new tests (CudaAttn.*,
#     MatvecCudaBalance.*, MatvecCudaStageX.*), decode with --no-cuda-mv-balance
#     --no-cuda-fuse-attn-gate (the code before this stop) against both on, each alone on the 27B;
#     --cuda-gemm-min-rows 8 / 16 / 32 (matmuls of 9..N rows by the matvec in launches of up to 8
#     rows, more by the GEMM): time to first token at -p 9,16,17,24,32 on the 4B and the 27B; a
#     4-row prefill's op profile (a verify's kernels) on the 27B and the default model.
#     (--cuda-mv-balance was measured slower and is not on main: branch h-balance.)
#   PART=tests: df_cuda_tests (all); the default model with --no-cuda-fuse-attn-gate and without,
#     alternating (plain and MTP at fixed depth 3); MTP adaptive; 4B Q4_0 / Q8_0; short-prompt
#     prefill; 27B plain, gate off, MTP at --draft-accept 0.8, its op profile:
#     PART=tests CARRY=.devcarry/lf36 bash bench/cuda/lead/stop36_run.sh
#   PART=gb (call 3, on branch h-groupbar's binary; the switch is not on main): df_cuda_tests on --cuda-mv-group-bar (a matvec row's warps meet at a barrier of their
#     own at each row group's end; default on), then decode with it off / on alternating:
#     PART=gb CARRY=.devcarry/lf36g bash bench/cuda/lead/stop36_run.sh
#   PART=final: df_cuda_tests, then decode and MTP with the defaults, and time to first token at
#     1..512 tokens with --cuda-gemm-min-rows 16 and 8 (the GEMM's split-K for few tiles, e.g. 17-128
#     tokens; 9..N rows by the matvec):
#     PART=final CARRY=.devcarry/lf36f bash bench/cuda/lead/stop36_run.sh
#   PART=check: the last code's CudaGemm.*, CudaOps.*, CudaDefaultModel.*, CudaAttn.* (FILTER=...):
#     PART=check CARRY=.devcarry/lf36c bash bench/cuda/lead/stop36_run.sh
#   env: TEST_ARGS=--gtest_filter=..., T27=seconds after which the 27B is skipped (default 470)
set -uo pipefail
source bench/cuda/lead/lib.sh
lead_unpack ${CARRY:-.devcarry/lf36}
cat $OUT/gpu.txt
if [ "${PART:-ab}" = check ]; then  # the last code's GEMM, matmul and model tests only (the device budget's rest)
  TESTS_TIMEOUT=${TESTS_TIMEOUT:-150} lead_tests --gtest_filter=${FILTER:-CudaGemm.*:CudaOps.*:CudaDefaultModel.*:CudaAttn.*}
  lead_collect
  exit 0
fi
( for m in q4_0 q8_0; do mk /tmp/q3_4b_$m.gguf --preset qwen3_4b --type $m & done; wait ) &
MK=$!
( mk /tmp/q35_27b_q4_0.gguf --arch qwen35 --preset qwen35_27b --type q4_0 --mtp-layers 1 --fast-random ) &
MK27=$!
BUDGET=9999
if [ "${PART:-ab}" = gb ]; then  # df_cuda_tests with --cuda-mv-group-bar on (the default), then off / on alternating
  TESTS_TIMEOUT=${TESTS_TIMEOUT:-300} lead_tests ${TEST_ARGS:-}
  wait $MK; grep make $OUT/make.txt
  GB="--no-cuda-mv-group-bar"
  for rep in 1 2; do
    bench q4_0_gboff$rep /tmp/q3_4b_q4_0.gguf -p 16 -n 128 -r 2 $GB
    bench q4_0_gbon$rep /tmp/q3_4b_q4_0.gguf -p 16 -n 128 -r 2
  done
  bench q8_0_gboff /tmp/q3_4b_q8_0.gguf -p 512 -n 128 -r 2 $GB
  bench q8_0_gbon /tmp/q3_4b_q8_0.gguf -p 512 -n 128 -r 2
  bench default_gboff models/default.gguf -p 512 -n 128 -r 2 $GB
  bench default_gbon models/default.gguf -p 512 -n 128 -r 2
  bench default_mtp models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 --spec-prompt models/heldout.txt
  if wait $MK27 && [ $((SECONDS - T0)) -lt ${T27:-470} ]; then
    bench q27_gboff /tmp/q35_27b_q4_0.gguf -p 512 -n 64 -r 1 $GB
    bench q27_gbon /tmp/q35_27b_q4_0.gguf -p 512 -n 64 -r 1
    bench q27_mtp /tmp/q35_27b_q4_0.gguf -p 32 -n 64 -r 1 --spec mtp --draft-max 3 --draft-accept 0.8
  fi
  lead_collect
  exit 0
fi
if [ "${PART:-ab}" = final ]; then  # the stop's last code: tests, decode, MTP, short prompts by N
  TESTS_TIMEOUT=${TESTS_TIMEOUT:-300} lead_tests ${TEST_ARGS:-}
  bench default models/default.gguf -p 512 -n 128 -r 2
  bench default_mtp models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 --spec-prompt models/heldout.txt
  bench default_mtp3 models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 --draft-fixed --spec-prompt models/heldout.txt
  wait $MK; grep make $OUT/make.txt
  bench q4_0_p512 /tmp/q3_4b_q4_0.gguf -p 512 -n 128 -r 2
  bench q8_0 /tmp/q3_4b_q8_0.gguf -p 512 -n 128 -r 2
  for g in 16 8; do bench q4_0_ttft_g$g /tmp/q3_4b_q4_0.gguf -p 1,8,9,16,17,32,64,128,512 -n 4 -r 2 --cuda-gemm-min-rows $g; done
  if wait $MK27 && [ $((SECONDS - T0)) -lt ${T27:-470} ]; then
    bench q27 /tmp/q35_27b_q4_0.gguf -p 512 -n 64 -r 1
    bench q27_mtp /tmp/q35_27b_q4_0.gguf -p 32 -n 64 -r 1 --spec mtp --draft-max 3 --draft-accept 0.8
    for g in 16 8; do bench q27_ttft_g$g /tmp/q35_27b_q4_0.gguf -p 1,9,16,17,32,64,128,512 -n 4 -r 1 --cuda-gemm-min-rows $g; done
  fi
  lead_collect
  exit 0
fi
OFF="--no-cuda-fuse-attn-gate"
TESTS_TIMEOUT=${TESTS_TIMEOUT:-300} lead_tests ${TEST_ARGS:-}
MTP3="--spec mtp --draft-max 3 --draft-fixed --spec-prompt models/heldout.txt"
for rep in 1 2; do
  bench default_off$rep models/default.gguf -p 512 -n 128 -r 2 $OFF
  bench default_on$rep models/default.gguf -p 512 -n 128 -r 2
  bench default_mtp3_off$rep models/default.gguf -p 64 -n 256 -r 2 $MTP3 $OFF
  bench default_mtp3_on$rep models/default.gguf -p 64 -n 256 -r 2 $MTP3
done
bench default_mtp models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 --spec-prompt models/heldout.txt
wait $MK; grep make $OUT/make.txt
bench q4_0_p512 /tmp/q3_4b_q4_0.gguf -p 512 -n 128 -r 2
bench q8_0 /tmp/q3_4b_q8_0.gguf -p 512 -n 128 -r 2
bench q4_0_short /tmp/q3_4b_q4_0.gguf -p 1,4,8,9,12,16,17 -n 4 -r 2
if wait $MK27 && [ $((SECONDS - T0)) -lt ${T27:-470} ]; then
  bench q27_off /tmp/q35_27b_q4_0.gguf -p 512 -n 64 -r 1 $OFF
  bench q27 /tmp/q35_27b_q4_0.gguf -p 512 -n 64 -r 1
  bench q27_mtp /tmp/q35_27b_q4_0.gguf -p 32 -n 64 -r 1 --spec mtp --draft-max 3 --draft-accept 0.8
  bench q27_short /tmp/q35_27b_q4_0.gguf -p 1,8,9,16 -n 4 -r 1
  prof q27 /tmp/q35_27b_q4_0.gguf -p 16 -n 16 -r 1
fi
lead_collect
