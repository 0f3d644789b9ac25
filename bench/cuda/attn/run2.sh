#!/usr/bin/env bash
# Follow-up device run for helper attn's branch (NOT YET RUN; for the lead): the 256-thread GQA
# kernel (--cuda-attn-wide, same bits) against the default. One call, ~110 s + cold start:
# bench_attn_cuda (v1 / gqa / gqa256, bits of gqa256 = gqa checked), df_cuda_tests CudaAttn.* and the
# attention / spec tests, then the 4B Q4_0 bench default vs --cuda-attn-wide, both with --profile
# (positions 512+), and --no-cuda-fuse-qk-attn with --profile (the unfused GQA at 512+: not measured
# in run.sh). Carry as run.sh: .devcarry/attn/bins.tar.xz of the branch's last commit.
set -uo pipefail
D=.devcarry/attn
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
chmod +x $D/diskformer $D/df_make_model $D/df_cuda_tests $D/bench_attn_cuda
CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$PWD/$D/lib:$CUBLAS_DIR
export CUDA_DISABLE_PTX_JIT=1
T0=$SECONDS
( [ -s /tmp/q3_4b_q4.gguf ] || "$D/df_make_model" -o /tmp/q3_4b_q4.gguf --vocab-text tools/make_model/vocab_corpus.txt \
    --preset qwen3_4b --type q4_0 > /dev/null 2>> $OUT/make.txt; echo "make rc=$? $((SECONDS - T0)) s" >> $OUT/make.txt ) &
MK=$!
timeout 60 $D/bench_attn_cuda --out $OUT/workbench.json > $OUT/workbench.txt 2>&1; echo "workbench rc=$? $((SECONDS - T0)) s"
cat $OUT/workbench.txt
timeout 60 $D/df_cuda_tests --gtest_filter='CudaAttn.*:CudaOps.Attention*:CudaOps.Lean*:CudaOps.Graph*:CudaOps.RowCount*:CudaSpec*:Shapes/CudaModels.*qwen3*' \
  > $OUT/tests.txt 2>&1; echo "df_cuda_tests rc=$? $((SECONDS - T0)) s"
grep -E "^\[  FAILED  \]|PASSED  \]" $OUT/tests.txt | head -20
wait $MK; cat $OUT/make.txt
for cfg in "new" "wide --cuda-attn-wide" "gqa2 --no-cuda-fuse-qk-attn"; do
  set -- $cfg; name=$1; shift
  timeout 45 $D/diskformer bench -m /tmp/q3_4b_q4.gguf --device cuda --output json -p 512 -n 128 -r 2 --profile "$@" \
    > $OUT/b_$name.json 2> $OUT/log_$name.txt; echo "bench $name rc=$? $((SECONDS - T0)) s"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[2], 'tg', round(d['decode_tokens_per_second'],1))" $OUT/b_$name.json $name
  grep -E "graph step|attention|qk_norm" $OUT/log_$name.txt | head -4
done
