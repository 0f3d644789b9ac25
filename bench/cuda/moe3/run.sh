#!/usr/bin/env bash
# helper moe3 (stop 20, issue 14): ONE device run of the final build: df_cuda_tests, an ncu
# per-kernel profile of eager decode on the 35B-A3B shape with 4 layers (new and --moe-legacy),
# then the full 40-layer 35B-A3B Q4_K file (--row-pool 1024): decode and pp512, new vs
# --moe-legacy (the stop-19 path) in the same run, then new with half / a quarter of the expert
# bytes in the device cache. Every step has a timeout and a deadline (device share).
set -uo pipefail
D=.devcarry/moe3
tar xJf $D/bins.tar.xz -C $D
chmod +x $D/diskformer $D/df_make_model $D/df_cuda_tests
CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$PWD/$D/lib:$CUBLAS_DIR
V=tools/make_model/vocab_corpus.txt
L=$OUT/log.txt
T0=$SECONDS
M=/dev/shm; [ "$(df --output=avail -B1G /dev/shm | tail -1)" -gt 30 ] || M=/tmp
df -h /dev/shm /tmp | tee -a $L; nproc | tee -a $L; free -g | tee -a $L
nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.sm --format=csv,noheader | tee -a $L
( $D/df_make_model -o $M/a3b_L4.gguf --vocab-text $V --arch qwen35moe --preset 35b-a3b --layers 4 --row-pool 1024 --type q4_k > /dev/null 2>>$L
  echo "made L4 rc=$? $((SECONDS - T0)) s" >> $L
  $D/df_make_model -o $M/a3b_L40.gguf --vocab-text $V --arch qwen35moe --preset 35b-a3b --layers 40 --row-pool 1024 --type q4_k > /dev/null 2>>$L
  echo "made L40 rc=$? $((SECONDS - T0)) s" >> $L ) &
G=$!
[ "${MOE3_TESTS:-1}" = 1 ] && timeout 100 $D/df_cuda_tests > $OUT/cuda_tests.txt 2>&1; echo "df_cuda_tests rc=$? $((SECONDS - T0)) s" | tee -a $L
grep -E "^\[  FAILED  \]|tests ran|PASSED  \]|SKIPPED  \]" $OUT/cuda_tests.txt | head -20 | tee -a $L
grep -E "Failure|Expected|Which is|actual|error" $OUT/cuda_tests.txt | cut -c1-200 | head -20 | tee -a $L
bench() {  # name model args...
  local name=$1 model=$2; shift 2
  local t0=$SECONDS
  timeout $TO $D/diskformer bench -m "$model" --device cuda --output json -q "$@" > $OUT/b_$name.json 2>> $L
  echo "bench $name rc=$? $((SECONDS - t0)) s (at $((SECONDS - T0)) s): $*" | tee -a $L
  python3 - $OUT/b_$name.json $name <<'PY' | tee -a $L
import json, sys
d = json.load(open(sys.argv[1]))
pp = {p['n_prompt']: round(p['tokens_per_second'], 1) for p in d.get('prefill', [])}
s = '%-14s tg %7.1f tok/s (%.4f ms) %6.1f GB/s  pp %s' % (sys.argv[2], d['decode_tokens_per_second'], d['decode_ms_per_token'], d['decode_weight_gb_per_second'], pp)
c = d.get('expert_cache')
if c and c.get('slots'):
    s += '\n   cache %.0f MiB %d slots: hit %.3f, host %.1f MiB/tok (%.1f GB/s), uploaded %.2f MiB/tok' % (
        c['capacity_bytes'] / 2**20, c['slots'], c['decode_hit_rate'], c['decode_bytes_from_host_per_token'] / 2**20,
        c['decode_host_read_gb_per_second'], c['decode_bytes_uploaded_per_token'] / 2**20)
print(s)
PY
}
prof() {  # name args...: ncu kernel durations of eager decode (-n 6) on the 4-layer file
  local name=$1; shift
  timeout 60 ncu --clock-control none --metrics gpu__time_duration.sum --csv --log-file $OUT/ncu_$name.csv \
    $D/diskformer bench -m $M/a3b_L4.gguf --device cuda -q -p 0 -n 6 -r 1 --no-graphs "$@" > /dev/null 2>> $L
  echo "ncu $name rc=$? (at $((SECONDS - T0)) s)" | tee -a $L
  python3 $D/ncu_token.py $OUT/ncu_$name.csv 4 > $OUT/prof_$name.txt 2>&1; head -24 $OUT/prof_$name.txt | tee -a $L
  xz -T4 $OUT/ncu_$name.csv
}
for i in $(seq 60); do grep -q "made L4" $L && break; sleep 1; done
prof new
prof legacy --moe-legacy
# while the 40-layer file is written: the 4-layer file (1728 MiB of experts: half 864, a quarter 432)
TO=40 bench L4 $M/a3b_L4.gguf -p 512 -n 128 -r 2
TO=40 bench L4_legacy $M/a3b_L4.gguf -p 512 -n 128 -r 2 --moe-legacy
TO=40 bench L4_half $M/a3b_L4.gguf -p 0 -n 128 -r 2 --expert-cache-mb 864
TO=40 bench L4_quarter $M/a3b_L4.gguf -p 0 -n 128 -r 2 --expert-cache-mb 432
wait $G; grep made $L; ls -l $M/*.gguf | tee -a $L
TO=100 bench L40 $M/a3b_L40.gguf -p 512 -n 128 -r 2
TO=90 bench L40_legacy $M/a3b_L40.gguf -p 512 -n 128 -r 1 --moe-legacy
# expert bytes of 40 layers: 40 x 3 x 256 x 589824 B = 17280 MiB: half 8640, a quarter 4320
[ $((SECONDS - T0)) -lt 215 ] && TO=80 bench L40_half $M/a3b_L40.gguf -p 0 -n 128 -r 1 --expert-cache-mb 8640
[ $((SECONDS - T0)) -lt 235 ] && TO=80 bench L40_quarter $M/a3b_L40.gguf -p 0 -n 128 -r 1 --expert-cache-mb 4320
echo "done at $((SECONDS - T0)) s" | tee -a $L
python3 -c "
import json,glob,os
out={os.path.basename(f)[2:-5]: json.load(open(f)) for f in sorted(glob.glob(os.environ['OUT']+'/b_*.json')) if os.path.getsize(f)>0}
json.dump(out, open(os.environ['OUT']+'/benches.json','w'), indent=1)"
rm -f $OUT/b_*.json
