#!/usr/bin/env bash
# Reuse across sizes after scattered frees (src/refill.c, heap_borrow): a fill
# of 40-byte blocks, 70 % freed at random, then as many 28-byte blocks; the
# new blocks go into the holes (a quarter of the new slab pages at most, at
# least half of them lent), survivors and new blocks keep their bytes,
# aligned requests stay aligned, a young heap keeps its slabs' fresh room
# for their own class, and a steady malloc/free cycle into the holes soon
# gets a slab of its own (under 1 % of its mallocs on the refill path).
# HAKMEM_LEND=0 and the speed profile lend nothing.  Asserted on the stats report's counts and on the
# blocks, never on time (deterministic: fixed seed, one allocating thread).
set -euo pipefail
cd "$(dirname "$0")/../.."
make -s all >/dev/null
mkdir -p build/tests
make -s build/tests/test-borrow-release >/dev/null
env -u HAKMEM_PROFILE build/tests/test-borrow-release
env -u HAKMEM_PROFILE HAKMEM_LEND=0 build/tests/test-borrow-release   # off: no loan, new slabs
env HAKMEM_PROFILE=speed build/tests/test-borrow-release                # off in the speed profile
