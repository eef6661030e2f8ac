#!/usr/bin/env bash
# OS-call and page-fault budget (SPEC): no OS calls in a steady small-block
# workload, large blocks reused by BigCache without mmap/munmap, and at most
# 600 page faults for 100 x malloc(2 MiB)+memset+free.  Default (balanced)
# and speed profiles.
# serial: counts OS calls and page faults (tests/run.sh -j runs it alone)
set -euo pipefail
. tests/cases/core_lib.sh
need $T/test-syscalls-release
run "OS-call budget, default profile (balanced)" $T/test-syscalls-release
run "OS-call budget, HAKMEM_PROFILE=speed" env HAKMEM_PROFILE=speed $T/test-syscalls-release
