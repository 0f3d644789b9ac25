#!/usr/bin/env bash
# One call on the GPU machine (see /work/.library/device): the CUDA tests, then
# `diskformer bench --device cuda` on the default model and on random models of the real
# shapes written there by df_make_model. Binaries come from BIN (built on the dev machine);
# every result lands in OUT as JSON / text. Usage: device_run.sh BIN OUT [tests|bench|big|all]
set -uo pipefail
BIN=$1
OUT=$2
WHAT=${3:-all}
VOCAB=tools/make_model/vocab_corpus.txt
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/gpu.txt"
if [[ $WHAT == tests || $WHAT == all ]]; then
  timeout 240 "$BIN/df_cuda_tests" --gtest_output=json:"$OUT/tests.json" > "$OUT/tests.txt" 2>&1
  echo "tests rc=$?"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |worst|near-tie|perplexity" "$OUT/tests.txt" | head -40
fi
bench() {  # name model args...
  local name=$1 model=$2
  shift 2
  timeout 150 "$BIN/diskformer" bench -m "$model" --device cuda --output json "$@" > "$OUT/bench_$name.json" 2> "$OUT/bench_$name.err"
  echo "bench $name rc=$?"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[2], 'tg %.1f tok/s  %.1f GB/s  %.1f %% of %.0f GB/s  pp %.0f tok/s  bytes/token %d' % (d['decode_tokens_per_second'], d['decode_weight_gb_per_second'], 100*d.get('decode_share_of_read_bandwidth',0), d.get('device_read_gb_per_second',0), d['prefill_tokens_per_second'], d['bytes_per_token']))" "$OUT/bench_$name.json" "$name" || tail -3 "$OUT/bench_$name.err"
}
make() {  # file args...
  local f=$1
  shift
  /usr/bin/time -f "make $f: %e s" timeout 240 "$BIN/df_make_model" -o "$f" --vocab-text $VOCAB "$@" > /dev/null 2>> "$OUT/make.txt"
  tail -1 "$OUT/make.txt"
}
if [[ $WHAT == bench || $WHAT == all ]]; then
  bench default models/default.gguf -p 512 -n 128 -r 3
  make /tmp/q3_06b_q8.gguf --preset qwen3_06b --type q8_0 && bench qwen3_06b_q8_0 /tmp/q3_06b_q8.gguf -p 128 -n 128 -r 2
  make /tmp/q3_4b_q8.gguf --preset qwen3_4b --type q8_0 && bench qwen3_4b_q8_0 /tmp/q3_4b_q8.gguf -p 128 -n 128 -r 2
  make /tmp/q3_4b_q4.gguf --preset qwen3_4b --type q4_0 && bench qwen3_4b_q4_0 /tmp/q3_4b_q4.gguf -p 128 -n 128 -r 2
  rm -f /tmp/q3_*.gguf
fi
if [[ $WHAT == big || $WHAT == all ]]; then
  make /tmp/q35_27b_q4.gguf --preset qwen35_27b --type q4_0 && bench qwen35_27b_q4_0 /tmp/q35_27b_q4.gguf -p 64 -n 128 -r 2
fi
