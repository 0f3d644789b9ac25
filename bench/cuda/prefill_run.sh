#!/usr/bin/env bash
# One call on the GPU machine for the prefill work (issue 10): the prefill workbench
# (bench_prefill_cuda), the CUDA tests, and `diskformer bench --device cuda -p 512,8192 -n 0`
# on random models of the real shapes (qwen3 4B Q8_0 / Q4_0, qwen35 27B Q4_0) written there by
# df_make_model (in parallel, while the GPU runs the tests). BIN: binaries built on the dev
# machine (BIN/lib: shared libraries they need that the GPU machine may lack). Results in OUT.
# Usage: prefill_run.sh BIN OUT [all|quick] [PROMPTS]
#   all:   workbench, tests, benches of the three models (the 27B file takes ~140 s to write)
#   quick: tests and benches, the 27B shape with 16 of its 64 layers (same layer mix)
set -uo pipefail
BIN=$1
OUT=$2
WHAT=${3:-all}
PROMPTS=${4:-512,8192}
export LD_LIBRARY_PATH=$BIN/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
VOCAB=tools/make_model/vocab_corpus.txt
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee -a "$OUT/log.txt"
BIG="q35_27b_q4:qwen35_27b:q4_0:"
[[ $WHAT == quick ]] && BIG="q35_27b_l16_q4:qwen35_27b:q4_0:--layers=16"  # no space: MODELS splits on it
MODELS="q3_4b_q8:qwen3_4b:q8_0: q3_4b_q4:qwen3_4b:q4_0: $BIG"
for m in $MODELS; do
  IFS=: read -r name preset type extra <<< "$m"
  ( /usr/bin/time -f "make $name: %e s" timeout 240 "$BIN/df_make_model" -o "/tmp/$name.gguf" --preset "$preset" \
      --type "$type" $extra --vocab-text $VOCAB > /dev/null 2>> "$OUT/make.txt"
    touch "/tmp/$name.done" ) &
done
if [[ $WHAT == all ]]; then
  timeout 150 "$BIN/bench_prefill_cuda" --out "$OUT/prefill.json" > "$OUT/prefill.txt" 2>&1
  echo "prefill workbench rc=$?"
  grep -E "FAIL|failures|error" "$OUT/prefill.txt" | head -20
  grep -E "^(speed|attention|delta)" "$OUT/prefill.txt" | cut -c1-170
fi
timeout 150 "$BIN/df_cuda_tests" > "$OUT/tests.txt" 2>&1
echo "tests rc=$?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |perplexity" "$OUT/tests.txt" | cut -c1-120 | head -30
grep -E "worst per-position" "$OUT/tests.txt" | cut -c1-150 | head -60
grep -B2 -A6 "Failure" "$OUT/tests.txt" | cut -c1-200 | head -40
for m in $MODELS; do
  IFS=: read -r name preset type extra <<< "$m"
  for _ in $(seq 1 240); do [[ -e /tmp/$name.done ]] && break; sleep 1; done
  grep "make $name" "$OUT/make.txt"
  timeout 150 "$BIN/diskformer" bench -m "/tmp/$name.gguf" --device cuda --output json -p "$PROMPTS" -n 0 -r 2 \
    > "$OUT/bench_$name.json" 2>> "$OUT/log.txt"
  echo "bench $name rc=$?"
  python3 -c "
import json,sys
d=json.load(open(sys.argv[1]))
for e in d['prefill']: print(sys.argv[2], 'pp%d %.0f tok/s (sd %.0f), time to first token %.1f ms' % (e['n_prompt'], e['tokens_per_second'], e['stddev'], e['time_to_first_token_ms']))
" "$OUT/bench_$name.json" "$name" || tail -3 "$OUT/log.txt"
  rm -f "/tmp/$name.gguf"
done
