#!/usr/bin/env bash
# helper mvn (issue 11), device call A of three (the binaries do not fit one transfer; the
# next two on the warm machine): df_cuda_tests, the matvec / fused / model / spec tests.
# Carry: .devcarry/mvn/a/bins.tar.xz (df_cuda_tests, lib/libpcre2-8.so.0).
set -uo pipefail
D=.devcarry/mvn/a
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
chmod +x $D/df_cuda_tests
CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$PWD/$D/lib:$CUBLAS_DIR
export CUDA_DISABLE_PTX_JIT=1  # the carried binaries hold sm_90 SASS only (pack.sh, zero_ptx.py)
T0=$SECONDS
timeout 70 $D/df_cuda_tests --gtest_filter='*Matvec*:*CudaFused*:*CudaModels*:*CudaSpec*:*CudaExpertCache*' > $OUT/tests.txt 2>&1
echo "df_cuda_tests rc=$? $((SECONDS - T0)) s"
grep -E "^\[  FAILED  \]|tests ran|PASSED  \]|SKIPPED  \]" $OUT/tests.txt | cut -c1-150 | head -30
grep -B3 -A8 "Failure" $OUT/tests.txt | cut -c1-200 | head -40
grep -E "MatvecCudaPipe|RowExact|CudaSpec" $OUT/tests.txt | grep "OK \]" | cut -c1-120
xz -T8 $OUT/tests.txt
