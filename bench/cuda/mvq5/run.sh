#!/usr/bin/env bash
# Helper mvq5's device call (int8-x Q5_K / Q4_1 / Q5_0 / Q5_1 matvec families), one call:
# df_cuda_tests (the matvec, GEMM and grouped GEMM tests), then the matvec workbench.
# Carry .devcarry/mvq5 (built here, Release, CUDA sm_90, stripped, PTX zeroed by
# bench/cuda/mvn/zero_ptx.py, `tar -I 'xz -9'`): bins.tar.xz = df_cuda_tests, df_make_model,
# lib/ (from the lead's lf22t carry), bench_matvec_cuda (when it fits the transfer).
set -uo pipefail
D=.devcarry/mvq5
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
chmod +x $D/df_cuda_tests $D/bench_matvec_cuda 2>/dev/null
CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$PWD/$D/lib:$CUBLAS_DIR
export CUDA_DISABLE_PTX_JIT=1 CUDA_MODULE_LOADING=LAZY  # the SASS of ops the filtered tests never launch (attention, delta rule, ssm_conv, flash prefill) is zeroed too
export PATH=$PWD/$D:$PATH
T0=$SECONDS
timeout 125 $D/df_cuda_tests --gtest_filter='AllFormats/*:*Gemm*:*gemm*:*Grouped*:MatvecCuda*:CudaFused.*' > $OUT/tests.txt 2>&1
echo "df_cuda_tests rc=$? $((SECONDS - T0)) s"
grep -E "^\[  FAILED  \]|tests ran|PASSED  \]|SKIPPED  \]" $OUT/tests.txt | cut -c1-150 | head -40
grep -B3 -A8 "Failure" $OUT/tests.txt | cut -c1-200 | head -40
if [ -x $D/bench_matvec_cuda ]; then
  timeout 50 $D/bench_matvec_cuda --formats q5_K,q5_0,q4_K,q6_K,q4_1,q5_1 --no-variants --modes default,int8x_rows_pdl --ns 1,4 \
    --shapes 2560x9728,5120x17408,248320x5120 --out $OUT/matvec.json > $OUT/matvec.txt 2>&1
  echo "matvec workbench rc=$? $((SECONDS - T0)) s"
  grep -E "^speed|read bandwidth" $OUT/matvec.txt | cut -c1-160 | head -80
fi
