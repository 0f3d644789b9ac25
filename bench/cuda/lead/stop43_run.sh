#!/usr/bin/env bash
# Lead's device run, stop 43 (issues 9, 11, 14).
#   pack: bench/cuda/pack.sh .devcarry/NAME build/diskformer build/df_make_model build/tests/df_cuda_tests
#   PART=all: df_cuda_tests (FILTER, default every test; SKIP_TESTS=1: none), then the pre-round
#     threshold at a verify's rows (--cuda-mv-preround: the default model's one-row launches have at
#     most 1152 columns, so 1536 / 2304 change only its 2..4-row launches; the 27B's one-row launches
#     below 12288 columns are 5120 / 6144 wide, so 8192 changes its 2-row launches only), the default
#     model's MTP at fixed depth 3 and adaptive; the 27B at --draft-accept 0.8 depth 3; then
#     (PART=all MOE=1) the 35B-A3B resident decode by --cuda-moe-pipe / --cuda-mv-short-pipe.
#   Each bench skipped past BUDGET_S s (default 560).
set -uo pipefail
source bench/cuda/lead/lib.sh
lead_unpack ${CARRY:-.devcarry/lf43b}
cat $OUT/gpu.txt
( mk /tmp/q35_27b_q4_0.gguf --arch qwen35 --preset qwen35_27b --type q4_0 --mtp-layers 1 --fast-random ) &
MK27=$!
if [ "${MOE:-0}" = 1 ]; then
  ( mk /dev/shm/a3b_L40.gguf --arch qwen35moe --preset 35b-a3b --layers 40 --row-pool 1024 --type q4_k --mtp-layers 1 ) &
  MKA=$!
fi
BUDGET=9999
[ "${SKIP_TESTS:-0}" = 0 ] && TESTS_TIMEOUT=${TESTS_TIMEOUT:-300} lead_tests --gtest_filter="${FILTER:-*}"
BUDGET=${BUDGET_S:-560}
HP="--spec-prompt models/heldout.txt"
D3="--spec mtp --draft-max 3 --draft-fixed"
for pr in 12288 1536 2304 12288 1536; do
  bench default_mtp3_pr${pr}_$SECONDS models/default.gguf -p 64 -n 256 -r 2 $D3 $HP --cuda-mv-preround $pr
done
bench default_mtp_pr12288 models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 $HP
bench default_mtp_pr1536 models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 $HP --cuda-mv-preround 1536
wait $MK27; grep make $OUT/make.txt
F3="--spec mtp --draft-max 3 --draft-accept 0.8 --draft-fixed"
for pr in 12288 8192 12288 8192; do
  bench q27_mtp3_pr${pr}_$SECONDS /tmp/q35_27b_q4_0.gguf -p 32 -n 128 -r 1 $F3 --cuda-mv-preround $pr
done
if [ "${MOE:-0}" = 1 ]; then
  wait $MKA; grep make $OUT/make.txt
  A40=/dev/shm/a3b_L40.gguf
  bench a3b_base $A40 -p 16 -n 128 -r 2
  bench a3b_pipe4 $A40 -p 16 -n 128 -r 2 --cuda-moe-pipe 4
  bench a3b_pipe0 $A40 -p 16 -n 128 -r 2 --cuda-moe-pipe 0
  bench a3b_short2 $A40 -p 16 -n 128 -r 2 --cuda-mv-short-pipe 2
  bench a3b_base2 $A40 -p 16 -n 128 -r 2
fi
python3 -c "
import json,glob,os
for f in sorted(glob.glob(os.environ['OUT']+'/b_*.json'), key=os.path.getmtime):
  try: d=json.load(open(f))
  except Exception: continue
  s=d.get('spec',{})
  print(os.path.basename(f), 'tg %.1f' % d.get('decode_tokens_per_second',0), 'x%.3f' % s.get('speedup',0) if s else '', 'verify ms', [round(x*1e3,3) for x in s.get('cost_verify_seconds',[])], 'head', round(s.get('cost_head_seconds',0)*1e3,3), s.get('acceptance_at'))
"
lead_collect
