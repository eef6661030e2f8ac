#!/usr/bin/env bash
# API conformance through LD_PRELOAD: a program linked against glibc only,
# run with build/libhakmem.so preloaded (checks that hakmem serves malloc).
set -euo pipefail
. tests/cases/core_lib.sh
need $T/test-api-glibc "$SO"
run "test-api (glibc-linked) with LD_PRELOAD=$SO" env LD_PRELOAD="$SO" $T/test-api-glibc --require-hakmem
