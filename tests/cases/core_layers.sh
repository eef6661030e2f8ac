#!/usr/bin/env bash
# The part of docs/DESIGN.md's layering that a grep can check: only src/os.c
# calls the OS's memory calls (mmap, munmap, madvise, mprotect, mremap,
# mincore), so every call is counted in one place under one contract.  The
# check reads code lines, not comments; it fails on the tree before
# site.c's mincore calls went through os.c.
set -euo pipefail
cd "$(dirname "$0")/../.."
calls=$(grep -nE '\b(mmap|munmap|madvise|mprotect|mremap|mincore)[[:space:]]*\(' src/*.c src/*.h |
  grep -vE '^src/os\.c:' | grep -vE '^[^:]+:[0-9]+:[[:space:]]*(\*|/\*|//)' || true)
if [[ -n $calls ]]; then
  echo "FAIL: OS memory calls outside src/os.c:"
  echo "$calls"
  exit 1
fi
echo "ok   OS memory calls only in src/os.c ($(ls src/*.c src/*.h | wc -l) files read)"
