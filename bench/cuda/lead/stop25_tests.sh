#!/usr/bin/env bash
# Lead's last device call of stop 25: df_cuda_tests (the binary `ctest -L cuda` runs, unfiltered) of
# the submitted commit, no benches (bench/cuda/lead/lib.sh). Carry .devcarry/lf25t, packed by
#   bench/cuda/pack.sh .devcarry/lf25t build/diskformer build/tests/df_cuda_tests build/df_make_model
set -uo pipefail
source bench/cuda/lead/lib.sh
lead_unpack .devcarry/lf25t
lead_tests
lead_collect
