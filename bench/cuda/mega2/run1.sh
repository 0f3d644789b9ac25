#!/usr/bin/env bash
# helper mega2 (issue 9), device call 1: the second persistent one-launch Q4_0 chain
# (bench/cuda/persistent_chain2.cuh, --persist2 NW:D:U:BPS:PF) beside the chain of mv_kernel
# launches (no PDL: the bits reference; PDL: main's default), the read-kernel chain and helper
# mega's first persistent version (--persist 4:0:1), one bench_matvec_cuda run per shape.
# Carry .devcarry/mega2 (bins.tar.xz: bench_matvec_cuda stripped, PTX zeroed; this script).
# If a run dies (not a timeout), its variants are rerun one per process, within BUDGET seconds.
set -uo pipefail
D=.devcarry/mega2
T0=$SECONDS
[ -x $D/bench_matvec_cuda ] || python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
chmod +x $D/bench_matvec_cuda
CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$CUBLAS_DIR
export CUDA_DISABLE_PTX_JIT=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv > $OUT/gpu.txt 2>&1
V4=${V4:-16:3:4:1:0,16:3:4:1:2,16:3:4:1:6,16:2:4:1:2,16:4:2:1:2,16:3:2:1:2,8:3:4:2:2,8:2:4:3:2,8:4:2:3:2}
V27=${V27:-16:3:4:1:0,16:3:4:1:2,16:3:4:1:6,16:2:4:1:2,16:4:2:1:2,16:3:2:1:2,8:3:4:2:2}
one() {  # shape variants persist-args...
  local sh=$1 vars=$2; shift 2
  timeout 60 $D/bench_matvec_cuda --quick --chain q4_0:$sh --chain-cfgs 0:0:0,1:0:0 --persist2 $vars "$@" \
    --out $OUT/chain_$sh.json > $OUT/chain_$sh.txt 2>&1
  local rc=$?
  echo "$sh rc=$rc $((SECONDS - T0)) s" | tee -a $OUT/chain_$sh.txt
  cat $OUT/chain_$sh.txt
  if [ $rc -ne 0 ] && [ $rc -ne 124 ]; then  # one process per variant
    for v in ${vars//,/ }; do
      [ $((SECONDS - T0)) -lt ${BUDGET:-100} ] || { echo "skip $sh $v (time)"; continue; }
      timeout 25 $D/bench_matvec_cuda --quick --chain q4_0:$sh --chain-cfgs 0:0:0 --persist2 $v \
        --out $OUT/chain_${sh}_${v//:/_}.json > $OUT/chain_${sh}_${v//:/_}.txt 2>&1
      echo "$sh $v rc=$? $((SECONDS - T0)) s"; grep -E "persist2|rror" $OUT/chain_${sh}_${v//:/_}.txt | cut -c1-200
    done
  fi
}
one 4b $V4 --persist 4:0:1
one 27b $V27
echo "done $((SECONDS - T0)) s"
