#!/usr/bin/env bash
# Packs the carries of bench/cuda/moedec/run_{a,b}.sh into /work/main/.devcarry/moedec/{a,b}:
# stripped binaries of this worktree's build, PTX zeroed (bench/cuda/mvn/zero_ptx.py), tar -I 'xz -9'.
# lib/ (the .so files diskformer and df_cuda_tests need there) from the lead's .devcarry/lf22b.
set -euo pipefail
W=$(cd "$(dirname "$0")/../../.." && pwd)
C=/work/main/.devcarry/moedec
S=$(mktemp -d)
mkdir -p $S/a $S/b $C/a $C/b
tar -xJf /work/main/.devcarry/lf22b/bins.tar.xz -C $S/a lib
cp -r $S/a/lib $S/b/
cp $W/build/tests/df_cuda_tests $S/a/; cp $W/build/df_make_model $S/a/; cp $W/build/diskformer $S/b/
strip $S/a/df_cuda_tests $S/a/df_make_model $S/b/diskformer
python3 $W/bench/cuda/mvn/zero_ptx.py $S/a/df_cuda_tests
python3 $W/bench/cuda/mvn/zero_ptx.py $S/b/diskformer
(cd $S/a && tar -I 'xz -9 -T2' -cf $C/a/bins.tar.xz df_cuda_tests df_make_model lib)
(cd $S/b && tar -I 'xz -9 -T2' -cf $C/b/bins.tar.xz diskformer lib)
cp $W/bench/cuda/moedec/run_a.sh $C/a/; cp $W/bench/cuda/moedec/run_b.sh $C/b/
ls -la $C/a $C/b
rm -rf $S
