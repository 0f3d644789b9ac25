#!/usr/bin/env bash
# Lead's final device run, part 2 (stop 20): the benches of final main on the default model and the
# real-shape random models that part 1 (stop20_tests_run.sh) wrote into /tmp on the same warm machine.
set -uo pipefail
D=.devcarry/lfb
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
chmod +x $D/diskformer $D/df_make_model
CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$PWD/$D/lib:$CUBLAS_DIR
VOCAB=tools/make_model/vocab_corpus.txt
T0=$SECONDS
for f in /tmp/q3_4b_q8.gguf /tmp/q3_4b_q4.gguf /tmp/q35_27b_q4f.gguf /dev/shm/a3b_L40.gguf; do [ -s $f ] || echo "missing $f (part 1 makes it)"; done
bench() {  # name model args...
  local name=$1 model=$2; shift 2
  timeout 100 $D/diskformer bench -m "$model" --device cuda --output json "$@" > $OUT/b_$name.json 2>> $OUT/log.txt
  echo "bench $name rc=$? $((SECONDS - T0)) s"
  python3 -c "
import json,sys; d=json.load(open(sys.argv[1]))
print('%-14s tg %7.1f tok/s %7.1f GB/s %5.1f %% of %.0f GB/s' % (sys.argv[2], d['decode_tokens_per_second'], d['decode_weight_gb_per_second'], 100*d.get('decode_share_of_read_bandwidth',0), d.get('device_read_gb_per_second',0)))
for p in d.get('prefill', []): print('   prefill', {k: (round(v,1) if isinstance(v,float) else v) for k,v in p.items()})
s=d.get('spec')
if s: print('   spec', {k: (round(v,3) if isinstance(v,float) else v) for k,v in s.items() if not isinstance(v,(list,dict))})
" $OUT/b_$name.json $name || tail -3 $OUT/log.txt
}
bench default models/default.gguf -p 512 -n 128 -r 2
bench default_spec models/default.gguf -p 64 -n 256 -r 2 --spec mtp --draft-max 3 --spec-prompt models/heldout.txt
bench q3_4b_q8 /tmp/q3_4b_q8.gguf -p 512 -n 128 -r 2
bench q3_4b_q4 /tmp/q3_4b_q4.gguf -p 512,8192 -n 128 -r 2
bench q35_27b_q4f /tmp/q35_27b_q4f.gguf -p 512 -n 64 -r 1
bench q35_27b_spec /tmp/q35_27b_q4f.gguf -p 32 -n 64 -r 1 --spec mtp --draft-max 3 --draft-accept 0.8
bench a3b_L40 /dev/shm/a3b_L40.gguf -p 512 -n 128 -r 2
bench q3_4b_q4_prof /tmp/q3_4b_q4.gguf -p 512 -n 32 -r 1 --profile
# half of the 40 layers' 17280 MiB of experts (moe3: 1728 MiB at 4 layers), only if time is left
[ $((SECONDS - T0)) -lt 170 ] && bench a3b_L40_half /dev/shm/a3b_L40.gguf -p 0 -n 64 -r 1 --expert-cache-mb 8640
python3 -c "
import json,glob,os
out={os.path.basename(f)[2:-5]: json.load(open(f)) for f in glob.glob(os.environ['OUT']+'/b_*.json') if os.path.getsize(f)>0}
json.dump(out, open(os.environ['OUT']+'/benches.json','w'), indent=1)"
rm -f $OUT/b_*.json
