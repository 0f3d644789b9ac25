#!/usr/bin/env bash
# Stop 43: where a 35B-A3B decode step goes (`bench --profile`, eager ops between events) at 8 layers, resident,
# and the default model's 1-row and 4-row profiles, for the next stop's issue 14 / 11 work.
#   pack: bench/cuda/pack.sh .devcarry/NAME build/diskformer build/df_make_model build/tests/df_cuda_tests
set -uo pipefail
source bench/cuda/lead/lib.sh
lead_unpack ${CARRY:-.devcarry/lf43f}
cat $OUT/gpu.txt
mk /tmp/a3b_L8.gguf --arch qwen35moe --preset 35b-a3b --layers 8 --row-pool 1024 --type q4_k --mtp-layers 1
export CUDA_MODULE_LOADING=EAGER
prof a3b_L8_p16 /tmp/a3b_L8.gguf -p 16 -n 64
prof default_p4 models/default.gguf -p 4 -n 64
lead_collect
