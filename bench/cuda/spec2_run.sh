#!/usr/bin/env bash
# helper spec2 (issue 11): one call on the H200. The default model: plain beside adaptive and
# fixed depths; a random qwen35 27B-shape Q4_0 model with an MTP layer (written here by
# df_make_model --fast-random, on cores 4-15 while the default-model benches run on 0-3) at
# --draft-accept 0.8, plain beside speculative. Each bench line: `diskformer bench -m M
# --device cuda --output json ...`, plain and spec alternating in one process.
set -uo pipefail
D=.devcarry/spec2
B=/tmp/dfbin
mkdir -p $B && tar -xJf $D/bins.tar.xz -C $B
export LD_LIBRARY_PATH=$B/lib  # the dev machine's libcurl / cpp-httplib closure (Debian 12)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee $OUT/log.txt
t0=$(date +%s)
( t=$(date +%s); taskset -c 4-15 timeout 70 $B/df_make_model -o /tmp/q35_27b.gguf --vocab-text tools/make_model/vocab_corpus.txt \
    --arch qwen35 --preset qwen35_27b --type q4_0 --mtp-layers 1 --fast-random > /dev/null 2>> $OUT/log.txt
  echo "make 27b rc=$? $(( $(date +%s) - t )) s" >> $OUT/log.txt ) &
MK=$!
DEADLINE=${DEADLINE:-85}  # seconds after t0: later benches are skipped (this helper's device share)
bench() {  # name timeout model args...
  local name=$1 to=$2 model=$3; shift 3
  local left=$(( DEADLINE - ($(date +%s) - t0) ))
  if (( left < 8 )); then echo "bench $name skipped (deadline)"; return; fi
  (( to > left )) && to=$left
  local t=$(date +%s)
  taskset -c 0-3 timeout $to $B/diskformer bench -m "$model" --device cuda --output json "$@" > /tmp/bench_$name.json 2>> $OUT/log.txt
  echo "bench $name rc=$? $(( $(date +%s) - t )) s (at $(( $(date +%s) - t0 )) s)"
  python3 -c "
import json,sys
a=json.load(open(sys.argv[1])); d=a['spec']
print(sys.argv[2], 'spec %.1f plain %.1f tok/s x%.3f  accepted %d/%d  cycles_at %s  by position %s  identical %s' % (d['spec_tokens_per_second'], d['plain_tokens_per_second'], d['speedup'], d['accepted'], d['drafted'], d['cycles_at'], ['%.3f' % x for x in d['acceptance_at']], d['identical_to_plain']))
print('   table ms', ['%.3f' % (1e3*x) for x in d['cost_table_seconds']], 'estimate ms', ['%.3f' % (1e3*x) for x in d['cycle_estimate_seconds']], 'runs', ['%.0f' % x for x in d['plain_runs']], ['%.0f' % x for x in d['spec_runs']])
a['name']=sys.argv[2]; open(sys.argv[3],'a').write(json.dumps(a)+'\n')" /tmp/bench_$name.json $name $OUT/benches.jsonl || tail -3 $OUT/log.txt
}
H="-p 64 -n 256 -r 2 --spec mtp --spec-prompt models/heldout.txt"
if [[ ${ONLY_27B:-0} != 1 ]]; then
bench default_d3_adaptive 40 models/default.gguf $H --draft-max 3
bench default_d2_fixed 40 models/default.gguf $H --draft-max 2 --draft-fixed
bench default_d3_fixed 40 models/default.gguf $H --draft-max 3 --draft-fixed
fi
wait $MK
cat $OUT/log.txt | grep "make 27b"
ls -la /tmp/q35_27b.gguf
R="-p 32 -n 64 -r 2 --spec mtp --draft-accept 0.8"
bench q35_27b_a08_d3_fixed 45 /tmp/q35_27b.gguf $R --draft-max 3 --draft-fixed
bench q35_27b_a08_d3_adaptive 40 /tmp/q35_27b.gguf $R --draft-max 3
echo "total $(( $(date +%s) - t0 )) s"
