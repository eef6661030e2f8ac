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
make -s build/tests/test-lists-release >/dev/null
env -u HAKMEM_PROFILE build/tests/test-lists-release
