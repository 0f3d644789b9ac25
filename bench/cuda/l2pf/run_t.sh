#!/usr/bin/env bash
# helper l2pf, device call T (second, on the warm machine): the model files for call B written
# into /tmp in the background while df_cuda_tests runs (all but CudaDefaultModel: TESTS overrides
# the filter). Carry .devcarry/l2pft/bins.tar.xz: df_cuda_tests, df_make_model, lib/.
set -uo pipefail
D=.devcarry/l2pft
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
chmod +x $D/df_make_model $D/df_cuda_tests
CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$PWD/$D/lib:$CUBLAS_DIR
VOCAB=tools/make_model/vocab_corpus.txt
T0=$SECONDS
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv > $OUT/gpu.txt 2>&1
mk() { local f=$1; shift; [ -s "$f" ] && return; "$D/df_make_model" -o "$f.tmp" --vocab-text $VOCAB "$@" > /dev/null 2>> $OUT/make.txt && mv "$f.tmp" "$f"; echo "make $f rc=$? $((SECONDS - T0)) s" >> $OUT/make.txt; }
( mk /tmp/q3_4b_q8.gguf --preset qwen3_4b --type q8_0 & mk /tmp/q3_4b_q4.gguf --preset qwen3_4b --type q4_0 &
  mk /tmp/q35_27b_q4f.gguf --arch qwen35 --preset qwen35_27b --type q4_0 --mtp-layers 1 --fast-random & wait ) &
MK=$!
timeout 150 $D/df_cuda_tests --gtest_filter="${TESTS:--CudaDefaultModel.*}" > $OUT/tests.txt 2>&1
echo "df_cuda_tests rc=$? $((SECONDS - T0)) s"
grep -E "^\[  FAILED  \]|tests ran|PASSED  \]|SKIPPED  \]" $OUT/tests.txt | cut -c1-150 | head -30
grep -B3 -A8 "Failure" $OUT/tests.txt | cut -c1-200 | head -40
wait $MK; grep make $OUT/make.txt; df -h /tmp | tail -1
xz -T8 $OUT/tests.txt
