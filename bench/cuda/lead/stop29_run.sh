#!/usr/bin/env bash
# Lead's device run, stop 29: stop 28's two parts (bench/cuda/lead/stop28_run.sh) in one call, from one
# carry with all three binaries (df_cuda_tests and diskformer share their kernels, so xz packs both in
# 38.6 MB, hardly more than one):
#   bench/cuda/pack.sh .devcarry/lf29 build/tests/df_cuda_tests build/diskformer build/df_make_model
# The 64 MiB transfer holds it beside the checkout only with fuzz/corpus, bench/cuda/results, attic and
# bench/cpu/results moved out of the checkout for the call (27.0 MB left, 23.2 MB of it the default
# model); put them back after it.
#   CARRY=.devcarry/lf29 BUDGET=560 bash bench/cuda/lead/stop29_run.sh
# Order: the 4B models are made in the background while df_cuda_tests runs (TESTS_TIMEOUT, default
# 300 s); then alternating A/B benches (each skipped once BUDGET s have passed): --decode-lookahead
# off / auto (default model, 4B Q4_0, 4B Q8_0), --cuda-copy-batch off / on (default model's MTP
# bench), --cuda-mv-tma-kb 100 (the bulk-copy kernel's second version, 4B), then the figures.
set -uo pipefail
source bench/cuda/lead/lib.sh
lead_unpack ${CARRY:-.devcarry/lf29}
( mk /tmp/q3_4b_q4.gguf --preset qwen3_4b --type q4_0 &
  mk /tmp/q3_4b_q8.gguf --preset qwen3_4b --type q8_0 &
  wait ) &
MK=$!
TESTS_TIMEOUT=${TESTS_TIMEOUT:-300} lead_tests
SPEC="--spec mtp --draft-max 3 --spec-prompt models/heldout.txt"
for r in a b; do
  bench def_la_off_$r models/default.gguf -p 16 -n 256 -r 3 --decode-lookahead off
  bench def_la_auto_$r models/default.gguf -p 16 -n 256 -r 3 --decode-lookahead auto
done
wait $MK; grep make $OUT/make.txt
for r in a b; do
  bench q4_la_off_$r /tmp/q3_4b_q4.gguf -p 16 -n 128 -r 2 --decode-lookahead off
  bench q4_la_auto_$r /tmp/q3_4b_q4.gguf -p 16 -n 128 -r 2 --decode-lookahead auto
done
for r in a b; do
  bench def_spec_cb_off_$r models/default.gguf -p 64 -n 256 -r 2 $SPEC
  bench def_spec_cb_on_$r models/default.gguf -p 64 -n 256 -r 2 $SPEC --cuda-copy-batch
done
for r in a b; do
  bench q8_la_off_$r /tmp/q3_4b_q8.gguf -p 16 -n 128 -r 2 --decode-lookahead off
  bench q8_la_auto_$r /tmp/q3_4b_q8.gguf -p 16 -n 128 -r 2 --decode-lookahead auto
done
bench q4_tma /tmp/q3_4b_q4.gguf -p 16 -n 128 -r 2 --cuda-mv-tma-kb ${TMA_KB:-100}
bench q8_tma /tmp/q3_4b_q8.gguf -p 16 -n 128 -r 2 --cuda-mv-tma-kb ${TMA_KB:-100}
bench default models/default.gguf -p 512 -n 128 -r 2 ${FLAGS:-}
bench q3_4b_q4 /tmp/q3_4b_q4.gguf -p 512 -n 128 -r 2 ${FLAGS:-}
bench q3_4b_q8 /tmp/q3_4b_q8.gguf -p 512 -n 128 -r 2 ${FLAGS:-}
lead_collect
