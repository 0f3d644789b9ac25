#!/usr/bin/env bash
# One call on the GPU machine for the second prefill round (issue 10): the workbench
# (bench_prefill_cuda: GEMM tiles vs cuBLAS slabs, delta rule lanes per row), the CUDA tests,
# an ncu kernel profile of prefill on the qwen35 27B shape with 4 of its 64 layers, and
# `diskformer bench --device cuda -p ...` old (OLD/diskformer, main's) vs new beside each other
# on random models of the real shapes written there by df_make_model.
# Usage: prefill2_run.sh BIN OUT STAGES   (STAGES: comma list of wb,tests,prof,b4,b27,b27long;
#   BIN: the new binaries, BIN/old/diskformer main's, BIN/lib the shared libraries they need)
set -uo pipefail
BIN=$1
OUT=$2
STAGES=",${3:-wb,tests,b4},"
has() { [[ $STAGES == *",$1,"* ]]; }
CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ /opt /usr/lib -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$BIN/lib:$CUBLAS_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
echo "cublas from $CUBLAS_DIR" | tee -a "$OUT/log.txt"
VOCAB=tools/make_model/vocab_corpus.txt
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee -a "$OUT/log.txt"
mk() {  # name preset type [extra]
  ( /usr/bin/time -f "make $1: %e s" timeout 300 "$BIN/df_make_model" -o "/tmp/$1.gguf" --preset "$2" --type "$3" ${4:-} \
      --vocab-text $VOCAB > /dev/null 2>> "$OUT/make.txt"; touch "/tmp/$1.done" ) &
}
waitfor() { for _ in $(seq 1 300); do [[ -e /tmp/$1.done ]] && return; sleep 1; done; }
has b4 && { mk q3_4b_q8 qwen3_4b q8_0; mk q3_4b_q4 qwen3_4b q4_0; }
has prof && mk q35_27b_l4_q4 qwen35_27b q4_0 --layers=4
{ has b27 || has b27long; } && mk q35_27b_q4 qwen35_27b q4_0
if has wb; then
  timeout 200 "$BIN/bench_prefill_cuda" --out "$OUT/prefill.json" --formats q8_0,q4_0,q4_k,q6_k --ns ${NS:-512,2048} \
    > "$OUT/prefill.txt" 2>&1
  echo "workbench rc=$?"
  grep -E "FAIL|failures|error" "$OUT/prefill.txt" | head -20
  grep -E "^(speed|attention|delta|  token|  flash)" "$OUT/prefill.txt" | cut -c1-230
fi
if has tests; then
  timeout 200 "$BIN/df_cuda_tests" > "$OUT/tests.txt" 2>&1
  echo "tests rc=$?"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) " "$OUT/tests.txt" | cut -c1-120 | head -30
  grep -B2 -A6 "Failure" "$OUT/tests.txt" | cut -c1-200 | head -40
fi
bench() {  # label binary model args...
  local label=$1 exe=$2 model=$3
  shift 3
  timeout 200 "$exe" bench -m "/tmp/$model.gguf" --device cuda --output json -n 0 "$@" > "$OUT/b_$label.json" 2>> "$OUT/log.txt"
  local rc=$?
  python3 -c "
import json,sys
d=json.load(open(sys.argv[1]))
for e in d['prefill']: print('%-22s pp%-6d %8.0f tok/s (sd %.0f)  ttft %.1f ms' % (sys.argv[2], e['n_prompt'], e['tokens_per_second'], e['stddev'], e['time_to_first_token_ms']))
" "$OUT/b_$label.json" "$label" || { echo "bench $label rc=$rc"; tail -3 "$OUT/log.txt"; }
}
if has prof; then
  waitfor q35_27b_l4_q4
  timeout 240 ncu --clock-control none --metrics gpu__time_duration.sum --csv --log-file "$OUT/ncu.csv" \
    "$BIN/diskformer" bench -m /tmp/q35_27b_l4_q4.gguf --device cuda -p 512 -n 0 -r 2 > /dev/null 2>&1
  echo "ncu rc=$?"
  python3 "$(dirname "$0")/ncu_period.py" "$OUT/ncu.csv" | tee "$OUT/profile.txt"
  rm -f /tmp/q35_27b_l4_q4.gguf
fi
if has b4; then
  for m in q3_4b_q8 q3_4b_q4; do
    waitfor $m
    bench "${m}_old" "$BIN/old/diskformer" $m -p 512,8192 -r 2
    bench "${m}_new" "$BIN/diskformer" $m -p 512,8192 -r 2
    [[ $m == q3_4b_q4 ]] && bench "${m}_new_b2048" "$BIN/diskformer" $m -p 8192 -r 2 -b 2048
  done
fi
if has b27 || has b27long; then
  waitfor q35_27b_q4
  grep make "$OUT/make.txt"
  has b27 && bench q35_27b_q4_old "$BIN/old/diskformer" q35_27b_q4 -p 512,8192 -r 1
  has b27 && bench q35_27b_q4_new "$BIN/diskformer" q35_27b_q4 -p 512,8192 -r 2
  has b27long && bench q35_27b_q4_new_32k "$BIN/diskformer" q35_27b_q4 -p 32768 -r 1
fi
python3 -c "
import json,glob,os
out={os.path.basename(f)[2:-5]: json.load(open(f)) for f in sorted(glob.glob(os.environ['OUT']+'/b_*.json')) if os.path.getsize(f)>0}
json.dump(out, open(os.environ['OUT']+'/benches.json','w'), indent=1)" 2>/dev/null
rm -f "$OUT"/b_*.json
