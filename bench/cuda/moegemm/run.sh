#!/usr/bin/env bash
# helper moegemm (issue 14, prefill): ONE device run (240 s share, cold start included).
# df_make_model writes the 35B-A3B Q4_K shape with 10 layers into /dev/shm in the background while
# df_cuda_tests runs the MoE / GEMM / model suites (the new CudaMoeGemm.* and
# CudaModelsMoeGemm.* among them); then `bench` with --cuda-moe-gemm (new) and
# --no-cuda-moe-gemm (old: the grouped n = 8 matvec) alternating on the 10-layer file, then new
# and old once each with --profile (the prompt's prefill op by op).
# The carry (.devcarry/moegemm): bins.tar.xz (stripped diskformer, df_cuda_tests, df_make_model;
# tar -I 'xz -9'), lib/ (libcpp-httplib.so.0.11 as moe4 carried it), this script.
set -uo pipefail
D=.devcarry/moegemm
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
chmod +x $D/diskformer $D/df_make_model $D/df_cuda_tests
CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$PWD/$D/lib:$CUBLAS_DIR
V=tools/make_model/vocab_corpus.txt
L=$OUT/log.txt
T0=$SECONDS
M=/dev/shm; [ "$(df --output=avail -B1G /dev/shm | tail -1)" -gt 10 ] || M=/tmp
nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.sm --format=csv,noheader | tee -a $L
( $D/df_make_model -o $M/a3b_L10.gguf --vocab-text $V --arch qwen35moe --preset 35b-a3b --layers 10 --row-pool 1024 --type q4_k > /dev/null 2>>$L
  echo "made L10 rc=$? $((SECONDS - T0)) s" >> $L ) &
G=$!
timeout 75 $D/df_cuda_tests --gtest_filter='CudaMoeGemm.*:CudaModelsMoeGemm.*:CudaGemm.*:CudaOps.Moe*:*qwen35moe*:CudaExpertCache.*' > $OUT/cuda_tests.txt 2>&1
echo "df_cuda_tests rc=$? $((SECONDS - T0)) s" | tee -a $L
grep -E "^\[  FAILED  \]|tests ran|PASSED  \]|SKIPPED  \]|^\[       OK \]|NMSE|positions above" $OUT/cuda_tests.txt | cut -c1-220 | head -60 | tee -a $L
grep -E "Failure|Expected|Which is|actual" $OUT/cuda_tests.txt | cut -c1-200 | head -20 | tee -a $L
bench() {  # name timeout model args...
  local name=$1 to=$2 model=$3; shift 3
  local t0=$SECONDS
  timeout $to $D/diskformer bench -m "$model" --device cuda --output json -q "$@" > $OUT/b_$name.json 2> $OUT/err_$name.txt
  echo "bench $name rc=$? $((SECONDS - t0)) s (at $((SECONDS - T0)) s): $*" | tee -a $L
  python3 - $OUT/b_$name.json $name <<'PY' 2>&1 | tee -a $L
import json, sys
d = json.load(open(sys.argv[1]))
pp = {p['n_prompt']: round(p['tokens_per_second'], 1) for p in d.get('prefill', [])}
print('%-12s tg %7.1f tok/s (%.4f ms)  pp %s' % (sys.argv[2], d['decode_tokens_per_second'], d['decode_ms_per_token'], pp))
pr = d.get('profile', {}).get('prefill')
if pr:  # (as run, this read keys 'calls' / 'ms' that the JSON does not have and printed zeros; the tables are in err_*_prof.txt)
    for o in pr.get('ops', [])[:14]:
        print('   %-24s %-26s x%5.0f  %8.1f us/call' % (o.get('op'), o.get('shape', ''), o.get('calls_per_token', 0), o.get('us_per_call', 0)))
PY
}
for i in $(seq 60); do grep -q "made L10" $L && break; sleep 1; done
grep made $L
F=$M/a3b_L10.gguf
NEW=--cuda-moe-gemm
OLD=--no-cuda-moe-gemm
bench L10_old1 25 $F -p 512 -n 16 -r 2 $OLD
bench L10_new1 25 $F -p 512 -n 16 -r 2 $NEW
[ $((SECONDS - T0)) -lt 125 ] && bench L10_new_prof 25 $F -p 512 -n 16 -r 2 $NEW --profile
[ $((SECONDS - T0)) -lt 140 ] && bench L10_old2 20 $F -p 512 -n 16 -r 2 $OLD
[ $((SECONDS - T0)) -lt 150 ] && bench L10_new2 20 $F -p 512 -n 16 -r 2 $NEW
[ $((SECONDS - T0)) -lt 155 ] && bench L10_old_prof 20 $F -p 512 -n 16 -r 2 $OLD --profile
echo "done at $((SECONDS - T0)) s" | tee -a $L
python3 -c "
import json,glob,os
out={}
for f in sorted(glob.glob(os.environ['OUT']+'/b_*.json')):
    try: out[os.path.basename(f)[2:-5]] = json.load(open(f))
    except Exception as e: out[os.path.basename(f)[2:-5]] = {'error': str(e)}
json.dump(out, open(os.environ['OUT']+'/benches.json','w'), indent=1)"
rm -f $OUT/b_*.json
