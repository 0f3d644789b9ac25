#!/usr/bin/env bash
# helper mvn (issue 11), device call B of three (warm, right after A): the matvec workbench (old:
# pipelined loads at n = 1 only, main's kernels; new: at n = 1..8, Context::pipe_rows; GB/s and us
# per call at n = 1, 2, 3, 4, 8 with PDL, graphs of back-to-back launches; variants at n = 4, 8)
# while the 27B Q4_0 MTP file is written into /tmp for call C.
# Carry: .devcarry/mvn/b/bins.tar.xz (bench_matvec_cuda, df_make_model).
set -uo pipefail
D=.devcarry/mvn/b
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
chmod +x $D/df_make_model $D/bench_matvec_cuda
VOCAB=tools/make_model/vocab_corpus.txt
export CUDA_DISABLE_PTX_JIT=1  # the carried binaries hold sm_90 SASS only (pack.sh, zero_ptx.py)
T0=$SECONDS
mk() { local f=$1; shift; [ -s "$f" ] && return; "$D/df_make_model" -o "$f.tmp" --vocab-text $VOCAB "$@" > /dev/null 2>> $OUT/make.txt && mv "$f.tmp" "$f"; echo "make $f rc=$? $((SECONDS - T0)) s" >> $OUT/make.txt; }
( mk /tmp/q35_27b_q4f.gguf --arch qwen35 --preset qwen35_27b --type q4_0 --mtp-layers 1 --fast-random ) &
MK=$!
# The 13 tests of call A that needed df_make_model next to df_cuda_tests (call A's files stay on
# the warm machine): again, with b's df_make_model beside it.
A=.devcarry/mvn/a
if [ -x $A/df_cuda_tests ]; then
  cp $D/df_make_model $A/
  CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)")
  LD_LIBRARY_PATH=$PWD/$A/lib:$CUBLAS_DIR timeout 60 $A/df_cuda_tests \
    --gtest_filter='CudaExpertCache*:CudaSpecModels*:CudaSpecGenerate*:Shapes/CudaModels*' > $OUT/tests2.txt 2>&1
  echo "df_cuda_tests (model-file tests) rc=$? $((SECONDS - T0)) s"
  grep -E "^\[  FAILED  \]|PASSED  \]|^\[       OK \]" $OUT/tests2.txt | cut -c1-120
  grep -B3 -A8 "Failure" $OUT/tests2.txt | cut -c1-200 | head -30
else echo "call A's df_cuda_tests is gone"; fi
timeout 90 $D/bench_matvec_cuda --out $OUT/matvec.json --formats q4_0,q8_0,q6_K,iq4_xs,q4_K --no-variants --no-validate \
  --shapes 2560x9728,9728x2560,5120x17408,17408x5120 --ns 1,2,3,4,8 --modes int8x_pipe_pdl,int8x_rows_pdl \
  --pipe-codes 5322,5222,5221,5022 --pipe-ns 4,8 > $OUT/matvec.txt 2>&1
echo "workbench rc=$? $((SECONDS - T0)) s"
cut -c1-600 $OUT/matvec.txt
wait $MK; cat $OUT/make.txt | grep make; df -h /tmp | tail -1
