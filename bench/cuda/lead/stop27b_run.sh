#!/usr/bin/env bash
# Lead's device run (stop 27, second try), ONE call: the bulk-copy matvec (kernels_tma.cuh).
# Carry .devcarry/lf27b, packed here by
#   bench/cuda/pack.sh .devcarry/lf27b build/diskformer build/tests/df_cuda_tests build/df_make_model \
#     build/bench/cuda/bench_matvec_cuda
# PART=1 (default): the workbench chain (4B Q4_0 / Q8_0, 27B-like Q4_0) with mv_kernel under PDL
# beside the bulk-copy kernel at several ring sizes, the new tests, then 4B Q4_0 / Q8_0 and the
# default model's decode with --cuda-mv-tma-kb 0 / KB alternating.
# PART=2: df_cuda_tests (TEST_FILTER, or all) and the figures with TMA_KB (default 100).
# PART=tests: df_cuda_tests only (unfiltered), from CARRY: with the default model in the checkout only
# df_cuda_tests + df_make_model fit the 64 MiB transfer (32.3 MB packed; with diskformer 38.6 MB):
#   bench/cuda/pack.sh .devcarry/lf27t2 build/tests/df_cuda_tests build/df_make_model
#   CARRY=.devcarry/lf27t2 PART=tests bash bench/cuda/lead/stop27b_run.sh
set -uo pipefail
source bench/cuda/lead/lib.sh
lead_unpack ${CARRY:-.devcarry/lf27b}
if [ "${PART:-1}" = tests ]; then
  TESTS_TIMEOUT=${TESTS_TIMEOUT:-400} lead_tests
  lead_collect
  exit 0
fi
chmod +x $D/bench_matvec_cuda 2>/dev/null
KB=${TMA_KB:-100}
( mk /tmp/q3_4b_q4.gguf --preset qwen3_4b --type q4_0 &
  mk /tmp/q3_4b_q8.gguf --preset qwen3_4b --type q8_0 &
  [ "${PART:-1}" = 2 ] && mk /tmp/q35_27b_q4f.gguf --arch qwen35 --preset qwen35_27b --type q4_0 --mtp-layers 1 --fast-random &
  wait ) &
MK=$!
if [ "${PART:-1}" = 1 ]; then
  timeout 150 $D/bench_matvec_cuda --out $OUT/chain.json --chain q4_0:4b,q8_0:4b,q4_0:27b \
    --chain-cfgs ${CHAIN_CFGS:-1:0:0,1:0:0:100,1:0:0:110,1:0:0:72,1:0:2:100,1:0:0:180,1:0:0:0} 2>&1 | tee $OUT/chain.txt
  echo "chain rc=$? $((SECONDS - T0)) s"
  [ -x $D/df_cuda_tests ] && TESTS_TIMEOUT=120 lead_tests --gtest_filter="${TEST_FILTER:-MatvecCudaTma.*:CudaOps.CopyBatch*:MatvecCudaPipe.*:MatvecCudaL2Prefetch.*}"
  wait $MK; grep make $OUT/make.txt
  for r in a b; do
    bench q4_off_$r /tmp/q3_4b_q4.gguf -p 16 -n 128 -r 2
    bench q4_tma_$r /tmp/q3_4b_q4.gguf -p 16 -n 128 -r 2 --cuda-mv-tma-kb $KB
  done
  for r in a b; do
    bench q8_off_$r /tmp/q3_4b_q8.gguf -p 16 -n 128 -r 2
    bench q8_tma_$r /tmp/q3_4b_q8.gguf -p 16 -n 128 -r 2 --cuda-mv-tma-kb $KB
  done
  if [ -f models/default.gguf ]; then  # (the call may leave it out: 23 MB of the 64 MB transfer)
    bench def_off models/default.gguf -p 16 -n 128 -r 2
    bench def_tma models/default.gguf -p 16 -n 128 -r 2 --cuda-mv-tma-kb $KB
  fi
  bench q4_tma_prof /tmp/q3_4b_q4.gguf -p 16 -n 64 -r 1 --cuda-mv-tma-kb $KB --profile
else
  if [ -n "${TEST_FILTER:-}" ]; then lead_tests --gtest_filter="$TEST_FILTER"; else lead_tests; fi
  wait $MK; grep make $OUT/make.txt
  bench default models/default.gguf -p 512 -n 128 -r 2
  bench q3_4b_q4 /tmp/q3_4b_q4.gguf -p 512 -n 128 -r 2
  bench q3_4b_q8 /tmp/q3_4b_q8.gguf -p 512 -n 128 -r 2
  bench q35_27b /tmp/q35_27b_q4f.gguf -p 512 -n 64 -r 1
  bench default_spec models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 --spec-prompt models/heldout.txt
  bench q35_27b_spec /tmp/q35_27b_q4f.gguf -p 32 -n 64 -r 1 --spec mtp --draft-max 3 --draft-accept 0.8
fi
lead_collect
