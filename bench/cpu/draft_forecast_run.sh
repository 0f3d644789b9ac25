#!/usr/bin/env bash
# Issue 14 item 5 on the CPU: `bench --spec mtp` with the routing forecast from the drafts off / on
# (--cpu-expert-draft-forecast), alternating within each round, each run in a memory cgroup (v1, root)
# of CGROUP_MB MiB with the model's pages evicted first, so that the experts on the mapped file come
# from disk (as bench/cpu/cpuprefetch_run.sh). One JSON line per run into OUT; a summary line each.
# Usage: ROUNDS=3 CGROUP_MB=1400 OUT=f.jsonl [ON="--cpu-expert-draft-forecast ..."] \
#   bash bench/cpu/draft_forecast_run.sh MODEL ARGS...   (ON: the "on" setting's flags)
#   ARGS e.g.: --cpu-repack off -p 16 -n 32 -r 1 -t 2 --spec mtp --draft-max 3 --draft-fixed --draft-accept 0.8
BIN=${BIN:-build/diskformer}; ROUNDS=${ROUNDS:-3}; out=${OUT:?}
model=$1; shift
cg=/sys/fs/cgroup/memory/df_draftfc_$$
mkdir "$cg" || exit 1
echo $((${CGROUP_MB:-1400} << 20)) > "$cg/memory.limit_in_bytes" || exit 1
trap 'rmdir "$cg"' EXIT
evict() {
  python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.fdatasync(fd); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)" "$1"
}
for round in $(seq 1 $ROUNDS); do
  for which in off on; do
    flags=""; [[ $which == on ]] && flags="${ON:---cpu-expert-draft-forecast}"
    evict "$model"
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    json=$(bash -c "echo \$\$ > $cg/cgroup.procs; exec $BIN bench -m $model --device cpu $flags $* --output json -q" 2>/dev/null)
    echo "$json" | python3 -c "
import json,sys; a=json.load(sys.stdin); a['which']=sys.argv[1] + (' ' + sys.argv[6] if sys.argv[1] == 'on' else ''); a['round']=int(sys.argv[2]); a['args']=sys.argv[3]; a['load']=sys.argv[5]
open(sys.argv[4],'a').write(json.dumps(a)+'\n'); s=a['spec']; e=s.get('expert_cache_spec',{}); p=s.get('expert_cache_plain',{})
print('draft forecast', sys.argv[1], 'round', sys.argv[2], 'load', sys.argv[5], 'plain %.2f spec %.2f tok/s (x%.3f) identical %s' % (s['plain_tokens_per_second'], s['spec_tokens_per_second'], s['speedup'], s['identical_to_plain']))
print('   spec: hit rate %.3f, disk %.1f MiB/token, stall %.1f ms/token; forecast recall %.3f precision %.3f, advised %.1f MiB/token, %.2f ms/token' % (
  e.get('decode_hit_rate',0), e.get('decode_bytes_from_disk_per_token',0)/2**20, e.get('decode_stall_ms_per_token',0), e.get('decode_draft_forecast_recall',0),
  e.get('decode_draft_forecast_precision',0), e.get('decode_draft_forecast_advised_bytes_per_token',0)/2**20, e.get('decode_draft_forecast_ms_per_token',0)))
print('   plain: hit rate %.3f, disk %.1f MiB/token, stall %.1f ms/token' % (p.get('decode_hit_rate',0), p.get('decode_bytes_from_disk_per_token',0)/2**20, p.get('decode_stall_ms_per_token',0)))
" "$which" $round "$*" "$out" "$load" "${ON:---cpu-expert-draft-forecast}"
  done
done
