#!/usr/bin/env bash
# helper moe4, call 2 (warm machine, the files of run.sh still in /dev/shm): the benches only, the lib/ dir now carried.
# helper moe4 (issue 14): ONE device run. df_cuda_tests (the MoE, ops, fused and matvec suites,
# the new CudaOps.MoePdlIsThePlainBits among them) while df_make_model writes the 35B-A3B Q4_K
# shape with 10 and then 40 layers into /dev/shm; then `bench` with --cuda-moe-pdl (new) and
# without (old, main's default) alternating on the 10-layer file, then new (--profile: the MoE
# ops now have their own entries, plus the prefill profiled op by op) and old on the 40-layer
# file, then the half expert cache if the deadline allows.
set -uo pipefail
D=.devcarry/moe4
[ -x $D/diskformer ] || python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
chmod +x $D/diskformer $D/df_make_model $D/df_cuda_tests
CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$PWD/$D/lib:$CUBLAS_DIR
V=tools/make_model/vocab_corpus.txt
L=$OUT/log.txt
T0=$SECONDS
M=/dev/shm; [ "$(df --output=avail -B1G /dev/shm | tail -1)" -gt 30 ] || M=/tmp
nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.sm --format=csv,noheader | tee -a $L
bench() {  # name timeout model args...
  local name=$1 to=$2 model=$3; shift 3
  local t0=$SECONDS
  timeout $to $D/diskformer bench -m "$model" --device cuda --output json -q "$@" > $OUT/b_$name.json 2> $OUT/err_$name.txt
  echo "bench $name rc=$? $((SECONDS - t0)) s (at $((SECONDS - T0)) s): $*" | tee -a $L
  python3 - $OUT/b_$name.json $name <<'PY' 2>&1 | tee -a $L
import json, sys
d = json.load(open(sys.argv[1]))
pp = {p['n_prompt']: round(p['tokens_per_second'], 1) for p in d.get('prefill', [])}
s = '%-12s tg %7.1f tok/s (%.4f ms) %6.1f GB/s  pp %s' % (sys.argv[2], d['decode_tokens_per_second'], d['decode_ms_per_token'], d['decode_weight_gb_per_second'], pp)
c = d.get('expert_cache')
if c and c.get('slots'):
    s += '\n   cache %.0f MiB %d slots: hit %.3f, host %.1f MiB/tok (%.1f GB/s)' % (
        c['capacity_bytes'] / 2**20, c['slots'], c['decode_hit_rate'], c['decode_bytes_from_host_per_token'] / 2**20,
        c['decode_host_read_gb_per_second'])
print(s)
PY
}
NEW=--cuda-moe-pdl
OLD=--no-cuda-moe-pdl
ls -l $M/*.gguf | tee -a $L
bench L10_old1 20 $M/a3b_L10.gguf -p 512 -n 128 -r 2 $OLD
bench L10_new1 20 $M/a3b_L10.gguf -p 512 -n 128 -r 2 $NEW
bench L40_new_prof 40 $M/a3b_L40.gguf -p 512 -n 128 -r 2 $NEW --profile
[ $((SECONDS - T0)) -lt 50 ] && bench L40_old 35 $M/a3b_L40.gguf -p 512 -n 128 -r 2 $OLD
echo "done at $((SECONDS - T0)) s" | tee -a $L
python3 -c "
import json,glob,os
out={}
for f in sorted(glob.glob(os.environ['OUT']+'/b_*.json')):
    try: out[os.path.basename(f)[2:-5]] = json.load(open(f))
    except Exception as e: out[os.path.basename(f)[2:-5]] = {'error': str(e)}
json.dump(out, open(os.environ['OUT']+'/benches.json','w'), indent=1)"
rm -f $OUT/b_*.json
