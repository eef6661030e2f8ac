#!/usr/bin/env bash
# Valgrind memcheck over hakmem's own code: test-api, test-model and a small
# threaded stress, hak_ names, linked with the release library.  hakmem maps
# its memory itself, so memcheck checks hakmem's accesses (and the tests'),
# not the blocks.  malloc in the executable is hakmem's: keep valgrind from
# redirecting it (--soname-synonyms=somalloc=nouserintercepts).
set -euo pipefail
. tests/cases/core_lib.sh
command -v valgrind >/dev/null || skip "valgrind not installed"
need $T/test-api-hak $T/test-model-hak $T/test-threads-hak
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
vgopts=(--error-exitcode=99 -q --soname-synonyms=somalloc=nouserintercepts)

# vg DESCRIPTION PROGRAM ARGS...: valgrind cannot read some debug info (clang
# 14's DWARF 5 with valgrind 3.19); then it runs a debug-stripped copy.
vg() {
  local desc=$1 prog=$2 rc=0
  shift 2
  echo "== valgrind $desc" >&2
  valgrind "${vgopts[@]}" "$prog" "$@" >"$tmp/out" 2>&1 || rc=$?
  if ((rc != 0)) && grep -q "debuginfo reader" "$tmp/out"; then
    echo "(valgrind cannot read the debug info of $prog: using a stripped copy)" >&2
    objcopy --strip-debug "$prog" "$tmp/stripped"
    rc=0
    valgrind "${vgopts[@]}" "$tmp/stripped" "$@" >"$tmp/out" 2>&1 || rc=$?
  fi
  grep -v '^  class ' "$tmp/out" || true
  ((rc == 0)) || die "valgrind $desc: exit status $rc (99 = memcheck errors)"
}
vg "test-api (hak_ names, build/libhakmem.a)" $T/test-api-hak
HT_SEED=31 vg "test-model, 100k ops" $T/test-model-hak 100000
vg "test-threads stress, 4 threads" $T/test-threads-hak stress 4 2 100
