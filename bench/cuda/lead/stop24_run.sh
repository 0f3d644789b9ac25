#!/usr/bin/env bash
# Lead's final device run (stop 24), ONE call: df_cuda_tests of final main (the binary `ctest -L cuda`
# runs; unfiltered; TESTS_TIMEOUT s, default 330) while df_make_model writes the benchmark models into
# /tmp and /dev/shm (niced, so the tests keep the cores), then the benches of final main.
# Carry .devcarry/lf24, packed here by
#   bench/cuda/pack.sh .devcarry/lf24 build/diskformer build/tests/df_cuda_tests build/df_make_model
# (stripped, PTX zeroed: CUDA_DISABLE_PTX_JIT=1 below). BUDGET (s) stops starting benches past it.
set -uo pipefail
D=.devcarry/lf24
T0=$SECONDS
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
chmod +x $D/diskformer $D/df_make_model $D/df_cuda_tests
CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$PWD/$D/lib:$CUBLAS_DIR
export CUDA_DISABLE_PTX_JIT=1  # PTX zeroed: sm_90 SASS only
export PATH=$PWD/$D:$PATH
VOCAB=tools/make_model/vocab_corpus.txt
echo "unpacked $((SECONDS - T0)) s"
nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.sm,clocks.mem --format=csv > $OUT/gpu.txt 2>&1
mk() { local f=$1; shift; [ -s "$f" ] && return; nice -n 19 "$D/df_make_model" -o "$f.tmp" --vocab-text $VOCAB "$@" > /dev/null 2>> $OUT/make.txt && mv "$f.tmp" "$f"; echo "make $f rc=$? $((SECONDS - T0)) s" >> $OUT/make.txt; }
( mk /tmp/q3_4b_q4.gguf --preset qwen3_4b --type q4_0 & mk /tmp/q3_4b_q8.gguf --preset qwen3_4b --type q8_0 &
  mk /tmp/q3_4b_q5k.gguf --preset qwen3_4b --type q5_K &
  mk /tmp/q35_27b_q4f.gguf --arch qwen35 --preset qwen35_27b --type q4_0 --mtp-layers 1 --fast-random &
  mk /dev/shm/a3b_L40.gguf --arch qwen35moe --preset 35b-a3b --layers 40 --row-pool 1024 --type q4_k & wait ) &
MK=$!
timeout ${TESTS_TIMEOUT:-330} $D/df_cuda_tests > $OUT/tests.txt 2>&1
echo "df_cuda_tests rc=$? $((SECONDS - T0)) s"
grep -E "^\[  FAILED  \]|tests ran|PASSED  \]|SKIPPED  \]" $OUT/tests.txt | cut -c1-150 | head -30
grep -B3 -A8 "Failure" $OUT/tests.txt | cut -c1-200 | head -40
grep -E "perplexity|near-ties" $OUT/tests.txt | cut -c1-170 | head -6
wait $MK; cat $OUT/make.txt | grep make
bench() {  # name model args...
  local name=$1 model=$2; shift 2
  [ $((SECONDS - T0)) -lt ${BUDGET:-430} ] || { echo "skip $name (time)"; return; }
  timeout 80 $D/diskformer bench -m "$model" --device cuda --output json -q "$@" > $OUT/b_$name.json 2>> $OUT/log.txt
  echo "bench $name rc=$? $((SECONDS - T0)) s"
  python3 -c "
import json,sys; d=json.load(open(sys.argv[1]))
print('%-18s tg %7.1f tok/s %7.1f GB/s %5.1f %% of %.0f GB/s' % (sys.argv[2], d['decode_tokens_per_second'], d['decode_weight_gb_per_second'], 100*d.get('decode_share_of_read_bandwidth',0), d.get('device_read_gb_per_second',0)))
for p in d.get('prefill', []): print('   prefill', {k: (round(v,1) if isinstance(v,float) else v) for k,v in p.items()})
s=d.get('spec')
if s: print('   spec', {k: (round(v,4) if isinstance(v,float) else v) for k,v in s.items() if not isinstance(v,dict)})
" $OUT/b_$name.json $name || tail -3 $OUT/log.txt
}
bench default models/default.gguf -p 512 -n 128 -r 2
bench default_shortpipe0 models/default.gguf -p 512 -n 128 -r 2 --cuda-mv-short-pipe 0
bench q3_4b_q4 /tmp/q3_4b_q4.gguf -p 512 -n 128 -r 2
bench q35_27b /tmp/q35_27b_q4f.gguf -p 512 -n 64 -r 1
bench a3b_L40 /dev/shm/a3b_L40.gguf -p 512 -n 128 -r 1
bench a3b_L40_pipe0 /dev/shm/a3b_L40.gguf -p 16 -n 128 -r 1 --cuda-moe-pipe 0 --cuda-mv-short-pipe 0
bench q3_4b_q8 /tmp/q3_4b_q8.gguf -p 512 -n 128 -r 2
bench default_spec models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 --spec-prompt models/heldout.txt
bench q35_27b_spec /tmp/q35_27b_q4f.gguf -p 32 -n 64 -r 1 --spec mtp --draft-max 3 --draft-accept 0.8
bench a3b_L40_half /dev/shm/a3b_L40.gguf -p 16 -n 64 -r 1 --expert-cache-mb 8640
bench q3_4b_q5k /tmp/q3_4b_q5k.gguf -p 512 -n 128 -r 2
python3 -c "
import json,glob,os
out={os.path.basename(f)[2:-5]: json.load(open(f)) for f in glob.glob(os.environ['OUT']+'/b_*.json') if os.path.getsize(f)>0}
json.dump(out, open(os.environ['OUT']+'/benches.json','w'), indent=1)"
rm -f $OUT/b_*.json; xz -T8 $OUT/tests.txt
echo "done $((SECONDS - T0)) s"
