#!/usr/bin/env bash
# Installs what diskformer needs to build and test, skipping whatever is already present:
#   1. Debian packages (compiler, CMake/Ninja, libraries, Node.js/npm, git) via apt-get
#      (as root, or through sudo when it is available); for the fuzz targets also clang, its
#      libFuzzer / sanitizer runtimes and llvm-symbolizer (clang libclang-rt-dev llvm; not with
#      --no-fuzz);
#   2. the npm `openai` client the server test drives (tests/server, `npm ci` from its lock file);
#   3. the llama.cpp reference: npm packages node-llama-cpp 3.21.1 + @node-llama-cpp/linux-x64
#      3.21.1 (prebuilt CPU libraries) installed with `npm ci` from the committed lock file into
#      build/ref, and the matching llama.cpp source cloned from the package's git bundle into
#      build/ref/llama.cpp.
# Usage: scripts/setup.sh [--no-ref] [--no-fuzz] [--ref-dir DIR]
set -euo pipefail
cd "$(dirname "$0")/.."

REF_DIR=build/ref
WITH_REF=1
WITH_FUZZ=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-ref) WITH_REF=0; shift ;;
    --no-fuzz) WITH_FUZZ=0; shift ;;
    --ref-dir) REF_DIR="$2"; shift 2 ;;
    *) echo "setup.sh: unknown argument '$1' (--no-ref | --no-fuzz | --ref-dir DIR)" >&2; exit 2 ;;
  esac
done

log() { echo "setup: $*"; }

# ---- 1. system packages (Debian 12 names) ----
PACKAGES=(build-essential cmake ninja-build pkg-config git ca-certificates
          libpcre2-dev nlohmann-json3-dev libcli11-dev libfmt-dev libgtest-dev libbenchmark-dev
          libcpp-httplib-dev libcurl4-openssl-dev libssl-dev)
# libFuzzer and the sanitizer runtimes come with libclang-rt-dev (only recommended by clang).
if [[ $WITH_FUZZ == 1 ]]; then PACKAGES+=(clang libclang-rt-dev llvm); fi
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js and npm may come from elsewhere (e.g. NodeSource, whose nodejs bundles npm).
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [[ ${#missing[@]} -gt 0 ]]; then
  SUDO=()
  if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then SUDO=(sudo); else
      echo "setup.sh: missing packages (${missing[*]}) and not root; install them and rerun" >&2; exit 1
    fi
  fi
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${SUDO[@]}" apt-get update -q
  "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  log "system packages present"
fi

# ---- 2. the server test's npm client ----
SRV_DIR=tests/server
SRV_OPENAI=$(cd "$SRV_DIR" && node -p "require('./package.json').dependencies.openai")
if [[ "$(cd "$SRV_DIR" && node -p "require('./node_modules/openai/package.json').version" 2>/dev/null)" == "$SRV_OPENAI" ]]; then
  log "npm openai $SRV_OPENAI present in $SRV_DIR"
else
  log "installing npm openai $SRV_OPENAI into $SRV_DIR"
  (cd "$SRV_DIR" && npm ci --ignore-scripts --no-audit --no-fund)
fi

[[ $WITH_REF == 1 ]] || exit 0

# ---- 3. llama.cpp reference ----
mkdir -p "$REF_DIR"
LIB_DIR="$REF_DIR/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
installed_version() {
  node -p "require('./$REF_DIR/node_modules/node-llama-cpp/package.json').version" 2>/dev/null || true
}
if [[ -f "$LIB_DIR/libllama.v0.4.0.so" && "$(installed_version)" == "3.21.1" ]] &&
   cmp -s tools/llama_ref/npm/package-lock.json "$REF_DIR/package-lock.json"; then
  log "node-llama-cpp 3.21.1 present in $REF_DIR"
else
  log "installing node-llama-cpp 3.21.1 into $REF_DIR"
  cp tools/llama_ref/npm/package.json tools/llama_ref/npm/package-lock.json "$REF_DIR/"
  # No download of binaries, no optional (other-platform / GPU) packages, no install scripts:
  # only the prebuilt CPU libraries and the source bundle are used.
  (cd "$REF_DIR" && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true \
     npm ci --omit=optional --ignore-scripts --no-audit --no-fund)
fi

SRC_DIR="$REF_DIR/llama.cpp"
BUNDLE="$REF_DIR/node_modules/node-llama-cpp/llama/gitRelease.bundle"
if [[ -f "$SRC_DIR/include/llama.h" && -f "$SRC_DIR/.git/HEAD" ]] &&
   [[ "$(git -C "$SRC_DIR" rev-parse HEAD)" == "$(git bundle list-heads "$BUNDLE" | awk 'NR==1{print $1}')" ]]; then
  log "llama.cpp source present in $SRC_DIR"
else
  log "cloning llama.cpp source from $BUNDLE"
  rm -rf "$SRC_DIR"
  git -c advice.detachedHead=false clone -q "$BUNDLE" "$SRC_DIR"
fi
log "reference ready: DF_LLAMA_SRC=$SRC_DIR DF_LLAMA_LIB=$LIB_DIR"
