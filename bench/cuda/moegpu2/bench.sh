#!/usr/bin/env bash
# helper moegpu2, part 2: qwen35moe benches (35B-A3B shape, 2 and 8 layers; moe-small),
# resident and with an expert cache of half / a quarter of the expert bytes.
set -uo pipefail
D=.devcarry/moegpu2b
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
chmod +x $D/diskformer $D/df_make_model
export LD_LIBRARY_PATH=$PWD/$D/lib
V=tools/make_model/vocab_corpus.txt
L=$OUT/log.txt
T0=$SECONDS
mk() { local f=$1; shift; [ -s "$f" ] && return; $D/df_make_model -o "$f.tmp" --vocab-text $V "$@" > /dev/null 2>> $L && mv "$f.tmp" "$f"; echo "make $f rc=$? $((SECONDS - T0)) s" | tee -a $L; }
# the 8-layer model is not waited for (device time): stop the writer started by run.sh
for p in $(pgrep -f moegpu2_mk.sh) $(pgrep -f moegpu2_make_model); do kill $p 2>/dev/null; done
cat /tmp/moegpu2_make.log 2>/dev/null | grep make | tee -a $L
mk /tmp/moe_small.gguf --arch qwen35moe --preset moe-small --type q4_k
mk /tmp/a3b_L2.gguf --arch qwen35moe --preset 35b-a3b --layers 2 --mtp-layers 0 --type q4_k
ls -l /tmp/*.gguf | tee -a $L
echo "== models ready at $((SECONDS - T0)) s" | tee -a $L
bench() {  # name model args...
  local name=$1 model=$2; shift 2
  local t0=$SECONDS
  timeout 100 $D/diskformer bench -m "$model" --device cuda --output json -q "$@" > $OUT/b_$name.json 2>> $L
  echo "bench $name rc=$? $((SECONDS - t0)) s" >> $L
  python3 - $OUT/b_$name.json $name <<'EOF' | tee -a $L
import json, sys
d = json.load(open(sys.argv[1]))
pp = {p['n_prompt']: round(p['tokens_per_second'], 1) for p in d.get('prefill', [])}
s = '%-16s tg %7.1f tok/s (%.3f ms) %6.1f GB/s  pp %s' % (sys.argv[2], d['decode_tokens_per_second'], d['decode_ms_per_token'], d['decode_weight_gb_per_second'], pp)
c = d.get('expert_cache')
if c:
    s += '\n   cache %.0f MiB %d slots: hit %.3f, host %.1f MiB/tok (%.1f GB/s), uploaded %.2f MiB/tok, %d replacements' % (
        c['capacity_bytes'] / 2**20, c['slots'], c['decode_hit_rate'], c['decode_bytes_from_host_per_token'] / 2**20,
        c['decode_host_read_gb_per_second'], c['decode_bytes_uploaded_per_token'] / 2**20, c['decode_replacements'])
print(s)
EOF
}
bench moe_small /tmp/moe_small.gguf -p 256 -n 128 -r 2
bench moe_small_c8 /tmp/moe_small.gguf -p 0 -n 128 -r 2 --expert-cache-mb 8
bench a3b_L2 /tmp/a3b_L2.gguf -p 512 -n 128 -r 2
bench a3b_L2_nofuse /tmp/a3b_L2.gguf -p 0 -n 128 -r 1 --no-fuse
bench a3b_L2_nographs /tmp/a3b_L2.gguf -p 0 -n 128 -r 1 --no-graphs
# expert bytes of 2 layers: 2 x 3 x 256 x 589824 = 864 MiB: half 432, quarter 216
bench a3b_L2_half /tmp/a3b_L2.gguf -p 512 -n 128 -r 2 --expert-cache-mb 432
bench a3b_L2_quarter /tmp/a3b_L2.gguf -p 0 -n 128 -r 2 --expert-cache-mb 216
echo "== benches done at $((SECONDS - T0)) s" | tee -a $L
python3 -c "
import json,glob,os
out={os.path.basename(f)[2:-5]: json.load(open(f)) for f in sorted(glob.glob(os.environ['OUT']+'/b_*.json')) if os.path.getsize(f)>0}
json.dump(out, open(os.environ['OUT']+'/benches.json','w'), indent=1)"
rm -f $OUT/b_*.json
