#!/usr/bin/env bash
# cudamv2 run 1: the matvec workbench, f32-x (old) beside int8-x (new) kernels.
set -uo pipefail
D=.devcarry/cudamv2
xz -dc $D/bench_matvec_cuda.xz > /tmp/bmc && chmod +x /tmp/bmc
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
timeout 300 /tmp/bmc --out $OUT/matvec_int8x.json --formats q8_0,q4_0,q4_K,q6_K,iq4_xs,f16 2>&1 | tee $OUT/matvec_int8x.txt | grep -v "^validate.*f32-x"
python3 - $OUT/matvec_int8x.json <<'PY'
import json,sys
d=json.load(open(sys.argv[1]))
for s in d['speed']:
  v=s.get('int8x_variants_n1',[])
  if v:
    b=max(v,key=lambda r:r['gbs'])
    print('%-7s %6d x %-6d best int8 rw%d u%d %5.0f |' % (s['type'],s['rows'],s['cols'],b['rw'],b['u'],b['gbs']), ' '.join('%d%d:%.0f'%(r['rw'],r['u'],r['gbs']) for r in v))
PY
