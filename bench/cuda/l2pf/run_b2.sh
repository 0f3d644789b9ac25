#!/usr/bin/env bash
# helper l2pf, device call B2 (run 4; run 3's diskformer had a stale object and crashed): the
# model files made here in the background (4B first), then `diskformer bench -m M --device cuda
# --output json -p 16 -n 128 -r 2` with the L2 prefetch off / on (--cuda-l2-prefetch-mb 8)
# alternating on 4B Q4_0 (ALL=1: then the 27B Q4_0 and 4B Q8_0 too).
# Carry .devcarry/l2pfb/bins.tar.xz: diskformer, df_make_model, lib/.
set -uo pipefail
D=.devcarry/l2pfb
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
chmod +x $D/diskformer $D/df_make_model
CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$PWD/$D/lib:$CUBLAS_DIR
VOCAB=tools/make_model/vocab_corpus.txt
T0=$SECONDS
mk() { local f=$1; shift; [ -s "$f" ] && return; "$D/df_make_model" -o "$f.tmp" --vocab-text $VOCAB "$@" > /dev/null 2>> $OUT/make.txt && mv "$f.tmp" "$f"; echo "make $f rc=$? $((SECONDS - T0)) s" >> $OUT/make.txt; }
[ "${ALL:-0}" = 1 ] && mk /tmp/q35_27b_q4f.gguf --arch qwen35 --preset qwen35_27b --type q4_0 --mtp-layers 1 --fast-random &
mk /tmp/q3_4b_q4.gguf --preset qwen3_4b --type q4_0 &
[ "${ALL:-0}" = 1 ] && mk /tmp/q3_4b_q8.gguf --preset qwen3_4b --type q8_0 &
: > $OUT/benches.jsonl
bench() {  # model label flags...
  local model=$1 label=$2; shift 2
  timeout 60 $D/diskformer bench -m "$model" --device cuda --output json -p 16 -n 128 -r 2 "$@" > $OUT/b.json 2> $OUT/err.txt
  local rc=$?
  python3 -c "
import json,sys; d=json.load(open(sys.argv[1]))
print(json.dumps({'model': sys.argv[2], 'flags': sys.argv[3], 'tg': d['decode_tokens_per_second'], 'ms': d['decode_ms_per_token'], 'gbs': d['decode_weight_gb_per_second'], 'share': d.get('decode_share_of_read_bandwidth',0), 'read_gbs': d.get('device_read_gb_per_second',0)}))
" $OUT/b.json "$(basename $model)" "$label" >> $OUT/benches.jsonl 2>/dev/null || { echo "bench rc=$rc $model $label:"; tr '\r' '\n' < $OUT/err.txt | grep -v 'loading \[' | tail -3; }
  tail -1 $OUT/benches.jsonl; echo "  $((SECONDS - T0)) s"
}
ON="--cuda-l2-prefetch --cuda-l2-prefetch-mb 8"
while [ ! -s /tmp/q3_4b_q4.gguf ]; do sleep 1; done
m=/tmp/q3_4b_q4.gguf; bench $m off --no-cuda-l2-prefetch; bench $m on8 $ON; bench $m off --no-cuda-l2-prefetch; bench $m on8 $ON
if [ "${ALL:-0}" = 1 ]; then  # (not run in this session: no device time left for it)
  while [ ! -s /tmp/q35_27b_q4f.gguf ]; do sleep 1; done
  m=/tmp/q35_27b_q4f.gguf; bench $m off --no-cuda-l2-prefetch; bench $m on8 $ON
  m=/tmp/q3_4b_q8.gguf; bench $m off --no-cuda-l2-prefetch; bench $m on8 $ON; bench $m off --no-cuda-l2-prefetch; bench $m on8 $ON
fi
wait
cat $OUT/make.txt | grep make
