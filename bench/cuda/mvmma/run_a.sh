#!/usr/bin/env bash
# mvmma device call a: the tensor-core int8 matvec workbench (bench_mvmma_cuda) on the real
# shapes, Q4_0 and Q8_0, n = 1 2 3 4 8, beside main's dp4a matvec. Carry: .devcarry/mvmma/a/bins.tar.xz
# (bench_mvmma_cuda built from this branch, Release sm_90, stripped, PTX zeroed, xz -9).
set -uo pipefail
D=.devcarry/mvmma/a
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
chmod +x $D/bench_mvmma_cuda
export CUDA_DISABLE_PTX_JIT=1
T0=$SECONDS
timeout 110 $D/bench_mvmma_cuda --out $OUT/mvmma.json > $OUT/mvmma.txt 2>&1; echo "bench rc=$? $((SECONDS - T0)) s"
cat $OUT/mvmma.txt | tail -45
python3 - <<'PY'
import json, os
p = os.environ['OUT'] + '/mvmma.json'
try:
    d = json.load(open(p))
except Exception as e:
    print('no json', e); raise SystemExit
for s in d.get('shapes', []):
    v = s['validation']
    print(s['type'], s['rows'], s['cols'], 'ks', s['splits'], {k: v[k] for k in v if not isinstance(v[k], dict)}, {k: v[k] for k in v if isinstance(v[k], dict)})
print(json.dumps(d.get('kernel_attrs', {}))[:1500])
PY
