#!/usr/bin/env bash
# cudadec's device run: CUDA tests, then decode benches (fused vs --no-fuse, one binary, one run)
# on the default model and real-shape random models made here, then the matvec workbench.
# Usage: bash .devcarry/cudadec/run.sh [tests|bench|mv|all]...  (results under $OUT)
set -uo pipefail
D=.devcarry/cudadec
WHAT=" ${*:-all} "
has() { [[ $WHAT == *" $1 "* || $WHAT == *" all "* ]]; }
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D  # one tar.xz: the binaries share their kernels
chmod +x $D/diskformer $D/df_make_model $D/df_cuda_tests $D/bench_matvec_cuda $D/df_unit_tests 2>/dev/null
cp $D/df_make_model /tmp/ 2>/dev/null  # the model tests find df_make_model beside themselves
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee $OUT/log.txt
VOCAB=tools/make_model/vocab_corpus.txt
export LD_LIBRARY_PATH=$PWD/$D/lib  # libcurl, cpp-httplib, ... of the build machine (Debian 12)
mk() { local f=$1 t0=$SECONDS; shift; [ -s "$f" ] && { echo "$f exists" >> $OUT/make.txt; return; }; "$D/df_make_model" -o "$f" --vocab-text $VOCAB "$@" > /dev/null 2>> $OUT/make.txt; echo "make $f rc=$? $((SECONDS - t0)) s" >> $OUT/make.txt; }
if has bench; then  # models on the CPU cores while the tests run
  ( mk /tmp/q3_4b_q8.gguf --preset qwen3_4b --type q8_0 & mk /tmp/q3_4b_q4.gguf --preset qwen3_4b --type q4_0 &
    mk /tmp/q35_27b_q4.gguf --preset qwen35_27b --type q4_0 & wait; echo done > /tmp/models_done ) &
fi
if has tests; then
  timeout 240 $D/df_cuda_tests > $OUT/tests.txt 2>&1; echo "df_cuda_tests rc=$?"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED  \]|tests ran" $OUT/tests.txt | head -30
  grep -E "native cpu vs exact|vs native cpu|perplexity" $OUT/tests.txt | cut -c1-170 | head -40
  [ -x $D/df_unit_tests ] && timeout 150 $D/df_unit_tests --gtest_filter='All/BackendOps.*/cuda_*' > $OUT/harness.txt 2>&1; echo "harness rc=$?"
  grep -E "^\[  (PASSED|FAILED) |tests ran" $OUT/harness.txt | head -12
fi
bench() {  # name model args...
  local name=$1 model=$2; shift 2
  timeout 150 $D/diskformer bench -m "$model" --device cuda --output json "$@" > $OUT/b_$name.json 2>> $OUT/log.txt; python3 -c "import json,sys; a=json.load(open(sys.argv[1])) if __import__('os').path.exists(sys.argv[1]) else {}; a[sys.argv[3]]=json.load(open(sys.argv[2])); json.dump(a,open(sys.argv[1],'w'),indent=1)" $OUT/benches.json $OUT/b_$name.json $name 2>> $OUT/log.txt
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('%-22s tg %7.1f tok/s %6.3f ms  %7.1f GB/s  %5.1f %% of %.0f GB/s  pp %.0f' % (sys.argv[2], d['decode_tokens_per_second'], 1e3/d['decode_tokens_per_second'], d['decode_weight_gb_per_second'], 100*d.get('decode_share_of_read_bandwidth',0), d.get('device_read_gb_per_second',0), d['prefill_tokens_per_second']))" $OUT/b_$name.json $name || tail -2 $OUT/log.txt
}
if has bench; then
  bench default models/default.gguf -p 64 -n 128 -r 2
  while [ ! -f /tmp/models_done ]; do sleep 1; done; cat $OUT/make.txt
  bench q3_4b_q8 /tmp/q3_4b_q8.gguf -p 16 -n 128 -r 2
  bench q3_4b_q8_nofuse /tmp/q3_4b_q8.gguf -p 16 -n 128 -r 2 --no-fuse
  bench q3_4b_q4 /tmp/q3_4b_q4.gguf -p 16 -n 128 -r 2
  bench q3_4b_q4_nofuse /tmp/q3_4b_q4.gguf -p 16 -n 128 -r 2 --no-fuse
  bench q35_27b_q4 /tmp/q35_27b_q4.gguf -p 16 -n 128 -r 1
fi
if has mv; then
  timeout 150 $D/bench_matvec_cuda --out $OUT/matvec.json --formats q8_0,q4_0,q4_K,q6_K,q5_K,iq4_xs,f16,bf16 > $OUT/matvec.txt 2>&1; echo "workbench rc=$?"
  python3 - $OUT/matvec.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("read bw %.0f GB/s" % d["read_bandwidth"]["gbs_median"])
for s in d["speed"]:
    if s["type"] in ("q8_0", "q4_0", "q4_K", "q6_K", "q5_K", "iq4_xs", "f16", "bf16"):
        print("%-7s %6d x %-6d %5.1f %%  %7.1f GB/s" % (s["type"], s["rows"], s["cols"], s["default"]["1"]["pct_of_read_bw"], s["default"]["1"]["gbs"]))
PY
fi
rm -f $OUT/b_*.json
