#!/usr/bin/env bash
# CPU benches of helper cpuprefetch: `bench --device cpu` over the four settings of the expert
# stats and the expert prefetch (--[no-]cpu-expert-stats x --[no-]cpu-expert-prefetch), and of
# the forecast (--cpu-expert-forecast: a third part "-on" of a setting, e.g. "on-on-on"),
# alternating setting by setting within each round; each record gets the load averages before
# the run. With CGROUP_MB, each run is put in a memory cgroup (v1, /sys/fs/cgroup/memory, root)
# of that many MiB and the model's pages are evicted before it (posix_fadvise DONTNEED), so that
# the experts on the mapped file come from disk (as bench/cpu/cpumoe_run.sh).
# Usage:
#   ROUNDS=3 OUT=file.jsonl [CGROUP_MB=1400] [SETTINGS="off-on off-off on-on on-off"] \
#     bash bench/cpu/cpuprefetch_run.sh NAME MODEL ARGS...
# SETTINGS: stats-prefetch[-forecast]; ARGS: e.g. --cpu-repack off -p 16 -n 32 -r 2 -t 2
BIN=${BIN:-build/diskformer}; ROUNDS=${ROUNDS:-3}; out=${OUT:?}
SETTINGS=${SETTINGS:-"off-on off-off on-on on-off"}
name=$1 model=$2; shift 2
cg=""
if [[ -n ${CGROUP_MB:-} ]]; then
  cg=/sys/fs/cgroup/memory/df_cpuprefetch_$$
  mkdir "$cg" || exit 1
  echo $((CGROUP_MB << 20)) > "$cg/memory.limit_in_bytes" || exit 1
  trap 'rmdir "$cg"' EXIT
fi
evict() {
  python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.fdatasync(fd); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)" "$1"
}
for round in $(seq 1 $ROUNDS); do
  for which in $SETTINGS; do
    IFS=- read -r stats prefetch forecast <<< "$which"
    flags="--cpu-expert-stats --cpu-expert-prefetch"
    [[ $stats == off ]] && flags=${flags/--cpu-expert-stats/--no-cpu-expert-stats}
    [[ $prefetch == off ]] && flags=${flags/--cpu-expert-prefetch/--no-cpu-expert-prefetch}
    [[ ${forecast:-off} == on ]] && flags="$flags --cpu-expert-forecast"
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    [[ -n $cg ]] && evict "$model"
    cmd="$BIN bench -m $model --device cpu $flags $* --output json -q"
    if [[ -n $cg ]]; then
      json=$(bash -c "echo \$\$ > $cg/cgroup.procs; exec $cmd" 2>/dev/null)
    else
      json=$($cmd 2>/dev/null)
    fi
    echo "$json" | python3 -c "
import json,sys; a=json.load(sys.stdin); a['name']=sys.argv[1]; a['which']=sys.argv[2]; a['round']=int(sys.argv[3]); a['args']=sys.argv[4]; a['load']=sys.argv[6]; a['cgroup_mb']=sys.argv[7]
open(sys.argv[5],'a').write(json.dumps(a)+'\n'); e=a.get('expert_cache',{})
print(sys.argv[1], 'stats-prefetch-forecast', sys.argv[2], 'round', sys.argv[3], 'load', sys.argv[6], 'pp %.1f tg %.2f' % (a['prefill_tokens_per_second'], a['decode_tokens_per_second']),
      ' '.join('%s %s' % (k.replace('decode_', ''), round(e[k] / (1 << 20), 3) if 'bytes' in k else round(e[k], 3)) for k in
               ('decode_hit_rate', 'decode_bytes_from_disk_per_token', 'decode_advised_bytes_per_token', 'decode_stall_ms_per_token', 'decode_check_ms_per_token',
                'decode_forecast_recall', 'decode_forecast_advised_bytes_per_token', 'decode_forecast_ms_per_token') if k in e))" \
      "$name" $which $round "$*" "$out" "$load" "${CGROUP_MB:-}"
  done
done
