#!/usr/bin/env bash
# Secure mode (build/libhakmem-secure.so): mistakes the default build does not
# detect are detected (one line, abort) or stopped by a guard page (SIGSEGV);
# the default build's detections still hold; correct programs still run.
set -euo pipefail
cd "$(dirname "$0")/../.."
export HAKMEM_PROF=off HAKMEM_GUARD=0   # (no sampled or guarded blocks: placements and counts exact; core_lib.sh, sampling_off)
make -s all build/tests/test-secure-glibc >/dev/null
LIB=$PWD/build/libhakmem-secure.so
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0
row() {   # name[:arg:arg]  want-rc  stderr-ERE
  local name=$1 want=$2 ere=$3 rc=0
  bash -c 'LD_PRELOAD="$1" timeout 60 "$2" "${@:3}" >"$0/out" 2>"$0/err"' "$tmp" "$LIB" build/tests/test-secure-glibc ${name//:/ } 2>/dev/null || rc=$?
  local line; line=$(head -n 1 "$tmp/err")
  if [[ $rc != "$want" ]] || ! grep -Eq -- "$ere" <<<"$line"; then
    echo "FAIL $name: status $rc (want $want), stderr: $line"; fails=$((fails + 1))
  else
    echo "ok   $name: status $rc ${line:+($line)}"
  fi
}
row overflow_1 134 '^hakmem: heap overflow detected in block 0x[0-9a-f]+: byte 0 past its 20 requested bytes'
row overflow_32 134 '^hakmem: heap overflow detected'
row write_after_free 134 '^hakmem: write after free detected in block 0x[0-9a-f]+'
# a write after free of one byte is found wherever it lands in what the free
# filled (the request and the canary after it): blocks whose fill takes each
# of the check's shapes (8-16, 17-32, 33-64 bytes, longer), first and last
# byte, and a byte in between; beyond 64 bytes with 32-byte vectors (AVX2,
# where the CPU has it) and with 16-byte ones
for avx2 in 1 0; do
  export HAKMEM_SECURE_AVX2=$avx2
  for n in 1 9 17 24 40 56 57 100 130 190 300 1000 3000; do
    for at in 0 $((n / 2)) $((n - 1)) $n; do
      row "write_after_free_at:$n:$at" 134 '^hakmem: write after free detected in block 0x[0-9a-f]+'
    done
  done
  for at in $(seq 4 8 196); do   # every word of one block whose check takes every branch of the loop
    row "write_after_free_at:190:$at" 134 '^hakmem: write after free detected in block 0x[0-9a-f]+'
  done
done
unset HAKMEM_SECURE_AVX2
# large blocks: a freed one is filled (below 1 MiB) or its pages dropped
# (from 1 MiB, fill byte 0: they read as zero), and checked when its mapping
# is taken again or let go; either way a byte written after the free is
# found, freed bytes read as fill and a new block holds no earlier owner's
for fill in '' 90; do
  export HAKMEM_SECURE_FILL=${fill:-0}
  for n in 262144 4194304; do
    for at in 0 $((n / 2 + 100)) $((n - 1)); do
      row "large_write_after_free_at:$n:$at" 134 '^hakmem: write after free detected in block 0x[0-9a-f]+ \(large block'
    done
    # (HAKMEM_THP=never: khugepaged may fill a dropped range of an advised
    # mapping back in with a huge page of zeros, which the residency check
    # would count; the drop itself does not depend on it)
    HAKMEM_THP=never row "large_after_free:$n" 0 ''
  done
done
unset HAKMEM_SECURE_FILL
# new blocks in random order (the default), or in address order with
# HAKMEM_SECURE_SHUFFLE=0
row carve_order:1 0 ''
HAKMEM_SECURE_SHUFFLE=0 row carve_order:0 0 ''
row link_overwrite 134 '^hakmem: (free list corrupted|write after free detected)'
row large_overflow 139 ''
row double_free 134 '^hakmem: double free of 0x[0-9a-f]+ \(size [0-9]+\) in free\(\)$'
row quarantine_budget 0 ''
row control 0 ''
# a real program under the secure build
out=$(LD_PRELOAD=$LIB sort -n < <(seq 200000 -1 1) | md5sum)
ref=$(seq 1 200000 | md5sum)
[[ $out == "$ref" ]] && echo "ok   sort under secure mode" || { echo "FAIL sort under secure mode"; fails=$((fails + 1)); }
# the API, model and thread-stress tests (glibc-linked programs) under the
# secure build: what a correct program may do still works (posix_memalign of
# large blocks, realloc of a malloc(0) block, remote frees, ...).  The model
# test runs a quarter of its default operations: its blocks of many MiB are
# filled again each time the secure build reuses their mapping (no earlier
# owner's bytes), which takes it from seconds to about two minutes.
make -s build/tests/test-api-glibc build/tests/test-model-glibc build/tests/test-threads-glibc >/dev/null
for t in "test-api-glibc --require-hakmem" "test-model-glibc 500000" "test-threads-glibc stress" \
         "test-threads-glibc moves 4" "test-threads-glibc handoff 2000"; do
  rc=0
  HT_MOVES_ITERS=300 LD_PRELOAD=$LIB timeout 300 build/tests/$t >"$tmp/out" 2>&1 || rc=$?
  if ((rc == 0)); then
    echo "ok   $t under secure mode"
  else   # (a crash or a hakmem: report prints no FAILED line: show the status and the last lines too)
    echo "FAIL $t under secure mode: status $rc"; grep -m5 FAILED "$tmp/out" || true; tail -n 5 "$tmp/out"; fails=$((fails + 1))
  fi
done
# without the SuperSlab guard pages (HAKMEM_SECURE_GUARD_PAGES=0: huge pages
# instead): correct programs still run, and the checks that do not rest on
# those pages still stop a mistake
if HAKMEM_SECURE_GUARD_PAGES=0 LD_PRELOAD=$LIB timeout 300 build/tests/test-model-glibc 200000 >"$tmp/out" 2>&1; then
  echo "ok   test-model-glibc 200000 under secure mode, HAKMEM_SECURE_GUARD_PAGES=0"
else
  echo "FAIL test-model-glibc 200000 under secure mode, HAKMEM_SECURE_GUARD_PAGES=0:"; grep -m5 FAILED "$tmp/out" || true; tail -n 5 "$tmp/out"; fails=$((fails + 1))
fi
export HAKMEM_SECURE_GUARD_PAGES=0
row overflow_1 134 '^hakmem: heap overflow detected in block 0x[0-9a-f]+: byte 0 past its 20 requested bytes'
row write_after_free 134 '^hakmem: write after free detected in block 0x[0-9a-f]+'
row large_overflow 139 ''
unset HAKMEM_SECURE_GUARD_PAGES
((fails == 0)) || exit 1
echo "secure mode: all rows as expected"
