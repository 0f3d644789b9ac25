#!/usr/bin/env bash
# helper moegpu2, part 1: starts writing the bench models (setsid: they outlive this call on a
# warm machine), then runs df_cuda_tests.
set -uo pipefail
D=.devcarry/moegpu2
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins.tar.xz $D
chmod +x $D/df_make_model $D/df_cuda_tests
cp $D/df_make_model /tmp/moegpu2_make_model
V=$PWD/tools/make_model/vocab_corpus.txt
cat > /tmp/moegpu2_mk.sh <<EOF
mk() { f=\$1; shift; t0=\$SECONDS; [ -s \$f ] && return; /tmp/moegpu2_make_model -o \$f.tmp --vocab-text $V "\$@" > /dev/null 2>> /tmp/moegpu2_make.log && mv \$f.tmp \$f; echo "make \$f rc=\$? \$((SECONDS - t0)) s" >> /tmp/moegpu2_make.log; }
mk /tmp/moe_small.gguf --arch qwen35moe --preset moe-small --type q4_k
mk /tmp/a3b_L2.gguf --arch qwen35moe --preset 35b-a3b --layers 2 --mtp-layers 0 --type q4_k
mk /tmp/a3b_L8.gguf --arch qwen35moe --preset 35b-a3b --layers 8 --mtp-layers 0 --type q4_k
echo done >> /tmp/moegpu2_make.log
EOF
setsid nohup bash /tmp/moegpu2_mk.sh > /dev/null 2>&1 < /dev/null &
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
T0=$SECONDS
timeout 200 $D/df_cuda_tests > $OUT/tests.txt 2>&1; echo "df_cuda_tests rc=$? $((SECONDS - T0)) s"
grep -E "^\[  FAILED  \]|tests ran|PASSED  \]|SKIPPED  \]" $OUT/tests.txt | cut -c1-160 | head -20
grep -E "expert cache:|Failure|Expected|Which is|actual|near-tie|not held" $OUT/tests.txt | cut -c1-200 | head -30
cat /tmp/moegpu2_make.log 2>/dev/null
