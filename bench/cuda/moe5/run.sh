#!/usr/bin/env bash
# moe5 (issue 14, stop 24), ONE call on the H200: df_cuda_tests of the MoE / pipe tests while
# df_make_model writes the 35B-A3B Q4_K shape (40 layers) into /dev/shm, the host-read ceiling
# (hostread), then the benches. Carry .devcarry/moe5: bins.tar.xz (bench/cuda/pack.sh: diskformer,
# df_cuda_tests, df_make_model, hostread + lib/) and this script. BUDGET (s): no bench starts past it.
set -uo pipefail
D=.devcarry/moe5
T0=$SECONDS
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
chmod +x $D/diskformer $D/df_make_model $D/df_cuda_tests $D/hostread
CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$PWD/$D/lib:$CUBLAS_DIR
export CUDA_DISABLE_PTX_JIT=1
echo "unpacked $((SECONDS - T0)) s"
nvidia-smi --query-gpu=name,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,clocks.sm,clocks.mem,memory.used \
  --format=csv > $OUT/gpu.txt 2>&1
M=/dev/shm/a3b_L40.gguf
( if [ ! -s $M ]; then $D/df_make_model -o $M.tmp --vocab-text tools/make_model/vocab_corpus.txt --arch qwen35moe \
    --preset 35b-a3b --layers 40 --row-pool 1024 --type q4_k > /dev/null 2>> $OUT/log.txt && mv $M.tmp $M; fi
  echo "make rc=$? $((SECONDS - T0)) s" >> $OUT/log.txt ) &
MK=$!
timeout ${TESTS_TIMEOUT:-100} $D/df_cuda_tests --gtest_filter="${FILTER:-CudaOps.*Pipe*:CudaOps.StreamedFused*:CudaOps.*Moe*:CudaExpertCache.*:MoeRouteCuda.*}" > $OUT/tests.txt 2>&1
echo "df_cuda_tests rc=$? $((SECONDS - T0)) s"
grep -E "^\[  FAILED  \]|tests ran|PASSED  \]|SKIPPED  \]|^\[       OK \]" $OUT/tests.txt | cut -c1-150 | head -40
grep -B2 -A6 "Failure" $OUT/tests.txt | cut -c1-220 | head -40
timeout 20 $D/hostread > $OUT/hostread.jsonl 2>&1; echo "hostread rc=$? $((SECONDS - T0)) s"; cat $OUT/hostread.jsonl
wait $MK; grep make $OUT/log.txt
bench() {  # name args...
  local name=$1; shift
  [ $((SECONDS - T0)) -lt ${BUDGET:-150} ] || { echo "skip $name (time)"; return; }
  timeout 45 $D/diskformer bench -m $M --device cuda --output json -q "$@" > $OUT/b_$name.json 2>> $OUT/log.txt
  echo "bench $name rc=$? $((SECONDS - T0)) s"
  python3 -c "
import json,sys; d=json.load(open(sys.argv[1]))
c=d.get('expert_cache',{})
print('%-14s tg %7.1f tok/s (%.3f ms) %6.1f GB/s' % (sys.argv[2], d['decode_tokens_per_second'], d['decode_ms_per_token'], d['decode_weight_gb_per_second']),
  'hit %.3f host %.1f MiB/tok %.1f GB/s cap %.0f MiB' % (c['decode_hit_rate'], c['decode_bytes_from_host_per_token']/2**20, c['decode_host_read_gb_per_second'], c['capacity_bytes']/2**20) if c else '')
" $OUT/b_$name.json $name || tail -3 $OUT/log.txt
}
P="--cuda-moe-pipe 2 --cuda-mv-short-pipe 2"
B="-p 16 -n 128 -r 1"
bench half_new $B --expert-cache-mb 8640 $P --cuda-moe-streamed-fused --profile
bench quarter_new $B --expert-cache-mb 4320 $P --cuda-moe-streamed-fused
bench half_old $B --expert-cache-mb 8640 $P --no-cuda-moe-streamed-fused
bench resident_new $B --expert-cache-mb 0 $P --profile
bench quarter_old $B --expert-cache-mb 4320 $P --no-cuda-moe-streamed-fused
bench half_nopipe $B --expert-cache-mb 8640 --cuda-moe-pipe 0 --cuda-mv-short-pipe 0 --no-cuda-moe-streamed-fused
python3 -c "
import json,glob,os
out={os.path.basename(f)[2:-5]: json.load(open(f)) for f in glob.glob(os.environ['OUT']+'/b_*.json') if os.path.getsize(f)>0}
json.dump(out, open(os.environ['OUT']+'/benches.json','w'), indent=1)"
rm -f $OUT/b_*.json; xz -T4 $OUT/tests.txt
echo "done $((SECONDS - T0)) s"
