#!/usr/bin/env bash
# Lead's device run (stop 27), ONE call: df_cuda_tests (TEST_FILTER, or all) while df_make_model
# writes the benchmark models, then the benches (bench/cuda/lead/lib.sh). Carry .devcarry/lf27,
# packed here by
#   bench/cuda/pack.sh .devcarry/lf27 build/diskformer build/tests/df_cuda_tests build/df_make_model
# PART=1: the grouped MoE GEMM's weight loads one step ahead against two (--cuda-moe-gemm-ahead,
# alternating) on the 35B-A3B pp512, and its prefill profile; PART=2 (default): the figures;
# PART=3: the 40-layer 35B-A3B Q4_K read from the file (O_DIRECT, page cache dropped) with half and
# a quarter of the experts' bytes cached, beside dd's O_DIRECT bandwidth (no tests unless TEST_FILTER).
set -uo pipefail
source bench/cuda/lead/lib.sh
lead_unpack .devcarry/lf27
if [ "${PART:-2}" = 3 ]; then
  M=/tmp/a3b_L40.gguf
  mk $M --arch qwen35moe --preset 35b-a3b --layers 40 --row-pool 1024 --type q4_k
  grep make $OUT/make.txt; ls -l $M; df -T /tmp | tail -1
  [ -n "${TEST_FILTER:-}" ] && lead_tests --gtest_filter="$TEST_FILTER"
  sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null && echo "dropped caches" || echo "no drop_caches (not root)"
  dd if=$M of=/dev/null bs=16M iflag=direct count=200 2> $OUT/dd.txt; tail -1 $OUT/dd.txt
  for cfg in "half 8640" "quarter 4320"; do
    set -- $cfg
    sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null
    bench disk_$1 $M -p 16 -n 16 -r 1 --expert-source file --expert-cache-mb $2
    python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); c=d.get('expert_cache',{})
print({k: (round(v,4) if isinstance(v,float) else v) for k,v in c.items()})" $OUT/b_disk_$1.json || true
  done
  lead_collect
  exit 0
fi
( [ "${PART:-2}" = 2 ] && mk /tmp/q3_4b_q4.gguf --preset qwen3_4b --type q4_0 &
  [ "${PART:-2}" = 2 ] && mk /tmp/q3_4b_q8.gguf --preset qwen3_4b --type q8_0 &
  [ "${PART:-2}" = 2 ] && mk /tmp/q35_27b_q4f.gguf --arch qwen35 --preset qwen35_27b --type q4_0 --mtp-layers 1 --fast-random &
  mk /dev/shm/a3b_L40.gguf --arch qwen35moe --preset 35b-a3b --layers 40 --row-pool 1024 --type q4_k & wait ) &
MK=$!
if [ -n "${TEST_FILTER:-}" ]; then lead_tests --gtest_filter="$TEST_FILTER"; else lead_tests; fi
wait $MK; grep make $OUT/make.txt
if [ "${PART:-2}" = 1 ]; then
  for r in a b; do
    bench a3b_pp_ahead2_$r /dev/shm/a3b_L40.gguf -p 512 -n 4 -r 3 --cuda-moe-gemm-ahead 2
    bench a3b_pp_ahead1_$r /dev/shm/a3b_L40.gguf -p 512 -n 4 -r 3 --cuda-moe-gemm-ahead 1
  done
  bench a3b_L40_prof /dev/shm/a3b_L40.gguf -p 512 -n 4 -r 1 --profile
else
  bench default models/default.gguf -p 512 -n 128 -r 2
  bench q3_4b_q4 /tmp/q3_4b_q4.gguf -p 512 -n 128 -r 2
  bench q35_27b /tmp/q35_27b_q4f.gguf -p 512 -n 64 -r 1
  bench a3b_L40 /dev/shm/a3b_L40.gguf -p 512 -n 128 -r 2
  bench q3_4b_q8 /tmp/q3_4b_q8.gguf -p 512 -n 128 -r 2
  bench default_spec models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 --spec-prompt models/heldout.txt
  bench q35_27b_spec /tmp/q35_27b_q4f.gguf -p 32 -n 64 -r 1 --spec mtp --draft-max 3 --draft-accept 0.8
fi
lead_collect
