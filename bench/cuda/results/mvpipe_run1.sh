#!/usr/bin/env bash
# mvpipe run 1: the matvec workbench only (old loop vs pipelined default vs pipelined variants).
set -uo pipefail
D=.devcarry/mvpipe
B=/tmp/mvp; mkdir -p $B
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins1.tar.xz $B
chmod +x $B/bench_matvec_cuda
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $OUT/gpu.txt 2>&1
T0=$SECONDS
timeout 200 $B/bench_matvec_cuda --out $OUT/matvec.json --formats q4_0,q8_0,q4_K,q6_K --no-variants \
  --shapes 2560x9728,9728x2560,5120x17408,17408x5120 > $OUT/matvec.txt 2>&1
echo "workbench rc=$? $((SECONDS - T0)) s"
cat $OUT/matvec.txt | cut -c1-400
