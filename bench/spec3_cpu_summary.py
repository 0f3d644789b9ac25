#!/usr/bin/env python3
# Summary of bench/spec3_cpu_run.sh records (helper spec3): per binary, medians over rounds of the
# wall and CPU-time speedups, and the ratio of pooled per-rep CPU seconds (min and median).
# Usage: bench/spec3_cpu_summary.py RECORDS.jsonl
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for name in sorted({r['name'] for r in rows}):
    for which in ['old', 'new']:
        rs = [r for r in rows if r['name'] == name and r['which'] == which]
        if not rs: continue
        sp = [r['spec'] for r in rs]
        P = [x for s in sp for x in s['plain_decode_cpu_seconds']]
        S = [x for s in sp for x in s['spec_decode_cpu_seconds']]
        print('%-22s %s rounds %d  wall median %.3f  cpu median %.3f  (rounds: %s)  pooled reps: min %.3f / median %.3f' % (
            name, which, len(rs), statistics.median(s['speedup'] for s in sp), statistics.median(s['cpu_time_speedup'] for s in sp),
            ' '.join('%.3f' % s['cpu_time_speedup'] for s in sp), min(P) / min(S), statistics.median(P) / statistics.median(S)))
