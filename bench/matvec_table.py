#!/usr/bin/env python3
"""Runs bench_matvec with repetitions and prints weight GB/s per type, ours vs llama.cpp's
vec_dot, taking for each benchmark the fastest repetition (robust to a busy machine).

  bench/matvec_table.py BUILD/bench/bench_matvec [--filter REGEX] [--reps N] [--isa avx512]
"""
import argparse, json, re, subprocess, sys
from collections import defaultdict

ap = argparse.ArgumentParser()
ap.add_argument("binary")
ap.add_argument("--filter", default=".*")
ap.add_argument("--reps", type=int, default=5)
ap.add_argument("--isa", default="avx512")
ap.add_argument("--min-time", default="0.1")
a = ap.parse_args()
flt = "^matvec(_ggml)?/(%s)/.*" % a.filter
out = subprocess.run([a.binary, "--benchmark_filter=" + flt, "--benchmark_format=json",
                      "--benchmark_repetitions=%d" % a.reps, "--benchmark_min_time=" + a.min_time],
                     check=True, capture_output=True, text=True).stdout
best = {}
for b in json.loads(out)["benchmarks"]:
    if b.get("run_type") != "iteration":
        continue
    name = b["run_name"]
    gbps = b["weight_GBps"]
    best[name] = max(best.get(name, 0.0), gbps)
rows = defaultdict(dict)
for name, g in best.items():
    m = re.match(r"matvec/([^/]+)/([^/]+)/(hot|cold)/t(\d+)", name)
    if m:
        t, isa, hc, th = m.groups()
        if isa == a.isa:
            rows[t]["ours_%s_t%s" % (hc, th)] = g
        continue
    m = re.match(r"matvec_ggml/([^/]+)/[^/]+/(hot|cold)/t(\d+)", name)
    if m:
        t, hc, th = m.groups()
        rows[t]["ggml_%s_t%s" % (hc, th)] = g
cols = ["hot_t1", "cold_t1", "hot_t2", "cold_t2"]
print("%-6s " % "type" + " ".join("%17s" % ("ours/ggml " + c) for c in cols))
for t in rows:
    r = rows[t]
    cells = []
    for c in cols:
        o, g = r.get("ours_" + c), r.get("ggml_" + c)
        cells.append("%17s" % ("%.1f / %.1f" % (o, g) if o and g else "-"))
    print("%-6s " % t + " ".join(cells))
