#!/usr/bin/env bash
# Helper mma's device run (issue 11, 2026-12-02), two calls on one warm machine (the carries do not
# fit one transfer; the second within 30 s so that the model files in /tmp survive):
#   PART=tests   (.devcarry/mma: df_cuda_tests, df_make_model, lib/): the matvec / fused / spec tests
#                while df_make_model writes the 27B (qwen35_27b Q4_0 + MTP) and the 4B Q4_0 into /tmp;
#   PART=benches (.devcarry/mmab: diskformer, df_make_model, lib/): the benches with --cuda-mv-mma
#                off / auto / on side by side (27B spec + plain, the default model's spec, 4B Q4_0 plain).
# Binaries built here (Release, CUDA sm_90), stripped, PTX zeroed (bench/cuda/mvn/zero_ptx.py), tar -I 'xz -9'.
set -uo pipefail
PART=${PART:-tests}
case $PART in tests) D=.devcarry/mma ;; benches) D=.devcarry/mmab ;; esac
[ -x $D/df_make_model ] || python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
chmod +x $D/diskformer $D/df_make_model $D/df_cuda_tests 2>/dev/null
CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$PWD/$D/lib:$CUBLAS_DIR
export CUDA_DISABLE_PTX_JIT=1
VOCAB=tools/make_model/vocab_corpus.txt
T0=$SECONDS
mk() { local f=$1; shift; [ -s "$f" ] && return; "$D/df_make_model" -o "$f.tmp" --vocab-text $VOCAB "$@" > /dev/null 2>> $OUT/make.txt && mv "$f.tmp" "$f"; echo "make $f rc=$? $((SECONDS - T0)) s" >> $OUT/make.txt; }
( mk /tmp/q3_4b_q4.gguf --preset qwen3_4b --type q4_0 &
  mk /tmp/q35_27b_q4f.gguf --arch qwen35 --preset qwen35_27b --type q4_0 --mtp-layers 1 --fast-random & wait ) &
MK=$!
if [ "$PART" = tests ]; then
  nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.sm,clocks.mem --format=csv > $OUT/gpu.txt 2>&1
  timeout ${TESTS_TIMEOUT:-150} $D/df_cuda_tests --gtest_filter="${TESTS_FILTER:-*Matvec*:*CudaFused*:*CudaSpec*}" > $OUT/tests.txt 2>&1
  echo "df_cuda_tests rc=$? $((SECONDS - T0)) s"
  grep -E "^\[  FAILED  \]|tests ran|PASSED  \]|SKIPPED  \]" $OUT/tests.txt | cut -c1-150 | head -30
  grep -B3 -A8 "Failure" $OUT/tests.txt | cut -c1-200 | head -40
  grep -E "^\[       OK \]" $OUT/tests.txt | sed 's/ (.*//; s/.*OK \] //' > $OUT/passed.txt
  wait $MK; cat $OUT/make.txt
  exit 0
fi
wait $MK; cat $OUT/make.txt 2>/dev/null
bench() {  # name model args...
  local name=$1 model=$2; shift 2
  [ $((SECONDS - T0)) -lt ${BUDGET:-200} ] || { echo "skip $name (time)"; return; }
  timeout 80 $D/diskformer bench -m "$model" --device cuda --output json "$@" > $OUT/b_$name.json 2>> $OUT/log.txt
  echo "bench $name rc=$? $((SECONDS - T0)) s"
  python3 -c "
import json,sys; d=json.load(open(sys.argv[1]))
print('%-18s tg %7.1f tok/s %7.1f GB/s %5.1f %%' % (sys.argv[2], d['decode_tokens_per_second'], d['decode_weight_gb_per_second'], 100*d.get('decode_share_of_read_bandwidth',0)))
s=d.get('spec')
if s: print('   spec', {k: (round(v,4) if isinstance(v,float) else v) for k,v in s.items() if not isinstance(v,dict)})
" $OUT/b_$name.json $name 2>&1 | cut -c1-900 || tail -3 $OUT/log.txt
}
S27="-p 32 -n 64 -r 1 --spec mtp --draft-max 3 --draft-accept 0.8"
SDEF="-p 64 -n 256 -r 2 --spec mtp --draft-max 3 --spec-prompt models/heldout.txt"
for m in auto off on; do bench q35_27b_spec_$m /tmp/q35_27b_q4f.gguf $S27 --cuda-mv-mma $m; done
for m in auto off; do bench default_spec_$m models/default.gguf $SDEF --cuda-mv-mma $m; done
for m in auto off; do bench q3_4b_q4_$m /tmp/q3_4b_q4.gguf -p 64 -n 128 -r 2 --cuda-mv-mma $m; done
bench default_spec_on models/default.gguf $SDEF --cuda-mv-mma on
bench q3_4b_q4_on /tmp/q3_4b_q4.gguf -p 64 -n 128 -r 2 --cuda-mv-mma on
python3 -c "
import json,glob,os
out={os.path.basename(f)[2:-5]: json.load(open(f)) for f in glob.glob(os.environ['OUT']+'/b_*.json') if os.path.getsize(f)>0}
json.dump(out, open(os.environ['OUT']+'/benches.json','w'), indent=1)"
rm -f $OUT/b_*.json
echo "done $((SECONDS - T0)) s"
