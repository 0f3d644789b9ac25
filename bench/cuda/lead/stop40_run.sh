#!/usr/bin/env bash
# Lead's device run, stop 40 (issues 9 and 11).
#   pack: bench/cuda/pack.sh .devcarry/NAME build/diskformer build/df_make_model build/tests/df_cuda_tests \
#           build/bench/cuda/bench_matvec_cuda
#   PART=verify27: where the 27B's verify rows go: `bench --profile` of prefills of 1..4 rows (a verify's
#     kernels, no snapshots) on the 27B Q4_0 with an MTP layer, the matvec micro-benchmark of Q4_0 / Q8_0 at
#     n = 1..5 and 8 on the FFN shapes of the 27B and the 4B, then the 27B MTP at --draft-accept 0.8 with --draft-vocab
#     0 / 32768 (the head's drafting vocabulary; DRAFT_VOCAB= another).
#   PART=ab (pack also DFBIN2's binary as diskformer_old): df_cuda_tests, the 27B MTP at fixed depth 3 (--draft-accept 0.8),
#     old / new twice, adaptive and fixed with --draft-vocab 32768 on new, then the stop-38 base set on new
#     (each bench skipped past BASE_BUDGET s).
#   PART=old27 (CARRY=.devcarry/lf40a, main's binaries): the 27B MTP at fixed depth 3 twice and adaptive, right after
#     PART=ab on the same warm machine.
#   PART=check: df_cuda_tests --gtest_filter=$FILTER only (TESTS_TIMEOUT, default 150 s).
set -uo pipefail
source bench/cuda/lead/lib.sh
lead_unpack ${CARRY:-.devcarry/lf40b}
cat $OUT/gpu.txt
if [ "${PART:-verify27}" = ab ]; then  # tests, then old (DFBIN2) / new alternating, then the base set on new
  ( for m in q4_0 q8_0; do mk /tmp/q3_4b_$m.gguf --preset qwen3_4b --type $m & done; wait ) &
  MK=$!
  ( mk /tmp/q35_27b_q4_0.gguf --arch qwen35 --preset qwen35_27b --type q4_0 --mtp-layers 1 --fast-random ) &
  MK27=$!
  BUDGET=9999
  if [ "${SKIP_TESTS:-0}" = 0 ]; then TESTS_TIMEOUT=${TESTS_TIMEOUT:-240} lead_tests ${TEST_ARGS:-}; fi
  HP="--spec-prompt models/heldout.txt"
  F3="--spec mtp --draft-max 3 --draft-accept 0.8"
  wait $MK27; grep make $OUT/make.txt
  BUDGET=${Q27_BUDGET:-9999}
  for rep in $(seq 1 ${REPS:-2}); do
    [ -x $D/diskformer_old ] && DFBIN=$D/diskformer_old bench q27_mtp3_old_$rep /tmp/q35_27b_q4_0.gguf -p 32 -n 128 -r 1 $F3 --draft-fixed
    bench q27_mtp3_new_$rep /tmp/q35_27b_q4_0.gguf -p 32 -n 128 -r 1 $F3 --draft-fixed
  done
  bench q27_mtp_new /tmp/q35_27b_q4_0.gguf -p 32 -n 128 -r 1 $F3
  bench q27_mtp3_new_v32k /tmp/q35_27b_q4_0.gguf -p 32 -n 128 -r 1 $F3 --draft-fixed --draft-vocab 32768
  python3 -c "
import json,glob,os
for f in sorted(glob.glob(os.environ['OUT']+'/b_q27_mtp*.json')):
  d=json.load(open(f)); s=d.get('spec',{})
  print(os.path.basename(f), 'verify ms', [round(x*1e3,3) for x in s.get('cost_verify_seconds',[])], 'head', round(s.get('cost_head_seconds',0)*1e3,3), 'catchup', round(s.get('cost_head_catchup_seconds',0)*1e3,3), s.get('cycles_at'))
"
  BUDGET=${BASE_BUDGET:-550}
  bench default models/default.gguf -p 512 -n 128 -r 2
  wait $MK; grep make $OUT/make.txt
  bench q4_0 /tmp/q3_4b_q4_0.gguf -p 512 -n 128 -r 2
  bench q8_0 /tmp/q3_4b_q8_0.gguf -p 512 -n 128 -r 2
  bench default_mtp models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 $HP
  bench default_mtp3 models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 --draft-fixed $HP
  bench q27 /tmp/q35_27b_q4_0.gguf -p 512 -n 64 -r 1
  lead_collect
  exit 0
fi
if [ "${PART:-verify27}" = old27 ]; then  # another pack's diskformer (main's) on the 27B, right after PART=ab (warm machine)
  ( mk /tmp/q35_27b_q4_0.gguf --arch qwen35 --preset qwen35_27b --type q4_0 --mtp-layers 1 --fast-random )
  BUDGET=9999
  F3="--spec mtp --draft-max 3 --draft-accept 0.8"
  for rep in 1 2; do bench q27_mtp3_old_$rep /tmp/q35_27b_q4_0.gguf -p 32 -n 128 -r 1 $F3 --draft-fixed; done
  bench q27_mtp_old /tmp/q35_27b_q4_0.gguf -p 32 -n 128 -r 1 $F3
  python3 -c "
import json,glob,os
for f in sorted(glob.glob(os.environ['OUT']+'/b_q27_mtp*.json')):
  d=json.load(open(f)); s=d.get('spec',{})
  print(os.path.basename(f), 'verify ms', [round(x*1e3,3) for x in s.get('cost_verify_seconds',[])], 'head', round(s.get('cost_head_seconds',0)*1e3,3), 'catchup', round(s.get('cost_head_catchup_seconds',0)*1e3,3), s.get('cycles_at'))
"
  lead_collect
  exit 0
fi
if [ "${PART:-verify27}" = check ]; then
  TESTS_TIMEOUT=${TESTS_TIMEOUT:-150} lead_tests --gtest_filter=${FILTER:-CudaOps.*}
  lead_collect
  exit 0
fi
( mk /tmp/q35_27b_q4_0.gguf --arch qwen35 --preset qwen35_27b --type q4_0 --mtp-layers 1 --fast-random ) &
MK27=$!
SH=5120x17408,17408x5120,2560x9728,9728x2560
timeout 200 $D/bench_matvec_cuda --no-variants --no-validate --formats q4_0,q8_0 --modes int8x_rows_pdl \
  --ns 1,2,3,4,5,8 --pipe-codes "" --shapes $SH --out $OUT/mv_ns.json > $OUT/mv_ns.txt 2>&1
echo "matvec rc=$? $((SECONDS - T0)) s"; grep -iE "GB/s|us" $OUT/mv_ns.txt | cut -c1-160 | head -60
wait $MK27; grep make $OUT/make.txt
for p in 1 2 3 4; do CUDA_MODULE_LOADING=EAGER prof q27_p$p /tmp/q35_27b_q4_0.gguf -p $p -n 4 -r 1 > /dev/null; done
for p in 1 2 3 4; do python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); pr=d.get('profile',d).get('prefill',{})
print('prefill', sys.argv[2], {k:(round(v,1) if isinstance(v,float) else v) for k,v in pr.items() if k!='ops'})
for o in pr.get('ops',[])[:24]: print('  ', {k:(round(v,1) if isinstance(v,float) else v) for k,v in o.items()})
" $OUT/b_prof_q27_p$p.json $p; done
BUDGET=9999
F3="--spec mtp --draft-max 3 --draft-accept 0.8"
for v in 0 ${DRAFT_VOCAB:-32768}; do
  bench q27_mtp_v$v /tmp/q35_27b_q4_0.gguf -p 32 -n 128 -r 1 $F3 --draft-vocab $v
  bench q27_mtp3_v$v /tmp/q35_27b_q4_0.gguf -p 32 -n 128 -r 1 $F3 --draft-fixed --draft-vocab $v
done
python3 -c "
import json,glob,os
for f in sorted(glob.glob(os.environ['OUT']+'/b_q27_mtp*.json')):
  s=json.load(open(f)).get('spec',{})
  print(os.path.basename(f), [round(x*1e3,3) for x in s.get('cost_verify_seconds',[])], round(s.get('cost_head_seconds',0)*1e3,3), round(s.get('cost_head_catchup_seconds',0)*1e3,3), s.get('cycles_at'))
"
lead_collect
