#!/usr/bin/env bash
# Shared part of the lead's device runs (sourced by stopNN_run.sh from stop 25 on):
#   lead_unpack DIR   unpack DIR/bins.tar.xz (bench/cuda/pack.sh) there, set the loader and PATH
#   mk FILE ARGS...   df_make_model into FILE unless it exists (niced; log in $OUT/make.txt)
#   bench NAME MODEL ARGS...   diskformer (DFBIN: another binary) bench --device cuda --output json into $OUT/b_NAME.json and
#                     a one-line summary; skipped once BUDGET s (default 430) have passed
#   prof NAME MODEL ARGS...   bench --profile (DFBIN: another binary) into $OUT/b_prof_NAME.json, the op table
#                     (stderr) into $OUT/prof_NAME.txt and its last 45 lines
#   lead_tests        df_cuda_tests (TESTS_TIMEOUT s, default 330) into $OUT/tests.txt and its summary
#   lead_collect      the b_*.json into $OUT/benches.json, tests.txt xz'ed
#   lead_tests_only S  with PART=tests: lead_tests (TESTS_TIMEOUT, default S s), lead_collect, exit
T0=$SECONDS
VOCAB=tools/make_model/vocab_corpus.txt
lead_unpack() {
  D=$1
  python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
  chmod +x $D/diskformer $D/df_make_model $D/df_cuda_tests
  CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)")
  export LD_LIBRARY_PATH=$PWD/$D/lib:$CUBLAS_DIR
  export CUDA_DISABLE_PTX_JIT=1  # PTX zeroed: sm_90 SASS only
  export PATH=$PWD/$D:$PATH
  echo "unpacked $((SECONDS - T0)) s"
  nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.sm,clocks.mem --format=csv > $OUT/gpu.txt 2>&1
}
mk() { local f=$1; shift; [ -s "$f" ] && return; nice -n 19 "$D/df_make_model" -o "$f.tmp" --vocab-text $VOCAB "$@" > /dev/null 2>> $OUT/make.txt && mv "$f.tmp" "$f"; echo "make $f rc=$? $((SECONDS - T0)) s" >> $OUT/make.txt; }
prof() {  # name model args...
  local name=$1 model=$2; shift 2
  timeout 120 ${DFBIN:-$D/diskformer} bench -m "$model" --device cuda --output json -q --profile "$@" > $OUT/b_prof_$name.json 2> $OUT/prof_$name.txt
  echo "profile $name rc=$? $((SECONDS - T0)) s"; cut -c1-130 $OUT/prof_$name.txt | tail -45
}
lead_tests() {
  timeout ${TESTS_TIMEOUT:-330} $D/df_cuda_tests "$@" > $OUT/tests.txt 2>&1
  echo "df_cuda_tests rc=$? $((SECONDS - T0)) s"
  grep -E "^\[  FAILED  \]|tests ran|PASSED  \]|SKIPPED  \]" $OUT/tests.txt | cut -c1-150 | head -30
  grep -B3 -A8 "Failure" $OUT/tests.txt | cut -c1-200 | head -40
  grep -E "perplexity|near-ties" $OUT/tests.txt | cut -c1-170 | head -6
}
bench() {  # name model args...
  local name=$1 model=$2; shift 2
  [ $((SECONDS - T0)) -lt ${BUDGET:-430} ] || { echo "skip $name (time)"; return; }
  timeout 80 ${DFBIN:-$D/diskformer} bench -m "$model" --device cuda --output json -q "$@" > $OUT/b_$name.json 2>> $OUT/log.txt
  echo "bench $name rc=$? $((SECONDS - T0)) s"
  python3 -c "
import json,sys; d=json.load(open(sys.argv[1]))
print('%-18s tg %7.1f tok/s %7.1f GB/s %5.1f %% of %.0f GB/s' % (sys.argv[2], d['decode_tokens_per_second'], d['decode_weight_gb_per_second'], 100*d.get('decode_share_of_read_bandwidth',0), d.get('device_read_gb_per_second',0)))
for p in d.get('prefill', []): print('   prefill', {k: (round(v,1) if isinstance(v,float) else v) for k,v in p.items()})
s=d.get('spec')
if s: print('   spec', {k: (round(v,4) if isinstance(v,float) else v) for k,v in s.items() if not isinstance(v,dict)})
" $OUT/b_$name.json $name || tail -3 $OUT/log.txt
}
lead_collect() {
  python3 -c "
import json,glob,os
out={os.path.basename(f)[2:-5]: json.load(open(f)) for f in glob.glob(os.environ['OUT']+'/b_*.json') if os.path.getsize(f)>0}
json.dump(out, open(os.environ['OUT']+'/benches.json','w'), indent=1)"
  rm -f $OUT/b_*.json; [ -f $OUT/tests.txt ] && xz -T8 $OUT/tests.txt
  echo "done $((SECONDS - T0)) s"
}
lead_tests_only() {
  [ "${PART:-1}" = tests ] || return 0
  TESTS_TIMEOUT=${TESTS_TIMEOUT:-$1} lead_tests
  lead_collect
  exit 0
}
