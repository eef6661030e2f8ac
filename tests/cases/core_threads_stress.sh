#!/usr/bin/env bash
# Deterministic multi-threaded stress with cookies and cross-thread frees:
# release (8 threads), debug, and ASan builds.
set -euo pipefail
. tests/cases/core_lib.sh
need $T/test-threads-release $T/test-threads-debug $T/test-threads-asan
run "stress, release, 8 threads x 10 rounds" $T/test-threads-release stress 8 10 2000
run "stress, debug library, 4 threads x 4 rounds" $T/test-threads-debug stress 4 4 300
run "stress, asan library, 4 threads x 4 rounds" $T/test-threads-asan stress 4 4 300
