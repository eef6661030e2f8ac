#!/usr/bin/env bash
# Randomized model test against the release library: 2M ops (seed 1), a
# second seed through LD_PRELOAD, a hot 64-slot run, and the speed and lean
# profiles (lean with MADV_FREE decommit).
# Reproduce a failure with: HT_SEED=<seed> build/tests/test-model-release OPS [SLOTS]
set -euo pipefail
. tests/cases/core_lib.sh
need $T/test-model-release $T/test-model-glibc "$SO"
run "test-model, release, seed 1, 2M ops" env HT_SEED=1 $T/test-model-release 2000000
run "test-model, LD_PRELOAD, seed 2, 1M ops" env HT_SEED=2 LD_PRELOAD="$SO" $T/test-model-glibc 1000000
run "test-model, release, seed 3, 1M ops, 64 slots (hot reuse)" env HT_SEED=3 $T/test-model-release 1000000 64
run "test-model, HAKMEM_PROFILE=speed, seed 4, 500k ops" env HAKMEM_PROFILE=speed HT_SEED=4 $T/test-model-release 500000
run "test-model, HAKMEM_PROFILE=lean HAKMEM_DECOMMIT=free, seed 5, 500k ops" \
  env HAKMEM_PROFILE=lean HAKMEM_DECOMMIT=free HT_SEED=5 $T/test-model-release 500000
