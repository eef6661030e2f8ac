#!/usr/bin/env bash
# The threaded tests, hak_ names, built with -fsanitize=thread against the
# TSan library: any data race report is fatal (halt_on_error, exit 66).
# The stress mode runs once more with heap profiling sampling about every
# 4 KiB allocated.
set -euo pipefail
. tests/cases/core_lib.sh
need $T/test-threads-tsan
run "stress under TSan (with stats, trim and hakmem_ctl snapshots every ~500 steps)" env HT_INTROSPECT_EVERY=500 $T/test-threads-tsan stress 4 3 150
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
run "stress under TSan, heap profiling on (every ~4 KiB sampled: the countdown, page slots, the profiler's tables)" \
  env HAKMEM_PROF=1 HAKMEM_PROF_RATE=4K HAKMEM_PROF_PREFIX="$tmp/p" $T/test-threads-tsan stress 4 3 150
run "churn under TSan, 2000 threads" $T/test-threads-tsan churn 2000 4
run "handoff under TSan, 500 threads" $T/test-threads-tsan handoff 500
run "bounded under TSan, 8 threads x 3 rounds" $T/test-threads-tsan bounded 8 3 100
run "fork under TSan, 30 forks" $T/test-threads-tsan fork 30 2
run "successor under TSan" $T/test-threads-tsan successor
run "share under TSan" $T/test-threads-tsan share
run "join under TSan" $T/test-threads-tsan join
run "idle under TSan (slabs taken from a heap while its owner sleeps, then its slow paths again)" env HAKMEM_DECOMMIT_DELAY_MS=100 HAKMEM_BACKGROUND=0 $T/test-threads-tsan idle 2
run "idle-race under TSan" env HAKMEM_DECOMMIT_DELAY_MS=100 HAKMEM_BACKGROUND=0 $T/test-threads-tsan idle-race 200
# (its fork children may start while a worker that has finished is not
# joined yet: TSan reports that thread as leaked in the child, which is not
# a race; the parent's own leaks are still checked by the other runs)
run "scavenge under TSan, 4 threads" env TSAN_OPTIONS="$TSAN_OPTIONS report_thread_leaks=0" $T/test-threads-tsan scavenge 4
run "moves under TSan, 4 threads" env HT_MOVES_ITERS=100 $T/test-threads-tsan moves 4
