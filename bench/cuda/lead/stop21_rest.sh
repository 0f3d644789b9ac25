#!/usr/bin/env bash
# Second call of stop 21 (warm machine): the df_cuda_tests that the first call (stop21_run.sh, 150 s timeout
# then) did not reach; passed.txt lists the ones it passed (a gtest negative filter).
D=.devcarry/lf; python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2], members=[m for m in tarfile.open(sys.argv[1]) if not m.name.startswith('diskformer')])" $D/bins.tar.xz $D
CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)"); export LD_LIBRARY_PATH=$PWD/$D/lib:$CUBLAS_DIR CUDA_DISABLE_PTX_JIT=1
timeout 65 $D/df_cuda_tests --gtest_filter="-$(cat $D/passed.txt)" > $OUT/tests2.txt 2>&1; echo rc=$?
grep -E "^\[  FAILED|tests ran|PASSED  \]|^\[       OK" $OUT/tests2.txt | cut -c1-140 | tail -40
