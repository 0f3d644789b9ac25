# Sums ncu's per-kernel durations by kernel name (the decode step's breakdown).
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; rows = rows[1:]
ki, vi = hdr.index("Kernel Name"), hdr.index("Metric Value")
tot = collections.defaultdict(float); cnt = collections.Counter()
for r in rows:
    try: v = float(r[vi].replace(",", ""))
    except ValueError: continue
    name = r[ki].split("(")[0][:150]
    tot[name] += v; cnt[name] += 1
all_ns = sum(tot.values())
print("kernels %d, total %.3f ms" % (sum(cnt.values()), all_ns / 1e6))
for n, v in sorted(tot.items(), key=lambda x: -x[1])[:25]:
    print("%8.3f ms %6d  %8.2f us/call  %s" % (v / 1e6, cnt[n], v / cnt[n] / 1e3, n))
