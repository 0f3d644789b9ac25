#!/usr/bin/env python3
# Summary of bench/cpu/cpuspec_run.sh records: per (name, binary), medians over rounds of the
# wall and CPU-time speedups, the median verify cost table (ms, rows 1..K) and head costs, the
# per-round cycles at each depth and the load averages. Usage: cpuspec_summary.py RECORDS.jsonl
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for name in sorted({r['name'] for r in rows}):
    for which in ['old', 'new']:
        rs = [r for r in rows if r['name'] == name and r['which'] == which]
        if not rs: continue
        sp = [r['spec'] for r in rs]
        K = len(sp[0]['cost_verify_seconds'])
        ver = [st.median(s['cost_verify_seconds'][k] for s in sp) * 1e3 for k in range(K)]
        print('%-12s %s rounds %d  wall median %.3f (%s)  cpu median %.3f (%s)' % (
            name, which, len(rs), st.median(s['speedup'] for s in sp), ' '.join('%.3f' % s['speedup'] for s in sp),
            st.median(s['cpu_time_speedup'] for s in sp), ' '.join('%.3f' % s['cpu_time_speedup'] for s in sp)))
        print('    verify ms (1..%d rows) %s  head %.3f  catch-up %.3f  cycles_at %s  acc %s  load %s' % (
            K, ' '.join('%.2f' % v for v in ver), st.median(s['cost_head_seconds'] for s in sp) * 1e3,
            st.median(s['cost_head_catchup_seconds'] for s in sp) * 1e3, [s['cycles_at'] for s in sp],
            [['%.2f' % a for a in s['acceptance_at']] for s in sp], [r['load'].split()[0] for r in rs]))
