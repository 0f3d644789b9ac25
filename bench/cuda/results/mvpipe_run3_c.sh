#!/usr/bin/env bash
# mvpipe run 3 (final, part c): df_cuda_tests of the final commit.
set -uo pipefail
D=.devcarry/mvpipe/c
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
chmod +x $D/df_make_model $D/df_cuda_tests
CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$PWD/$D/lib:$CUBLAS_DIR
T0=$SECONDS
timeout 200 $D/df_cuda_tests > $OUT/tests.txt 2>&1; echo "df_cuda_tests rc=$? $((SECONDS - T0)) s"
grep -E "^\[  FAILED  \]|tests ran|PASSED  \]|SKIPPED  \]" $OUT/tests.txt | cut -c1-150 | head -30
grep -B3 -A8 "Failure" $OUT/tests.txt | cut -c1-200 | head -40
grep -E "MatvecCudaPipe|perplexity" $OUT/tests.txt | cut -c1-170 | head -8
