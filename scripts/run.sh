#!/usr/bin/env bash
# Builds the diskformer CLI, then completes a prompt (greedy) with the embedded default model.
# Usage: scripts/run.sh [PROMPT]
set -euo pipefail
cd "$(dirname "$0")/.."
PROMPT=${1:-$'def fibonacci(n):\n'}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build -j2 diskformer >&2  # stdout: the completion only
exec build/diskformer run -p "$PROMPT" -n 96 --temp 0
