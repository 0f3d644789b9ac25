#!/usr/bin/env python3
"""Matvec workbench of h-mvq6 against main's (the lead's stop-22 run over every format): GB/s and
% of each run's own measured read bandwidth (different runs: the shares are what compare).
Usage: compare.py NEW.json MAIN.json"""
import json, sys
new, old = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
bn, bo = new['read_bandwidth']['gbs_median'], old['read_bandwidth']['gbs_median']
print(f"read bandwidth: this run {bn:.0f} GB/s, main's run {bo:.0f} GB/s")
def best(s):  # main's table: the int8-x pipelined kernel with PDL where a format has one, else f32-x
    for m in ('int8x_rows_pdl', 'default'):
        if m in s and '1' in s[m]: return m, s[m]['1']['gbs']
    return None, None
om = {(s['type'], s['rows'], s['cols']): s for s in old['speed']}
print("| format | shape | main (mode) GB/s, % | f32-x now GB/s, % | int8-x now n=1 GB/s, % | n=4 f32-x -> int8-x GB/s |")
print("|---|---|---|---|---|---|")
for s in new['speed']:
    k = (s['type'], s['rows'], s['cols'])
    o = om.get(k)
    m, g = best(o) if o else (None, None)
    d = s.get('default', {})
    i = s.get('int8x_rows_pdl', {})
    f1 = d.get('1', {}).get('gbs'); i1 = i.get('1', {}).get('gbs')
    f4 = d.get('4', {}).get('gbs'); i4 = i.get('4', {}).get('gbs')
    pc = lambda v, b: f"{v:.0f} ({100*v/b:.1f} %)" if v else "-"
    mm = f"{g:.0f} ({100*g/bo:.1f} %, {'int8-x' if m == 'int8x_rows_pdl' else 'f32-x'})" if g else "-"
    n4 = f"{f4:.0f} -> {i4:.0f}" if f4 and i4 else (f"{f4:.0f}" if f4 else "-")
    print(f"| {s['type']} | {s['rows']}x{s['cols']} | {mm} | {pc(f1, bn)} | {pc(i1, bn)} | {n4} |")
