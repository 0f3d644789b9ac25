#!/usr/bin/env bash
# One call on the GPU machine (see /work/.library/device): the CUDA tests, then
# `diskformer bench --device cuda` on the default model and on random models of the real
# shapes written there by df_make_model. Binaries come from BIN (built on the dev machine);
# every result lands in OUT as JSON / text. Usage: device_run.sh BIN OUT [tests|bench|prof|big|all]
set -uo pipefail
BIN=$1
OUT=$2
WHAT=${3:-all}
VOCAB=tools/make_model/vocab_corpus.txt
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee -a "$OUT/log.txt"
if [[ $WHAT == tests || $WHAT == all ]]; then
  timeout 240 "$BIN/df_cuda_tests" > "$OUT/tests.txt" 2>&1
  echo "tests rc=$?"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |worst|near-tie|perplexity" "$OUT/tests.txt" | cut -c1-160 | head -40
  grep -B2 -A6 "Failure" "$OUT/tests.txt" | cut -c1-200 | head -60
fi
bench() {  # name model args...
  local name=$1 model=$2
  shift 2
  timeout 150 "$BIN/diskformer" bench -m "$model" --device cuda --output json "$@" > "$OUT/bench_$name.json" 2>> "$OUT/log.txt"
  echo "bench $name rc=$?"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[2], 'tg %.1f tok/s  %.1f GB/s  %.1f %% of %.0f GB/s  pp %.0f tok/s  bytes/token %d' % (d['decode_tokens_per_second'], d['decode_weight_gb_per_second'], 100*d.get('decode_share_of_read_bandwidth',0), d.get('device_read_gb_per_second',0), d['prefill_tokens_per_second'], d['bytes_per_token']))" "$OUT/bench_$name.json" "$name" || tail -3 "$OUT/log.txt"
}
make() {  # file args...
  local f=$1
  shift
  /usr/bin/time -f "make $f: %e s" timeout 240 "$BIN/df_make_model" -o "$f" --vocab-text $VOCAB "$@" > /dev/null 2>> "$OUT/log.txt"
  tail -1 "$OUT/log.txt"
}
if [[ $WHAT == bench || $WHAT == all ]]; then
  bench default models/default.gguf -p 512 -n 128 -r 3
  make /tmp/q3_4b_q8.gguf --preset qwen3_4b --type q8_0 && bench qwen3_4b_q8_0 /tmp/q3_4b_q8.gguf -p 128 -n 128 -r 2
  make /tmp/q3_4b_q4.gguf --preset qwen3_4b --type q4_0 && bench qwen3_4b_q4_0 /tmp/q3_4b_q4.gguf -p 128 -n 128 -r 2
  rm -f /tmp/q3_*.gguf
fi
if [[ $WHAT == prof ]]; then  # where a decode step's time goes: kernel durations by ncu
  make /tmp/q3_06b_q8.gguf --preset qwen3_06b --type q8_0
  bench qwen3_06b_q8_0 /tmp/q3_06b_q8.gguf -p 16 -n 64 -r 2
  bench qwen3_06b_q8_0_nographs /tmp/q3_06b_q8.gguf -p 16 -n 64 -r 2 --no-graphs
  timeout 200 ncu --clock-control none --metrics gpu__time_duration.sum --csv --log-file "$OUT/ncu.csv" \
    "$BIN/diskformer" bench -m /tmp/q3_06b_q8.gguf --device cuda -p 0 -n 4 -r 1 > /dev/null 2>&1
  echo "ncu rc=$?"
  python3 - "$OUT/ncu.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; rows = rows[1:]
ki, vi = hdr.index("Kernel Name"), hdr.index("Metric Value")
tot = collections.defaultdict(float); cnt = collections.Counter()
for r in rows:
    try: v = float(r[vi].replace(",", ""))
    except ValueError: continue
    name = r[ki].split("(")[0][:70]
    tot[name] += v; cnt[name] += 1
all_ns = sum(tot.values())
print("kernels %d, total %.3f ms" % (sum(cnt.values()), all_ns / 1e6))
for n, v in sorted(tot.items(), key=lambda x: -x[1])[:14]:
    print("%8.3f ms %6d  %7.2f us/call  %s" % (v / 1e6, cnt[n], v / cnt[n] / 1e3, n))
PY
fi
if [[ $WHAT == big || $WHAT == all ]]; then
  make /tmp/q35_27b_q4.gguf --preset qwen35_27b --type q4_0 && bench qwen35_27b_q4_0 /tmp/q35_27b_q4.gguf -p 64 -n 128 -r 2
fi
if [[ $WHAT == small || $WHAT == all ]]; then
  make /tmp/q3_06b_q8.gguf --preset qwen3_06b --type q8_0 && bench qwen3_06b_q8_0 /tmp/q3_06b_q8.gguf -p 128 -n 128 -r 2
fi
