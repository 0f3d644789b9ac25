#!/usr/bin/env bash
# moedec call B (warm, right after call A): diskformer bench of the file call A made, the old path
# (defaults: --cuda-moe-pipe 0 --cuda-mv-short-pipe 0) beside the new flags, in one run.
# Carry .devcarry/moedec/b/bins.tar.xz: diskformer (stripped, PTX zeroed), lib/. BUDGET (s of wall)
# stops starting benches past it.
set -uo pipefail
D=/tmp/mdb; mkdir -p $D
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" .devcarry/moedec/b/bins.tar.xz $D
chmod +x $D/diskformer
CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$D/lib:$CUBLAS_DIR
export CUDA_DISABLE_PTX_JIT=1
T0=$SECONDS
F=${F:-/dev/shm/a3b_L6.gguf}
ls -la $F || exit 1
b() { local name=$1; shift; [ $((SECONDS - T0)) -lt ${BUDGET:-30} ] || { echo "skip $name (time)"; return; }
  timeout 40 $D/diskformer bench -m $F --device cuda --output json -q "$@" > $OUT/b_$name.json 2> $OUT/e_$name.txt; echo "bench $name rc=$? $((SECONDS - T0)) s: $*";
  python3 -c "
import json,sys; d=json.load(open(sys.argv[1]))
print('%-10s tg %7.1f tok/s (%.4f ms)' % (sys.argv[2], d['decode_tokens_per_second'], 1000/d['decode_tokens_per_second']), [round(p.get('tokens_per_second',0),1) for p in d.get('prefill',[])])
" $OUT/b_$name.json $name; }
b old -p 512 -n 128 -r 2
b moe4 -p 512 -n 128 -r 2 --cuda-moe-pipe 4
b moe4s4 -p 512 -n 128 -r 2 --cuda-moe-pipe 4 --cuda-mv-short-pipe 4
b moe2s2 -p 512 -n 128 -r 2 --cuda-moe-pipe 2 --cuda-mv-short-pipe 2
echo "done $((SECONDS - T0)) s"
