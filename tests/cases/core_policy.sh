#!/usr/bin/env bash
# Large blocks and memory release: BigCache hits and bounds, the release
# batch (contents gone after DONTNEED, RSS falls), calloc of reused blocks,
# cross-size reuse (a growing realloc moves into a cached block: contents,
# faults, growing past it; what kept buffers pin stays within the budget),
# RSS returning after a 1 GiB live set (lean within 1 s; malloc_trim in every
# profile), OS calls in steady state, THP modes, the pages a carve of big
# blocks faults in, one reserve (small and large blocks taking turns hold
# one tier's free memory, not both), profile defaults/overrides.
# serial: RSS must fall within 1 s; OS-call counts (tests/run.sh -j runs it alone)
set -euo pipefail
cd "$(dirname "$0")/../.."
export HAKMEM_PROF=off HAKMEM_GUARD=0   # (no sampled or guarded blocks: placements and counts exact; core_lib.sh, sampling_off)
make -s all >/dev/null
mkdir -p build/tests
make -s build/tests/test-policy-release >/dev/null
T=build/tests/test-policy-release
run() { echo "+ $*"; env -u HAKMEM_PROFILE "$@"; }

run $T bigcache_hit
run HAKMEM_BIGCACHE_MAX_MB=32 $T bigcache_bound
run HAKMEM_BIGCACHE_MAX_MB=0 HAKMEM_DECOMMIT=dontneed $T batch_dontneed
run $T calloc_reuse
for p in speed balanced; do run HAKMEM_PROFILE=$p $T cross_realloc; done
run HAKMEM_PROFILE=lean HAKMEM_BIGCACHE_MAX_MB=128 $T cross_realloc
run $T cross_calloc
run $T cross_grow
run HAKMEM_BIGCACHE_MAX_MB=64 $T cross_pin
run HAKMEM_PROFILE=lean $T rss_wait
for p in speed balanced lean; do run HAKMEM_PROFILE=$p $T rss_trim; done
for p in speed balanced; do run HAKMEM_PROFILE=$p $T steady_calls; done
for m in never auto always; do run HAKMEM_THP=$m $T thp; done
for p in speed balanced; do run HAKMEM_PROFILE=$p $T carve_faults; done
run HAKMEM_PROFILE=balanced $T cross_class
run HAKMEM_PROFILE=balanced $T exact
run HAKMEM_PROFILE=balanced HAKMEM_THP=never HAKMEM_DECOMMIT=dontneed HAKMEM_DECOMMIT_DELAY_MS=60000 HAKMEM_BIGCACHE_AGE_MS=60000 $T one_reserve   # (no clock gives pages back between the phases on a slow machine)
# profile defaults (speed=0 balanced=1 lean=2) and an explicit override winning
run HAKMEM_PROFILE=speed $T profile 0 HAKMEM_DECOMMIT 0
run $T profile 1 HAKMEM_DECOMMIT 2
run HAKMEM_PROFILE=lean $T profile 2 HAKMEM_DECOMMIT_DELAY_MS 0
run HAKMEM_PROFILE=lean HAKMEM_DECOMMIT=free $T profile 2 HAKMEM_DECOMMIT 1
run HAKMEM_PROFILE=speed HAKMEM_BIGCACHE_MAX_MB=7 $T profile 0 HAKMEM_BIGCACHE_MAX_MB 7
run HAKMEM_PROFILE=balanced $T profile 1 HAKMEM_BIGCACHE_MAX_MB 128
run HAKMEM_PROFILE=speed $T profile 0 HAKMEM_PREWARM $((8 << 20))
echo "release policy: all scenarios passed"
