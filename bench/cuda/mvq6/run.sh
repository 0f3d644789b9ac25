#!/usr/bin/env bash
# Helper mvq6's device call, one call on a cold machine: the FULL df_cuda_tests (the binary
# `ctest -L cuda` runs, df_make_model beside it for the model tests), then the matvec workbench
# on the int8-x families of h-mvq6 (Q5_K, Q5_0, Q5_1, Q2_K, Q3_K, IQ4_NL, MXFP4; Q4_1 / Q4_K /
# Q6_K / IQ4_XS as references). Carry .devcarry/mvq6 (built here, Release, CUDA sm_90, stripped,
# PTX zeroed by bench/cuda/mvn/zero_ptx.py): bins.tar.xz = df_cuda_tests, bench_matvec_cuda,
# df_make_model, lib/libpcre2-8.so.0, in ONE xz stream with a 192 MiB dictionary
# (`xz --lzma2=preset=9e,dict=192MiB`: the two CUDA binaries share most of their kernels, 32 MB in all).
# END (s, default 225): the workbench gets what is left of it after the tests.
set -uo pipefail
D=.devcarry/mvq6
T0=$SECONDS
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
chmod +x $D/df_cuda_tests $D/bench_matvec_cuda $D/df_make_model
CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$PWD/$D/lib:$CUBLAS_DIR
export CUDA_DISABLE_PTX_JIT=1  # PTX zeroed: sm_90 SASS only
echo "unpacked $((SECONDS - T0)) s"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
timeout ${TESTS_TIMEOUT:-215} $D/df_cuda_tests > $OUT/tests.txt 2>&1
echo "df_cuda_tests rc=$? $((SECONDS - T0)) s"
grep -E "^\[  FAILED  \]|tests ran|PASSED  \]|SKIPPED  \]" $OUT/tests.txt | cut -c1-150 | head -30
grep -B3 -A8 "Failure" $OUT/tests.txt | cut -c1-200 | head -40
grep -E "perplexity|near-ties" $OUT/tests.txt | cut -c1-170 | head -4
# The workbench in two calls, the new families first (a timeout cuts the references, not them);
# the text output is line-buffered, so what a timeout cuts still comes back.
wb() {  # name formats
  local left=$(( ${END:-225} - (SECONDS - T0) ))
  echo "workbench $1 gets ${left} s"
  [ $left -gt 8 ] || return
  timeout $left stdbuf -oL $D/bench_matvec_cuda --formats $2 --no-variants --pipe-codes '' \
    --modes default,int8x_rows_pdl --ns 1,4 --shapes 2560x9728,5120x17408,248320x5120 --out $OUT/matvec_$1.json > $OUT/matvec_$1.txt 2>&1
  echo "matvec workbench $1 rc=$? $((SECONDS - T0)) s"
  grep -E "^speed|^   (default|int8x)|read bandwidth|^validate" $OUT/matvec_$1.txt | cut -c1-170 | head -60
}
wb new ${NEW_FORMATS:-q5_K,q5_0,q5_1}
wb ref ${REF_FORMATS:-q4_K,q6_K,q4_1}
xz -T8 $OUT/tests.txt
echo "done $((SECONDS - T0)) s"
