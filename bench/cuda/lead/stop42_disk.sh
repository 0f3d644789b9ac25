#!/usr/bin/env bash
# Stop 42: the file tier after the fix (moe_experts_fused declines it): CudaExpertCache.* (the file-tier
# test now with the CLI's --cuda-moe-streamed-fused default), the 4-layer 35B-A3B file-tier benches
# (stop42_diag.sh's settings), then the 40-layer file at half and a quarter of the expert bytes from
# the file (O_DIRECT on /tmp; the page cache dropped before each).
set -uo pipefail
source bench/cuda/lead/lib.sh
lead_unpack ${CARRY:-.devcarry/lf42b}
( mk /tmp/a40.gguf --arch qwen35moe --preset 35b-a3b --layers 40 --row-pool 1024 --type q4_k --mtp-layers 1 ) &
MK=$!
mk /dev/shm/a4m.gguf --arch qwen35moe --preset 35b-a3b --layers 4 --row-pool 256 --type q4_k --mtp-layers 1
TESTS_TIMEOUT=120 lead_tests --gtest_filter='CudaExpertCache.*:CudaModelsMoe*'
BUDGET=${BUDGET_S:-500}
bench d4_file /dev/shm/a4m.gguf -p 16 -n 16 -r 1 --expert-source file --expert-cache-mb 864
bench d4_file_nofused /dev/shm/a4m.gguf -p 16 -n 16 -r 1 --expert-source file --expert-cache-mb 864 --no-cuda-moe-streamed-fused
bench d4_host /dev/shm/a4m.gguf -p 16 -n 16 -r 1 --expert-cache-mb 864
wait $MK; grep make $OUT/make.txt
for cfg in "half 8640" "quarter 4320"; do
  set -- $cfg
  sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null
  bench a40_disk_$1 /tmp/a40.gguf -p 16 -n 16 -r 1 --expert-source file --expert-cache-mb $2
done
python3 -c "
import json,glob,os
for f in sorted(glob.glob(os.environ['OUT']+'/b_*.json')):
  try: d=json.load(open(f))
  except Exception: print(os.path.basename(f), 'no json'); continue
  e=d.get('expert_cache',{})
  print(os.path.basename(f), 'tg %.2f' % d.get('decode_tokens_per_second',0), {k: round(v,4) if isinstance(v,float) else v for k,v in e.items() if k.startswith('decode_') or k in ('direct_io','slots')})
"
lead_collect
