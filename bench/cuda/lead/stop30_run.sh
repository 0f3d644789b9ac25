#!/usr/bin/env bash
# Lead's device run, stop 30, in two calls on one warm machine (the model files stay in /tmp and
# /dev/shm between them):
#   PART=1: df_cuda_tests on the commit packed; pp512 of a 10-layer 35B-A3B shape (a layer's
#     grouped GEMM is that of 40 layers, and the file loads in seconds; stop 30 ran the A/B of the
#     since removed --cuda-moe-gemm-ahead 1 / 2 here); nsys traces of decode graph replays (every kernel's duration and the gaps
#     between kernels: what bounds a decode step) where the machine has nsys; issue 9's figures
#     (default model, 4B Q4_0 / Q8_0, 27B Q4_0).
#   PART=tests: df_cuda_tests only.
#   PART=2: issue 9's matvec micro-benchmark per format at the real shapes; 27B MTP at
#     --draft-accept 0.8; the 40-layer 35B-A3B; default-model MTP; an nsys trace of 35B-A3B decode.
#   bench/cuda/pack.sh .devcarry/lf30 build/tests/df_cuda_tests build/diskformer build/df_make_model \
#     build/bench/cuda/bench_matvec_cuda
#   (fuzz/corpus, bench/cuda/results, attic, bench/cpu/results out of the checkout for the call)
#   PART=1 CARRY=.devcarry/lf30 BUDGET=470 bash bench/cuda/lead/stop30_run.sh   (then PART=2)
# Each bench or trace is skipped once BUDGET s have passed.
set -uo pipefail
source bench/cuda/lead/lib.sh
lead_unpack ${CARRY:-.devcarry/lf30}
chmod +x $D/bench_matvec_cuda 2>/dev/null
lead_tests_only 250  # PART=tests: df_cuda_tests only (the final commit's check)
A10=/dev/shm/a3b_L10.gguf A40=/dev/shm/a3b_L40.gguf
NSYS=$(command -v nsys || find /usr/local/cuda*/ /opt -maxdepth 4 -name nsys -type f 2>/dev/null | head -1)
trace() {  # name model args...: nsys over diskformer bench, every kernel of the graph replays as CSV
  local name=$1 model=$2; shift 2
  [ -n "$NSYS" ] || { echo "no nsys: trace $name skipped"; return; }
  [ $((SECONDS - T0)) -lt ${BUDGET:-430} ] || { echo "skip trace $name (time)"; return; }
  timeout 120 $NSYS profile -o /tmp/tr_$name --force-overwrite true -t cuda --cuda-graph-trace=node \
    --sample=none --cpuctxsw=none $D/diskformer bench -m "$model" --device cuda --output json -q "$@" \
    > $OUT/trace_$name.json 2>> $OUT/log.txt
  echo "trace $name rc=$? $((SECONDS - T0)) s"
  timeout 90 $NSYS stats --report cuda_gpu_trace --format csv --output /tmp/tr_$name /tmp/tr_$name.nsys-rep >> $OUT/log.txt 2>&1
  for f in /tmp/tr_${name}*.csv; do [ -f "$f" ] && xz -T8 -c "$f" > $OUT/$(basename "$f").xz; done
  ls -la $OUT | grep "tr_$name" || echo "trace $name: no csv"
}
if [ "${PART:-1}" = 1 ]; then
  { for t in nsys ncu nvidia-smi; do echo "$t: $(command -v $t || find /usr/local/cuda*/ /opt -maxdepth 4 -name $t -type f 2>/dev/null | head -1)"; done; } > $OUT/tools.txt 2>&1
  cat $OUT/tools.txt
  ( mk /tmp/q3_4b_q4.gguf --preset qwen3_4b --type q4_0 &
    mk $A10 --arch qwen35moe --preset 35b-a3b --layers 10 --row-pool 1024 --type q4_k &
    mk /tmp/q3_4b_q8.gguf --preset qwen3_4b --type q8_0 &
    mk /tmp/q35_27b_q4f.gguf --arch qwen35 --preset qwen35_27b --type q4_0 --mtp-layers 1 --fast-random &
    mk $A40 --arch qwen35moe --preset 35b-a3b --layers 40 --row-pool 1024 --type q4_k &
    wait ) &
  MK=$!
  TESTS_TIMEOUT=${TESTS_TIMEOUT:-250} lead_tests ${TEST_ARGS:-}
  wait $MK; grep make $OUT/make.txt
  # (stop 30's run alternated --cuda-moe-gemm-ahead 1 / 2 here: no gain, the flag is removed)
  bench a3b10_pp $A10 -p 512 -n 4 -r 3
  trace 4b_q4 /tmp/q3_4b_q4.gguf -p 16 -n 24 -r 1
  trace 4b_q4_nopdl /tmp/q3_4b_q4.gguf -p 16 -n 24 -r 1 --no-pdl  # durations without PDL's early starts
  trace default models/default.gguf -p 16 -n 48 -r 1
  bench default models/default.gguf -p 512 -n 128 -r 2
  bench q3_4b_q4 /tmp/q3_4b_q4.gguf -p 512 -n 128 -r 2
  bench q3_4b_q8 /tmp/q3_4b_q8.gguf -p 512 -n 128 -r 2
  bench q35_27b /tmp/q35_27b_q4f.gguf -p 512 -n 64 -r 1
else
  if [ -x $D/bench_matvec_cuda ]; then
    timeout 170 $D/bench_matvec_cuda --no-variants --modes default,int8x_rows_pdl --ns 1 \
      --shapes 2560x9728,5120x17408,248320x5120 --out $OUT/matvec_all.json > $OUT/matvec_all.txt 2>&1
    echo "matvec workbench rc=$? $((SECONDS - T0)) s"
    grep -E "^speed|read bandwidth" $OUT/matvec_all.txt | cut -c1-160 | head -150
  fi
  bench q35_27b_spec /tmp/q35_27b_q4f.gguf -p 32 -n 64 -r 1 --spec mtp --draft-max 3 --draft-accept 0.8
  bench a3b_L40 $A40 -p 512 -n 128 -r 2
  bench def_spec models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 --spec-prompt models/heldout.txt
  trace a3b10 $A10 -p 16 -n 24 -r 1
  trace def_spec models/default.gguf -p 64 -n 128 -r 1 --spec mtp --draft-max 3 --spec-prompt models/heldout.txt
fi
lead_collect
