#!/usr/bin/env bash
# Stop 43: the routed experts' GEMM threshold (--cuda-moe-gemm-min-rows: 9..N rows by the grouped matvec, more by
# the grouped tensor-core GEMM; 16 before). The CUDA MoE tests, then short prompts' prefill of the 35B-A3B shape at
# 8 layers (/tmp) by threshold, alternating.
#   pack: bench/cuda/pack.sh .devcarry/NAME build/diskformer build/df_make_model build/tests/df_cuda_tests
set -uo pipefail
source bench/cuda/lead/lib.sh
lead_unpack ${CARRY:-.devcarry/lf43g}
cat $OUT/gpu.txt
( mk /tmp/a3b_L8.gguf --arch qwen35moe --preset 35b-a3b --layers 8 --row-pool 1024 --type q4_k --mtp-layers 1 ) &
MKA=$!
BUDGET=9999
TESTS_TIMEOUT=${TESTS_TIMEOUT:-150} lead_tests --gtest_filter="${FILTER:-CudaModelsMoeGemm.*:CudaExpertCache.*:CudaMoeGemm.*}"
BUDGET=${BUDGET_S:-200}
wait $MKA; grep make $OUT/make.txt
for p in 12 16 32; do
  for t in 16 8 16 8; do
    bench a3b_p${p}_t${t}_$SECONDS /tmp/a3b_L8.gguf -p $p -n 4 -r 5 --cuda-moe-gemm-min-rows $t
  done
done
python3 -c "
import json,glob,os
for f in sorted(glob.glob(os.environ['OUT']+'/b_a3b*.json'), key=os.path.getmtime):
  d=json.load(open(f)); p=d.get('prefill',[{}])[0]
  print(os.path.basename(f), 'pp %.1f tok/s' % p.get('tokens_per_second',0), 'ttft %.2f ms' % p.get('time_to_first_token_ms',0))
"
lead_collect
