#!/usr/bin/env python3
"""One decode token's kernels from an ncu CSV (gpu__time_duration.sum per launch) of eager decode
(`diskformer bench -p 0 -n N --no-graphs`): the shortest period P with names[-P:] == names[-2P:-P]
is one token; its kernels in launch order of the first layer's pattern, and summed by name.
Usage: ncu_token.py ncu.csv LAYERS"""
import collections
import csv
import sys

rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
layers = int(sys.argv[2])
hdr, rows = rows[0], rows[1:]
ki, vi = hdr.index("Kernel Name"), hdr.index("Metric Value")
seq = []
for r in rows:
    try:
        v = float(r[vi].replace(",", ""))
    except ValueError:
        continue
    seq.append((r[ki].split("(")[0].replace("void ", "")[:110], v))
# the bench ends with the read-bandwidth kernel (repeated): drop the trailing run of it
while len(seq) > 1 and seq[-1][0] == seq[-2][0]:
    seq.pop()
if seq and "read" in seq[-1][0]:
    seq.pop()
names = [s[0] for s in seq]
period = 0
for p in range(8, len(names) // 2 + 1):
    if names[-p:] == names[-2 * p:-p]:
        period = p
        break
if not period:
    sys.exit("no repeated period in %d launches" % len(names))
tok = seq[-period:]
all_ns = sum(v for _, v in tok)
print("launches %d; one token: %d kernels, %.1f us of kernel time (%d layers: %.1f kernels, %.1f us a layer incl. head)"
      % (len(seq), period, all_ns / 1e3, layers, period / layers, all_ns / 1e3 / layers))
tot, cnt = collections.defaultdict(float), collections.Counter()
for n, v in tok:
    tot[n] += v
    cnt[n] += 1
for n, v in sorted(tot.items(), key=lambda x: -x[1]):
    print("%9.1f us %5.1f %% %4d x %7.2f us  %s" % (v / 1e3, 100 * v / all_ns, cnt[n], v / cnt[n] / 1e3, n))
print("-- the token's launches in order (us):")
for n, v in tok:
    print("%7.2f  %s" % (v / 1e3, n))
