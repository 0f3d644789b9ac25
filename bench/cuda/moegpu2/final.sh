#!/usr/bin/env bash
# helper moegpu2, part 3: the MoE CUDA tests of the final build, then decode of the 35B-A3B
# shape at 2 and 8 layers written with --row-pool (quantized rows repeated from a pool of 1024:
# memory-speed writing; the router stays random) for the per-layer slope.
set -uo pipefail
D=.devcarry/moegpu2
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
chmod +x $D/df_make_model $D/df_cuda_tests $D/diskformer
export LD_LIBRARY_PATH=$PWD/$D/lib
V=tools/make_model/vocab_corpus.txt
L=$OUT/log.txt
T0=$SECONDS
( $D/df_make_model -o /tmp/p2.gguf --vocab-text $V --arch qwen35moe --preset 35b-a3b --layers 2 --row-pool 1024 --type q4_k > /dev/null 2>&1
  $D/df_make_model -o /tmp/p8.gguf --vocab-text $V --arch qwen35moe --preset 35b-a3b --layers 8 --row-pool 1024 --type q4_k > /dev/null 2>&1
  echo "models $((SECONDS - T0)) s" >> $L ) &
G=$!
timeout 40 $D/df_cuda_tests --gtest_filter='CudaOps.MoeSwigluFusedIsTheUnfusedBits' > $OUT/tests.txt 2>&1; echo "tests rc=$? $((SECONDS - T0)) s" | tee -a $L
grep -E "^\[  FAILED  \]|tests ran|PASSED  \]|expert cache:|Failure" $OUT/tests.txt | cut -c1-200 | head -12 | tee -a $L
wait $G; cat $L | grep models; ls -l /tmp/p2.gguf /tmp/p8.gguf | tee -a $L
bench() {
  local name=$1 model=$2; shift 2
  timeout 40 $D/diskformer bench -m "$model" --device cuda --output json -q "$@" > $OUT/b_$name.json 2>> $L
  python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); c=d.get('expert_cache')
print('%-10s tg %7.1f tok/s %.4f ms pp %s %s' % (sys.argv[2], d['decode_tokens_per_second'], d['decode_ms_per_token'], [round(p['tokens_per_second'],1) for p in d['prefill']], '' if not c else 'hit %.3f host %.1f MiB/tok' % (c['decode_hit_rate'], c['decode_bytes_from_host_per_token']/2**20)))" $OUT/b_$name.json $name | tee -a $L
  echo "   $((SECONDS - T0)) s" | tee -a $L
}
bench p2 /tmp/p2.gguf -p 512 -n 128 -r 1
bench p8 /tmp/p8.gguf -p 512 -n 128 -r 1
bench p8_half /tmp/p8.gguf -p 0 -n 128 -r 1 --expert-cache-mb 1728
python3 -c "
import json,glob,os
out={os.path.basename(f)[2:-5]: json.load(open(f)) for f in sorted(glob.glob(os.environ['OUT']+'/b_*.json')) if os.path.getsize(f)>0}
json.dump(out, open(os.environ['OUT']+'/benches_pool.json','w'), indent=1)"
rm -f $OUT/b_*.json
