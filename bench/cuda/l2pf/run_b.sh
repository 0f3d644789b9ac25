#!/usr/bin/env bash
# helper l2pf, device call B (right after A, on the warm machine: A's model files in /tmp):
# decode benches, L2 prefetch off and on alternating, `diskformer bench -m M --device cuda
# --output json -p 16 -n 128 -r 2`. Carry .devcarry/l2pfb/bins.tar.xz: diskformer, lib/.
# $1: the "on" configurations, ';'-separated flag sets (default below).
set -uo pipefail
D=.devcarry/l2pfb
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
chmod +x $D/diskformer
CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$PWD/$D/lib:$CUBLAS_DIR
T0=$SECONDS
# Default "on" configurations: the fastest PDL chain configuration with a prefetch in call A's
# workbench (summed over its chains), then --cuda-l2-prefetch-mb 24 at the occupancy's grid if that differs.
PICK=$(python3 -c "
import json,sys
try: ch=json.load(open('/tmp/l2pf_chain.json'))['chain']
except Exception: print(''); sys.exit()
tot={}
for c in ch:
  for r in c['runs']:
    if r['pdl'] and r['l2_mb']>0 and r['bits_equal_first']: tot[(r['l2_mb'],r['blocks_per_sm'])]=tot.get((r['l2_mb'],r['blocks_per_sm']),0)+r['ms']/c['runs'][1]['ms']
b=min(tot,key=tot.get); f=lambda k: '--cuda-l2-prefetch --cuda-l2-prefetch-mb %d --cuda-mv-blocks-per-sm %d'%k
print(f(b)+('' if b==(24,0) else ';'+f((24,0))))
" 2>/dev/null)
echo "picked: $PICK"
ON="${1:-${PICK:---cuda-l2-prefetch --cuda-l2-prefetch-mb 24;--cuda-l2-prefetch --cuda-l2-prefetch-mb 24 --cuda-mv-blocks-per-sm 1}}"
for f in /tmp/q3_4b_q8.gguf /tmp/q3_4b_q4.gguf /tmp/q35_27b_q4f.gguf; do [ -s $f ] || echo "missing $f (call A makes it)"; done
: > $OUT/benches.jsonl
bench() {  # model label flags...
  local model=$1 label=$2; shift 2
  timeout 90 $D/diskformer bench -m "$model" --device cuda --output json -p 16 -n 128 -r 2 "$@" > $OUT/b.json 2>> $OUT/log.txt
  local rc=$?
  python3 -c "
import json,sys; d=json.load(open(sys.argv[1]))
print(json.dumps({'model': sys.argv[2], 'flags': sys.argv[3], 'tg': d['decode_tokens_per_second'], 'gbs': d['decode_weight_gb_per_second'], 'share': d.get('decode_share_of_read_bandwidth',0), 'read_gbs': d.get('device_read_gb_per_second',0)}))
" $OUT/b.json "$(basename $model)" "$label" >> $OUT/benches.jsonl 2>/dev/null || echo "bench rc=$rc $model $label: $(tail -2 $OUT/log.txt)"
  tail -1 $OUT/benches.jsonl; echo "  $((SECONDS - T0)) s"
}
IFS=';' read -ra CFGS <<< "$ON"
for m in /tmp/q3_4b_q4.gguf /tmp/q3_4b_q8.gguf; do
  for rep in 1 2; do
    [ $rep = 2 ] && [ $((SECONDS - T0)) -gt 100 ] && continue
    bench $m off --no-cuda-l2-prefetch
    for c in "${CFGS[@]}"; do bench $m "$c" $c; done
  done
done
m=/tmp/q35_27b_q4f.gguf
bench $m off --no-cuda-l2-prefetch
for c in "${CFGS[@]}"; do bench $m "$c" $c; done
[ $((SECONDS - T0)) -lt 170 ] && bench $m off --no-cuda-l2-prefetch
[ $((SECONDS - T0)) -lt 170 ] && bench $m "${CFGS[0]}" ${CFGS[0]}
