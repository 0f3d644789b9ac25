#!/usr/bin/env bash
# helper l2pf, device call A (first of three on one warm machine): the workbench's decode chain
# (bench_matvec_cuda --chain) with the L2 prefetch off and on; its JSON also into /tmp for call B.
# Carry .devcarry/l2pfa/bins.tar.xz: bench_matvec_cuda (stripped, built from branch h-l2pf).
set -uo pipefail
D=.devcarry/l2pfa
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
chmod +x $D/bench_matvec_cuda
T0=$SECONDS
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv > $OUT/gpu.txt 2>&1
timeout 100 $D/bench_matvec_cuda --quick --chain q4_0:4b,q8_0:4b,q4_0:27b --out $OUT/chain.json > $OUT/chain.txt 2>&1
echo "chain rc=$? $((SECONDS - T0)) s"; cat $OUT/chain.txt; cp $OUT/chain.json /tmp/l2pf_chain.json
