#!/usr/bin/env bash
# Lead's final device run, part 1 (stop 20): df_cuda_tests of final main (the binary `ctest -L cuda`
# runs) while the benchmark models are written into /tmp and /dev/shm for part 2 (the next call, on
# the warm machine). Carries, built here (Release, CUDA sm_90), stripped, each under ~35 MB:
#   .devcarry/lft/bins.tar.xz: df_cuda_tests, df_make_model, lib/ (the .so files diskformer needs
#   there: libpcre2-8, libcpp-httplib, libcurl's dependencies; see stop 19's carry), plus this script;
#   .devcarry/lfb/bins.tar.xz: diskformer, df_make_model, lib/, plus stop20_bench_run.sh as run.sh.
# Not run in stop 20 (the device was no longer lent when main was final).
set -uo pipefail
D=.devcarry/lft
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
chmod +x $D/df_make_model $D/df_cuda_tests
CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$PWD/$D/lib:$CUBLAS_DIR
VOCAB=tools/make_model/vocab_corpus.txt
T0=$SECONDS
mk() { local f=$1; shift; [ -s "$f" ] && return; "$D/df_make_model" -o "$f.tmp" --vocab-text $VOCAB "$@" > /dev/null 2>> $OUT/make.txt && mv "$f.tmp" "$f"; echo "make $f rc=$? $((SECONDS - T0)) s" >> $OUT/make.txt; }
( mk /tmp/q3_4b_q8.gguf --preset qwen3_4b --type q8_0 & mk /tmp/q3_4b_q4.gguf --preset qwen3_4b --type q4_0 &
  mk /tmp/q35_27b_q4f.gguf --arch qwen35 --preset qwen35_27b --type q4_0 --mtp-layers 1 --fast-random &
  mk /dev/shm/a3b_L40.gguf --arch qwen35moe --preset 35b-a3b --layers 40 --row-pool 1024 --type q4_k & wait ) &
MK=$!
timeout 170 $D/df_cuda_tests > $OUT/tests.txt 2>&1; echo "df_cuda_tests rc=$? $((SECONDS - T0)) s"
grep -E "^\[  FAILED  \]|tests ran|PASSED  \]|SKIPPED  \]" $OUT/tests.txt | cut -c1-150 | head -30
grep -B3 -A8 "Failure" $OUT/tests.txt | cut -c1-200 | head -40
grep -E "perplexity|near-ties" $OUT/tests.txt | cut -c1-170 | head -12
wait $MK; cat $OUT/make.txt | grep make; df -h /tmp | tail -1
xz -T8 $OUT/tests.txt
