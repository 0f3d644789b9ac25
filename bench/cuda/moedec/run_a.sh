#!/usr/bin/env bash
# moedec call A (cold machine): df_cuda_tests of the new paths while df_make_model writes the
# 35B-A3B Q4_K shape with $LAYERS layers into /dev/shm (kept for call B on the warm machine).
# Carry .devcarry/moedec/a/bins.tar.xz: df_cuda_tests (stripped, PTX zeroed), df_make_model, lib/.
set -uo pipefail
D=/tmp/mda; mkdir -p $D
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" .devcarry/moedec/a/bins.tar.xz $D
chmod +x $D/df_cuda_tests $D/df_make_model
CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$D/lib:$CUBLAS_DIR
export CUDA_DISABLE_PTX_JIT=1
T0=$SECONDS
LAYERS=${LAYERS:-6}
F=/dev/shm/a3b_L$LAYERS.gguf
( timeout 60 $D/df_make_model -o $F.tmp --vocab-text tools/make_model/vocab_corpus.txt --arch qwen35moe --preset 35b-a3b \
    --layers $LAYERS --row-pool 1024 --type q4_k > $OUT/make.txt 2>&1 && mv $F.tmp $F; echo "make rc=$? $((SECONDS - T0)) s" >> $OUT/make.txt ) &
MK=$!
timeout 60 $D/df_cuda_tests --gtest_filter="${TESTS_FILTER:-CudaOps.MoePipe*:CudaOps.ShortPipe*:CudaOps.MoePdlIsThePlainBits:CudaFused.*:MoeRouteCuda.*}" > $OUT/tests.txt 2>&1
echo "df_cuda_tests rc=$? $((SECONDS - T0)) s"
grep -E "^\[  FAILED  \]|tests ran|PASSED  \]|SKIPPED  \]|^\[       OK \]" $OUT/tests.txt | cut -c1-150 | head -30
grep -B3 -A8 "Failure" $OUT/tests.txt | cut -c1-200 | head -40
wait $MK; tail -1 $OUT/make.txt; ls -la $F
