#!/usr/bin/env bash
# mvpipe run 3 (final, part a): decode benches of the three real-shape models, the pipelined
# matvec (default) and the previous kernel (--mv-no-pipe) side by side in one run, alternating.
set -uo pipefail
D=.devcarry/mvpipe
B=/tmp/mvp; mkdir -p $B
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/a/bins.tar.xz $B
chmod +x $B/diskformer $B/df_make_model
CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$B/lib:$CUBLAS_DIR
VOCAB=tools/make_model/vocab_corpus.txt
T0=$SECONDS
mk() { local f=$1; shift; [ -s "$f" ] && return; "$B/df_make_model" -o "$f.tmp" --vocab-text $VOCAB "$@" > /dev/null 2>> $OUT/make.txt && mv "$f.tmp" "$f"; echo "make $f rc=$? $((SECONDS - T0)) s" >> $OUT/make.txt; }
( mk /tmp/q3_4b_q8.gguf --preset qwen3_4b --type q8_0 & mk /tmp/q3_4b_q4.gguf --preset qwen3_4b --type q4_0 &
  mk /tmp/q35_27b_q4f.gguf --arch qwen35 --preset qwen35_27b --type q4_0 --mtp-layers 1 --fast-random & wait )
grep make $OUT/make.txt
bench() {  # name model args...
  local name=$1 model=$2; shift 2
  timeout 120 $B/diskformer bench -m "$model" --device cuda --output json "$@" > $OUT/b_$name.json 2>> $OUT/log.txt
  echo "bench $name rc=$? $((SECONDS - T0)) s"
  python3 -c "
import json,sys; d=json.load(open(sys.argv[1]))
print('%-16s tg %7.1f tok/s %7.1f GB/s %5.1f %% of %.0f GB/s %.3f ms/tok' % (sys.argv[2], d['decode_tokens_per_second'], d['decode_weight_gb_per_second'], 100*d.get('decode_share_of_read_bandwidth',0), d.get('device_read_gb_per_second',0), d['decode_ms_per_token']))
" $OUT/b_$name.json $name || tail -3 $OUT/log.txt
}
for m in q3_4b_q8:/tmp/q3_4b_q8.gguf q3_4b_q4:/tmp/q3_4b_q4.gguf q35_27b_q4:/tmp/q35_27b_q4f.gguf; do
  n=${m%%:*}; f=${m#*:}
  bench ${n}_old $f -p 16 -n 128 -r 2 --mv-no-pipe
  bench ${n}_new $f -p 16 -n 128 -r 2
done
bench q3_4b_q4_old2 /tmp/q3_4b_q4.gguf -p 16 -n 128 -r 2 --mv-no-pipe
bench q3_4b_q4_new2 /tmp/q3_4b_q4.gguf -p 16 -n 128 -r 2
python3 -c "
import json,glob,os
out={os.path.basename(f)[2:-5]: json.load(open(f)) for f in glob.glob(os.environ['OUT']+'/b_*.json') if os.path.getsize(f)>0}
json.dump(out, open(os.environ['OUT']+'/benches.json','w'), indent=1)"
rm -f $OUT/b_*.json
