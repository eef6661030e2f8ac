#!/usr/bin/env bash
# Randomized model test, hak_ names, against the ASan+UBSan library.
set -euo pipefail
. tests/cases/core_lib.sh
need $T/test-model-asan
run "test-model, asan library, seed 21, 1M ops" env HT_SEED=21 $T/test-model-asan 1000000
