#!/usr/bin/env bash
# Helper decops's device run (issue 9: the decode step's small kernels, PDL, bench --profile):
# df_cuda_tests of the branch, then decode benches of the default model, qwen3 4B Q8_0 and
# qwen35 27B Q4_0 (random weights of the real shapes, written here by df_make_model), each
# with the lean small kernels (default, with --profile) beside --plain-small-kernels (the
# launches of main: PDL on the matvecs only, attention's merge kernel, one argmax block) and
# --no-pdl, in the same run. Usage (device machine, repo root): bash .devcarry/decops/run.sh
set -uo pipefail
D=.devcarry/decops
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
chmod +x $D/diskformer $D/df_make_model $D/df_cuda_tests
CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$PWD/$D/lib:$CUBLAS_DIR
VOCAB=tools/make_model/vocab_corpus.txt
T0=$SECONDS
mk() { local f=$1; shift; [ -s "$f" ] && return; "$D/df_make_model" -o "$f.tmp" --vocab-text $VOCAB "$@" > /dev/null 2>> $OUT/make.txt && mv "$f.tmp" "$f"; echo "make $f rc=$? $((SECONDS - T0)) s" >> $OUT/make.txt; }
( mk /tmp/q3_4b_q8.gguf --preset qwen3_4b --type q8_0 & mk /tmp/q35_27b_q4f.gguf --arch qwen35 --preset qwen35_27b --type q4_0 --mtp-layers 1 --fast-random & wait ) &
MK=$!
timeout 150 $D/df_cuda_tests > $OUT/tests.txt 2>&1; echo "df_cuda_tests rc=$? $((SECONDS - T0)) s"
grep -E "^\[  FAILED  \]|tests ran|PASSED  \]|SKIPPED  \]" $OUT/tests.txt | cut -c1-150 | head -30
grep -B3 -A8 "Failure" $OUT/tests.txt | cut -c1-200 | head -40
bench() {  # name timeout model args...
  local name=$1 to=$2 model=$3; shift 3
  timeout $to $D/diskformer bench -m "$model" --device cuda --output json "$@" > $OUT/b_$name.json 2> $OUT/err_$name.txt
  echo "bench $name rc=$? $((SECONDS - T0)) s"
  python3 -c "
import json,sys; d=json.load(open(sys.argv[1]))
print('%-16s tg %7.1f tok/s %6.3f ms %7.1f GB/s %5.1f %% of %.0f GB/s' % (sys.argv[2], d['decode_tokens_per_second'], d['decode_ms_per_token'], d['decode_weight_gb_per_second'], 100*d.get('decode_share_of_read_bandwidth',0), d.get('device_read_gb_per_second',0)))
" $OUT/b_$name.json $name || tail -3 $OUT/err_$name.txt
  grep -A40 "^profile:" $OUT/err_$name.txt | head -40
}
bench default_lean 40 models/default.gguf -p 512 -n 128 -r 2 --profile
bench default_plain 40 models/default.gguf -p 512 -n 128 -r 2 --plain-small-kernels --profile
bench default_nopdl 40 models/default.gguf -p 512 -n 128 -r 2 --no-pdl
wait $MK; grep make $OUT/make.txt
bench q3_4b_q8_lean 60 /tmp/q3_4b_q8.gguf -p 512 -n 128 -r 2 --profile
bench q3_4b_q8_plain 60 /tmp/q3_4b_q8.gguf -p 512 -n 128 -r 2 --plain-small-kernels
bench q3_4b_q8_nopdl 60 /tmp/q3_4b_q8.gguf -p 512 -n 128 -r 2 --no-pdl
bench q35_27b_lean 90 /tmp/q35_27b_q4f.gguf -p 512 -n 64 -r 2 --profile
bench q35_27b_plain 90 /tmp/q35_27b_q4f.gguf -p 512 -n 64 -r 2 --plain-small-kernels
python3 -c "
import json,glob,os
out={os.path.basename(f)[2:-5]: json.load(open(f)) for f in glob.glob(os.environ['OUT']+'/b_*.json') if os.path.getsize(f)>0}
json.dump(out, open(os.environ['OUT']+'/benches.json','w'), indent=1)"
rm -f $OUT/b_*.json
echo "total $((SECONDS - T0)) s"
