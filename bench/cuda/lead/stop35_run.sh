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
#   env: TEST_ARGS=--gtest_filter=..., MODELS="q4_0 q8_0", T27=seconds after which the 27B is
#   skipped (default 470)
set -uo pipefail
source bench/cuda/lead/lib.sh
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
[ "${PART:-ab}" = tests ] && TESTS_TIMEOUT=${TESTS_TIMEOUT:-260} lead_tests ${TEST_ARGS:-}
( mk /tmp/q35_27b_q4_0.gguf --arch qwen35 --preset qwen35_27b --type q4_0 --mtp-layers 1 --fast-random ) &
MK27=$!
wait $MK; grep make $OUT/make.txt
BUDGET=9999
if [ "${PART:-ab}" = ab ]; then
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
  if wait $MK27 && [ $((SECONDS - T0)) -lt ${T27:-470} ]; then
    bench q27 /tmp/q35_27b_q4_0.gguf -p 512 -n 64 -r 1
    bench q27_mtp /tmp/q35_27b_q4_0.gguf -p 32 -n 64 -r 1 --spec mtp --draft-max 3 --draft-accept 0.8
  fi
fi
lead_collect
