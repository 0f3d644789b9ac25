#!/usr/bin/env bash
# Lead's last device run, stop 43: the submitted binaries (the CLI's defaults now taken from EngineOptions{}).
#   pack: bench/cuda/pack.sh .devcarry/NAME build/diskformer build/df_make_model build/tests/df_cuda_tests
#   df_cuda_tests --gtest_filter=$FILTER; the default model plain and MTP; the 4B Q4_0; the 35B-A3B shape at 8 layers
#   (/tmp) resident, host tier and file tier (O_DIRECT) at half the expert bytes, through the CLI's defaults.
set -uo pipefail
source bench/cuda/lead/lib.sh
lead_unpack ${CARRY:-.devcarry/lf43f}
cat $OUT/gpu.txt
( mk /tmp/q3_4b_q4_0.gguf --preset qwen3_4b --type q4_0 ) &
MK=$!
( mk /tmp/a3b_L8.gguf --arch qwen35moe --preset 35b-a3b --layers 8 --row-pool 1024 --type q4_k --mtp-layers 1 ) &
MKA=$!
BUDGET=9999
TESTS_TIMEOUT=${TESTS_TIMEOUT:-150} lead_tests --gtest_filter="${FILTER:-CudaExpertCache.*:CudaSpec*:CudaDefaultModel.*}"
BUDGET=${BUDGET_S:-300}
bench default models/default.gguf -p 512 -n 128 -r 2
bench default_mtp models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 --spec-prompt models/heldout.txt
wait $MK; bench q4_0 /tmp/q3_4b_q4_0.gguf -p 512 -n 128 -r 2
wait $MKA; grep make $OUT/make.txt
bench a3b_L8 /tmp/a3b_L8.gguf -p 16 -n 64 -r 1
bench a3b_L8_host_half /tmp/a3b_L8.gguf -p 16 -n 64 -r 1 --expert-cache-mb 1728
sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null
bench a3b_L8_file_half /tmp/a3b_L8.gguf -p 16 -n 32 -r 1 --expert-source file --expert-cache-mb 1728
python3 -c "
import json,glob,os
for f in sorted(glob.glob(os.environ['OUT']+'/b_a3b*.json')):
  d=json.load(open(f)); e=d.get('expert_cache',{})
  print(os.path.basename(f), 'tg %.1f' % d.get('decode_tokens_per_second',0), {k: round(v,4) if isinstance(v,float) else v for k,v in e.items() if k.startswith('decode_')})
"
lead_collect
