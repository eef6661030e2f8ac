#!/usr/bin/env bash
# The API test itself, checked against the reference: the same glibc-linked
# program without hakmem must pass every glibc-semantics check.  A failure
# here is a bug in the test, not in hakmem.
set -euo pipefail
. tests/cases/core_lib.sh
need $T/test-api-glibc $T/test-model-glibc $T/test-threads-glibc $T/test-cxx-glibc
run "test-api against glibc malloc (no hakmem)" $T/test-api-glibc
run "test-model against glibc malloc (no hakmem), 200k ops" $T/test-model-glibc 200000
run "test-threads stress against glibc malloc" $T/test-threads-glibc stress 4 3 200
run "test-cxx against glibc malloc" $T/test-cxx-glibc
