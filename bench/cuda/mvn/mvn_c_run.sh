#!/usr/bin/env bash
# helper mvn (issue 11), device call C of three (warm, right after B): decode and MTP speculative
# benches, new (pipelined loads at n = 1..8) beside old (--mv-no-pipe-rows: n = 2..8 in the
# previous loop, main's kernels), on the default model (real head, held-out text) and on the
# 27B Q4_0 MTP file that call B wrote into /tmp (--draft-accept 0.8): the lead's stop-20 commands
# (bench/cuda/lead/stop20_bench_run.sh). The spec bench runs plain and MTP side by side.
# Carry: .devcarry/mvn/c/bins.tar.xz (diskformer, lib/; xz -9e: the transfer limit).
set -uo pipefail
D=.devcarry/mvn/c
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
chmod +x $D/diskformer
CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$PWD/$D/lib:$CUBLAS_DIR
VOCAB=tools/make_model/vocab_corpus.txt
export CUDA_DISABLE_PTX_JIT=1  # the carried binaries hold sm_90 SASS only (pack.sh, zero_ptx.py)
T0=$SECONDS
M27=/tmp/q35_27b_q4f.gguf
[ -s $M27 ] || echo "missing $M27 (call B makes it): the 27B benches will fail"
bench() {  # name model args...
  local name=$1 model=$2; shift 2
  timeout 100 $D/diskformer bench -m "$model" --device cuda --output json "$@" > $OUT/b_$name.json 2>> $OUT/log.txt
  echo "bench $name rc=$? $((SECONDS - T0)) s"
  python3 -c "
import json,sys; d=json.load(open(sys.argv[1]))
print('%-18s tg %7.1f tok/s' % (sys.argv[2], d['decode_tokens_per_second']))
s=d.get('spec')
if s:
  print('   plain %.1f mtp %.1f tok/s speedup %.3f; acceptance %s; cycles at depth %s' % (s['plain_tokens_per_second'], s['spec_tokens_per_second'], s['speedup'], [round(a,3) for a in s['acceptance_at']], s['cycles_at']))
  c=s['cost_table_seconds']; print('   cost table: verify ms of 1..%d rows %s = %s steps; head row ms %.3f; identical %s' % (len(c), [round(1e3*v,3) for v in c], [round(v/c[0],3) for v in c], 1e3*s['cost_head_seconds'], s['identical_to_plain']))
" $OUT/b_$name.json $name || tail -3 $OUT/log.txt
}
bench default_spec_new models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 --spec-prompt models/heldout.txt
bench default_spec_old models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 --spec-prompt models/heldout.txt --mv-no-pipe-rows
bench q35_27b_spec_new $M27 -p 32 -n 64 -r 1 --spec mtp --draft-max 3 --draft-accept 0.8
bench q35_27b_spec_old $M27 -p 32 -n 64 -r 1 --spec mtp --draft-max 3 --draft-accept 0.8 --mv-no-pipe-rows
[ $((SECONDS - T0)) -lt 120 ] && bench q35_27b_fixed3_new $M27 -p 32 -n 64 -r 1 --spec mtp --draft-max 3 --draft-fixed --draft-accept 0.8
python3 -c "
import json,glob,os
out={os.path.basename(f)[2:-5]: json.load(open(f)) for f in glob.glob(os.environ['OUT']+'/b_*.json') if os.path.getsize(f)>0}
json.dump(out, open(os.environ['OUT']+'/benches.json','w'), indent=1)"
rm -f $OUT/b_*.json
grep -av "loading \[" $OUT/log.txt > $OUT/log_clean.txt; rm -f $OUT/log.txt
