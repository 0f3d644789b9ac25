#!/usr/bin/env bash
# helper mega, the one device call (issue 9): the persistent one-launch Q4_0 chain
# (bench/cuda/persistent_chain.cuh) beside l2pf's chain of per-matrix launches (no PDL: the
# bits reference; PDL) and the read-kernel chain, in one bench_matvec_cuda run per shape.
# Carry .devcarry/mega/bins.tar.xz (bench_matvec_cuda, stripped).
set -uo pipefail
D=.devcarry/mega
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
chmod +x $D/bench_matvec_cuda
CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$CUBLAS_DIR
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv > $OUT/gpu.txt 2>&1
P=36:0:1,32:0:1,24:0:1,16:0:1,8:0:1,4:0:1,32:1:1,16:0:2,16:1:2,36:0:1
timeout 50 $D/bench_matvec_cuda --quick --chain q4_0:4b --chain-cfgs 0:0:0,1:0:0 --persist $P --out $OUT/chain_4b.json > $OUT/chain_4b.txt 2>&1
echo "4b rc=$?" >> $OUT/chain_4b.txt
cat $OUT/chain_4b.txt
timeout 30 $D/bench_matvec_cuda --quick --chain q4_0:27b --chain-cfgs 0:0:0,1:0:0 --persist 24:0:1,16:0:1,8:0:1,16:0:2 --out $OUT/chain_27b.json > $OUT/chain_27b.txt 2>&1
echo "27b rc=$?" >> $OUT/chain_27b.txt
cat $OUT/chain_27b.txt
