#!/usr/bin/env bash
# valgrind memcheck over hakmem's own code with the standard names:
# tests/test-valgrind.c, one thread, linked with build/libhakmem.a (whole archive,
# so hakmem *is* the program's malloc), mixed malloc/calloc/realloc/free/
# memalign/posix_memalign/aligned_alloc/valloc from 0 B to 6 MiB with
# pattern checks.  Fails on any memcheck error (--error-exitcode=99).
#
# The flags: memcheck by default replaces malloc & co. not only in libc but
# also in the main executable, i.e. it would swap hakmem out for its own
# allocator and test nothing of ours.  --soname-synonyms=somalloc=nouserintercepts
# limits its replacement to libc.so, so hakmem's malloc runs (on memory it
# mmaps itself, which memcheck tracks as plain mapped memory: hakmem's reads
# and writes of headers, free lists and slab descriptors are all checked;
# block-level leaks and overruns are not, since memcheck does not know our
# blocks).  The case also shows that without the flag valgrind does take
# over malloc (vg's hak_owns() check fails), so the flag is really needed.
# Then the secure build, preloaded under the model test.
set -euo pipefail
. tests/cases/core_lib.sh
command -v valgrind >/dev/null || skip "valgrind not installed"
make -s all $T/test-valgrind-release >/dev/null
VG=$T/test-valgrind-release
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ops=${VG_OPS:-40000}
$VG "$ops" || die "vg fails without valgrind"
rc=0
out=$(valgrind --error-exitcode=99 -q $VG 1000 2>&1) || rc=$?
if ((rc == 1)) && grep -q 'not a hakmem block' <<<"$out"; then
  echo "without --soname-synonyms: valgrind replaced malloc, as expected"
else
  echo "note: without --soname-synonyms valgrind did not replace malloc (exit status $rc)"
fi
vg=(valgrind --error-exitcode=99 -q --soname-synonyms=somalloc=nouserintercepts)
echo "\$ ${vg[*]} $VG $ops"
rc=0
"${vg[@]}" $VG "$ops" >"$tmp/vg.out" 2>"$tmp/vg.err" || rc=$?
cat "$tmp/vg.out"
if ((rc != 0)); then
  head -n 60 "$tmp/vg.err"
  ((rc == 99)) && die "memcheck reported errors"
  die "vg under valgrind: exit status $rc"
fi
[[ ! -s $tmp/vg.err ]] || { cat "$tmp/vg.err"; die "valgrind printed something"; }
echo "memcheck: no errors"
# The secure build the same way, preloaded (valgrind then replaces only
# libc's malloc): its checks read and write around every block (the trailer,
# the canary, the block below, fills and fill checks with loads and stores
# that may overlap).  memcheck sees hakmem's mappings as plain memory, so
# what this catches is an access outside them or a decision on an
# undefined value, not a stray access inside a segment.
make -s build/libhakmem-secure.so build/tests/test-model-glibc >/dev/null
sec=(env LD_PRELOAD="$PWD/build/libhakmem-secure.so" build/tests/test-model-glibc 30000)
echo "\$ ${vg[*]} --trace-children=yes ${sec[*]}"
rc=0
"${vg[@]}" --trace-children=yes "${sec[@]}" >"$tmp/vgs.out" 2>"$tmp/vgs.err" || rc=$?
tail -n 1 "$tmp/vgs.out"
if ((rc != 0)); then
  head -n 60 "$tmp/vgs.err"
  die "the secure build under valgrind: exit status $rc"
fi
grep -q ' 0 failed$' "$tmp/vgs.out" || die "the model test failed under the secure build"
[[ ! -s $tmp/vgs.err ]] || { cat "$tmp/vgs.err"; die "valgrind printed something (secure build)"; }
echo "memcheck, secure build: no errors"
