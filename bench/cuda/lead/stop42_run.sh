#!/usr/bin/env bash
# Lead's device run, stop 42 (issues 9, 11, 14).
#   pack: bench/cuda/pack.sh .devcarry/NAME build/diskformer build/df_make_model build/tests/df_cuda_tests
#   PART=all | check | mv: stop41_run.sh's parts (tests, issue 9's models, the MTP set; the matvec table).
#   PART=moe: issue 14's 35B-A3B Q4_K shape (40 layers, 20 GB in /dev/shm): resident decode and prefill,
#     the expert cache at half and a quarter of the expert bytes (--expert-cache-mb 8640 / 4320, host tier),
#     then the file tier (--expert-source file, O_DIRECT) at half. Each bench skipped past BUDGET_S s.
set -uo pipefail
if [ "${PART:-all}" != moe ]; then exec bash bench/cuda/lead/stop41_run.sh; fi
source bench/cuda/lead/lib.sh
lead_unpack ${CARRY:-.devcarry/lf42}
cat $OUT/gpu.txt
A40=/dev/shm/a3b_L40.gguf
mk $A40 --arch qwen35moe --preset 35b-a3b --layers 40 --row-pool 1024 --type q4_k --mtp-layers 1
grep make $OUT/make.txt
BUDGET=${BUDGET_S:-540}
bench a3b_L40 $A40 -p 512 -n 128 -r 2
bench a3b_L40_half $A40 -p 16 -n 64 -r 1 --expert-cache-mb 8640
bench a3b_L40_quarter $A40 -p 16 -n 64 -r 1 --expert-cache-mb 4320
bench a3b_L40_mtp $A40 -p 32 -n 64 -r 1 --spec mtp --draft-max 3 --draft-accept 0.8 --draft-fixed
bench a3b_L40_disk_half $A40 -p 16 -n 16 -r 1 --expert-source file --expert-cache-mb 8640
python3 -c "
import json,glob,os
for f in sorted(glob.glob(os.environ['OUT']+'/b_a3b*.json')):
  d=json.load(open(f)); e=d.get('expert_cache',{})
  print(os.path.basename(f), 'tg %.1f' % d.get('decode_tokens_per_second',0), {k: round(v,4) if isinstance(v,float) else v for k,v in e.items() if k.startswith('decode_')})
"
lead_collect
