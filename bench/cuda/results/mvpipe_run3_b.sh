#!/usr/bin/env bash
# mvpipe run 3 (final, part b): the workbench of the final commit: every format validated, the
# priority formats on the five real shapes (old loop, old + PDL, pipelined default, + PDL),
# the pipelined variants 322 / 222 / 221 beside them.
set -uo pipefail
D=.devcarry/mvpipe
B=/tmp/mvp; mkdir -p $B
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/b/bins.tar.xz $B
chmod +x $B/bench_matvec_cuda
T0=$SECONDS
timeout 150 $B/bench_matvec_cuda --out $OUT/matvec.json --formats q4_0,q8_0,q4_K,q6_K,iq4_xs,q5_K --no-variants \
  --pipe-codes 5322,5222,5221 > $OUT/matvec.txt 2>&1
echo "workbench rc=$? $((SECONDS - T0)) s"
cut -c1-420 $OUT/matvec.txt
timeout 100 $B/bench_matvec_cuda --out $OUT/matvec_validate_all.json --no-variants --shapes none > $OUT/matvec_validate_all.txt 2>&1
echo "validate all rc=$? $((SECONDS - T0)) s"; grep -c "bit-identical 1  get_rows exact 1" $OUT/matvec_validate_all.txt; grep -v "bit-identical 1  get_rows exact 1" $OUT/matvec_validate_all.txt | head
