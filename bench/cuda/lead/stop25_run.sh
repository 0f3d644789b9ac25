#!/usr/bin/env bash
# Lead's device run (stop 25), ONE call: df_cuda_tests of main (the binary `ctest -L cuda` runs;
# unfiltered unless TEST_FILTER) while df_make_model writes the benchmark models into /tmp and
# /dev/shm, then the benches (bench/cuda/lead/lib.sh). Carry .devcarry/lf25, packed here by
#   bench/cuda/pack.sh .devcarry/lf25 build/diskformer build/tests/df_cuda_tests build/df_make_model
# PART=1: the short pipe's default against the other setting (alternating) and profiles of the
# 4B Q4_0 decode and the 35B-A3B prefill; PART=3: prefill with and without --cuda-prefill-sgemm
# (alternating) and the 35B-A3B prefill profile; PART=2 (default): the figures of every model.
set -uo pipefail
source bench/cuda/lead/lib.sh
lead_unpack .devcarry/lf25
( [ "${PART:-2}" = 3 ] || mk /tmp/q3_4b_q4.gguf --preset qwen3_4b --type q4_0 &
  [ "${PART:-2}" = 2 ] && mk /tmp/q3_4b_q5k.gguf --preset qwen3_4b --type q5_K &
  [ "${PART:-2}" = 3 ] || mk /tmp/q3_4b_q8.gguf --preset qwen3_4b --type q8_0 &
  [ "${PART:-2}" = 3 ] || mk /tmp/q35_27b_q4f.gguf --arch qwen35 --preset qwen35_27b --type q4_0 --mtp-layers 1 --fast-random &
  mk /dev/shm/a3b_L40.gguf --arch qwen35moe --preset 35b-a3b --layers 40 --row-pool 1024 --type q4_k & wait ) &
MK=$!
if [ -n "${TEST_FILTER:-}" ]; then lead_tests --gtest_filter="$TEST_FILTER"; else lead_tests; fi
wait $MK; cat $OUT/make.txt | grep make
if [ "${PART:-2}" = 3 ]; then
  for r in a b; do
    bench a3b_pp_$r /dev/shm/a3b_L40.gguf -p 512 -n 4 -r 3
    bench a3b_pp_nosg_$r /dev/shm/a3b_L40.gguf -p 512 -n 4 -r 3 --no-cuda-prefill-sgemm
  done
  bench a3b_L40_prof /dev/shm/a3b_L40.gguf -p 512 -n 4 -r 1 --profile
elif [ "${PART:-2}" = 1 ]; then
  # the short pipe's default (-1: 2 for qwen35moe, 0 for dense), each against the other setting
  bench default_a models/default.gguf -p 512 -n 128 -r 2
  bench default_sp2_a models/default.gguf -p 512 -n 128 -r 2 --cuda-mv-short-pipe 2
  bench default_b models/default.gguf -p 512 -n 128 -r 2
  bench default_sp2_b models/default.gguf -p 512 -n 128 -r 2 --cuda-mv-short-pipe 2
  bench a3b_L40_a /dev/shm/a3b_L40.gguf -p 512 -n 128 -r 1
  bench a3b_L40_sp0_a /dev/shm/a3b_L40.gguf -p 16 -n 128 -r 1 --cuda-mv-short-pipe 0
  bench a3b_L40_b /dev/shm/a3b_L40.gguf -p 512 -n 128 -r 2
  bench a3b_L40_sp0_b /dev/shm/a3b_L40.gguf -p 16 -n 128 -r 1 --cuda-mv-short-pipe 0
  bench q3_4b_q4 /tmp/q3_4b_q4.gguf -p 512 -n 128 -r 2
  bench q3_4b_q4_sp2 /tmp/q3_4b_q4.gguf -p 16 -n 128 -r 2 --cuda-mv-short-pipe 2
  bench a3b_L40_prof /dev/shm/a3b_L40.gguf -p 512 -n 16 -r 1 --profile
  bench q3_4b_q4_prof /tmp/q3_4b_q4.gguf -p 512 -n 64 -r 1 --profile
  bench q35_27b_prof /tmp/q35_27b_q4f.gguf -p 512 -n 16 -r 1 --profile
else
  bench default models/default.gguf -p 512 -n 128 -r 2
  bench q3_4b_q4 /tmp/q3_4b_q4.gguf -p 512 -n 128 -r 2
  bench q35_27b /tmp/q35_27b_q4f.gguf -p 512 -n 64 -r 1
  bench a3b_L40 /dev/shm/a3b_L40.gguf -p 512 -n 128 -r 2
  bench q3_4b_q8 /tmp/q3_4b_q8.gguf -p 512 -n 128 -r 2
  bench default_spec models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 --spec-prompt models/heldout.txt
  bench q35_27b_spec /tmp/q35_27b_q4f.gguf -p 32 -n 64 -r 1 --spec mtp --draft-max 3 --draft-accept 0.8
  bench a3b_L40_half /dev/shm/a3b_L40.gguf -p 16 -n 64 -r 1 --expert-cache-mb 8640
  bench q3_4b_q5k /tmp/q3_4b_q5k.gguf -p 512 -n 128 -r 2
fi
lead_collect
