#!/usr/bin/env bash
# Randomized model test against the debug library (internal assertions on).
set -euo pipefail
. tests/cases/core_lib.sh
need $T/test-model-debug
run "test-model, debug library, seed 11, 1M ops" env HT_SEED=11 $T/test-model-debug 1000000
