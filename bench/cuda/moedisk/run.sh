#!/usr/bin/env bash
# helper moedisk (stop 24): the file tier's tests, then benches of a 20-layer 35B-A3B Q4_K model
# read from the file (O_DIRECT) beside the disk's O_DIRECT bandwidth measured by dd.
set -uo pipefail
D=.devcarry/moedisk
T0=$SECONDS
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
chmod +x $D/diskformer $D/df_make_model $D/df_cuda_tests
CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$PWD/$D/lib:$CUBLAS_DIR
export CUDA_DISABLE_PTX_JIT=1
M=/tmp/a3b_L20.gguf
df -T /tmp > $OUT/env.txt 2>&1; id >> $OUT/env.txt; nproc >> $OUT/env.txt
( timeout 120 $D/df_make_model -o $M --vocab-text tools/make_model/vocab_corpus.txt --arch qwen35moe --preset 35b-a3b \
    --layers 20 --row-pool 1024 --type q4_k > /dev/null 2> $OUT/make.txt; echo "make rc=$? $((SECONDS - T0)) s" >> $OUT/make.txt ) &
MK=$!
timeout 70 $D/df_cuda_tests --gtest_filter='CudaExpertCache.*' > $OUT/tests.txt 2>&1
echo "tests rc=$? $((SECONDS - T0)) s"
grep -E "OK \]|FAILED|PASSED|file tier|expert cache:|Failure" $OUT/tests.txt | cut -c1-220 | head -20
wait $MK; cat $OUT/make.txt; ls -l $M
sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null && echo "dropped caches" || echo "no drop_caches (not root)"
dd if=$M of=/dev/null bs=16M iflag=direct count=200 2> $OUT/dd.txt; tail -1 $OUT/dd.txt
for cfg in "half 4320" "quarter 2160"; do
  set -- $cfg
  [ $((SECONDS - T0)) -lt 200 ] || { echo "skip $1 (time)"; continue; }
  timeout 55 $D/diskformer bench -m $M --device cuda --output json -q -p 16 -n 16 -r 1 --expert-source file \
    --expert-cache-mb $2 > $OUT/b_$1.json 2> $OUT/b_$1.err
  echo "bench $1 rc=$? $((SECONDS - T0)) s"; tail -2 $OUT/b_$1.err
  python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); c=d['expert_cache']
print(sys.argv[2], 'tg %.3f tok/s pp %.2f tok/s' % (d['decode_tokens_per_second'], d['prefill_tokens_per_second']),
  {k: (round(v,4) if isinstance(v,float) else v) for k,v in c.items()})" $OUT/b_$1.json $1 || true
done
