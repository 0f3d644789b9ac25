#!/usr/bin/env bash
# Helper decops's device run 2: df_cuda_tests (less CudaDefaultModel, the 21 s perplexity) of h-decops-attn (attention: 4 positions per warp
# at once, >= 64-position slices), then the default model's decode with --profile (positions
# 512... after the prompt, where attention took 34 us a layer in run 1).
set -uo pipefail
D=.devcarry/decops
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
chmod +x $D/diskformer $D/df_cuda_tests $D/df_make_model
FILTER=${1:--CudaDefaultModel.*}
CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$PWD/$D/lib:$CUBLAS_DIR
T0=$SECONDS
timeout 30 $D/df_cuda_tests --gtest_filter="$FILTER" > $OUT/tests.txt 2>&1; echo "df_cuda_tests rc=$? $((SECONDS - T0)) s"
grep -E "^\[  FAILED  \]|tests ran|PASSED  \]|SKIPPED  \]" $OUT/tests.txt | cut -c1-150 | head -20
grep -B3 -A8 "Failure" $OUT/tests.txt | cut -c1-200 | head -30
for a in "512"; do
  timeout 10 $D/diskformer bench -m models/default.gguf --device cuda --output json -p $a -n 64 -r 2 --profile > $OUT/b_$a.json 2> $OUT/e_$a.txt
  echo "bench -p $a rc=$? $((SECONDS - T0)) s"
  grep -v "loading \[" $OUT/e_$a.txt | grep -A24 "^profile:"
done
