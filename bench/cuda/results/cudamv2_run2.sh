#!/usr/bin/env bash
# cudamv2 run 2: workbench (f32-x old, int8-x new, +PDL), df_cuda_tests, decode benches old vs
# new on the default model and real-shape random models, and a kernel-time profile (ncu).
set -uo pipefail
D=.devcarry/cudamv2
B=/tmp/cmv; mkdir -p $B
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $B
chmod +x $B/diskformer $B/df_make_model $B/df_cuda_tests $B/bench_matvec_cuda
export LD_LIBRARY_PATH=$B/lib
VOCAB=tools/make_model/vocab_corpus.txt
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
mk() { local f=$1 t0=$SECONDS; shift; [ -s "$f" ] && return; nice $B/df_make_model -o "$f.tmp" --vocab-text $VOCAB "$@" > /dev/null 2>> $OUT/make.txt && mv "$f.tmp" "$f"; echo "make $f rc=$? $((SECONDS - t0)) s" >> $OUT/make.txt; }
( mk /tmp/q3_4b_q8.gguf --preset qwen3_4b --type q8_0 & mk /tmp/q3_4b_q4.gguf --preset qwen3_4b --type q4_0 &
  mk /tmp/q35_27b_q4.gguf --preset qwen35_27b --type q4_0 & wait ) &
MK=$!
T0=$SECONDS
timeout 200 $B/bench_matvec_cuda --out $OUT/matvec.json --formats q8_0,q4_0,q4_K,q6_K,iq4_xs > $OUT/matvec.txt 2>&1; echo "workbench rc=$? $((SECONDS - T0)) s"
grep -E "^speed|int8-x nmse" $OUT/matvec.txt | sed 's/  */ /g' | cut -c1-200
T0=$SECONDS
timeout 200 $B/df_cuda_tests > $OUT/tests.txt 2>&1; echo "df_cuda_tests rc=$? $((SECONDS - T0)) s"
grep -E "^\[  FAILED  \]|tests ran|PASSED  \]|SKIPPED  \]" $OUT/tests.txt | cut -c1-150 | head -30
grep -B3 -A8 "Failure" $OUT/tests.txt | cut -c1-200 | head -60
wait $MK; cat $OUT/make.txt | grep make
bench() {  # name model args...
  local name=$1 model=$2; shift 2
  timeout 120 $B/diskformer bench -m "$model" --device cuda --output json "$@" > $OUT/b_$name.json 2>> $OUT/log.txt
  python3 -c "
import json,sys; d=json.load(open(sys.argv[1]))
print('%-16s tg %7.1f tok/s %7.1f GB/s %5.1f %% of %.0f GB/s  %.3f ms/tok' % (sys.argv[2], d['decode_tokens_per_second'], d['decode_weight_gb_per_second'], 100*d.get('decode_share_of_read_bandwidth',0), d.get('device_read_gb_per_second',0), d['decode_ms_per_token']))
" $OUT/b_$name.json $name || { echo "bench $name failed"; tail -3 $OUT/log.txt; }
}
for m in default:models/default.gguf q3_4b_q8:/tmp/q3_4b_q8.gguf q3_4b_q4:/tmp/q3_4b_q4.gguf; do
  n=${m%%:*}; f=${m#*:}
  bench ${n}_old $f -p 64 -n 128 -r 2 --mv-exact --no-pdl
  bench ${n}_new $f -p 64 -n 128 -r 2
  [[ $n == q3_4b* ]] && bench ${n}_new_nopdl $f -p 64 -n 128 -r 2 --no-pdl
done
# where a decode step's time goes: every kernel's duration (ncu), 4B Q4_0, new kernels, 3 decode tokens
T0=$SECONDS
timeout 100 ncu --clock-control none --metrics gpu__time_duration.sum --csv --log-file $OUT/ncu.csv \
  $B/diskformer bench -m /tmp/q3_4b_q4.gguf --device cuda -p 8 -n 3 -r 1 > /dev/null 2>&1; echo "ncu rc=$? $((SECONDS - T0)) s"
python3 $D/ncu_sum.py $OUT/ncu.csv | tee $OUT/ncu_summary.txt
xz -9 $OUT/ncu.csv
bench q35_27b_q4_old /tmp/q35_27b_q4.gguf -p 64 -n 128 -r 2 --mv-exact --no-pdl
bench q35_27b_q4_new /tmp/q35_27b_q4.gguf -p 64 -n 128 -r 2
python3 -c "
import json,glob,os
out={os.path.basename(f)[2:-5]: json.load(open(f)) for f in glob.glob(os.environ['OUT']+'/b_*.json') if os.path.getsize(f)>0}
json.dump(out, open(os.environ['OUT']+'/benches.json','w'), indent=1)"
rm -f $OUT/b_*.json
