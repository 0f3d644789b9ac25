#!/usr/bin/env bash
# Lead's device run, stop 38 (issues 9 and 11).
#   pack: bench/cuda/pack.sh .devcarry/NAME build/diskformer build/df_make_model build/tests/df_cuda_tests
#   PART=base: df_cuda_tests (all), then decode with the defaults (default model plain / MTP adaptive /
#     MTP depth 3 on models/heldout.txt; 4B Q4_0 / Q8_0; 27B Q4_0 with an MTP layer plain and MTP at
#     --draft-accept 0.8, adaptive and depth 3):
#     PART=base CARRY=.devcarry/lf38a bash bench/cuda/lead/stop38_run.sh
#   PART=prof: the default model's op profile (bench --profile) at -p 1 / 4 / 8 (the prefill of 4 and 8 rows: a
#     verify's kernels), decode at 64 positions.
#   PART=ab (pack .devcarry/lf38c: --cuda-copy-kernels, the output head without get_rows): df_cuda_tests, then --no-cuda-copy-kernels / --cuda-copy-kernels
#     alternating on the default model (plain, MTP adaptive, MTP depth 3; twice), the 4B Q4_0, the 27B MTP at depth 3
#     (--draft-accept 0.8), and the default model's op profile at -p 1 / 4:
#     PART=ab CARRY=.devcarry/lf38c bash bench/cuda/lead/stop38_run.sh
#   PART=check: df_cuda_tests --gtest_filter=$FILTER only.
#   env: TEST_ARGS=--gtest_filter=..., DFBIN2=a second diskformer for A/B pairs (PART=ab)
set -uo pipefail
source bench/cuda/lead/lib.sh
lead_unpack ${CARRY:-.devcarry/lf38a}
cat $OUT/gpu.txt
if [ "${PART:-base}" = prof ]; then  # the default model's step by op: decode at 64 positions, prefill of 1 / 4 / 8 rows
  for p in 1 4 8; do CUDA_MODULE_LOADING=EAGER prof default_p$p models/default.gguf -p $p -n 64 -r 1; done
  for p in 1 4 8; do python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); pr=d.get('profile',d).get('prefill',{})
print('prefill', sys.argv[2], {k:v for k,v in pr.items() if k!='ops'})
for o in pr.get('ops',[])[:40]: print('  ', {k:(round(v,2) if isinstance(v,float) else v) for k,v in o.items()})
" $OUT/b_prof_default_p$p.json $p; done
  lead_collect
  exit 0
fi
if [ "${PART:-base}" = ab ]; then  # --cuda-copy-kernels off / on alternating (same binary), tests first
  ( mk /tmp/q3_4b_q4_0.gguf --preset qwen3_4b --type q4_0 ) &
  MK=$!
  MK27=
  if [ "${B27:-520}" != 0 ]; then
    ( mk /tmp/q35_27b_q4_0.gguf --arch qwen35 --preset qwen35_27b --type q4_0 --mtp-layers 1 --fast-random ) &
    MK27=$!
  fi
  BUDGET=9999
  if [ "${SKIP_TESTS:-0}" = 0 ]; then TESTS_TIMEOUT=${TESTS_TIMEOUT:-240} lead_tests ${TEST_ARGS:-}; fi
  HP="--spec-prompt models/heldout.txt"
  for rep in 1 2; do
    for ck in no-cuda-copy-kernels cuda-copy-kernels; do
      bench default_${ck}_$rep models/default.gguf -p 512 -n 128 -r 2 --$ck
      bench default_mtp_${ck}_$rep models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 $HP --$ck
      bench default_mtp3_${ck}_$rep models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 --draft-fixed $HP --$ck
    done
  done
  wait $MK
  for ck in no-cuda-copy-kernels cuda-copy-kernels; do bench q4_0_$ck /tmp/q3_4b_q4_0.gguf -p 512 -n 128 -r 2 --$ck; done
  for p in 1 4; do CUDA_MODULE_LOADING=EAGER prof default_p$p models/default.gguf -p $p -n 64 -r 1; done
  [ -n "$MK27" ] && wait $MK27
  BUDGET=${B27:-520}
  for ck in no-cuda-copy-kernels cuda-copy-kernels; do
    bench q27_mtp3_$ck /tmp/q35_27b_q4_0.gguf -p 32 -n 128 -r 1 --spec mtp --draft-max 3 --draft-fixed --draft-accept 0.8 --$ck
  done
  lead_collect
  exit 0
fi
if [ "${PART:-base}" = check ]; then
  TESTS_TIMEOUT=${TESTS_TIMEOUT:-150} lead_tests --gtest_filter=${FILTER:-CudaOps.*}
  lead_collect
  exit 0
fi
( for m in q4_0 q8_0; do mk /tmp/q3_4b_$m.gguf --preset qwen3_4b --type $m & done; wait ) &
MK=$!
( mk /tmp/q35_27b_q4_0.gguf --arch qwen35 --preset qwen35_27b --type q4_0 --mtp-layers 1 --fast-random ) &
MK27=$!
BUDGET=9999
if [ "${SKIP_TESTS:-0}" = 0 ]; then TESTS_TIMEOUT=${TESTS_TIMEOUT:-240} lead_tests ${TEST_ARGS:-}; fi
HP="--spec-prompt models/heldout.txt"
bench default models/default.gguf -p 512 -n 128 -r 2
bench default_mtp models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 $HP
bench default_mtp3 models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 --draft-fixed $HP
wait $MK; grep make $OUT/make.txt
bench q4_0 /tmp/q3_4b_q4_0.gguf -p 512 -n 128 -r 2
bench q8_0 /tmp/q3_4b_q8_0.gguf -p 512 -n 128 -r 2
wait $MK27; grep make $OUT/make.txt
F3="--spec mtp --draft-max 3 --draft-accept 0.8"
bench q27 /tmp/q35_27b_q4_0.gguf -p 512 -n 64 -r 1
bench q27_mtp /tmp/q35_27b_q4_0.gguf -p 32 -n 128 -r 1 $F3
bench q27_mtp3 /tmp/q35_27b_q4_0.gguf -p 32 -n 128 -r 1 $F3 --draft-fixed
lead_collect
