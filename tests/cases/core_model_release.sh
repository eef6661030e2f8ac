#!/usr/bin/env bash
# Randomized model test (2M ops, seeded) against the release library, with
# standard names; then a second seed through LD_PRELOAD.
# Reproduce a failure with: HT_SEED=<seed> build/tests/test-model-release
set -euo pipefail
. tests/cases/core_lib.sh
need $T/test-model-release $T/test-model-glibc "$SO"
run "test-model, release, seed 1, 2M ops" env HT_SEED=1 $T/test-model-release 2000000
run "test-model, LD_PRELOAD, seed 2, 1M ops" env HT_SEED=2 LD_PRELOAD="$SO" $T/test-model-glibc 1000000
run "test-model, release, seed 3, 1M ops, 64 slots (hot reuse)" env HT_SEED=3 $T/test-model-release 1000000 64
