#!/usr/bin/env bash
# Deterministic multi-threaded stress with cookies, cross-thread frees and
# reallocs, aligned and calloc blocks, and trim/stats calls racing with
# allocation: release (8 threads; default and lean profile), debug, ASan.
set -euo pipefail
. tests/cases/core_lib.sh
need $T/test-threads-release $T/test-threads-debug $T/test-threads-asan
run "stress, release, 8 threads x 10 rounds" $T/test-threads-release stress 8 10 2000
run "stress, release, trim/stats every ~300 steps" env HT_INTROSPECT_EVERY=300 $T/test-threads-release stress 4 4 2000
run "stress, release, HAKMEM_PROFILE=lean, 4 threads x 6 rounds" env HAKMEM_PROFILE=lean $T/test-threads-release stress 4 6 2000
run "stress, debug library, 4 threads x 4 rounds" env HT_INTROSPECT_EVERY=1000 $T/test-threads-debug stress 4 4 300
run "stress, asan library, 4 threads x 4 rounds" env HT_INTROSPECT_EVERY=1000 $T/test-threads-asan stress 4 4 300
run "moves, asan library, 4 threads" env HT_MOVES_ITERS=300 $T/test-threads-asan moves 4
run "scavenge: sparse slabs' free pages given back while other threads free, release" $T/test-threads-release scavenge 4
run "scavenge, debug library" $T/test-threads-debug scavenge 2
run "scavenge, asan library" $T/test-threads-asan scavenge 2
# (join counts every freed block back: a sampled or guarded one never is)
run "join: remote frees joined to the owner's own free list, release" env HAKMEM_PROF=off HAKMEM_GUARD=0 $T/test-threads-release join
run "join, debug library" env HAKMEM_PROF=off HAKMEM_GUARD=0 $T/test-threads-debug join
