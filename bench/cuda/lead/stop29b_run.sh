#!/usr/bin/env bash
# Lead's device run, stop 29, second call: df_cuda_tests on the commit packed, then the figures of
# issues 9, 11 and 14 with stop 29's defaults (--decode-lookahead auto, --cuda-copy-batch on) and the
# A/B of --cuda-moe-gemm-ahead 1 / 2 (the grouped MoE GEMM with two weight steps in flight).
#   bench/cuda/pack.sh .devcarry/lf29b build/tests/df_cuda_tests build/diskformer build/df_make_model
#   (fuzz/corpus, bench/cuda/results, attic, bench/cpu/results out of the checkout for the call)
#   CARRY=.devcarry/lf29b BUDGET=570 bash bench/cuda/lead/stop29b_run.sh
# Short call (little device time left): MODELS=a3b A3B_LAYERS=10 TEST_ARGS=--gtest_filter='*MoeGemm*' BUDGET=100
# The models are made in the background while the tests run; each bench is skipped once BUDGET s
# have passed, in this order: 35B-A3B pp512 A/B, 27B MTP at --draft-accept 0.8, 35B-A3B decode,
# 27B plain, default-model MTP, the default model and 4B figures.
set -uo pipefail
source bench/cuda/lead/lib.sh
lead_unpack ${CARRY:-.devcarry/lf29b}
# which profilers the device machine has (for a later session's per-kernel timings of a decode graph)
{ for t in nsys ncu nvidia-smi; do echo "$t: $(command -v $t || find /usr/local/cuda*/ /opt -maxdepth 4 -name $t -type f 2>/dev/null | head -1)"; done; } > $OUT/tools.txt 2>&1
# MODELS: which to make (default all; e.g. MODELS=a3b for a short call: the benches of the others skip)
M=" ${MODELS:-4b 27b a3b} "
L=${A3B_LAYERS:-40}; A3B=/dev/shm/a3b_L$L.gguf  # A3B_LAYERS=10: a shape of 10 layers (made in ~30 s)
( [[ $M == *" 4b "* ]] && mk /tmp/q3_4b_q4.gguf --preset qwen3_4b --type q4_0 &
  [[ $M == *" 4b "* ]] && mk /tmp/q3_4b_q8.gguf --preset qwen3_4b --type q8_0 &
  [[ $M == *" 27b "* ]] && mk /tmp/q35_27b_q4f.gguf --arch qwen35 --preset qwen35_27b --type q4_0 --mtp-layers 1 --fast-random &
  [[ $M == *" a3b "* ]] && mk $A3B --arch qwen35moe --preset 35b-a3b --layers $L --row-pool 1024 --type q4_k &
  wait ) &
MK=$!
TESTS_TIMEOUT=${TESTS_TIMEOUT:-260} lead_tests ${TEST_ARGS:-}
wait $MK; grep make $OUT/make.txt
for r in a b; do
  bench a3b_pp_ah1_$r $A3B -p 512 -n 4 -r 3 --cuda-moe-gemm-ahead 1
  bench a3b_pp_ah2_$r $A3B -p 512 -n 4 -r 3 --cuda-moe-gemm-ahead 2
done
bench q35_27b_spec /tmp/q35_27b_q4f.gguf -p 32 -n 64 -r 1 --spec mtp --draft-max 3 --draft-accept 0.8
bench a3b_L$L $A3B -p 512 -n 128 -r 2
bench q35_27b /tmp/q35_27b_q4f.gguf -p 512 -n 64 -r 1
bench def_spec models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 --spec-prompt models/heldout.txt
bench default models/default.gguf -p 512 -n 128 -r 2
bench q3_4b_q4 /tmp/q3_4b_q4.gguf -p 512 -n 128 -r 2
bench q3_4b_q8 /tmp/q3_4b_q8.gguf -p 512 -n 128 -r 2
lead_collect
