#!/usr/bin/env bash
# Builds the diskformer CLI and the embedded default model, then generates from a prompt.
# Usage: scripts/run.sh [PROMPT]
set -euo pipefail
cd "$(dirname "$0")/.."
PROMPT=${1:-"The lighthouse keeper opened his notebook and wrote"}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build -j2 diskformer default_model
exec build/diskformer run -p "$PROMPT"
