#!/usr/bin/env bash
# helper mega2: strips build/'s bench_matvec_cuda, zeroes its PTX (mvn/zero_ptx.py: the sm_90
# SASS runs, CUDA_DISABLE_PTX_JIT=1 there) and packs it with run1.sh into /work/main/.devcarry/mega2.
set -euo pipefail
W=$(cd "$(dirname "$0")/../../.." && pwd)
C=/work/main/.devcarry/mega2
S=/tmp/mega2_stage
rm -rf $S && mkdir -p $S $C
cp $W/build/bench/cuda/bench_matvec_cuda $S/
strip $S/bench_matvec_cuda
python3 $W/bench/cuda/mvn/zero_ptx.py $S/bench_matvec_cuda
tar -C $S -I 'xz -9' -cf $C/bins.tar.xz bench_matvec_cuda
cp $W/bench/cuda/mega2/run*.sh $C/
ls -la $C
