#!/usr/bin/env bash
# CPU benches of h-spec3 (2 cores, loaded machine): old (main 7e809ff, $OLD) and new ($NEW)
# binaries alternating, round by round; plain and spec alternate inside each bench (CPU-time
# ratios: lost time slices of a loaded machine do not count). The random-head model (drafts
# fail) as spec2 made it: df_make_model -o /tmp/spec2_rand.gguf --arch qwen35 --layers 8
#   --dim 384 --ff 1152 --heads 6 --kv-heads 2 --head-dim 64 --ssm-state 64 --ssm-k-heads 6
#   --ssm-v-heads 6 --type q8_0 --mtp-layers 1 --vocab-from models/default.gguf
# Usage: OLD=/tmp/spec3_old_diskformer NEW=build/diskformer ROUNDS=4 bash bench/spec3_cpu_run.sh NAME MODEL ARGS...
# WHICH="new" runs the new binary only.
OLD=${OLD:-/tmp/spec3_old_diskformer}; NEW=${NEW:-build/diskformer}; ROUNDS=${ROUNDS:-4}; WHICH=${WHICH:-old new}
out=${OUT:-/tmp/spec3_cpu}/cpu_benches.jsonl
mkdir -p "$(dirname "$out")"
name=$1 model=$2; shift 2
for round in $(seq 1 $ROUNDS); do
  for which in $WHICH; do
    bin=$OLD; [[ $which == new ]] && bin=$NEW
    nice -n 19 $bin bench -m $model -p 64 -n 256 -r 3 --spec mtp --output json "$@" 2>/dev/null | python3 -c "
import json,sys; a=json.load(sys.stdin); a['name']=sys.argv[1]; a['which']=sys.argv[2]; a['round']=int(sys.argv[3]); a['args']=sys.argv[4]
open(sys.argv[5],'a').write(json.dumps(a)+'\n'); d=a['spec']
print(sys.argv[1], sys.argv[2], 'round', sys.argv[3], 'wall x%.3f cpu x%.3f cycles_at %s acc %s ident %s' % (d['speedup'], d['cpu_time_speedup'], d['cycles_at'], ['%.3f'%x for x in d['acceptance_at']], d['identical_to_plain']))" "$name" $which $round "$*" $out
  done
done
