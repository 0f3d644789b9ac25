#!/usr/bin/env bash
# Lead's device run for what stop 28 left unmeasured (no GPU was lent that stop). Two carries,
# both packed here by bench/cuda/pack.sh (the checkout, 23 MB of it models/default.gguf, and one
# pack must fit the 64 MiB transfer):
#   bench/cuda/pack.sh .devcarry/lf28t build/tests/df_cuda_tests build/df_make_model
#   bench/cuda/pack.sh .devcarry/lf28b build/diskformer build/df_make_model
# PART=tests (carry lf28t): df_cuda_tests unfiltered: among them the unrun ones,
#   MatvecCudaTma.*, CudaOps.CopyBatchIsTheCopiesBits, CudaSpecModels.CopyBatchVerifyRowsEqualDecode,
#   CudaSpecGenerate.CopyBatchGivesTheSameTokens, CudaGreedySteps.LookaheadGivesPlainTokens.
#   CARRY=.devcarry/lf28t PART=tests bash bench/cuda/lead/stop28_run.sh
# PART=1 (carry lf28b, default): alternating A/B in one call, `diskformer bench --device cuda`:
#   --decode-lookahead off / auto (default model, 4B Q4_0, 4B Q8_0), --cuda-copy-batch off / on
#   (the default model's MTP bench), --cuda-mv-tma-kb 0 / 100 (4B Q4_0 / Q8_0: the bulk-copy
#   kernel's second version), then the figures with the flags given in FLAGS.
#   CARRY=.devcarry/lf28b bash bench/cuda/lead/stop28_run.sh
set -uo pipefail
source bench/cuda/lead/lib.sh
lead_unpack ${CARRY:-.devcarry/lf28b}
lead_tests_only 420
( mk /tmp/q3_4b_q4.gguf --preset qwen3_4b --type q4_0 &
  mk /tmp/q3_4b_q8.gguf --preset qwen3_4b --type q8_0 &
  wait ) &
MK=$!
SPEC="--spec mtp --draft-max 3 --spec-prompt models/heldout.txt"
for r in a b; do
  bench def_la_off_$r models/default.gguf -p 16 -n 256 -r 3 --decode-lookahead off
  bench def_la_auto_$r models/default.gguf -p 16 -n 256 -r 3 --decode-lookahead auto
done
for r in a b; do
  bench def_spec_cb_off_$r models/default.gguf -p 64 -n 256 -r 2 $SPEC
  bench def_spec_cb_on_$r models/default.gguf -p 64 -n 256 -r 2 $SPEC --cuda-copy-batch
done
wait $MK; grep make $OUT/make.txt
for r in a b; do
  bench q4_la_off_$r /tmp/q3_4b_q4.gguf -p 16 -n 128 -r 2 --decode-lookahead off
  bench q4_la_auto_$r /tmp/q3_4b_q4.gguf -p 16 -n 128 -r 2 --decode-lookahead auto
  bench q4_tma_$r /tmp/q3_4b_q4.gguf -p 16 -n 128 -r 2 --cuda-mv-tma-kb ${TMA_KB:-100}
done
for r in a b; do
  bench q8_la_off_$r /tmp/q3_4b_q8.gguf -p 16 -n 128 -r 2 --decode-lookahead off
  bench q8_la_auto_$r /tmp/q3_4b_q8.gguf -p 16 -n 128 -r 2 --decode-lookahead auto
  bench q8_tma_$r /tmp/q3_4b_q8.gguf -p 16 -n 128 -r 2 --cuda-mv-tma-kb ${TMA_KB:-100}
done
# the figures (issue 9's table: -p 512 -n 128) with the flags that won above
bench default models/default.gguf -p 512 -n 128 -r 2 ${FLAGS:-}
bench q3_4b_q4 /tmp/q3_4b_q4.gguf -p 512 -n 128 -r 2 ${FLAGS:-}
bench q3_4b_q8 /tmp/q3_4b_q8.gguf -p 512 -n 128 -r 2 ${FLAGS:-}
lead_collect
