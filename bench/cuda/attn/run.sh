#!/usr/bin/env bash
# Helper attn's device run (issue 9 decode attention), one call: the workbench (bench_attn_cuda)
# and df_cuda_tests (all but the MoE and perplexity tests) while df_make_model writes the 4B
# Q8_0 / Q4_0 files into /tmp, then `diskformer bench` of each: the new kernels (GQA attention
# with q/k norm + RoPE + KV store folded in), --no-cuda-fuse-qk-attn (GQA, two launches) and
# --cuda-attn-v1 (main's kernels), with --profile on the Q4_0 pair.
# Carry .devcarry/attn/bins.tar.xz (built on branch h-attn, Release sm_90, stripped, PTX zeroed):
# diskformer, df_cuda_tests, bench_attn_cuda, df_make_model, lib/.
set -uo pipefail
D=.devcarry/attn
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
chmod +x $D/diskformer $D/df_make_model $D/df_cuda_tests $D/bench_attn_cuda
CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$PWD/$D/lib:$CUBLAS_DIR
export CUDA_DISABLE_PTX_JIT=1
VOCAB=tools/make_model/vocab_corpus.txt
T0=$SECONDS
mk() { local f=$1; shift; [ -s "$f" ] && return; "$D/df_make_model" -o "$f.tmp" --vocab-text $VOCAB "$@" > /dev/null 2>> $OUT/make.txt && mv "$f.tmp" "$f"; echo "make $f rc=$? $((SECONDS - T0)) s" >> $OUT/make.txt; }
( mk /tmp/q3_4b_q8.gguf --preset qwen3_4b --type q8_0 & mk /tmp/q3_4b_q4.gguf --preset qwen3_4b --type q4_0 & wait ) &
MK=$!
timeout 60 $D/bench_attn_cuda --out $OUT/workbench.json > $OUT/workbench.txt 2>&1; echo "workbench rc=$? $((SECONDS - T0)) s"
cat $OUT/workbench.txt
timeout ${TESTS_S:-80} $D/df_cuda_tests --gtest_filter="${FILTER:--CudaDefaultModel.*:CudaMoeGemm.*:CudaOps.Moe*:CudaModelsMoeGemm.*:CudaExpertCache.*:*moe*}" > $OUT/tests.txt 2>&1
echo "df_cuda_tests rc=$? $((SECONDS - T0)) s"
grep -E "^\[  FAILED  \]|tests ran|PASSED  \]|SKIPPED  \]" $OUT/tests.txt | cut -c1-150 | head -30
grep -B3 -A8 "Failure" $OUT/tests.txt | cut -c1-200 | head -40
grep -E "OK \] CudaAttn|OK \] CudaOps.(Att|Lean|Graph|Row)|OK \] CudaSpec" $OUT/tests.txt | cut -c1-120
wait $MK; cat $OUT/make.txt
bench() {  # name model args...
  local name=$1 model=$2; shift 2
  [ $((SECONDS - T0)) -lt ${BUDGET:-120} ] || { echo "skip $name (time)"; return; }
  timeout 45 $D/diskformer bench -m "$model" --device cuda --output json "$@" > $OUT/b_$name.json 2>> $OUT/log_$name.txt
  echo "bench $name rc=$? $((SECONDS - T0)) s"
  python3 -c "
import json,sys; d=json.load(open(sys.argv[1]))
print('%-14s tg %7.1f tok/s %7.1f GB/s %5.1f %% of %.0f GB/s' % (sys.argv[2], d['decode_tokens_per_second'], d['decode_weight_gb_per_second'], 100*d.get('decode_share_of_read_bandwidth',0), d.get('device_read_gb_per_second',0)))
for p in d.get('prefill', []): print('   prefill', {k: (round(v,1) if isinstance(v,float) else v) for k,v in p.items()})
" $OUT/b_$name.json $name || tail -3 $OUT/log_$name.txt
}
bench q4_new /tmp/q3_4b_q4.gguf -p 512 -n 128 -r 2 --profile
bench q4_v1 /tmp/q3_4b_q4.gguf -p 512 -n 128 -r 2 --cuda-attn-v1 --profile
bench q8_new /tmp/q3_4b_q8.gguf -p 512 -n 128 -r 2
bench q8_v1 /tmp/q3_4b_q8.gguf -p 512 -n 128 -r 2 --cuda-attn-v1
bench q4_gqa2 /tmp/q3_4b_q4.gguf -p 512 -n 128 -r 2 --no-cuda-fuse-qk-attn
grep -hE "attention|qk_norm|step" $OUT/log_q4_new.txt $OUT/log_q4_v1.txt 2>/dev/null | head -20
python3 -c "
import json,glob,os
out={os.path.basename(f)[2:-5]: json.load(open(f)) for f in glob.glob(os.environ['OUT']+'/b_*.json') if os.path.getsize(f)>0}
json.dump(out, open(os.environ['OUT']+'/benches.json','w'), indent=1)"
rm -f $OUT/b_*.json; xz -T8 $OUT/tests.txt
echo "total $((SECONDS - T0)) s"
