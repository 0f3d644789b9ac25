#!/usr/bin/env bash
# helper mvn: strips the binaries of build/ and packs the three device carries into
# /work/main/.devcarry/mvn/{a,b,c}/bins.tar.xz plus run.sh (= mvn_{a,b,c}_run.sh):
# a: df_cuda_tests + lib/libpcre2-8.so.0; b: bench_matvec_cuda, df_make_model;
# c: diskformer + lib/ (the .so files of stop 20's carry, .devcarry/lfb). The PTX of the CUDA
# binaries is zeroed (zero_ptx.py; the sm_90 SASS runs, CUDA_DISABLE_PTX_JIT=1 there): the
# binaries did not fit the transfer limit beside the checkout.
set -euo pipefail
W=$(cd "$(dirname "$0")/../../.." && pwd)
C=/work/main/.devcarry/mvn
LIBSRC=/tmp/mvn_libs
rm -rf $LIBSRC && mkdir -p $LIBSRC && python3 -c "
import tarfile; t=tarfile.open('/work/main/.devcarry/lfb/bins.tar.xz')
t.extractall('$LIBSRC', members=[m for m in t.getmembers() if m.name.startswith('lib')])"
for part in a b c; do
  S=/tmp/mvn_stage_$part; rm -rf $S && mkdir -p $S/lib
  case $part in
    a) bins="tests/df_cuda_tests"; cp $LIBSRC/lib/libpcre2-8.so.0 $S/lib/ ;;
    b) bins="bench/cuda/bench_matvec_cuda df_make_model" ;;
    c) bins="diskformer"; cp -r $LIBSRC/lib/. $S/lib/ ;;
  esac
  for b in $bins; do cp $W/build/$b $S/$(basename $b); strip $S/$(basename $b); done
  for b in $bins; do [ $b = df_make_model ] || python3 $W/bench/cuda/mvn/zero_ptx.py $S/$(basename $b); done
  mkdir -p $C/$part && (cd $S && tar cf - * | xz -T2 -6 > $C/$part/bins.tar.xz)
  cp $W/bench/cuda/mvn/mvn_${part}_run.sh $C/$part/run.sh
  ls -la $C/$part/bins.tar.xz
done
