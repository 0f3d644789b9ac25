#!/usr/bin/env python3
"""Where a decode step's time goes, from an nsys cuda_gpu_trace CSV (bench/cuda/lead/stop30_run.sh
`trace`: `nsys profile --cuda-graph-trace=node` over `diskformer bench`, then `nsys stats --report
cuda_gpu_trace --format csv`).

Decode steps are cut at each launch of the step's last kernel (--end, default: the first kernel
name containing "argmax"); the last --steps steps are kept (the bench's decode runs last). Per
kernel name: launches per step, mean duration, and the mean gap from the previous kernel's end to
its start (negative: it started before the previous one ended, as PDL allows; a step's first
kernel: from the previous step's end). The step's wall
time splits into the time some kernel runs (busy) and the time none does (idle).

Usage: trace_gaps.py TRACE.csv[.xz] [--steps 16] [--end argmax] [--json out.json]
"""
import argparse, csv, io, json, lzma, sys
from collections import defaultdict


def rows_of(path):
    raw = lzma.open(path, 'rt') if path.endswith('.xz') else open(path, newline='')
    text = raw.read()
    # nsys may print lines before the header: start at the line naming the start column
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith('"Start') or line.startswith('Start'):
            break
    else:
        sys.exit('no "Start (ns)" header in ' + path)
    rd = csv.DictReader(io.StringIO('\n'.join(lines[i:])))
    out = []
    for r in rd:
        name = r.get('Name', '')
        if not r.get('Duration (ns)') or 'memcpy' in name.lower() or 'memset' in name.lower():
            if name and ('[CUDA memcpy' in name or '[CUDA memset' in name):
                out.append((int(r['Start (ns)']), int(r['Duration (ns)']), name))
            continue
        out.append((int(r['Start (ns)']), int(r['Duration (ns)']), name))
    out.sort()
    return out


def short(name):
    n = name.split('(')[0]
    n = n.replace('void ', '').replace('df::', '').replace('cudamv::', '')
    return n[:90]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('csv')
    ap.add_argument('--steps', type=int, default=16)
    ap.add_argument('--end', default='argmax')
    ap.add_argument('--json')
    a = ap.parse_args()
    ks = rows_of(a.csv)
    ends = [i for i, k in enumerate(ks) if a.end in k[2]]
    if len(ends) < 2:
        sys.exit('fewer than two kernels named *%s*' % a.end)
    ends = ends[-(a.steps + 1):]
    steps = [ks[ends[j] + 1: ends[j + 1] + 1] for j in range(len(ends) - 1)]
    step_ends = [ks[ends[j]][0] + ks[ends[j]][1] for j in range(len(ends))]  # the previous step's end
    per = defaultdict(lambda: [0, 0.0, 0.0])  # launches, duration ns, gap ns
    walls, busys = [], []
    cycles = []
    for j, st in enumerate(steps):
        prev_end = step_ends[j]
        t0 = st[0][0]
        t1 = max(s + d for s, d, _ in st)
        walls.append(t1 - t0)
        cycles.append(step_ends[j + 1] - step_ends[j])
        busy, cur_s, cur_e = 0, None, None
        for s, d, n in st:
            e = s + d
            if cur_e is None or s > cur_e:
                if cur_e is not None:
                    busy += cur_e - cur_s
                cur_s, cur_e = s, e
            else:
                cur_e = max(cur_e, e)
            p = per[short(n)]
            p[0] += 1
            p[1] += d
            p[2] += s - prev_end
            prev_end = max(prev_end, e)
        busy += cur_e - cur_s
        busys.append(busy)
    ns = len(steps)
    wall = sum(walls) / ns / 1e3
    busy = sum(busys) / ns / 1e3
    launches = sum(p[0] for p in per.values()) / ns
    cycle = sum(cycles) / ns / 1e3
    print('%d steps: %.1f us a step end to end, %.1f us from its first kernel start to its last kernel end; '
          '%.1f launches; busy %.1f us, idle %.1f us in the step (%.2f us a launch), %.1f us between steps'
          % (ns, cycle, wall, launches, busy, wall - busy, (wall - busy) / launches, cycle - wall))
    print('%-90s %7s %9s %9s %9s' % ('kernel', 'n/step', 'us/call', 'us/step', 'gap us'))
    table = []
    for name, (c, d, g) in sorted(per.items(), key=lambda kv: -kv[1][1]):
        row = {'kernel': name, 'per_step': c / ns, 'us_per_call': d / c / 1e3, 'us_per_step': d / ns / 1e3,
               'mean_gap_us': g / c / 1e3}
        table.append(row)
        print('%-90s %7.2f %9.2f %9.2f %9.2f' % (name, row['per_step'], row['us_per_call'], row['us_per_step'],
                                                 row['mean_gap_us']))
    if a.json:
        json.dump({'steps': ns, 'us_per_step': cycle, 'us_first_to_last_kernel': wall, 'busy_us': busy, 'idle_us': wall - busy,
                   'launches_per_step': launches, 'kernels': table}, open(a.json, 'w'), indent=1)


if __name__ == '__main__':
    main()
