#!/usr/bin/env bash
# CPU benches of helper cpuspec (issue 11): binaries OLD and NEW alternate round by round;
# plain and spec alternate inside each bench (bench --spec mtp). Each record gets the load
# averages before the run. Usage:
#   OLD=/tmp/old_diskformer NEW=build/diskformer ROUNDS=4 OUT=file.jsonl bash bench/cpu/cpuspec_run.sh NAME MODEL ARGS...
# ARGS: e.g. -t 1 --spec-prompt models/heldout.txt --draft-max 3
OLD=${OLD:?}; NEW=${NEW:-build/diskformer}; ROUNDS=${ROUNDS:-4}; out=${OUT:?}
name=$1 model=$2; shift 2
for round in $(seq 1 $ROUNDS); do
  for which in old new; do
    bin=$OLD; [[ $which == new ]] && bin=$NEW
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    nice -n 19 $bin bench -m $model -p 64 -n 256 -r 3 --spec mtp --output json "$@" 2>/dev/null | python3 -c "
import json,sys; a=json.load(sys.stdin); a['name']=sys.argv[1]; a['which']=sys.argv[2]; a['round']=int(sys.argv[3]); a['args']=sys.argv[4]; a['load']=sys.argv[6]
open(sys.argv[5],'a').write(json.dumps(a)+'\n'); d=a['spec']
print(sys.argv[1], sys.argv[2], 'round', sys.argv[3], 'load', sys.argv[6], 'wall x%.3f cpu x%.3f cycles_at %s verify %s ident %s' % (d['speedup'], d['cpu_time_speedup'], d['cycles_at'], ['%.2f'%(x*1e3) for x in d['cost_verify_seconds']], d['identical_to_plain']))" "$name" $which $round "$*" $out "$load"
  done
done
