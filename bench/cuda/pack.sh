#!/usr/bin/env bash
# Packs binaries built here for the GPU machine (Ubuntu 24.04, CUDA 13) into one carry:
#   DEST/bins.tar.xz = the binaries (stripped; the PTX of CUDA binaries zeroed by
#   bench/cuda/mvn/zero_ptx.py: the sm_90 SASS runs there with CUDA_DISABLE_PTX_JIT=1) + lib/,
#   the shared libraries they load that are neither glibc, libstdc++/libgcc nor CUDA's
#   (libpcre2-8, libcurl and its dependencies, ...), in one xz stream with a 192 MiB dictionary
#   (the CUDA binaries share most of their kernels, so two of them cost little more than one).
# Usage: [SKIP_LIBS="libfoo.so.1 ..."] bench/cuda/pack.sh DEST BINARY... (DEST: a folder under the
#   checkout that .git/info/exclude ignores, e.g. /work/main/.devcarry/NAME; name it in the call's
#   carry). SKIP_LIBS: libraries not to carry (the device machine has them with these names:
#   stop28_run.sh PART=tests lists which).
# There: python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" \
#   DEST/bins.tar.xz DEST; export LD_LIBRARY_PATH=$PWD/DEST/lib:<dir of libcublas.so.13>
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
DEST=$(mkdir -p "$1" && cd "$1" && pwd); shift  # absolute: the tar below runs in the staging folder
S=$(mktemp -d)
mkdir -p "$S/lib" "$DEST"
for b in "$@"; do
  cp "$b" "$S/"; n=$(basename "$b"); strip "$S/$n"
  # (grep reads all of readelf's output: with -q it may exit first, and under pipefail readelf's
  # SIGPIPE made the test false, so the PTX stayed: a 51 MB pack instead of ~32 MB)
  if readelf -S "$S/$n" 2>/dev/null | grep nv_fatbin > /dev/null; then python3 "$HERE/mvn/zero_ptx.py" "$S/$n"; fi
  ldd "$b" | awk '$3 ~ /^\// { print $3 }' | while read -r lib; do
    case $(basename "$lib") in
      libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libstdc++*|libgcc_s*|libcuda*|libcublas*|libnvidia*) ;;
      *) [[ " ${SKIP_LIBS:-} " == *" $(basename "$lib") "* ]] || cp -L "$lib" "$S/lib/" ;;
    esac
  done
done
(cd "$S" && tar -cf - * | xz -T1 --lzma2=preset=9e,dict=192MiB > "$DEST/bins.tar.xz")
ls -la "$DEST/bins.tar.xz"; (cd "$S" && ls lib)
rm -rf "$S"
