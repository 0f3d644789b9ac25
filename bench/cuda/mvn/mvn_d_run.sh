#!/usr/bin/env bash
# helper mvn (issue 11), device call D: why call C's 27B verify costs were the same with and
# without --mv-no-pipe-rows. A 16-layer file of the 27B's widths (qwen35_27b preset, --layers 16),
# the cost table of verify 1..8 rows (--draft-max 7) under: default, --mv-no-pipe-rows,
# --mv-no-pipe, --no-cuda-fuse-deltanet.
# Carry: .devcarry/mvn/d/bins.tar.xz (diskformer, df_make_model, lib/).
set -uo pipefail
D=.devcarry/mvn/d
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
chmod +x $D/diskformer $D/df_make_model
CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$PWD/$D/lib:$CUBLAS_DIR
export CUDA_DISABLE_PTX_JIT=1  # the carried binaries hold sm_90 SASS only (pack.sh, zero_ptx.py)
VOCAB=tools/make_model/vocab_corpus.txt
T0=$SECONDS
M=/tmp/q35_27b_L16.gguf
timeout 60 $D/df_make_model -o $M --vocab-text $VOCAB --arch qwen35 --preset qwen35_27b --layers 16 --type q4_0 --mtp-layers 1 --fast-random > /dev/null
echo "make rc=$? $((SECONDS - T0)) s"
bench() {  # name args...
  local name=$1; shift
  timeout 40 $D/diskformer bench -m $M --device cuda --output json -p 32 -n 64 -r 1 --spec mtp --draft-max 7 --draft-fixed --draft-accept 0.8 "$@" > $OUT/b_$name.json 2>> $OUT/log.txt
  echo "bench $name rc=$? $((SECONDS - T0)) s"
  python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); s=d['spec']
c=s['cost_table_seconds']
print('%-10s plain %.1f mtp %.1f tok/s; verify ms 1..%d rows %s' % (sys.argv[2], s['plain_tokens_per_second'], s['spec_tokens_per_second'], len(c), [round(1e3*v,3) for v in c]))
" $OUT/b_$name.json $name || tail -3 $OUT/log.txt
}
bench new
bench norows --mv-no-pipe-rows
bench nopipe --mv-no-pipe
bench new2
bench nodnfuse --no-cuda-fuse-deltanet
python3 -c "
import json,glob,os
out={os.path.basename(f)[2:-5]: json.load(open(f)) for f in glob.glob(os.environ['OUT']+'/b_*.json') if os.path.getsize(f)>0}
json.dump(out, open(os.environ['OUT']+'/benches_d.json','w'), indent=1)"
rm -f $OUT/b_*.json; grep -av "loading \[" $OUT/log.txt | grep -v "^\s*$" | tail -5
