#!/usr/bin/env bash
# Lead's device run, stop 41 (issues 9 and 11).
#   pack: bench/cuda/pack.sh .devcarry/NAME build/diskformer build/df_make_model build/tests/df_cuda_tests
#   PART=all: df_cuda_tests (SKIP_TESTS=1: not), then the base set (default, 4B Q4_0 / Q8_0, 27B Q4_0 with
#     an MTP layer), the default model's MTP (adaptive and depth 3, without and with the drafting
#     vocabulary's prefix + context slots: CTX="--draft-vocab 1024 --draft-context 256"), the 27B's MTP at
#     --draft-accept 0.8 (depth 3, adaptive, and with CTX: the cost side only). Each bench is skipped past
#     BUDGET s (default 560).
#   PART=check: df_cuda_tests --gtest_filter=$FILTER only (TESTS_TIMEOUT, default 150 s).
#   PART=mv (pack: build/diskformer build/df_make_model build/bench/cuda/bench_matvec_cuda, models/default.gguf
#     moved out of the tree for the size): the matvec micro-benchmark per format on the three shapes
#     (n = 1, f32-x and int8-x modes; MV_TIMEOUT s), then the 4B Q4_0 / Q8_0 and the 27B plain, the 27B MTP at
#     --draft-accept 0.8 depth 3 without and with CTX.
set -uo pipefail
source bench/cuda/lead/lib.sh
if [ "${PART:-all}" = mv ]; then
  D=${CARRY:-.devcarry/lf41m}
  python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
  chmod +x $D/*
  CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)")
  export LD_LIBRARY_PATH=$PWD/$D/lib:$CUBLAS_DIR CUDA_DISABLE_PTX_JIT=1
  nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.sm,clocks.mem --format=csv > $OUT/gpu.txt 2>&1
  cat $OUT/gpu.txt
  ( for m in q4_0 q8_0; do mk /tmp/q3_4b_$m.gguf --preset qwen3_4b --type $m & done; wait ) &
  MK=$!
  ( mk /tmp/q35_27b_q4_0.gguf --arch qwen35 --preset qwen35_27b --type q4_0 --mtp-layers 1 --fast-random ) &
  MK27=$!
  timeout ${MV_TIMEOUT:-200} $D/bench_matvec_cuda --no-variants --all-shapes --shapes 2560x9728,5120x17408,248320x5120 \
    --modes default,int8x_rows_pdl --ns 1 --pipe-codes "" --out $OUT/matvec.json > $OUT/matvec.txt 2>&1
  echo "matvec workbench rc=$? $((SECONDS - T0)) s"
  grep -E "^speed|read bandwidth|^ +(default|int8x)" $OUT/matvec.txt | cut -c1-120 | tail -30
  BUDGET=${BUDGET_S:-400}
  CTX=${CTX:---draft-vocab 1024 --draft-context 256}
  F3="--spec mtp --draft-max 3 --draft-accept 0.8 --draft-fixed"
  wait $MK; grep make $OUT/make.txt
  bench q4_0 /tmp/q3_4b_q4_0.gguf -p 512 -n 128 -r 2
  bench q8_0 /tmp/q3_4b_q8_0.gguf -p 512 -n 128 -r 2
  wait $MK27; grep make $OUT/make.txt
  bench q27 /tmp/q35_27b_q4_0.gguf -p 512 -n 64 -r 1
  bench q27_mtp3 /tmp/q35_27b_q4_0.gguf -p 32 -n 128 -r 1 $F3
  bench q27_mtp3_ctx /tmp/q35_27b_q4_0.gguf -p 32 -n 128 -r 1 $F3 $CTX
  lead_collect
  exit 0
fi
lead_unpack ${CARRY:-.devcarry/lf41b}
cat $OUT/gpu.txt
if [ "${PART:-all}" = check ]; then
  TESTS_TIMEOUT=${TESTS_TIMEOUT:-150} lead_tests --gtest_filter=${FILTER:-CudaOps.*}
  lead_collect
  exit 0
fi
( for m in q4_0 q8_0; do mk /tmp/q3_4b_$m.gguf --preset qwen3_4b --type $m & done; wait ) &
MK=$!
( mk /tmp/q35_27b_q4_0.gguf --arch qwen35 --preset qwen35_27b --type q4_0 --mtp-layers 1 --fast-random ) &
MK27=$!
BUDGET=9999
[ "${SKIP_TESTS:-0}" = 0 ] && TESTS_TIMEOUT=${TESTS_TIMEOUT:-240} lead_tests ${TEST_ARGS:-}
BUDGET=${BUDGET_S:-560}
HP="--spec-prompt models/heldout.txt"
CTX=${CTX:---draft-vocab 1024 --draft-context 256}
bench default models/default.gguf -p 512 -n 128 -r 2
bench default_mtp models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 $HP
bench default_mtp_ctx models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 $HP $CTX
bench default_mtp3 models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 --draft-fixed $HP
bench default_mtp3_ctx models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 --draft-fixed $HP $CTX
wait $MK; grep make $OUT/make.txt
bench q4_0 /tmp/q3_4b_q4_0.gguf -p 512 -n 128 -r 2
bench q8_0 /tmp/q3_4b_q8_0.gguf -p 512 -n 128 -r 2
wait $MK27; grep make $OUT/make.txt
F3="--spec mtp --draft-max 3 --draft-accept 0.8"
bench q27 /tmp/q35_27b_q4_0.gguf -p 512 -n 64 -r 1
bench q27_mtp3 /tmp/q35_27b_q4_0.gguf -p 32 -n 128 -r 1 $F3 --draft-fixed
bench q27_mtp /tmp/q35_27b_q4_0.gguf -p 32 -n 128 -r 1 $F3
bench q27_mtp3_ctx /tmp/q35_27b_q4_0.gguf -p 32 -n 128 -r 1 $F3 --draft-fixed $CTX
python3 -c "
import json,glob,os
for f in sorted(glob.glob(os.environ['OUT']+'/b_*mtp*.json')):
  d=json.load(open(f)); s=d.get('spec',{})
  print(os.path.basename(f), 'x%.3f' % s.get('speedup',0), 'verify ms', [round(x*1e3,3) for x in s.get('cost_verify_seconds',[])], 'head', round(s.get('cost_head_seconds',0)*1e3,3), 'catchup', round(s.get('cost_head_catchup_seconds',0)*1e3,3), s.get('cycles_at'), s.get('accepted'), s.get('drafted'))
"
lead_collect
