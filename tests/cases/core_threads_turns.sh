#!/usr/bin/env bash
# Threads that take turns and are then joined (bench/turns, preloaded).
# pthread_join frees a dead thread's TLS while glibc holds its stack cache
# lock, which pthread_create takes: hakmem's background thread, started
# from such a free, hung the program (4 runs of 4 at 256 threads, 20 ms
# delay; every signal is blocked inside pthread_create, so only SIGKILL ends
# it, hence timeout -s KILL).  Now it is started from malloc's slow path,
# or from a free only in a process without threads (src/background.c).
set -euo pipefail
. tests/cases/core_lib.sh
need "$SO" build/bench/turns
for i in 1 2 3; do
  run "256 threads take 512 turns and are joined, run $i" timeout -s KILL 120 \
    env HAKMEM_DECOMMIT_DELAY_MS=20 THREADS=256 TURNS=512 WS=500 LD_PRELOAD="$SO" build/bench/turns
done
echo "== a process without threads that frees a burst gets the thread all the same (its stats say background=1)"
out=$(HAKMEM_STATS=1 HAKMEM_DECOMMIT_DELAY_MS=20 LD_PRELOAD="$SO" build/bench/grow --rounds=40 --max=16Mi 2>&1)
grep -E "^pages:" <<<"$out"
grep -q "^pages: .*background=1" <<<"$out" || die "no background thread after a burst in a process without threads"
