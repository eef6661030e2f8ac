#!/usr/bin/env bash
# The class lists behind the fast paths (src/slab.c, src/refill.c): random frees over many
# nearly full slabs (alloc-test's pattern) leave nearly every malloc on the
# fast path, because a slab that gets a block back waits at the end of its
# class list.  Asserts the share of mallocs that took the refill path, from
# the stats report's counts (deterministic: one thread, fixed seed).
set -euo pipefail
cd "$(dirname "$0")/../.."
make -s all >/dev/null
mkdir -p build/tests
cc -O2 -fno-builtin -std=gnu11 -Iinclude -Itests tests/lists-test.c build/libhakmem.a -pthread -o build/tests/lists-test
env -u HAKMEM_PROFILE build/tests/lists-test
