#!/usr/bin/env bash
# Compaction (HAKMEM_MESH=1, src/mesh.c): blocks keep their contents while
# threads write, allocate and free during compaction; pointers into meshed
# slabs stay valid for free, realloc and malloc_usable_size; a thread that
# meshed its heap exits; fork after and during compaction gives the child
# its own memory; a program that closes the mesh file's descriptor.
# Release, debug (internal assertions) and TSan builds; the threads stress
# and fork tests with meshing on; fragment meshes and its blocks keep their
# contents.  Deadlocks fail through alarm().
set -euo pipefail
. tests/cases/core_lib.sh
need $T/test-mesh-release $T/test-mesh-debug $T/test-mesh-tsan $T/test-threads-release build/bench/fragment "$SO"
export HAKMEM_MESH=1
run "contents, release, 3 writers + 3 churners, 30 compactions" $T/test-mesh-release contents 3 30
run "api, release: free/realloc/usable_size into meshed slabs, thread exit" $T/test-mesh-release api
run "fork, release, 30 forks (half during compaction and writes)" $T/test-mesh-release fork 30
run "closed: the program closes the mesh file and reuses its number; fork falls back to private copies" $T/test-mesh-release closed
run "contents, debug library, 2 writers + 2 churners, 10 compactions" $T/test-mesh-debug contents 2 10
run "api, debug library" $T/test-mesh-debug api
run "fork, debug library, 10 forks" $T/test-mesh-debug fork 10
run "contents, tsan, 2 writers + 2 churners, 8 compactions" $T/test-mesh-tsan contents 2 8
run "api, tsan" $T/test-mesh-tsan api
run "fork, tsan, 6 forks" $T/test-mesh-tsan fork 6
run "threads stress with meshing, trim every ~300 steps" env HT_INTROSPECT_EVERY=300 $T/test-threads-release stress 4 4 2000
run "threads fork with meshing, 100 forks, 3 busy threads" $T/test-threads-release fork 100 3
out=$(HAKMEM_STATS=1 LD_PRELOAD="$SO" build/bench/fragment --mb=64 2>&1)
echo "$out" | grep -E '^RESULT|^mesh:'
grep -q 'check=ok' <<<"$out" || bad "fragment with meshing: blocks lost their contents"
meshed=$(grep -o 'meshed_slabs=[0-9]*' <<<"$out" | cut -d= -f2)
((${meshed:-0} > 0)) || bad "fragment with meshing: nothing was meshed"
checks_done "mesh"
