#!/usr/bin/env bash
# Lead's device run, stop 34 (issue 9): int8-x matvecs as thread block clusters that round x
# once between them (--cuda-mv-cluster, default 4), the norm weights staged before the wait, the
# attention grid with the key/value heads along x and the rope angles made before the wait.
#   PART=new (the stop's binaries; --cuda-mv-cluster 0/2/4/8 side by side):
#     bench/cuda/pack.sh .devcarry/lf34a build/tests/df_cuda_tests build/diskformer build/df_make_model
#     PART=new CARRY=.devcarry/lf34a bash bench/cuda/lead/stop34_run.sh
#   PART=old (right after PART=new, on the same warm machine: its unpacked .devcarry/lf34a and the
#     models in /tmp stay): main's binary at the start of the stop (diskformer_old, ee177ce) side
#     by side with the stop's (two binaries do not fit one carry):
#     bench/cuda/pack.sh .devcarry/lf34c /tmp/diskformer_old build/df_make_model
#     PART=old CARRY=.devcarry/lf34c bash bench/cuda/lead/stop34_run.sh
#     (the machine did not keep .devcarry/lf34a between calls: both in one carry, models/ moved out,
#     bench/cuda/pack.sh .devcarry/lf34d build/diskformer /tmp/diskformer_old build/df_make_model;
#     PART=old CARRY=.devcarry/lf34d ...)
#   env: TEST_ARGS=--gtest_filter=..., MODELS="q4_0 q8_0", T27=seconds after which the 27B is skipped
#   PART=tests: df_cuda_tests alone.
#   PART=trace: the 4B matvec chains (Q4_0, Q8_0) with clusters 0 / 2 / 4 and without PDL, and one
#     traced replay of the first (stop 32's --chain-trace: per-stage phase times):
#     bench/cuda/pack.sh .devcarry/lf34t build/bench/cuda/bench_matvec_cuda (models/ moved out)
#     PART=trace CARRY=.devcarry/lf34t bash bench/cuda/lead/stop34_run.sh
set -uo pipefail
source bench/cuda/lead/lib.sh
if [ "${PART:-new}" = trace ]; then
  D=${CARRY:-.devcarry/lf34t}
  python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
  chmod +x $D/bench_matvec_cuda
  export LD_LIBRARY_PATH=$PWD/$D/lib CUDA_DISABLE_PTX_JIT=1
  nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.sm,clocks.mem --format=csv > $OUT/gpu.txt 2>&1
  timeout 300 $D/bench_matvec_cuda --no-variants --chain ${CHAINS:-q4_0:4b,q8_0:4b} \
    --chain-cfgs 1:0:0,1:0:0:2,1:0:0:4,0:0:0 --chain-trace --out $OUT/chain_trace.json > $OUT/chain_trace.txt 2>&1
  echo "chain trace rc=$? $((SECONDS - T0)) s"; cut -c1-160 $OUT/chain_trace.txt | tail -45
  exit 0
fi
if [ "${PART:-new}" = old ]; then
  D=${CARRY:-.devcarry/lf34c}
  python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
  chmod +x $D/diskformer_old $D/df_make_model
  NEW=.devcarry/lf34a/diskformer
  [ -f $D/diskformer ] && chmod +x $D/diskformer && NEW=$D/diskformer
  [ -x $NEW ] || { echo "no $NEW: PART=new did not run on this machine"; exit 3; }
  CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)")
  export LD_LIBRARY_PATH=$PWD/$(dirname $NEW)/lib:$CUBLAS_DIR CUDA_DISABLE_PTX_JIT=1
  nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.sm,clocks.mem --format=csv > $OUT/gpu.txt 2>&1
  OLD=$D/diskformer_old
  ( for m in ${MODELS:-q4_0 q8_0}; do mk /tmp/q3_4b_$m.gguf --preset qwen3_4b --type $m & done; wait ) &
  MK=$!
  ( mk /tmp/q35_27b_q4_0.gguf --arch qwen35 --preset qwen35_27b --type q4_0 --mtp-layers 1 --fast-random ) &
  MK27=$!
  wait $MK; grep make $OUT/make.txt
  BUDGET=9999
  for rep in 1 2; do
    DFBIN=$OLD bench q4_0_p16_old$rep /tmp/q3_4b_q4_0.gguf -p 16 -n 128 -r 2
    DFBIN=$NEW bench q4_0_p16_new$rep /tmp/q3_4b_q4_0.gguf -p 16 -n 128 -r 2 --cuda-mv-cluster 0
  done
  DFBIN=$OLD bench q4_0_p512_old /tmp/q3_4b_q4_0.gguf -p 512 -n 128 -r 2
  DFBIN=$NEW bench q4_0_p512_new /tmp/q3_4b_q4_0.gguf -p 512 -n 128 -r 2 --cuda-mv-cluster 0
  DFBIN=$OLD bench q8_0_old /tmp/q3_4b_q8_0.gguf -p 512 -n 128 -r 2
  DFBIN=$NEW bench q8_0_new /tmp/q3_4b_q8_0.gguf -p 512 -n 128 -r 2 --cuda-mv-cluster 0
  if wait $MK27 && [ $((SECONDS - T0)) -lt ${T27:-420} ]; then
    DFBIN=$OLD bench q27_old /tmp/q35_27b_q4_0.gguf -p 512 -n 64 -r 1
    DFBIN=$NEW bench q27_new /tmp/q35_27b_q4_0.gguf -p 512 -n 64 -r 1 --cuda-mv-cluster 0
    DFBIN=$OLD bench q27_mtp_old /tmp/q35_27b_q4_0.gguf -p 32 -n 64 -r 1 --spec mtp --draft-max 3 --draft-accept 0.8
    DFBIN=$NEW bench q27_mtp_new /tmp/q35_27b_q4_0.gguf -p 32 -n 64 -r 1 --spec mtp --draft-max 3 --draft-accept 0.8 --cuda-mv-cluster 0
  fi
  lead_collect
  exit 0
fi
lead_unpack ${CARRY:-.devcarry/lf34a}
lead_tests_only 300
( for m in ${MODELS:-q4_0 q8_0}; do mk /tmp/q3_4b_$m.gguf --preset qwen3_4b --type $m & done; wait ) &
MK=$!
TESTS_TIMEOUT=${TESTS_TIMEOUT:-260} lead_tests ${TEST_ARGS:-}
wait $MK; grep make $OUT/make.txt
( mk /tmp/q35_27b_q4_0.gguf --arch qwen35 --preset qwen35_27b --type q4_0 --mtp-layers 1 --fast-random ) &
BUDGET=9999
for rep in 1 2; do
  for c in 4 0; do bench q4_0_p16_c${c}_$rep /tmp/q3_4b_q4_0.gguf -p 16 -n 128 -r 2 --cuda-mv-cluster $c; done
done
for c in 2 8; do bench q4_0_p16_c$c /tmp/q3_4b_q4_0.gguf -p 16 -n 128 -r 2 --cuda-mv-cluster $c; done
for c in 4 0 8; do bench q4_0_p512_c$c /tmp/q3_4b_q4_0.gguf -p 512 -n 128 -r 2 --cuda-mv-cluster $c; done
for c in 4 0 8; do bench q8_0_c$c /tmp/q3_4b_q8_0.gguf -p 512 -n 128 -r 2 --cuda-mv-cluster $c; done
for c in 4 0; do bench default_c$c models/default.gguf -p 512 -n 128 -r 2 --cuda-mv-cluster $c; done
bench default_mtp_c4 models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 --spec-prompt models/heldout.txt
bench default_c4_plain64 models/default.gguf -p 64 -n 256 -r 2
lead_collect
