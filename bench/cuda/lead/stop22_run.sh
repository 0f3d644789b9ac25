#!/usr/bin/env bash
# Lead's final device run (stop 22), one call: df_cuda_tests of final main (the binary `ctest -L cuda`
# runs) while df_make_model writes the benchmark models into /tmp and /dev/shm, then the benches of
# final main and the matvec workbench over every format. Carry (built here, Release, CUDA sm_90,
# stripped, PTX zeroed by bench/cuda/mvn/zero_ptx.py, `tar -I 'xz -9'`):
#   .devcarry/lf22/bins.tar.xz: diskformer, df_cuda_tests, df_make_model, bench_matvec_cuda, lib/ (the .so
#   files diskformer needs there: libpcre2-8, libcpp-httplib, libcurl's dependencies).
# Three calls on one warm machine (the carries do not fit one transfer): PART=tests (.devcarry/lf22:
# df_cuda_tests, df_make_model, lib/), PART=benches (.devcarry/lf22b: diskformer, df_make_model, lib/),
# PART=matvec (.devcarry/lf22c: bench_matvec_cuda). BUDGET (s) stops starting benches past it.
set -uo pipefail
PART=${PART:-tests}
case $PART in tests) D=.devcarry/lf22 ;; benches) D=.devcarry/lf22b ;; matvec) D=.devcarry/lf22c ;; esac
[ -x $D/df_make_model ] || [ -x $D/bench_matvec_cuda ] || python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
chmod +x $D/diskformer $D/df_make_model $D/df_cuda_tests $D/bench_matvec_cuda 2>/dev/null
CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$PWD/$D/lib:$CUBLAS_DIR
export CUDA_DISABLE_PTX_JIT=1  # the carried binaries have their PTX zeroed: sm_90 SASS only
VOCAB=tools/make_model/vocab_corpus.txt
if [ "$PART" = matvec ]; then
  timeout 150 $D/bench_matvec_cuda --no-variants --modes ${MV_MODES:-default,int8x_rows_pdl} --ns 1 --shapes 2560x9728,5120x17408,248320x5120 \
    --out $OUT/matvec_all.json > $OUT/matvec_all.txt 2>&1; echo "matvec workbench rc=$?"
  grep -E "^speed|read bandwidth" $OUT/matvec_all.txt | cut -c1-160 | head -150
  exit 0
fi
T0=$SECONDS
nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.sm,clocks.mem --format=csv > $OUT/gpu.txt 2>&1
mk() { local f=$1; shift; [ -s "$f" ] && return; "$D/df_make_model" -o "$f.tmp" --vocab-text $VOCAB "$@" > /dev/null 2>> $OUT/make.txt && mv "$f.tmp" "$f"; echo "make $f rc=$? $((SECONDS - T0)) s" >> $OUT/make.txt; }
( mk /tmp/q3_4b_q8.gguf --preset qwen3_4b --type q8_0 & mk /tmp/q3_4b_q4.gguf --preset qwen3_4b --type q4_0 &
  mk /tmp/q35_27b_q4f.gguf --arch qwen35 --preset qwen35_27b --type q4_0 --mtp-layers 1 --fast-random &
  mk /dev/shm/a3b_L40.gguf --arch qwen35moe --preset 35b-a3b --layers 40 --row-pool 1024 --type q4_k & wait ) &
MK=$!
if [ "$PART" != benches ]; then
  timeout ${TESTS_TIMEOUT:-260} $D/df_cuda_tests ${TESTS_FILTER:+--gtest_filter=$TESTS_FILTER} > $OUT/tests.txt 2>&1
  echo "df_cuda_tests rc=$? $((SECONDS - T0)) s"
  grep -E "^\[  FAILED  \]|tests ran|PASSED  \]|SKIPPED  \]" $OUT/tests.txt | cut -c1-150 | head -30
  grep -B3 -A8 "Failure" $OUT/tests.txt | cut -c1-200 | head -40
  grep -E "perplexity|near-ties" $OUT/tests.txt | cut -c1-170 | head -12
  grep -E "^\[       OK \]" $OUT/tests.txt | sed 's/ (.*//; s/.*OK \] //' > $OUT/passed.txt
fi
wait $MK; grep make $OUT/make.txt
[ "$PART" = tests ] && exit 0
[ "$PART" = benches ] && { wait $MK; }
bench() {  # name model args...
  local name=$1 model=$2; shift 2
  [ $((SECONDS - T0)) -lt ${BUDGET:-470} ] || { echo "skip $name (time)"; return; }
  timeout 90 $D/diskformer bench -m "$model" --device cuda --output json "$@" > $OUT/b_$name.json 2>> $OUT/log.txt
  echo "bench $name rc=$? $((SECONDS - T0)) s"
  python3 -c "
import json,sys; d=json.load(open(sys.argv[1]))
print('%-14s tg %7.1f tok/s %7.1f GB/s %5.1f %% of %.0f GB/s' % (sys.argv[2], d['decode_tokens_per_second'], d['decode_weight_gb_per_second'], 100*d.get('decode_share_of_read_bandwidth',0), d.get('device_read_gb_per_second',0)))
for p in d.get('prefill', []): print('   prefill', {k: (round(v,1) if isinstance(v,float) else v) for k,v in p.items()})
s=d.get('spec')
if s: print('   spec', {k: (round(v,4) if isinstance(v,float) else v) for k,v in s.items() if not isinstance(v,dict)})
" $OUT/b_$name.json $name || tail -3 $OUT/log.txt
}
bench default_spec models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 --spec-prompt models/heldout.txt
bench default_spec_nopiperows models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 --spec-prompt models/heldout.txt --mv-no-pipe-rows
bench default models/default.gguf -p 512 -n 128 -r 2
bench q3_4b_q4 /tmp/q3_4b_q4.gguf -p 512 -n 128 -r 2
bench q3_4b_q4_attnv1 /tmp/q3_4b_q4.gguf -p 512 -n 128 -r 2 --cuda-attn-v1
bench q3_4b_q4_nofuseqk /tmp/q3_4b_q4.gguf -p 512 -n 128 -r 2 --no-cuda-fuse-qk-attn
bench q3_4b_q8 /tmp/q3_4b_q8.gguf -p 512 -n 128 -r 2
bench q35_27b_spec /tmp/q35_27b_q4f.gguf -p 32 -n 64 -r 1 --spec mtp --draft-max 3 --draft-accept 0.8
bench q35_27b_spec_attnv1 /tmp/q35_27b_q4f.gguf -p 32 -n 64 -r 1 --spec mtp --draft-max 3 --draft-accept 0.8 --cuda-attn-v1
bench q35_27b /tmp/q35_27b_q4f.gguf -p 512 -n 64 -r 1
bench q35_27b_gdntoken /tmp/q35_27b_q4f.gguf -p 512 -n 16 -r 1 --cuda-gdn-prefill token
bench a3b_L40 /dev/shm/a3b_L40.gguf -p 512 -n 128 -r 1
bench a3b_L40_gdntoken /dev/shm/a3b_L40.gguf -p 512 -n 16 -r 1 --cuda-gdn-prefill token
bench a3b_L40_half /dev/shm/a3b_L40.gguf -p 0 -n 64 -r 1 --expert-cache-mb 8640
python3 -c "
import json,glob,os
out={os.path.basename(f)[2:-5]: json.load(open(f)) for f in glob.glob(os.environ['OUT']+'/b_*.json') if os.path.getsize(f)>0}
json.dump(out, open(os.environ['OUT']+'/benches.json','w'), indent=1)"
rm -f $OUT/b_*.json; [ -f $OUT/tests.txt ] && xz -T8 $OUT/tests.txt
echo "done $((SECONDS - T0)) s"
