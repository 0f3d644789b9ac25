#!/usr/bin/env bash
# Lead's device run, stop 32 (issue 9: where a qwen3 4B decode step's time goes at short context).
#   PART=prof: qwen3 4B Q4_0 / Q8_0 (df_make_model --preset qwen3_4b): bench, then bench --profile
#     at positions 16..80 (-p 16 -n 64) and 512..576; the profile tables into $OUT/prof_*.txt.
#   PART=trace: the matvec chain of the 4B shapes (bench_matvec_cuda --chain, PDL on and off) and
#     one replay with every launch's per-block phase stamps (--chain-trace: where a launch's
#     ~10 us go: entry after the previous launch, release from griddepcontrol.wait, x prologue,
#     products); its own carry (move models/default.gguf out of the checkout for the call):
#     bench/cuda/pack.sh .devcarry/lf32b build/bench/cuda/bench_matvec_cuda
#   PART=tests: df_cuda_tests only.
#   bench/cuda/pack.sh .devcarry/lf32 build/tests/df_cuda_tests build/diskformer build/df_make_model
#   PART=prof CARRY=.devcarry/lf32 bash bench/cuda/lead/stop32_run.sh
#   PART=trace CARRY=.devcarry/lf32b bash bench/cuda/lead/stop32_run.sh
set -uo pipefail
source bench/cuda/lead/lib.sh
lead_unpack ${CARRY:-.devcarry/lf32}
lead_tests_only 330
if [ "${PART:-prof}" = trace ]; then
  chmod +x $D/bench_matvec_cuda
  timeout 300 $D/bench_matvec_cuda --no-variants --chain ${CHAINS:-q4_0:4b,q8_0:4b} --chain-cfgs 1:0:0,0:0:0 \
    --chain-trace --out $OUT/chain_trace.json > $OUT/chain_trace.txt 2>&1
  echo "chain trace rc=$? $((SECONDS - T0)) s"; cat $OUT/chain_trace.txt | cut -c1-160 | tail -40
  lead_collect
  exit 0
fi
if [ "${PART:-prof}" = prof ]; then
  ( for m in ${MODELS:-q4_0 q8_0}; do mk /tmp/q3_4b_$m.gguf --preset qwen3_4b --type $m & done; wait )
  grep make $OUT/make.txt
  for m in ${MODELS:-q4_0 q8_0}; do
    bench ${m} /tmp/q3_4b_$m.gguf -p 16 -n 128 -r 2 ${BENCH_ARGS:-}
    prof ${m}_p16 /tmp/q3_4b_$m.gguf -p 16 -n 64 -r 1 ${BENCH_ARGS:-}
  done
  prof q4_0_p512 /tmp/q3_4b_q4_0.gguf -p 512 -n 64 -r 1 ${BENCH_ARGS:-}
fi
lead_collect
