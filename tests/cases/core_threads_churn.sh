#!/usr/bin/env bash
# Threads that come and go (issue #10): 100,000 short-lived threads (4 at a
# time) leaving blocks for main; 10,000 threads one after another, each
# freeing the blocks the previous one left; the stress rounds with 2 and 64
# threads (oversubscribed) with mapped bytes and RSS bounded by the peak live
# bytes; and the memory of an exited thread's freed blocks going to the next
# thread, also when a thread with room of its own allocates in between;
# the slabs of a thread that makes no call, emptied by other threads' frees,
# going back all the same; the slabs of a thread asleep in the kernel given
# to the threads that run (park.c), while it wakes at any moment, but not
# while it sleeps in a signal handler;
# large blocks moving by realloc while other threads map segments.
# Every mode asserts bounds on memory, never times.
# With no segment cache every segment that empties is unmapped at once: a
# collector that reads a segment after releasing its last slab then faults
# (a crash CI met once in ~30 runs with the cache on, ~1 in 2 with it off).
# serial: mapped-bytes and RSS bounds with 64 threads depend on scheduling (tests/run.sh -j runs it alone)
set -euo pipefail
. tests/cases/core_lib.sh
need $T/test-threads-release $T/test-threads-debug
run "churn, release, 100000 threads" $T/test-threads-release churn 100000 4
run "churn, debug library, 5000 threads" $T/test-threads-debug churn 5000 4
run "handoff, 10000 threads each freeing the previous one's blocks" $T/test-threads-release handoff 10000
run "bounded, 2 threads x 100 rounds" $T/test-threads-release bounded 2 100 500
run "bounded, 64 threads x 10 rounds" $T/test-threads-release bounded 64 10 300
for i in 1 2 3; do
  run "bounded, 64 threads x 10 rounds, no segment cache (run $i of 3)" env HAKMEM_SEG_CACHE=0 $T/test-threads-release bounded 64 10 300
done
run "reuse of an exited thread's freed blocks" $T/test-threads-release reuse
run "reuse, debug library" $T/test-threads-debug reuse
run "the exited thread's segment goes to its successor, not to a heap with room of its own" $T/test-threads-release successor
run "successor, debug library" $T/test-threads-debug successor
run "pages a live thread freed serve another thread without a new mapping" $T/test-threads-release share
run "share, debug library" $T/test-threads-debug share
run "reserve: the classes a thread stopped using give their empty slabs back" env HAKMEM_DECOMMIT_DELAY_MS=100 HAKMEM_BACKGROUND=0 $T/test-threads-release reserve
run "reserve, debug library" env HAKMEM_DECOMMIT_DELAY_MS=100 HAKMEM_BACKGROUND=0 $T/test-threads-debug reserve
run "idle: a thread that makes no call keeps none of the slabs other threads emptied" env HAKMEM_DECOMMIT_DELAY_MS=100 HAKMEM_BACKGROUND=0 HAKMEM_PARK=0 $T/test-threads-release idle 3
run "idle, debug library" env HAKMEM_DECOMMIT_DELAY_MS=100 HAKMEM_BACKGROUND=0 HAKMEM_PARK=0 $T/test-threads-debug idle 2
run "idle-race: slabs taken while their owner wakes at any moment, debug library" env HAKMEM_DECOMMIT_DELAY_MS=100 HAKMEM_BACKGROUND=0 HAKMEM_PARK=0 $T/test-threads-debug idle-race 300
run "idle with sleeping threads' slabs given (park.c)" env HAKMEM_DECOMMIT_DELAY_MS=100 HAKMEM_BACKGROUND=0 $T/test-threads-release idle 3
run "park-race: a sleeping thread's slabs given while it wakes at any moment, debug library" env HAKMEM_DECOMMIT_DELAY_MS=100 HAKMEM_BACKGROUND=0 $T/test-threads-debug park-race 300
run "park-race, release library" env HAKMEM_DECOMMIT_DELAY_MS=100 HAKMEM_BACKGROUND=0 $T/test-threads-release park-race 300
run "park-signal: a thread asleep in a signal handler keeps its slabs" env HAKMEM_DECOMMIT_DELAY_MS=100 HAKMEM_BACKGROUND=0 $T/test-threads-release park-signal
run "park-reuse: blocks a sleeping thread freed serve a new thread in its pages" env HAKMEM_DECOMMIT_DELAY_MS=100 HAKMEM_BACKGROUND=0 $T/test-threads-release park-reuse
run "park-reuse, debug library" env HAKMEM_DECOMMIT_DELAY_MS=100 HAKMEM_BACKGROUND=0 $T/test-threads-debug park-reuse
run "burst: 1 GiB freed by 4 threads is given back within two decommit delays of idling" env HAKMEM_DECOMMIT_DELAY_MS=400 $T/test-threads-release burst
run "moves: large blocks growing by realloc while others map, 4 threads" $T/test-threads-release moves 4
run "moves, no segment cache" env HAKMEM_SEG_CACHE=0 $T/test-threads-release moves 4
