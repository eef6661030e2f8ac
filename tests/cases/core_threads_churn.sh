#!/usr/bin/env bash
# 100,000 short-lived threads (4 at a time) that allocate, free, and leave
# blocks for main; RSS and hakmem's mapped bytes must stay bounded.
set -euo pipefail
. tests/cases/core_lib.sh
need $T/test-threads-release $T/test-threads-debug
run "churn, release, 100000 threads" $T/test-threads-release churn 100000 4
run "churn, debug library, 5000 threads" $T/test-threads-debug churn 5000 4
