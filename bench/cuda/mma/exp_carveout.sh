#!/usr/bin/env bash
# Helper mma's third call (.devcarry/mmac: diskformer, df_make_model, lib/ of the carveout commit): a
# 16-layer qwen3 4B Q4_0 file, plain decode with --cuda-mv-mma off / auto / on side by side, to see
# whether the shared-memory carveout of the mma kernel (family_mma.cu prepare_type) was its in-model cost.
set -uo pipefail
D=.devcarry/mmac
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
chmod +x $D/diskformer $D/df_make_model
export LD_LIBRARY_PATH=$PWD/$D/lib:$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)")
export CUDA_DISABLE_PTX_JIT=1
T0=$SECONDS
$D/df_make_model -o /tmp/q3_4b_l16_q4.gguf --vocab-text tools/make_model/vocab_corpus.txt --preset qwen3_4b --layers 16 --type q4_0 > /dev/null 2>&1
echo "make rc=$? $((SECONDS - T0)) s"
for m in off auto on; do
  timeout 20 $D/diskformer bench -m /tmp/q3_4b_l16_q4.gguf --device cuda --output json -p 16 -n 128 -r 2 --cuda-mv-mma $m > $OUT/b_$m.json 2>> $OUT/log.txt
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[2], 'tg %.1f tok/s' % d['decode_tokens_per_second'])" $OUT/b_$m.json $m
  echo "  $((SECONDS - T0)) s"
done
