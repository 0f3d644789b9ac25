#!/usr/bin/env bash
# moedec call 1: measure main's qwen35moe decode (35B-A3B Q4_K shape, 10 layers) with the lead's
# stop-22 binaries (.devcarry/lf22b: diskformer + df_make_model of b25053d).
set -uo pipefail
D=/tmp/lf; mkdir -p $D
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" .devcarry/lf22b/bins.tar.xz $D
chmod +x $D/diskformer $D/df_make_model
CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$D/lib:$CUBLAS_DIR
export CUDA_DISABLE_PTX_JIT=1
T0=$SECONDS
F=/dev/shm/a3b_L10.gguf
timeout 60 $D/df_make_model -o $F --vocab-text tools/make_model/vocab_corpus.txt --arch qwen35moe --preset 35b-a3b --layers 10 --row-pool 1024 --type q4_k > $OUT/make.txt 2>&1
echo "make rc=$? $((SECONDS - T0)) s"; ls -la $F
b() { local name=$1; shift; timeout 60 $D/diskformer bench -m $F --device cuda --output json -q "$@" > $OUT/b_$name.json 2> $OUT/e_$name.txt; echo "bench $name rc=$? $((SECONDS - T0)) s";
  python3 -c "
import json,sys; d=json.load(open(sys.argv[1]))
print('%-12s tg %7.1f tok/s (%.4f ms)' % (sys.argv[2], d['decode_tokens_per_second'], 1000/d['decode_tokens_per_second']), [round(p.get('tokens_per_second',0),1) for p in d.get('prefill',[])])
" $OUT/b_$name.json $name; }
b base -p 512 -n 128 -r 2
b prof -p 512 -n 128 -r 1 --profile
cat $OUT/e_prof.txt | cut -c1-140 | tail -60
b nopdl -p 512 -n 128 -r 2 --no-cuda-moe-pdl
b plainsmall -p 512 -n 128 -r 2 --plain-small-kernels
echo "done $((SECONDS - T0)) s"
