#!/usr/bin/env bash
# Lead's device run, stop 35 (issue 9): the fused decode attention loads its query head and its
# own row's k and v right after griddepcontrol.wait, in one round trip (qk_head.cuh load_head /
# norm_rope_regs; qk_norm_rope.cu loads its heads the same way).
#   PART=ab: main's binary at the start of the stop (diskformer_old, aecfad9) side by side with this
#     stop's, alternating; models/ moved out (the carry's 64 MiB):
#     bench/cuda/pack.sh .devcarry/lf35b build/diskformer /tmp/diskformer_old build/df_make_model
#     PART=ab CARRY=.devcarry/lf35b bash bench/cuda/lead/stop35_run.sh
#   PART=tests: df_cuda_tests, then this stop's binary on the default model (plain and MTP) and the
#     4B / 27B files (made here unless /tmp has them from PART=ab on the same warm machine):
#     bench/cuda/pack.sh .devcarry/lf35t build/diskformer build/df_make_model build/tests/df_cuda_tests
#     PART=tests CARRY=.devcarry/lf35t bash bench/cuda/lead/stop35_run.sh
#   PART=final: as PART=tests on the stop's last code (the attention change, the MTP head's
#     cache-only rows, the CPU thread pool), plus the default model's MTP at fixed depths 2 / 3 / 4
#     and adaptive up to 5, and the 27B's op profile (-p 16 -n 16):
#     bench/cuda/pack.sh .devcarry/lf35f build/diskformer build/df_make_model build/tests/df_cuda_tests
#     PART=final CARRY=.devcarry/lf35f bash bench/cuda/lead/stop35_run.sh
#   PART=xq: df_cuda_tests on the xq handoff (the SwiGLU launch rounds its output to int8 for the
#     down launch, --cuda-xq-handoff, default on), then decode benches with and without it
#     (--no-cuda-xq-handoff) alternating, one binary:
#     bench/cuda/pack.sh .devcarry/lf35x build/diskformer build/df_make_model build/tests/df_cuda_tests
#     PART=xq CARRY=.devcarry/lf35x bash bench/cuda/lead/stop35_run.sh
#   env: TEST_ARGS=--gtest_filter=..., MODELS="q4_0 q8_0", T27=seconds after which the 27B is
#   skipped (default 470)
#   PART=trace: the decode matvec chains (27B-like Q4_0 / Q8_0, 16 layers; 4B Q4_0) with PDL and a
#     traced replay: per stage the x prologue, products and span (same carry as PART=mv)
#     PART=trace CARRY=.devcarry/lf35m bash bench/cuda/lead/stop35_run.sh
#   PART=mv: the matvec micro-benchmark per format (issue 9's table): every format at the five
#     speed shapes (--all-shapes), n = 1, f32-x ("default") and the backend's int8-x default
#     ("int8x_rows_pdl"), with the workbench's validation at 1024 x 4096:
#     bench/cuda/pack.sh .devcarry/lf35m build/bench/cuda/bench_matvec_cuda   (models/ moved out)
#     PART=mv CARRY=.devcarry/lf35m bash bench/cuda/lead/stop35_run.sh
set -uo pipefail
source bench/cuda/lead/lib.sh
if [ "${PART:-ab}" = trace ]; then  # the 27B-shape and 4B chains with PDL, traced (stop 32's --chain-trace)
  D=${CARRY:-.devcarry/lf35m}
  python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
  chmod +x $D/bench_matvec_cuda
  export LD_LIBRARY_PATH=$PWD/$D/lib CUDA_DISABLE_PTX_JIT=1
  nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.sm,clocks.mem --format=csv > $OUT/gpu.txt 2>&1
  timeout 300 $D/bench_matvec_cuda --no-variants --chain ${CHAINS:-q4_0:27b,q4_0:4b,q8_0:27b} --chain-cfgs 1:0:0 \
    --chain-trace --out $OUT/chain_trace.json > $OUT/chain_trace.txt 2>&1
  echo "chain trace rc=$? $((SECONDS - T0)) s"; cut -c1-160 $OUT/chain_trace.txt | tail -60
  exit 0
fi
if [ "${PART:-ab}" = mv ]; then
  D=${CARRY:-.devcarry/lf35m}
  python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
  chmod +x $D/bench_matvec_cuda
  export LD_LIBRARY_PATH=$PWD/$D/lib CUDA_DISABLE_PTX_JIT=1
  nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.sm,clocks.mem --format=csv > $OUT/gpu.txt 2>&1
  timeout ${MV_TIMEOUT:-500} $D/bench_matvec_cuda --no-variants --all-shapes --modes default,int8x_rows_pdl --ns 1 \
    --pipe-codes "" --out $OUT/matvec.json > $OUT/matvec.txt 2>&1
  echo "matvec workbench rc=$? $((SECONDS - T0)) s"
  grep -E "^speed|read bandwidth|^ +(default|int8x)" $OUT/matvec.txt | cut -c1-120 | tail -40
  exit 0
fi
D=${CARRY:-.devcarry/lf35b}
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
chmod +x $D/*
CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$PWD/$D/lib:$CUBLAS_DIR CUDA_DISABLE_PTX_JIT=1
nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.sm,clocks.mem --format=csv > $OUT/gpu.txt 2>&1
cat $OUT/gpu.txt
OLD=$D/diskformer_old NEW=$D/diskformer
( for m in ${MODELS:-q4_0 q8_0}; do mk /tmp/q3_4b_$m.gguf --preset qwen3_4b --type $m & done; wait ) &
MK=$!
[ "${PART:-ab}" != ab ] && TESTS_TIMEOUT=${TESTS_TIMEOUT:-260} lead_tests ${TEST_ARGS:-}
( mk /tmp/q35_27b_q4_0.gguf --arch qwen35 --preset qwen35_27b --type q4_0 --mtp-layers 1 --fast-random ) &
MK27=$!
wait $MK; grep make $OUT/make.txt
BUDGET=9999
if [ "${PART:-ab}" = xq ]; then
  ( mk /tmp/q3_4b_q4_K.gguf --preset qwen3_4b --type q4_K ) &
  MK4K=$!
  for rep in 1 2; do
    bench q4_0_p16_off$rep /tmp/q3_4b_q4_0.gguf -p 16 -n 128 -r 2 --no-cuda-xq-handoff
    bench q4_0_p16_on$rep /tmp/q3_4b_q4_0.gguf -p 16 -n 128 -r 2
  done
  bench q4_0_p512_off /tmp/q3_4b_q4_0.gguf -p 512 -n 128 -r 2 --no-cuda-xq-handoff
  bench q4_0_p512_on /tmp/q3_4b_q4_0.gguf -p 512 -n 128 -r 2
  bench q8_0_off /tmp/q3_4b_q8_0.gguf -p 512 -n 128 -r 2 --no-cuda-xq-handoff
  bench q8_0_on /tmp/q3_4b_q8_0.gguf -p 512 -n 128 -r 2
  bench default_off models/default.gguf -p 512 -n 128 -r 2 --no-cuda-xq-handoff
  bench default_on models/default.gguf -p 512 -n 128 -r 2
  bench default_mtp_on models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 --spec-prompt models/heldout.txt
  if wait $MK4K; then
    bench q4_K_off /tmp/q3_4b_q4_K.gguf -p 512 -n 128 -r 2 --no-cuda-xq-handoff
    bench q4_K_on /tmp/q3_4b_q4_K.gguf -p 512 -n 128 -r 2
  fi
  if wait $MK27 && [ $((SECONDS - T0)) -lt ${T27:-470} ]; then
    bench q27_off /tmp/q35_27b_q4_0.gguf -p 512 -n 64 -r 1 --no-cuda-xq-handoff
    bench q27_on /tmp/q35_27b_q4_0.gguf -p 512 -n 64 -r 1
    bench q27_mtp_on /tmp/q35_27b_q4_0.gguf -p 32 -n 64 -r 1 --spec mtp --draft-max 3 --draft-accept 0.8
  fi
elif [ "${PART:-ab}" = ab ]; then
  for rep in 1 2; do
    DFBIN=$OLD bench q4_0_p16_old$rep /tmp/q3_4b_q4_0.gguf -p 16 -n 128 -r 2
    DFBIN=$NEW bench q4_0_p16_new$rep /tmp/q3_4b_q4_0.gguf -p 16 -n 128 -r 2
  done
  DFBIN=$OLD bench q4_0_p512_old /tmp/q3_4b_q4_0.gguf -p 512 -n 128 -r 2
  DFBIN=$NEW bench q4_0_p512_new /tmp/q3_4b_q4_0.gguf -p 512 -n 128 -r 2
  DFBIN=$OLD bench q8_0_old /tmp/q3_4b_q8_0.gguf -p 512 -n 128 -r 2
  DFBIN=$NEW bench q8_0_new /tmp/q3_4b_q8_0.gguf -p 512 -n 128 -r 2
  DFBIN=$OLD prof q4_0_old /tmp/q3_4b_q4_0.gguf -p 16 -n 64 -r 1
  DFBIN=$NEW prof q4_0_new /tmp/q3_4b_q4_0.gguf -p 16 -n 64 -r 1
  if wait $MK27 && [ $((SECONDS - T0)) -lt ${T27:-470} ]; then
    DFBIN=$OLD bench q27_old /tmp/q35_27b_q4_0.gguf -p 512 -n 64 -r 1
    DFBIN=$NEW bench q27_new /tmp/q35_27b_q4_0.gguf -p 512 -n 64 -r 1
  fi
else
  bench default models/default.gguf -p 512 -n 128 -r 2
  bench default_mtp models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 --spec-prompt models/heldout.txt
  bench q4_0_p512 /tmp/q3_4b_q4_0.gguf -p 512 -n 128 -r 2
  bench q8_0 /tmp/q3_4b_q8_0.gguf -p 512 -n 128 -r 2
  if [ "$PART" = final ]; then
    for d in 2 3 4; do
      bench default_mtp_fixed$d models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max $d --draft-fixed --spec-prompt models/heldout.txt
    done
    bench default_mtp_max5 models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 5 --spec-prompt models/heldout.txt
  fi
  if wait $MK27 && [ $((SECONDS - T0)) -lt ${T27:-470} ]; then
    bench q27 /tmp/q35_27b_q4_0.gguf -p 512 -n 64 -r 1
    bench q27_mtp /tmp/q35_27b_q4_0.gguf -p 32 -n 64 -r 1 --spec mtp --draft-max 3 --draft-accept 0.8
    [ "$PART" = final ] && prof q27 /tmp/q35_27b_q4_0.gguf -p 16 -n 16 -r 1
  fi
fi
lead_collect
