#!/usr/bin/env bash
# Stop 42: the file tier's cudaErrorIllegalAddress (call 2: `bench --expert-source file
# --expert-cache-mb 8640` on the 40-layer 35B-A3B Q4_K with an MTP layer in /dev/shm), narrowed on
# 4-layer files of the same shape: with / without the MTP layer, /dev/shm / /tmp, lookahead on / off,
# then compute-sanitizer on the first failing setting.
set -uo pipefail
source bench/cuda/lead/lib.sh
lead_unpack ${CARRY:-.devcarry/lf42}
mk /dev/shm/a4m.gguf --arch qwen35moe --preset 35b-a3b --layers 4 --row-pool 256 --type q4_k --mtp-layers 1 &
mk /dev/shm/a4.gguf --arch qwen35moe --preset 35b-a3b --layers 4 --row-pool 256 --type q4_k &
wait; grep make $OUT/make.txt
cp /dev/shm/a4m.gguf /tmp/a4m.gguf
SAN=$(command -v compute-sanitizer || find /usr/local/cuda*/ -maxdepth 3 -name compute-sanitizer -type f 2>/dev/null | head -1)
echo "sanitizer: $SAN"
fail=""
run() {  # name model args...
  local name=$1 m=$2; shift 2
  timeout 60 $D/diskformer bench -m $m --device cuda --output json -q -p 16 -n 16 -r 1 "$@" > $OUT/d_$name.json 2> $OUT/d_$name.err
  local rc=$?
  echo "$name rc=$rc $((SECONDS - T0)) s: $(tail -c 300 $OUT/d_$name.err | tr '\n' ' ')"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('   tg %.1f' % d['decode_tokens_per_second'], {k: v for k,v in d.get('expert_cache',{}).items() if k in ('decode_hit_rate','slots','direct_io','all_loads')})" $OUT/d_$name.json 2>/dev/null
  [ $rc -ne 0 ] && [ -z "$fail" ] && fail="$m $*"
}
run shm_mtp /dev/shm/a4m.gguf --expert-source file --expert-cache-mb 864
run shm_mtp_nolook /dev/shm/a4m.gguf --expert-source file --expert-cache-mb 864 --decode-lookahead off
run shm_nomtp /dev/shm/a4.gguf --expert-source file --expert-cache-mb 864
run tmp_mtp /tmp/a4m.gguf --expert-source file --expert-cache-mb 864
run shm_mtp_host /dev/shm/a4m.gguf --expert-cache-mb 864
run shm_mtp_big /dev/shm/a4m.gguf --expert-source file --expert-cache-mb 3000
if [ -n "$fail" ] && [ -n "$SAN" ]; then
  echo "sanitizer on: $fail"
  timeout 200 $SAN --tool memcheck --print-limit 20 $D/diskformer bench -m $fail --device cuda --output json -q -p 16 -n 2 -r 1 \
    > $OUT/san.txt 2>&1
  echo "sanitizer rc=$? $((SECONDS - T0)) s"; grep -v "^=========     " $OUT/san.txt | head -60
fi
echo "done $((SECONDS - T0)) s"
