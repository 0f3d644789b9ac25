#!/usr/bin/env bash
# mvmma2 device call (the only one): bench_mvmma_cuda with mma_planar.cuh's kernels (tile2 =
# the tile layout with wk = 1 instances, planar_shfl / planar_ld32 = the dp4a PackedWeight read
# as it is) beside main's dp4a matvec and mvmma's tile kernel (D 2, 3); Q4_0 and Q8_0, the four
# shapes, n = 1 2 4 8. Carry: .devcarry/mvmma2 (bins.tar.xz: bench_mvmma_cuda of this branch,
# Release sm_90, stripped, PTX zeroed, xz -9).
set -uo pipefail
D=.devcarry/mvmma2
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
chmod +x $D/bench_mvmma_cuda
export CUDA_DISABLE_PTX_JIT=1
T0=$SECONDS
timeout 62 $D/bench_mvmma_cuda --out $OUT/mvmma2.json --ns 1,2,4,8 > $OUT/mvmma2.txt 2>&1; echo "bench rc=$? $((SECONDS - T0)) s"
tail -40 $OUT/mvmma2.txt
python3 - <<'PY'
import json, os
p = os.environ['OUT'] + '/mvmma2.json'
try:
    d = json.load(open(p))
except Exception as e:
    print('no json', e); raise SystemExit
for s in d.get('shapes', []):
    v = s['validation']
    print(s['type'], s['rows'], s['cols'], {k: v[k] for k in v if k != 'configs'})
PY
