#!/usr/bin/env bash
# cudamv2 run 4: df_cuda_tests of the branch after merging main (d24bcbf).
set -uo pipefail
D=.devcarry/cudamv2
B=/tmp/cmv4; mkdir -p $B
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/bins4.tar.xz $B
chmod +x $B/df_cuda_tests $B/df_make_model
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/targets/x86_64-linux/lib
T0=$SECONDS
timeout 200 $B/df_cuda_tests > $OUT/tests.txt 2>&1; echo "df_cuda_tests rc=$? $((SECONDS - T0)) s"
grep -E "^\[  FAILED  \]|tests ran|PASSED  \]|SKIPPED  \]" $OUT/tests.txt | cut -c1-150 | head -20
grep -E "int8 x \(default\)|Failure" $OUT/tests.txt | cut -c1-170 | head -30
