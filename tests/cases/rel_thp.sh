#!/usr/bin/env bash
# Huge pages (src/thp.c): a big heap's segments are advised MADV_HUGEPAGE
# (auto, always) or not (never); 100 small threads get none and their RSS
# stays small; after free + malloc_trim nothing advised stays resident; a
# large block covering 2 MiB is advised and grows by realloc; blocks that
# span pages mostly go to halves of segments that are not advised; the secure
# build's held large mappings are advised when they are taken again.  The advice is
# read back from /proc/self/smaps (deterministic); AnonHugePages only printed.
set -euo pipefail
cd "$(dirname "$0")/../.."
export HAKMEM_PROF=off HAKMEM_GUARD=0   # (no sampled or guarded blocks: placements and counts exact; core_lib.sh, sampling_off)
make -s all >/dev/null
mkdir -p build/tests
make -s build/tests/test-thp-release >/dev/null
T=build/tests/test-thp-release
run() { echo "+ $*"; env -u HAKMEM_PROFILE -u HAKMEM_THP "$@"; }
for m in auto always never; do
  run HAKMEM_THP=$m $T big
  run HAKMEM_THP=$m HAKMEM_BIGCACHE_MAX_MB=0 $T large
  run HAKMEM_THP=$m $T medium
done
# the secure build's held large mappings, advised again once freed blocks were dense
make -s build/tests/test-thp-glibc >/dev/null
for m in auto never; do
  run HAKMEM_THP=$m LD_PRELOAD=$PWD/build/libhakmem-secure.so build/tests/test-thp-glibc held
done
run $T threads
run HAKMEM_DECOMMIT_DELAY_MS=0 $T demote
run $T demote
