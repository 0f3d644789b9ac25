#!/usr/bin/env bash
# CPU benches of h-spec2 (2 cores, loaded machine): plain and spec alternate inside each bench.
# The random-head model: build-cpu/df_make_model -o /tmp/spec2_rand.gguf --arch qwen35 --layers 8
#   --dim 384 --ff 1152 --heads 6 --kv-heads 2 --head-dim 64 --ssm-state 64 --ssm-k-heads 6
#   --ssm-v-heads 6 --type q8_0 --mtp-layers 1 --vocab-from models/default.gguf
cd /work/wt/spec2
B=./build-cpu/diskformer
out=${OUT:-/tmp/spec2_cpu}/cpu_benches.jsonl
: > $out
one() { # name model args
  local name=$1 model=$2; shift 2
  $B bench -m $model -p 64 -n 256 -r 3 --spec mtp --output json "$@" 2>/dev/null | python3 -c "
import json,sys; a=json.load(sys.stdin); a['name']=sys.argv[1]; a['args']=sys.argv[2]; open(sys.argv[3],'a').write(json.dumps(a)+'\n')
d=a['spec']; print(sys.argv[1], 'wall x%.3f cpu x%.3f cycles_at %s acc %s ident %s' % (d['speedup'], d['cpu_time_speedup'], d['cycles_at'], ['%.3f'%x for x in d['acceptance_at']], d['identical_to_plain']))" "$name" "$*" $out
}
for round in 1 2; do
  one default_d3_adaptive models/default.gguf --spec-prompt models/heldout.txt --draft-max 3
  one default_d2_fixed models/default.gguf --spec-prompt models/heldout.txt --draft-max 2 --draft-fixed
  one default_d3_fixed models/default.gguf --spec-prompt models/heldout.txt --draft-max 3 --draft-fixed
  one randhead_d3_adaptive /tmp/spec2_rand.gguf --spec-prompt models/heldout.txt --draft-max 3
done
