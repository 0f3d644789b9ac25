#!/usr/bin/env bash
# One call on the GPU machine for the prefill work (issue 10): the prefill workbench (bench_prefill_cuda), the CUDA
# tests, and `diskformer bench --device cuda -p 512,8192 -n 0` on random models of the real
# shapes (qwen3 4B Q8_0 / Q4_0, qwen35 27B Q4_0) written there by df_make_model while the
# GPU runs the first two. BIN: binaries built on the dev machine. Everything lands in OUT.
# Usage: prefill_run.sh BIN OUT [PROMPTS]   (PROMPTS default 512,8192)
set -uo pipefail
BIN=$1
OUT=$2
PROMPTS=${3:-512,8192}
VOCAB=tools/make_model/vocab_corpus.txt
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee -a "$OUT/log.txt"
MODELS="q3_4b_q8:qwen3_4b:q8_0 q3_4b_q4:qwen3_4b:q4_0 q35_27b_q4:qwen35_27b:q4_0"
(
  for m in $MODELS; do
    IFS=: read -r name preset type <<< "$m"
    /usr/bin/time -f "make $name: %e s" timeout 240 "$BIN/df_make_model" -o "/tmp/$name.gguf" --preset "$preset" \
      --type "$type" --vocab-text $VOCAB > /dev/null 2>> "$OUT/make.txt"
    touch "/tmp/$name.done"
  done
) &
timeout 150 "$BIN/bench_prefill_cuda" --out "$OUT/prefill.json" > "$OUT/prefill.txt" 2>&1
echo "prefill workbench rc=$?"
grep -E "FAIL|failures|error" "$OUT/prefill.txt" | head -20
grep -E "^(speed|attention|delta)" "$OUT/prefill.txt" | cut -c1-170
run_tests() {
  timeout 120 "$BIN/df_cuda_tests" > "$OUT/tests.txt" 2>&1
  echo "tests rc=$?"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |worst|perplexity" "$OUT/tests.txt" | grep -v "worst per-position NMSE [0-9.e-]* (budget" | cut -c1-160 | head -30
  grep -E "worst per-position" "$OUT/tests.txt" | sort -t' ' -k1,1 | cut -c1-150 | head -60
  grep -B2 -A6 "Failure" "$OUT/tests.txt" | cut -c1-200 | head -40
}
bench_model() {  # name: waits for the file, benches it, removes it
  local name=$1
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
}
# the benches of the 4B shapes, the tests while the 27B file is written, then its bench
bench_model q3_4b_q8
bench_model q3_4b_q4
run_tests
bench_model q35_27b_q4
