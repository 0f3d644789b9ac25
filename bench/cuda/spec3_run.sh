#!/usr/bin/env bash
# helper spec3 (issue 11): one call on the H200. df_cuda_tests' speculative tests (CudaSpec*) of
# this branch, then old (main 7e809ff) and new (h-spec3) binaries side by side: the default model
# plain beside adaptive MTP, and a random qwen35 27B-shape Q4_0 model with an MTP layer (written
# here by df_make_model --fast-random while the tests and default-model benches run) at
# --draft-accept 0.8, adaptive and --draft-fixed; a --draft-max 7 run of the new binary gives the
# start-up cost table for verifies of 1..8 rows (what a cycle costs). Each bench line:
# `diskformer bench -m M --device cuda --output json ...`, plain and spec alternating in one
# process.
set -uo pipefail
D=.devcarry/spec3
B=/tmp/dfbin3
mkdir -p $B && python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $B
chmod +x $B/*
CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$CUBLAS_DIR
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee $OUT/log.txt
t0=$(date +%s)
( t=$(date +%s); [ -s /tmp/q35_27b_q4f.gguf ] || taskset -c 4-15 timeout 90 $B/df_make_model -o /tmp/q35_27b_q4f.gguf \
    --vocab-text tools/make_model/vocab_corpus.txt --arch qwen35 --preset qwen35_27b --type q4_0 --mtp-layers 1 \
    --fast-random > /dev/null 2>> $OUT/log.txt
  echo "make 27b rc=$? $(( $(date +%s) - t )) s" >> $OUT/log.txt ) &
MK=$!
t=$(date +%s)
taskset -c 0-3 timeout 60 $B/df_cuda_tests --gtest_filter='CudaSpec*' > $OUT/cuda_spec_tests.txt 2>&1
echo "df_cuda_tests CudaSpec* rc=$? $(( $(date +%s) - t )) s"
grep -E "^\[  FAILED  \]|tests ran|PASSED  \]|SKIPPED  \]" $OUT/cuda_spec_tests.txt | head -20
DEADLINE=${DEADLINE:-175}  # seconds after t0: later benches are skipped (this helper's device share)
bench() {  # name binary timeout model args...
  local name=$1 bin=$2 to=$3 model=$4; shift 4
  local left=$(( DEADLINE - ($(date +%s) - t0) ))
  if (( left < 8 )); then echo "bench $name skipped (deadline)"; return; fi
  (( to > left )) && to=$left
  local t=$(date +%s)
  taskset -c 0-3 timeout $to $B/$bin bench -m "$model" --device cuda --output json "$@" > /tmp/bench_$name.json 2>> $OUT/log.txt
  echo "bench $name rc=$? $(( $(date +%s) - t )) s (at $(( $(date +%s) - t0 )) s)"
  python3 -c "
import json,sys
a=json.load(open(sys.argv[1])); d=a['spec']
print(sys.argv[2], 'spec %.1f plain %.1f tok/s x%.3f  accepted %d/%d  cycles_at %s  by position %s  identical %s' % (d['spec_tokens_per_second'], d['plain_tokens_per_second'], d['speedup'], d['accepted'], d['drafted'], d['cycles_at'], ['%.3f' % x for x in d['acceptance_at']], d['identical_to_plain']))
print('   verify ms', ['%.3f' % (1e3*x) for x in d['cost_verify_seconds']], 'head %.3f catch-up %.3f' % (1e3*d['cost_head_seconds'], 1e3*d['cost_head_catchup_seconds']), 'estimate ms', ['%.3f' % (1e3*x) for x in d['cycle_estimate_seconds']], 'runs', ['%.0f' % x for x in d['plain_runs']], ['%.0f' % x for x in d['spec_runs']], 'startup', d.get('startup_cost_table_seconds'))
a['name']=sys.argv[2]; a['args']=sys.argv[3]; open(sys.argv[4],'a').write(json.dumps(a)+'\n')" /tmp/bench_$name.json $name "$*" $OUT/benches.jsonl || tail -3 $OUT/log.txt
}
H="-p 64 -n 256 -r 2 --spec mtp --draft-max 3 --spec-prompt models/heldout.txt"
bench default_old diskformer_old 30 models/default.gguf $H
bench default_new diskformer 30 models/default.gguf $H
bench default_old2 diskformer_old 30 models/default.gguf $H
bench default_new2 diskformer 30 models/default.gguf $H
bench default_new_d7_table diskformer 30 models/default.gguf -p 64 -n 64 -r 1 --spec mtp --draft-max 7 --draft-fixed --spec-prompt models/heldout.txt
wait $MK
grep "make 27b" $OUT/log.txt
R="-p 32 -n 64 -r 1 --spec mtp --draft-max 3 --draft-accept 0.8"
bench q35_old_adaptive diskformer_old 30 /tmp/q35_27b_q4f.gguf $R
bench q35_new_adaptive diskformer 30 /tmp/q35_27b_q4f.gguf $R
bench q35_old_fixed diskformer_old 30 /tmp/q35_27b_q4f.gguf $R --draft-fixed
bench q35_new_fixed diskformer 30 /tmp/q35_27b_q4f.gguf $R --draft-fixed
bench q35_new_d7_table diskformer 30 /tmp/q35_27b_q4f.gguf -p 32 -n 16 -r 1 --spec mtp --draft-max 7 --draft-fixed --draft-accept 0.8
echo "total $(( $(date +%s) - t0 )) s"
