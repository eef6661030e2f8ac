#!/usr/bin/env bash
# Where a new slab's pages come from (src/heap.c, slab_new): the fullest of
# the heap's segments with room, so a sparse segment drains and leaves the
# heap when its last block is freed.  Deterministic: one thread.
set -euo pipefail
cd "$(dirname "$0")/../.."
make -s all >/dev/null
mkdir -p build/tests
cc -O2 -fno-builtin -std=gnu11 -Iinclude -Itests tests/place-test.c build/libhakmem.a -pthread -o build/tests/place-test
env -u HAKMEM_PROFILE build/tests/place-test
