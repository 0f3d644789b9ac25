#!/usr/bin/env bash
# helper moe3, branch h-moe3-norm (f750b5a, NOT yet run on a GPU): df_cuda_tests, then the 4-layer
# 35B-A3B-shaped file's decode/pp512 (compare with h200_2026-12-01_moe3_run2: 1556.4 tok/s, 31371);
# with argument "L40" also the 40-layer file (82 s to write; compare 198.6 tok/s, pp512 3209).
set -uo pipefail
D=.devcarry/moe3n
tar xJf $D/bins.tar.xz -C $D
CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$PWD/$D/lib:$CUBLAS_DIR
V=tools/make_model/vocab_corpus.txt
T0=$SECONDS
( $D/df_make_model -o /dev/shm/a3b_L4.gguf --vocab-text $V --arch qwen35moe --preset 35b-a3b --layers 4 --row-pool 1024 --type q4_k > /dev/null 2>&1
  [ "${1:-}" = L40 ] && $D/df_make_model -o /dev/shm/a3b_L40.gguf --vocab-text $V --arch qwen35moe --preset 35b-a3b --layers 40 --row-pool 1024 --type q4_k > /dev/null 2>&1 ) &
G=$!
timeout 100 $D/df_cuda_tests > $OUT/cuda_tests.txt 2>&1; echo "df_cuda_tests rc=$? $((SECONDS - T0)) s"
grep -E "^\[  FAILED  \]|tests ran|PASSED  \]" $OUT/cuda_tests.txt | head
wait $G
for f in /dev/shm/a3b_L4.gguf /dev/shm/a3b_L40.gguf; do
  [ -s $f ] || continue
  timeout 100 $D/diskformer bench -m $f --device cuda --output json -q -p 512 -n 128 -r 2 > $OUT/$(basename $f .gguf).json
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[1], round(d['decode_tokens_per_second'],1), [round(p['tokens_per_second'],1) for p in d['prefill']])" $OUT/$(basename $f .gguf).json
done
