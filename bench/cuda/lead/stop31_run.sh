#!/usr/bin/env bash
# Lead's device run, stop 31: the int8-x kernels over raw blocks (matvec/family_i8_*.cu: Q2_K,
# Q3_K, IQ4_NL, MXFP4, NVFP4, Q1_0, Q2_0, TQ2_0, IQ2_XXS/XS/S, IQ3_XXS/S, IQ1_S/M).
#   PART=1: df_cuda_tests; qwen3 4B in the MODELS types (default Q3_K / Q2_K; the IQ formats have
#     no reference quantiser for df_make_model), int8-x (the default) beside --mv-exact (the f32-x
#     kernels), alternating (run 1 named the results q3k / q2k).
#   PART=mv: the matvec micro-benchmark per format (f32-x "default" beside the int8-x default
#     "int8x_rows_pdl" and, from run 2, "int8x_pdl": the unpipelined loop; run 1 asked for
#     2560x9728,5120x17408,248320x5120, of which the workbench runs only the head for these
#     formats); its own carry (the 64 MiB limit):
#     bench/cuda/pack.sh .devcarry/lf31b build/bench/cuda/bench_matvec_cuda
#     (34-41 MB: with the ~28 MB tree over the limit unless models/default.gguf is moved out of
#     the checkout for the call; the workbench does not read it)
#   PART=tests: df_cuda_tests only (the final commit's check).
#   bench/cuda/pack.sh .devcarry/lf31 build/tests/df_cuda_tests build/diskformer build/df_make_model
#   PART=1 CARRY=.devcarry/lf31 BUDGET=480 bash bench/cuda/lead/stop31_run.sh
#   PART=mv CARRY=.devcarry/lf31b bash bench/cuda/lead/stop31_run.sh
set -uo pipefail
source bench/cuda/lead/lib.sh
lead_unpack ${CARRY:-.devcarry/lf31}
chmod +x $D/bench_matvec_cuda 2>/dev/null
lead_tests_only 330
if [ "${PART:-1}" = 1 ]; then
  ( for m in ${MODELS:-q3_K q2_K}; do mk /tmp/q3_4b_$m.gguf --preset qwen3_4b --type $m & done; wait ) &
  MK=$!
  TESTS_TIMEOUT=${TESTS_TIMEOUT:-330} lead_tests ${TEST_ARGS:-}
  wait $MK; grep make $OUT/make.txt
  for m in ${MODELS:-q3_K q2_K}; do
    bench ${m}_i8 /tmp/q3_4b_$m.gguf -p 512 -n 128 -r 1
    bench ${m}_f32x /tmp/q3_4b_$m.gguf -p 512 -n 128 -r 1 --mv-exact
    bench ${m}_i8b /tmp/q3_4b_$m.gguf -p 512 -n 128 -r 1
  done
elif [ "${PART}" = mv ]; then
    timeout 200 $D/bench_matvec_cuda --no-variants --modes ${MODES:-default,int8x_pdl,int8x_rows_pdl} --ns 1 --pipe-codes "" \
      --formats ${FORMATS:-q2_K,q3_K,iq4_nl,mxfp4,nvfp4,q1_0,q2_0,tq2_0,iq2_xxs,iq2_xs,iq2_s,iq3_xxs,iq3_s,iq1_s,iq1_m,q4_0} \
      --shapes ${SHAPES:-17408x5120,248320x5120} --out $OUT/matvec_i8.json > $OUT/matvec_i8.txt 2>&1
    echo "matvec workbench rc=$? $((SECONDS - T0)) s"
    grep -E "^validate|^speed|read bandwidth|^ +(default|int8x)" $OUT/matvec_i8.txt | cut -c1-160 | head -150
fi
lead_collect
