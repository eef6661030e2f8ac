#!/usr/bin/env bash
# fork() while other threads allocate; children allocate, free inherited
# blocks, start a thread and exit 0; deadlocks fail through alarm().
set -euo pipefail
. tests/cases/core_lib.sh
need $T/test-threads-release $T/test-threads-debug $T/test-threads-glibc "$SO"
run "fork, release, 200 forks, 3 busy threads" $T/test-threads-release fork 200 3
run "fork, LD_PRELOAD, 100 forks, 3 busy threads" env LD_PRELOAD="$SO" $T/test-threads-glibc fork 100 3
run "fork, debug library (its assertions check the heaps and slabs each child inherits), 50 forks, 3 busy threads" $T/test-threads-debug fork 50 3
