#!/usr/bin/env python3
"""Kernel time of one prefill repetition from an ncu CSV (gpu__time_duration.sum per launch) of
`diskformer bench -p N -r R` (R >= 2): the last two repetitions launch the same kernel sequence
(the first also tunes the GEMM), so the shortest period P with names[-P:] == names[-2P:-P] is
one repetition; its kernels are summed by name. Usage: ncu_period.py ncu.csv"""
import collections
import csv
import sys

rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr, rows = rows[0], rows[1:]
ki, vi = hdr.index("Kernel Name"), hdr.index("Metric Value")
seq = []
for r in rows:
    try:
        v = float(r[vi].replace(",", ""))
    except ValueError:
        continue
    seq.append((r[ki].split("(")[0].replace("void ", "")[:90], v))
names = [s[0] for s in seq]
period = 0
for p in range(1, len(names) // 2 + 1):
    if names[-p:] == names[-2 * p:-p]:
        period = p
        break
if not period:
    sys.exit("no repeated period found in %d launches" % len(names))
tot, cnt = collections.defaultdict(float), collections.Counter()
for n, v in seq[-period:]:
    tot[n] += v
    cnt[n] += 1
all_ns = sum(tot.values())
print("launches %d, one repetition: %d kernels, %.3f ms of kernel time" % (len(seq), period, all_ns / 1e6))
groups = collections.defaultdict(float)
for n, v in tot.items():
    g = ("gemm (tile kernel)" if "gemm_kernel" in n else "gemm (dequant slab)" if "dequant_slab" in n else
         "gemm (cuBLAS)" if ("gemm" in n.lower() or "cutlass" in n or "sm90" in n) else
         "delta rule" if "delta_rule" in n else "flash attention" if "flash" in n else
         "matvec" if "matvec" in n or "mv_" in n else "other")
    groups[g] += v
for g, v in sorted(groups.items(), key=lambda x: -x[1]):
    print("  %-22s %8.3f ms %5.1f %%" % (g, v / 1e6, 100 * v / all_ns))
for n, v in sorted(tot.items(), key=lambda x: -x[1])[:25]:
    print("%8.3f ms %5.1f %% %5d  %8.2f us/call  %s" % (v / 1e6, 100 * v / all_ns, cnt[n], v / cnt[n] / 1e3, n))
