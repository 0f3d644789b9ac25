#!/usr/bin/env bash
# mvpipe run 2: the workbench with the staged/pipelined variants and the new default.
set -uo pipefail
D=.devcarry/mvpipe
B=/tmp/mvp; mkdir -p $B
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins2.tar.xz $B
chmod +x $B/bench_matvec_cuda
T0=$SECONDS
timeout 200 $B/bench_matvec_cuda --out $OUT/matvec.json --formats q4_0,q8_0,q4_K,q6_K,iq4_xs --no-variants \
  --pipe-codes 5221,5222,5321,5322,6021,6024,6221,6222,6322,6212 \
  --shapes 2560x9728,9728x2560,5120x17408,17408x5120 > $OUT/matvec.txt 2>&1
echo "workbench rc=$? $((SECONDS - T0)) s"
cat $OUT/matvec.txt | cut -c1-600
